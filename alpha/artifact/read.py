"""The ``run.json`` entry a build records for an artifact, read from the file and checked.

The other names the package face takes from here live in the modules that do their one job:
reading a payload (:func:`alpha.artifact.payload.read_artifact`, which the entry inside an
artifact imports without the loader), and the whole check and the SHA-256
(``alpha.artifact.verify``)."""

from __future__ import annotations

from pathlib import Path

from alpha.artifact.description import description_view
from alpha.artifact.payload import (
    PAYLOAD_NAME,
    artifact_name,
    checked_role,
    read_artifact,
)
from alpha.artifact.verify import file_sha256, verify_artifact
from alpha.errors import ArtifactInvalid

__all__ = ["artifact_entry", "file_sha256", "read_artifact", "verify_artifact"]


def artifact_entry(path: Path) -> dict[str, object]:
    """The ``run.json`` entry of the artifact at ``path``: ``role``, ``target``, ``file``,
    ``bytes``, ``sha256``, ``lower`` and ``higher`` (peers in edge order), read from the file.

    Raises:
        ArtifactInvalid: the artifact is damaged (:func:`verify_artifact`), unreadable,
            invalid, or not named for its role.
    """
    verify_artifact(path)
    payload = read_artifact(path)
    where = f"{path.name}: {PAYLOAD_NAME}"
    _, lower, higher = description_view(payload, where)
    role = checked_role(payload["role"], f"{where}: role")
    if path.name != artifact_name(role):
        raise ArtifactInvalid(f"{path.name} holds role {role}; name it {artifact_name(role)}")
    try:
        size, digest = path.stat().st_size, file_sha256(path)
    except OSError as error:
        raise ArtifactInvalid(f"{path.name}: {error}") from None
    return {
        "role": role,
        "target": payload["target"],
        "file": path.name,
        "bytes": size,
        "sha256": digest,
        "lower": list(lower),
        "higher": list(higher),
    }
