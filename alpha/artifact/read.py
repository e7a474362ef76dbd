"""Checking an artifact from outside it: its whole check against its manifest, its SHA-256,
and the ``run.json`` entry a build records for it. Reading its payload is
:func:`alpha.artifact.payload.read_artifact` (re-exported here for the package face): the
entry inside an artifact reads it, and must not import the loader back through this module."""

from __future__ import annotations

import hashlib
from pathlib import Path

from alpha.artifact.description import description_view
from alpha.artifact.loader import HASH_CHUNK, Damaged, verify
from alpha.artifact.payload import (
    PAYLOAD_NAME,
    artifact_name,
    checked_role,
    read_artifact,
)
from alpha.errors import ArtifactInvalid

__all__ = ["artifact_entry", "file_sha256", "read_artifact", "verify_artifact"]


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as 64 lowercase hex digits.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_artifact(path: Path) -> None:
    """Check the artifact at ``path`` whole, as its loader does before anything in it runs:
    it begins with the artifact's two lines, and every member matches its SHA-256 in the
    manifest (``SHA256SUMS``, the last member), which lists every other member once, in order.

    Raises:
        ArtifactInvalid: the file cannot be read, is truncated, is not a zip archive, lacks a
            manifest or has a bad one, holds a member the manifest does not list, lacks one it
            lists, a zip header is not a build's, or a member differs from its SHA-256 (or
            CRC-32); the message is the loader's sentence, naming the file, the damage and what
            to do.
    """
    try:
        verify(str(path))
    except Damaged as error:
        raise ArtifactInvalid(str(error)) from None


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
