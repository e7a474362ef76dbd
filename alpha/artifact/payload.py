"""What an artifact's payload (``role.json``) is: its format, its target, its fields' checks.

Building, reading, running and listing artifacts all check a payload the same way, so the
checks live here, once. The module imports only the standard library and Alpha's light
modules: an artifact checks its target before numpy or trio is imported.
"""

from __future__ import annotations

import json
import platform
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from alpha.checked import int_in
from alpha.core.targets import TARGETS
from alpha.core.topology import MAX_ROLES
from alpha.errors import ArtifactInvalid, TargetMismatch
from alpha.files import role_file
from alpha.records.trace import TraceBounds, bounds_problem

__all__ = [
    "ARTIFACT_FORMAT",
    "MAX_PAYLOAD_BYTES",
    "PAYLOAD_NAME",
    "TARGETS",
    "artifact_name",
    "check_payload_fields",
    "check_target",
    "checked_role",
    "host_target",
    "read_artifact",
    "trace_bounds",
]

ARTIFACT_FORMAT: Final = "alpha-artifact/1"
"""The ``format`` field of every artifact payload (``role.json``) this module writes and reads."""

PAYLOAD_NAME: Final = "role.json"
"""The member of an artifact that holds its payload."""

# A payload is a role description and a compact local schedule (a 200,000-round repeat is one
# form, not 200,000): kilobytes. 16 MiB is far above any real one, and stops a damaged or
# foreign archive from making a participant or the launcher read gigabytes. The loader bounds
# every member by the same size, its MAX_MEMBER_BYTES, which it must write itself: it imports
# the standard library only (tests/artifact/test_loader_entry.py holds the two equal).
MAX_PAYLOAD_BYTES: Final = 16 * 1024 * 1024

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
    """The light checks (no numpy needed): format, role, target, a description table, the
    trace's bounds when it carries them.

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
    trace_bounds(payload, where)


def trace_bounds(payload: Mapping[str, object], where: str) -> TraceBounds:
    """The bounds a traced participant writes its trace within (``docs/trace.md``): the
    payload's ``trace`` table (``{"limit": N, "mode": "first" | "ring"}``, the plan's
    ``[trace]``), or the defaults when it has none.

    Raises:
        ArtifactInvalid: ``trace`` is not such a table; the message names what is wrong.
    """
    entry = payload.get("trace")
    if entry is None:
        return TraceBounds()
    if not isinstance(entry, Mapping) or set(entry) != {"limit", "mode"}:
        raise ArtifactInvalid(f"{where}: trace must be a table of limit and mode, got {entry!r}")
    problem = bounds_problem(entry["limit"], entry["mode"])
    if problem is not None:
        raise ArtifactInvalid(f"{where}: trace.{problem}")
    return TraceBounds(entry["limit"], entry["mode"])


# --- reading a payload from an archive ----------------------------------------


def _read_payload_bytes(path: Path) -> bytes:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if "__main__.py" not in names:
                raise ArtifactInvalid(f"{path.name} has no __main__.py: it is not an artifact")
            if PAYLOAD_NAME not in names:
                raise ArtifactInvalid(f"{path.name} has no {PAYLOAD_NAME}: it is not an artifact")
            info = archive.getinfo(PAYLOAD_NAME)
            if info.compress_type != zipfile.ZIP_STORED:
                raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} must be stored uncompressed")
            if info.file_size > MAX_PAYLOAD_BYTES:
                raise ArtifactInvalid(
                    f"{path.name}: {PAYLOAD_NAME} is {info.file_size} bytes, past the "
                    f"{MAX_PAYLOAD_BYTES} allowed"
                )
            return archive.read(info)
    except FileNotFoundError:
        raise ArtifactInvalid(f"{path} does not exist") from None
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error) as error:
        raise ArtifactInvalid(f"{path.name} is not a readable artifact: {error}") from None
    except NotImplementedError as error:  # a compression method zipfile does not know
        raise ArtifactInvalid(f"{path.name} is not a readable artifact: {error}") from None


def read_artifact(path: Path) -> dict[str, object]:
    """The payload (``role.json``) of the artifact at ``path``, with its format, role and
    target checked (its description is checked where it is used).

    Raises:
        ArtifactInvalid: the file is missing, is not a zip, is damaged, lacks ``role.json`` or
            ``__main__.py``, or its payload is not JSON or has a wrong format, role or target.
    """
    data = _read_payload_bytes(path)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} is not JSON: {error}") from None
    if not isinstance(payload, dict):
        raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} must be a JSON object")
    check_payload_fields(payload, f"{path.name}: {PAYLOAD_NAME}")
    return payload
