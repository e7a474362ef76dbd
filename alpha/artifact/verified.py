"""A folder of artifacts checked against its ``run.json`` and each against itself: what the
launcher starts from (``alpha.launch.launcher.launch_specs``)."""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, final

from alpha.artifact.description import payload_description
from alpha.artifact.payload import PAYLOAD_NAME, read_artifact
from alpha.artifact.run_json import RUN_JSON, read_run_json
from alpha.artifact.verify import artifact_runtime, file_sha256, verify_archive
from alpha.errors import ArtifactExposed, ArtifactInvalid

if TYPE_CHECKING:
    from alpha.schedule.role import RoleDescription

__all__ = ["VerifiedRole", "check_private", "verified_roles"]


def check_private(path: Path, name: str | None = None) -> None:
    """Refuse the keyed artifact at ``path`` unless it is this user's alone: owned by this
    user, and no permission for its group or anyone else (the keys of its edges are inside:
    docs/security.md). ``name`` is how the refusal names it (its file name by default).

    Raises:
        ArtifactExposed: another user owns it, or its mode lets another user at it.
        ArtifactInvalid: it cannot be looked at.
    """
    label = path.name if name is None else name
    try:
        found = path.stat()
    except OSError as error:
        raise ArtifactInvalid(f"{label}: {error}") from None
    mode = stat.S_IMODE(found.st_mode)
    if found.st_uid != os.getuid():
        raise ArtifactExposed(
            f"{label} holds its edges' keys and belongs to user {found.st_uid}, not to this "
            f"user ({os.getuid()}); compile the plan again as this user"
        )
    if mode & 0o077:
        raise ArtifactExposed(
            f"{label} holds its edges' keys and another user can read it (mode {mode:04o}); "
            f"chmod go= {shlex.quote(str(path))}, or compile again (keyed artifacts are "
            "written 0700)"
        )


def _agree_on_the_run(
    run: Mapping[str, object],
    payload: Mapping[str, object],
    description: RoleDescription,
    name: str,
) -> None:
    """Refuse a ``run.json`` that says of the run what the artifact ``name`` (its payload and
    the description read from it) does not: the number of participants, the run identity, or
    the plan's name (when the payload has one).

    Raises:
        ArtifactInvalid: the first field that differs, with both values.
    """
    if description.participants != run["participants"]:
        raise ArtifactInvalid(
            f"{name} is a role of a run of {description.participants} participants, but "
            f"{RUN_JSON} says {run['participants']}"
        )
    recorded = run["identity"]
    assert isinstance(recorded, Mapping)  # checked by read_run_json
    for part in ("learner", "contract", "membership"):
        carried = getattr(description.identity, part).hex()
        if carried != recorded[part]:
            raise ArtifactInvalid(
                f"{name} carries the run identity's {part} digest {carried}, but {RUN_JSON} "
                f"records {recorded[part]}"
            )
    if "plan" in payload and payload["plan"] != run["name"]:
        raise ArtifactInvalid(
            f"{name} was compiled from the plan {payload['plan']!r}, but {RUN_JSON} names the "
            f"run {run['name']!r}"
        )


def _check_file(directory: Path, entry: Mapping[str, object], what: str) -> None:
    """Refuse unless ``directory/entry["file"]`` has the size and SHA-256 ``entry`` records.

    Raises:
        ArtifactInvalid: it is missing, unreadable, or changed since it was built.
    """
    name = entry["file"]
    assert isinstance(name, str)  # checked by read_run_json
    path = directory / name
    try:
        size, digest = path.stat().st_size, file_sha256(path)
    except FileNotFoundError:
        raise ArtifactInvalid(f"{name} is missing from {directory}; compile again") from None
    except OSError as error:
        raise ArtifactInvalid(f"{name}: {error}") from None
    if size != entry["bytes"] or digest != entry["sha256"]:
        label = name if what == name else f"{what} {name}"
        raise ArtifactInvalid(
            f"{label} changed since it was built ({size} bytes, sha256 {digest}; "
            f"{RUN_JSON} says {entry['bytes']} bytes, sha256 {entry['sha256']}); "
            "compile again"
        )


