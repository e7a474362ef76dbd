"""Writing an artifact: the shared runtime (the package's sources and their bytecode, once per
folder, :func:`build_runtime`), the ``__main__.py`` that carries the loader, the zip members'
fixed fields, and :func:`build_artifact`.

Every artifact of a build shares the bytes before its payload (:func:`_archive_prefix`, built
once per process); the same payload and the same sources give byte-identical files.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import io
import json
import marshal
import stat
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import alpha
from alpha.artifact.description import payload_description
from alpha.artifact.loader import (
    FILE_MODE,
    HEADER,
    MAIN_NAME,
    MANIFEST_NAME,
    RUNTIME_NAME,
    ZIP_CREATE_SYSTEM,
    ZIP_EPOCH,
    ZIP_VERSION,
    encode_manifest,
    encode_runtime,
    file_digest,
    runtime_name,
)
from alpha.artifact.payload import (
    MAX_PAYLOAD_BYTES,
    PAYLOAD_NAME,
    check_payload_fields,
)
from alpha.errors import ArtifactInvalid
from alpha.files import write_bytes_atomically

__all__ = [
    "ARTIFACT_MODE",
    "KEYED_ARTIFACT_MODE",
    "build_artifact",
    "build_runtime",
    "package_code_digest",
    "runtime_entry",
]

# The artifact's __main__.py. Python reads this member itself, without checking its CRC-32, so
# it is stored, and it carries the loader as a string, L: a newline, the SHA-256 of the rest, a
# newline, then artifact/loader.py deflated in base64. A flipped bit in L is then caught by the
# check instead of making Python print a syntax error: no single flip of a hex or base64 digit
# or a newline makes a NUL byte, or a quote that could end the raw string (newlines surround
# its contents, so no quote or backslash a flip makes is next to its own quotes), and latin-1
# decodes any byte a flip makes. Only the few statements outside L cannot check themselves: a
# flip there stops Python before the loader runs, or leaves them running the loader, which
# checks this whole member against the manifest through zipfile, whose CRC-32 catches it.
# A warm starter (alpha/launch/warm_server.py) compiles the loader once for all its children,
# each code object under the SHA-256 in L of the text it was compiled from, in the module
# LOADERS_MODULE; a child whose L checks finds its own loader there under that SHA-256 and runs
# it instead of compiling the same text again (about 7 ms, half of a warm child's start-up). A
# flip in that lookup finds nothing, and the loader is compiled as anywhere else.
LOADERS_MODULE: Final = "__alpha_loaders__"
MAIN_TEMPLATE: Final = """\
# coding: latin-1
# An Alpha artifact (docs/artifacts.md): L is the loader, which checks every member first.
import base64, hashlib, sys, zlib

L = r'''
{sha256}
{loader}'''
if hashlib.sha256(L[66:].encode("latin-1")).hexdigest() != L[1:65]:
    name = sys.argv[0].rpartition("/")[2]
    print(
        "role ?: failed: ArtifactInvalid: " + name + " is damaged: its loader does not match its "
        "SHA-256; compile it again with alpha compile",
        file=sys.stderr,
    )
    sys.exit(2)  # EXIT_USAGE, nothing ran: alpha cannot be imported before it is checked
