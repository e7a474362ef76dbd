"""Reading an artifact from outside it: its payload, its whole check against its manifest,
its SHA-256, and the ``run.json`` entry a build records for it."""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from pathlib import Path

from alpha.artifact.loader import HASH_CHUNK, Damaged, verify
from alpha.artifact.payload import (
    MAX_PAYLOAD_BYTES,
    PAYLOAD_NAME,
    artifact_name,
    check_payload_fields,
    checked_role,
    description_view,
)
from alpha.errors import ArtifactInvalid

__all__ = ["artifact_entry", "file_sha256", "read_artifact", "verify_artifact"]


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
