"""Checking an artifact from outside it: its whole check against its manifest and the runtime
it binds (the loader's own, :func:`alpha.artifact.loader.verify_role`), and its SHA-256."""

from __future__ import annotations

from pathlib import Path

from alpha.artifact.loader import Damaged, bound_runtime, file_digest, verify, verify_role
from alpha.errors import ArtifactInvalid

__all__ = ["artifact_runtime", "file_sha256", "verify_archive", "verify_artifact"]


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as 64 lowercase hex digits.

    Raises:
        OSError: the file cannot be read.
    """
    return file_digest(str(path))


def verify_artifact(path: Path) -> None:
    """Check the artifact at ``path`` whole, as its loader does before anything in it runs:
    it begins with the artifact's two lines, every member matches its SHA-256 in the manifest
    (``SHA256SUMS``, the last member), which lists every other member once, in order; and the
    runtime it binds (``RUNTIME``) lies beside it with that SHA-256.

    Raises:
        ArtifactInvalid: the file cannot be read, is truncated, is not a zip archive, lacks a
            manifest or has a bad one, holds a member the manifest does not list, lacks one it
            lists, a zip header is not a build's, or a member differs from its SHA-256 (or
            CRC-32); or its runtime is missing or differs from the SHA-256 it binds; the message
            is the loader's sentence, naming the file, the damage and what to do.
    """
    try:
        verify_role(str(path))
    except Damaged as error:
        raise ArtifactInvalid(str(error)) from None


def verify_archive(path: Path) -> None:
    """Check the archive at ``path`` against its own manifest only (a role's artifact without
    its runtime, or a runtime): :func:`alpha.artifact.loader.verify`.

    Raises:
        ArtifactInvalid: as :func:`verify_artifact`, the runtime aside.
    """
    try:
        verify(str(path))
    except Damaged as error:
        raise ArtifactInvalid(str(error)) from None


def artifact_runtime(path: Path) -> tuple[str, str]:
    """The (file name, SHA-256) of the runtime the artifact at ``path`` binds.

    Raises:
        ArtifactInvalid: it cannot be read, or has no ``RUNTIME`` member or a bad one.
    """
    try:
        return bound_runtime(str(path))
    except Damaged as error:
        raise ArtifactInvalid(f"{path.name} is damaged: {error}") from None
    except Exception as error:  # zipfile's BadZipFile, an OSError, ...: not a build's
        raise ArtifactInvalid(f"{path.name} is not a readable artifact: {error}") from None