@final
@dataclass(frozen=True, slots=True)
class VerifiedRole:
    """One role's artifact, checked against ``run.json`` and against itself. ``lower`` and
    ``higher`` are the peers whose ports the launcher relays: those of its edges without a
    port fixed at compile time (``docs/roles.md``), each of which it connects to or listens
    for."""

    role: int
    path: Path
    lower: tuple[int, ...]
    higher: tuple[int, ...]
    target: str  # the machine it was built for (one of alpha.artifact.TARGETS)


def verified_roles(directory: Path) -> tuple[list[VerifiedRole], float | None]:
    """The artifacts ``run.json`` lists in ``directory``, every one checked, and the largest
    session deadline among them (None when a role has none). The launcher turns them into
    what it starts (:func:`alpha.launch.launcher.launch_specs`).

    ``run.json`` is trusted for nothing the artifacts do not confirm: every artifact must
    match its entry's size and SHA-256, pass its own checks (each member against the manifest
    inside it), bind the shared runtime ``run.json`` lists (whose size and SHA-256 are checked
    once, first), and agree with ``run.json`` on its role, target,
    peers, the number of participants, the run identity and the plan's name (when its payload
    records one). Every artifact is checked before any spec is returned.

    Raises:
        ArtifactInvalid: ``run.json`` is missing or invalid; it lacks a role of the run (the
            first missing one is named: launching on one host needs every role); the runtime is
            missing or changed; an artifact binds another runtime, or is missing, changed since
            it was built (size or SHA-256), damaged (its manifest), invalid, or disagrees with
            ``run.json``.
    """
    run = read_run_json(directory)
    participants = run["participants"]
    roles = run["roles"]
    assert isinstance(participants, int) and isinstance(roles, list)  # checked by read_run_json
    built = {entry["role"]: entry for entry in roles}
    for role in range(participants):
        if role not in built:
            raise ArtifactInvalid(
                f"{directory / RUN_JSON} lists no artifact for role {role} of {participants}; "
                "compile all roles to launch on one host"
            )
    runtime = run["runtime"]
    assert isinstance(runtime, Mapping)  # checked by read_run_json
    _check_file(directory, runtime, "the shared runtime")
    specs = []
    deadlines: list[float | None] = []
    for entry in roles:
        role, name = entry["role"], entry["file"]
        path = directory / name
        _check_file(directory, entry, name)
        # The runtime was checked once, above: each role's own archive, and that it binds it.
        verify_archive(path)
        bound = artifact_runtime(path)
        if bound != (runtime["file"], runtime["sha256"]):
            raise ArtifactInvalid(
                f"{name} binds the runtime {bound[0]}, but {RUN_JSON} lists {runtime['file']}; "
                "compile again"
            )
        payload = read_artifact(path)
        description = payload_description(payload, f"{name}: {PAYLOAD_NAME}")
        if description.keyed:
            check_private(path, name)
        if payload["role"] != role or payload["target"] != entry["target"]:
            raise ArtifactInvalid(
                f"{name} holds role {payload['role']} for {payload['target']}, but {RUN_JSON} "
                f"lists role {role} for {entry['target']}"
            )
        seconds = description.budgets.deadline
        lower = tuple(edge.peer for edge in description.lower)
        higher = tuple(edge.peer for edge in description.higher)
        if list(lower) != entry["lower"] or list(higher) != entry["higher"]:
            raise ArtifactInvalid(
                f"{name} has lower peers {list(lower)} and higher {list(higher)}, but "
                f"{RUN_JSON} lists {entry['lower']} and {entry['higher']}"
            )
        _agree_on_the_run(run, payload, description, name)
        deadlines.append(seconds)
        target = payload["target"]
        assert isinstance(target, str)  # one of TARGETS: checked by read_artifact
        # An edge whose port was fixed at compile time is neither announced nor relayed.
        lower = tuple(edge.peer for edge in description.lower if edge.port is None)
        higher = tuple(edge.peer for edge in description.higher if edge.port is None)
        specs.append(VerifiedRole(role, path, lower, higher, target))
    bounded = [seconds for seconds in deadlines if seconds is not None]
    return specs, (max(bounded) if len(bounded) == len(deadlines) and bounded else None)
