"""What an artifact's payload (``role.json``) is: its format, its target, its fields' checks.

Building, reading, running and listing artifacts all check a payload the same way, so the
checks live here, once. The module imports only the standard library and Alpha's light
modules: an artifact checks its target before numpy or trio is imported.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from alpha.artifact.loader import MAX_MEMBER_BYTES
from alpha.checked import int_in
from alpha.core.topology import MAX_ROLES
from alpha.errors import ArtifactInvalid, TargetMismatch
from alpha.files import role_file

if TYPE_CHECKING:
    from alpha.schedule.role import RoleDescription

__all__ = [
    "ARTIFACT_FORMAT",
    "MAX_PAYLOAD_BYTES",
    "PAYLOAD_NAME",
    "TARGETS",
    "artifact_name",
    "check_payload_fields",
    "check_target",
    "checked_role",
    "description_view",
    "host_target",
    "payload_description",
]

ARTIFACT_FORMAT: Final = "alpha-artifact/1"
"""The ``format`` field of every artifact payload (``role.json``) this module writes and reads."""

TARGETS: Final = ("x86_64", "aarch64")
"""The machines an artifact can be built for (decision 7 of the design)."""

PAYLOAD_NAME: Final = "role.json"
"""The member of an artifact that holds its payload."""

# A payload is a role description and a compact local schedule (a 200,000-round repeat is one
# form, not 200,000): kilobytes. 16 MiB is far above any real one, and stops a damaged or
# foreign archive from making a participant or the launcher read gigabytes. The loader bounds
# every member by the same size (it cannot import this module before checking it).
MAX_PAYLOAD_BYTES: Final = MAX_MEMBER_BYTES

#: Machine names, as ``platform.machine()`` spells them, of each target.
_MACHINES: Final = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
}


# --- targets ----------------------------------------------------------------


def host_target(machine: str | None = None) -> str:
    """The target of this machine (or of ``machine``, a ``platform.machine()`` name).

    ``x86_64`` and ``amd64`` are ``"x86_64"``; ``aarch64`` and ``arm64`` are ``"aarch64"``
    (case aside). Any other machine keeps its own name, which matches no target. Under
    ``qemu-aarch64`` user emulation the machine is ``aarch64``.
    """
    name = platform.machine() if machine is None else machine
    return _MACHINES.get(name.lower(), name)


def check_target(payload: Mapping[str, object], host: str | None = None) -> None:
    """Refuse to run ``payload`` unless it was built for ``host`` (this machine by default).

    Raises:
        TargetMismatch: the payload's target is not the host's; the message is the one line an
            artifact prints, naming the role, both targets and what to do.
    """
    here = host_target() if host is None else host
    target = payload.get("target")
    if target != here:
        raise TargetMismatch(
            f"role {payload.get('role', '?')}: this artifact is built for {target}, but this "
            f"machine is {here}; run it on a {target} machine (or under qemu-{target})"
        )


# --- payloads ---------------------------------------------------------------


def artifact_name(role: int) -> str:
    """The file name of ``role``'s artifact: ``role-NNNNNN.pyz`` (at least six digits)."""
    return role_file(role, ".pyz")


def checked_role(value: object, where: str) -> int:
    """``value`` as a role, 0..MAX_ROLES-1.

    Raises:
        ArtifactInvalid: ``value`` is not an int (a bool is not) in that range.
    """
    if not int_in(value, 0, MAX_ROLES - 1):
        raise ArtifactInvalid(f"{where} must be an int in 0..{MAX_ROLES - 1}, got {value!r}")
    return value


def check_payload_fields(payload: Mapping[str, object], where: str) -> None:
    """The light checks (no numpy needed): format, role, target, a description table.

    Raises:
        ArtifactInvalid: the first field that is wrong, named.
    """
    if payload.get("format") != ARTIFACT_FORMAT:
        raise ArtifactInvalid(
            f"{where}: format must be {ARTIFACT_FORMAT!r}, got {payload.get('format')!r}"
        )
    checked_role(payload.get("role"), f"{where}: role")
    target = payload.get("target")
    if target not in TARGETS:
        raise ArtifactInvalid(f"{where}: target must be one of {TARGETS}, got {target!r}")
    if not isinstance(payload.get("description"), dict):
        raise ArtifactInvalid(
            f"{where}: description must be a role description table, "
            f"got {payload.get('description')!r}"
        )


def payload_description(payload: Mapping[str, object], where: str) -> RoleDescription:
    """The payload's description, parsed.

    Raises:
        ArtifactInvalid: the description is not a valid role description, or describes another
            role than the payload's.
    """
    # Imported here: the role layer needs numpy, and an artifact checks its target first.
    from alpha.errors import RoleDescriptionInvalid
    from alpha.schedule.role import RoleDescription

    try:
        description = RoleDescription.from_dict(payload.get("description"))
    except RoleDescriptionInvalid as error:
        raise ArtifactInvalid(f"{where}: description: {error}") from None
    if description.role != payload.get("role"):
        raise ArtifactInvalid(
            f"{where}: description.role is {description.role}, but the payload is role "
            f"{payload.get('role')}"
        )
    return description


def description_view(
    payload: Mapping[str, object], where: str
) -> tuple[float | None, tuple[int, ...], tuple[int, ...]]:
    """The payload's description, parsed: its deadline (None: off), lower and higher peers.

    Raises:
        ArtifactInvalid: as :func:`payload_description`.
    """
    description = payload_description(payload, where)
    return (
        description.budgets.deadline,
        tuple(edge.peer for edge in description.lower),
        tuple(edge.peer for edge in description.higher),
    )
