"""Checking an artifact from outside it: its whole check against its manifest (the loader's
own, :func:`alpha.artifact.loader.verify`) and its SHA-256."""

from __future__ import annotations

import hashlib
from pathlib import Path

from alpha.artifact.loader import HASH_CHUNK, Damaged, verify
from alpha.errors import ArtifactInvalid

__all__ = ["file_sha256", "verify_artifact"]


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