C = getattr(sys.modules.get("{loaders}"), "codes", {{}}).get(L[1:65])  # a warm starter's
exec(C or compile(zlib.decompress(base64.b64decode(L[66:])), "alpha/artifact/loader.py", "exec"))
"""

# Every member's zip fields (ZIP_EPOCH, ZIP_CREATE_SYSTEM, ZIP_VERSION, FILE_MODE) are fixed,
# so that rebuilding from the same inputs gives the same bytes whenever and wherever it runs;
# they are defined in alpha/artifact/loader.py, which checks them. run.json has FILE_MODE too; the
# artifact itself is executable (it has a shebang).
ARTIFACT_MODE: Final = 0o755
# An artifact that holds its edges' keys (a keyed plan's, docs/security.md) is its owner's
# alone: read, write and, as an executable, run by the owner; nothing for anyone else.
KEYED_ARTIFACT_MODE: Final = 0o700

# zlib's strongest level: sources are compressed once per build and read at every start, so
# the smallest file is worth the time. Fixed, so the bytes do not follow zlib's default.
COMPRESS_LEVEL: Final = 9

# Bytecode beside the sources: a PEP 552 ``.pyc`` whose flags say "hash-based, check the
# source". zipimport loads it instead of compiling the sources at every start (about 0.3 s of a
# participant's start), after checking it against its source's hash; an interpreter of another
# version ignores it and compiles the source. Marshal format 2 has no back-references, whose
# use follows the building process's reference counts, so the bytes depend only on the source
# and the interpreter's version.
PYC_FLAGS: Final = 0b11
PYC_MARSHAL_VERSION: Final = 2

# The files of the package a runtime carries and its code digest covers: the modules, and the C
# source of the compiled ordered fold (alpha/learner/ordered.c), which a participant compiles
# from the runtime it runs (docs/kernels.md).
SOURCE_SUFFIXES: Final = (".py", ".c")


def _canonical(value: object, where: str) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, ASCII, no NaN or infinity."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ArtifactInvalid(f"{where} is not a JSON value: {error}") from None
    return text.encode("ascii")


# --- the bundled sources ----------------------------------------------------


def _package_sources() -> list[tuple[str, Path]]:
    """``(archive name, file)`` of every source file of the ``alpha`` package (each of
    :data:`SOURCE_SUFFIXES`), sorted."""
    root = Path(alpha.__file__).resolve().parent
    sources = [
        (path.relative_to(root.parent).as_posix(), path)
        for path in root.rglob("*")
        if path.suffix in SOURCE_SUFFIXES
        and "__pycache__" not in path.relative_to(root).parts
        and path.is_file()
    ]
    return sorted(sources)


@functools.cache
def package_code_digest() -> bytes:
    """The code digest (``alpha.core.digests.code_digest``) of the sources every artifact carries:
    each ``.py`` file of the package by its archive name, so neither where the package lies
    nor the interpreter enters it. Read and hashed once per process.

    Raises:
        OSError: a source cannot be read.
    """
    # Imported here: alpha.core.digests needs numpy, which this module leaves to the participant.
    from alpha.core.digests import code_digest

    return code_digest((name, path.read_bytes()) for name, path in _package_sources())


def _ordered(code: object) -> bool:
    """Whether marshal writes ``code``'s constants in an order that no hash seed changes: a
    frozenset constant iterates in its elements' hash order, fixed only for integers."""
    for constant in getattr(code, "co_consts", ()):
        if isinstance(constant, frozenset) and not all(type(e) is int for e in constant):
            return False
        if hasattr(constant, "co_consts") and not _ordered(constant):
            return False
    return True


def _bytecode(name: str, source: bytes) -> bytes | None:
    """The checked hash-based ``.pyc`` of the module ``name`` (its archive path), or None for
    a module whose bytecode would depend on the hash seed (it is then compiled at start) and
    for a source that is no module (the C source)."""
    if not name.endswith(".py"):
        return None
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    if not _ordered(code):
        return None
    return (
        importlib.util.MAGIC_NUMBER
        + PYC_FLAGS.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code, PYC_MARSHAL_VERSION)
    )


# --- the archive ------------------------------------------------------------


def _main_source() -> bytes:
    """The artifact's ``__main__.py``: :data:`MAIN_TEMPLATE` around the loader's source."""
    loader = Path(alpha.__file__).resolve().parent.joinpath("artifact", "loader.py").read_bytes()
    encoded = base64.encodebytes(zlib.compress(loader, COMPRESS_LEVEL))  # lines, each ending \n
    main = MAIN_TEMPLATE.format(
        sha256=hashlib.sha256(encoded).hexdigest(),
        loader=encoded.decode("ascii"),
        loaders=LOADERS_MODULE,
    )
    return main.encode("ascii")


@functools.cache
def _runtime() -> tuple[bytes, str]:
    """The shared runtime's bytes and their SHA-256: :data:`HEADER` and a zip of the
    package's sources and their bytecode, then ``SHA256SUMS``, their manifest (so it can be
    checked by hand and by :func:`alpha.artifact.loader.verify`). Built and compressed once per
    process; the same sources give the same bytes."""
    out = io.BytesIO()
    out.write(HEADER)
    entries = []
    with zipfile.ZipFile(out, "w") as archive:
        for name, path in _package_sources():
            source = path.read_bytes()
            members = [(name, source)]
            bytecode = _bytecode(name, source)
            if bytecode is not None:
                members.append((name.removesuffix(".py") + ".pyc", bytecode))
            for member, data in members:
                archive.writestr(
                    _member(member, zipfile.ZIP_DEFLATED), data, compresslevel=COMPRESS_LEVEL
                )
                entries.append((member, hashlib.sha256(data).hexdigest()))
        archive.writestr(_member(MANIFEST_NAME, zipfile.ZIP_STORED), encode_manifest(entries))
    data = out.getvalue()
    return data, hashlib.sha256(data).hexdigest()


@functools.cache
def _archive_prefix(runtime_digest: str) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """Every artifact's bytes before its payload: :data:`HEADER` and a zip of ``__main__.py``
    (stored, see :data:`MAIN_TEMPLATE`) and ``RUNTIME`` (the runtime it binds, stored); and the
    manifest entries (name, SHA-256) of those members. Built once per process and runtime."""
    out = io.BytesIO()
    out.write(HEADER)
    entries = []
    with zipfile.ZipFile(out, "w") as archive:
        members = [(MAIN_NAME, _main_source()), (RUNTIME_NAME, encode_runtime(runtime_digest))]
        for member, data in members:
            archive.writestr(_member(member, zipfile.ZIP_STORED), data)
            entries.append((member, hashlib.sha256(data).hexdigest()))
    return out.getvalue(), tuple(entries)


def runtime_entry() -> dict[str, object]:
    """The ``run.json`` entry (``file``, ``bytes``, ``sha256``) of the runtime this process
    builds, from the package it runs.

    Raises:
        OSError: a source cannot be read.
    """
    data, digest = _runtime()
    return {"file": runtime_name(digest), "bytes": len(data), "sha256": digest}


def build_runtime(directory: Path) -> dict[str, object]:
    """Write the shared runtime into ``directory`` as ``runtime-SHA256.pyz``, unless a file of
    that name already holds exactly those bytes; return its ``run.json`` entry
    (:func:`runtime_entry`). The file appears at once, whole, mode ``0644``.

    Raises:
        OSError: the folder cannot be written.
    """
    entry = runtime_entry()
    data, digest = _runtime()
    path = directory / runtime_name(digest)
    try:
        if path.stat().st_size == len(data) and file_digest(str(path)) == digest:
            return entry
    except FileNotFoundError:
        pass
    write_bytes_atomically(path, data, FILE_MODE)
    return entry


def _member(name: str, compress_type: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.create_system = ZIP_CREATE_SYSTEM
    info.create_version = info.extract_version = ZIP_VERSION
    info.external_attr = (stat.S_IFREG | FILE_MODE) << 16
    info.compress_type = compress_type
    return info


def build_artifact(
    path: Path, payload: Mapping[str, object], *, runtime: Mapping[str, object] | None = None
) -> int:
    """Write the artifact for ``payload`` at ``path``; return its size in bytes.

    The artifact binds the shared runtime (the package, ``runtime-SHA256.pyz`` beside it):
    ``runtime`` is the entry :func:`build_runtime` returned for ``path``'s folder; without it,
    the runtime is written there first (when not already there).

    ``payload`` holds ``format`` (:data:`ARTIFACT_FORMAT`), ``role``, ``target`` (one of
    :data:`TARGETS`), ``description`` (``RoleDescription.to_dict()`` of that role) and
    optionally ``schedule`` (the role's local schedule, any JSON value). The file appears at
    once, whole, executable; the same payload and sources give the same bytes.

    Raises:
        ArtifactInvalid: a key is missing or wrong (the message names it), the payload is not
            JSON, or its canonical JSON passes :data:`MAX_PAYLOAD_BYTES`.
    """
    where = f"the payload of {path.name}"
    if not isinstance(payload, Mapping):
        raise ArtifactInvalid(f"{where} must be a table, got {type(payload).__name__}")
    for key in ("format", "role", "target", "description"):
        if key not in payload:
            raise ArtifactInvalid(f"{where} lacks the key {key!r}")
    check_payload_fields(payload, where)
    keyed = payload_description(payload, where).keyed
    role_json = _canonical(dict(payload), where)
    if len(role_json) > MAX_PAYLOAD_BYTES:
        raise ArtifactInvalid(
            f"{where} is {len(role_json)} bytes of JSON, past the {MAX_PAYLOAD_BYTES} allowed"
        )
    if runtime is None:
        runtime = build_runtime(path.parent)
    digest = runtime["sha256"]
    if not isinstance(digest, str) or runtime.get("file") != runtime_name(digest):
        raise ArtifactInvalid(f"the runtime entry for {path.name} is not build_runtime's")
    prefix, entries = _archive_prefix(digest)
    manifest = encode_manifest([*entries, (PAYLOAD_NAME, hashlib.sha256(role_json).hexdigest())])
    whole = io.BytesIO(prefix)
    whole.seek(0, io.SEEK_END)
    with zipfile.ZipFile(whole, "a") as archive:
        # Both stored, the payload then the manifest: every artifact of a build shares the
        # bytes before the payload, and its size is the shared part (the loader and the
        # runtime's binding), exactly the payload's canonical JSON, and a manifest whose size
        # does not depend on the payload.
        archive.writestr(_member(PAYLOAD_NAME, zipfile.ZIP_STORED), role_json)
        archive.writestr(_member(MANIFEST_NAME, zipfile.ZIP_STORED), manifest)
    write_bytes_atomically(path, whole.getvalue(), KEYED_ARTIFACT_MODE if keyed else ARTIFACT_MODE)
    return path.stat().st_size
