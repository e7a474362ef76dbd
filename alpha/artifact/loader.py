"""The loader every artifact runs first: check the whole archive and the runtime it binds, then
start its role.

An artifact's ``__main__.py`` carries this module's source and runs it before anything of the
``alpha`` package is imported, so it uses the standard library only. It checks every member
against the archive's manifest, ``SHA256SUMS``; then the shared runtime beside it (the
``alpha`` package, once per folder, ``runtime-SHA256.pyz``) against the SHA-256 its member
``RUNTIME`` binds; and refuses a damaged artifact or runtime in one line before any of their
code runs. The launcher runs the same checks in-process (``alpha.artifact.verify_artifact``).
Formats and exit codes: ``docs/artifacts.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import stat
import struct
import sys
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

MANIFEST_NAME = "SHA256SUMS"
"""The last member of an artifact: a ``sha256sum`` line for every other member, in order."""

MAIN_NAME = "__main__.py"
"""The first member of an artifact: what Python runs, and what carries this loader."""

RUNTIME_NAME = "RUNTIME"
"""The member of a role's artifact that binds its runtime: one ``sha256sum`` line, the
runtime file's SHA-256 and its name (``runtime-SHA256.pyz``, beside the artifact)."""

RUNTIME_PREFIX = "runtime-"
RUNTIME_SUFFIX = ".pyz"

# Every artifact begins with these two lines. The shebang lets ``./role-NNNNNN.pyz`` run it.
# Python reads a file as a zip archive only when its end is whole; a truncated artifact is
# read as a script instead, and the second line, a coding declaration that names no encoding,
# stops it before anything runs with the one line "SyntaxError: encoding problem: damaged-...".
HEADER = (
    b"#!/usr/bin/env python3\n"
    b"# coding: damaged-alpha-artifact.compile-it-again-with-alpha-compile\n"
)

# The exit codes alpha.exitcodes names EXIT_USAGE (nothing ran: the artifact is damaged) and
# EXIT_FAILURE (interrupted): this module cannot import alpha before it has checked it.
EXIT_DAMAGED = 2
EXIT_INTERRUPTED = 1

# The largest member is role.json, which alpha.artifact bounds at this size (its
# MAX_PAYLOAD_BYTES); a member that claims more is damage, refused before it is read.
MAX_MEMBER_BYTES = 16 * 1024 * 1024

# A manifest is one line of about 90 bytes per member, and an artifact holds about 90 members:
# some 8 KB. 1 MiB is far above any real one, and bounds what a damaged one makes the loader
# read.
MAX_MANIFEST_BYTES = 1024 * 1024

# Bytes read at a time when hashing: a member is never held whole in memory.
HASH_CHUNK = 1 << 20

# The zip fields of every member, fixed so that rebuilding from the same inputs gives the same
# bytes whenever and wherever it runs (alpha.artifact writes them): the earliest time a zip
# entry can record; "made by" Unix (3), whose external attributes carry the mode; a plain
# readable file whatever the umask or the source file's mode; zip 2.0, enough for stored and
# deflated members. The loader refuses any other value, so no byte of an artifact goes
# unchecked: what is not a member's data is one of these, a length, a CRC-32 or an offset.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
ZIP_CREATE_SYSTEM = 3
FILE_MODE = 0o644
ZIP_VERSION = 20

REMEDY = "compile it again with alpha compile"

# What main() runs once every member is checked: the entry itself, not alpha.artifact, which
# also holds the builder and run.json (tests/artifact/test_loader_entry.py holds it to the
# real function).
ENTRY = ("alpha.artifact.entry", "run_embedded")

_HEX = frozenset("0123456789abcdef")
_LINE_GAP = "  "  # between the digest and the name, as sha256sum writes a text-mode line

# The zip records (APPNOTE 4.3.7, 4.3.12, 4.3.16) as zipfile writes them for these members.
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_CENTRAL_SIZE = 46  # a central directory record, without extra field or comment
_END = struct.Struct("<4s4H2LH")
_ATTRIBUTES = (stat.S_IFREG | FILE_MODE) << 16
_DOS_TIME = ZIP_EPOCH[3] << 11 | ZIP_EPOCH[4] << 5 | ZIP_EPOCH[5] // 2
_DOS_DATE = (ZIP_EPOCH[0] - 1980) << 9 | ZIP_EPOCH[1] << 5 | ZIP_EPOCH[2]
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


class Damaged(Exception):
    """An artifact, or a manifest, is not what an Alpha build writes; the message says how."""


# --- the manifest codec -----------------------------------------------------


def _check_entry(name: str, digest: str, seen: set[str], where: str) -> None:
    if len(digest) != 64 or not _HEX.issuperset(digest):
        raise Damaged(f"{where}: the digest must be 64 lowercase hex digits")
    if not name or not name.isascii() or not name.isprintable() or "\\" in name:
        raise Damaged(f"{where}: the name must be printable ASCII without a backslash")
    if name in seen:
        raise Damaged(f"{where}: {name} is listed twice")
    seen.add(name)


def encode_manifest(entries: Iterable[tuple[str, str]]) -> bytes:
    """The manifest of ``entries`` (member name, SHA-256 as 64 lowercase hex digits), in their
    order: a line ``DIGEST  NAME`` per member, as ``sha256sum`` writes and checks it.

    Raises:
        Damaged: a digest is not 64 lowercase hex digits, a name is empty, not printable
            ASCII or holds a backslash (which sha256sum would escape), or a name is repeated.
    """
    seen: set[str] = set()
    lines = []
    for number, (name, digest) in enumerate(entries, 1):
        _check_entry(name, digest, seen, f"{MANIFEST_NAME} line {number}")
        lines.append(f"{digest}{_LINE_GAP}{name}\n")
    if not lines:
        raise Damaged(f"{MANIFEST_NAME} must list at least one member")
    return "".join(lines).encode("ascii")


def decode_manifest(data: bytes) -> list[tuple[str, str]]:
    """The entries (member name, SHA-256 hex) of a manifest, in order. Only what
    :func:`encode_manifest` writes is accepted, so each list has exactly one encoding.

    Raises:
        Damaged: the bytes are not ASCII, empty, lack the last newline, or a line is not
            ``DIGEST  NAME`` with a valid digest and name, or repeats a name; the message names
            the line.
    """
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise Damaged(f"{MANIFEST_NAME} is not ASCII text") from None
    if not text.endswith("\n"):
        raise Damaged(f"{MANIFEST_NAME} is empty or lacks its last newline")
    seen: set[str] = set()
    entries = []
    for number, line in enumerate(text[:-1].split("\n"), 1):
        digest, gap, name = line[:64], line[64:66], line[66:]
        where = f"{MANIFEST_NAME} line {number}"
        if gap != _LINE_GAP:
            raise Damaged(f"{where} is not 'DIGEST  NAME'")
        _check_entry(name, digest, seen, where)
        entries.append((name, digest))
    return entries


# --- checking an artifact ---------------------------------------------------


def _content(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """A member's content, in chunks; zipfile checks its CRC-32 once it has read it all.

    Raises:
        Damaged: the member cannot be read (its data does not inflate, or its CRC-32 differs).
    """
    try:
        with archive.open(info) as member:
            while chunk := member.read(HASH_CHUNK):
                yield chunk
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise Damaged(f"{info.filename} cannot be read ({error})") from None


def _same_names(held: list[str], listed: list[str]) -> None:
    """Refuse, naming the first difference, unless the archive holds exactly the listed
    members, once each, in the listed order."""
    if held == listed:
        return
    for name in held:
        if name not in listed:
            raise Damaged(f"it holds {name}, which {MANIFEST_NAME} does not list")
    for name in listed:
        if name not in held:
            raise Damaged(f"it lacks {name}, which {MANIFEST_NAME} lists")
    for name in held:
        if held.count(name) > 1:
            raise Damaged(f"it holds {name} twice")
    raise Damaged(f"its members are not in the order {MANIFEST_NAME} lists them")


def _check_layout(handle: BinaryIO, archive: zipfile.ZipFile) -> None:
    """Refuse any byte outside the members' data that a build does not write: each member's
    central directory entry and local header hold the fixed fields, its own lengths and CRC-32,
    and nothing else; members follow one another with no gap, then the central directory, then
    the end record, then the end of the file."""
    infos = archive.infolist()
    offset = len(HEADER)
    for info in infos:
        fields = (
            info.create_version,
            info.extract_version,
            info.create_system,
            info.flag_bits,
            info.reserved,
            info.volume,
            info.internal_attr,
            info.external_attr,
            info.date_time,
            info.extra,
            info.comment,
            info.header_offset,
        )
        expected = (ZIP_VERSION, ZIP_VERSION, ZIP_CREATE_SYSTEM, 0, 0, 0, 0, _ATTRIBUTES)
        if fields != (*expected, ZIP_EPOCH, b"", b"", offset) or info.compress_type not in _METHODS:
            raise Damaged(f"the central directory entry of {info.filename} is not a build's")
        name = info.filename.encode("ascii")
        local = _LOCAL.pack(
            b"PK\x03\x04",
            ZIP_VERSION,
            0,
            0,
            info.compress_type,
            _DOS_TIME,
            _DOS_DATE,
            info.CRC,
            info.compress_size,
            info.file_size,
            len(name),
            0,
        )
        handle.seek(offset)
        if handle.read(len(local) + len(name)) != local + name:
            raise Damaged(f"the local header of {info.filename} is not a build's")
        offset += len(local) + len(name) + info.compress_size
    if archive.comment:
        raise Damaged("its zip archive has a comment, which no build writes")
    central = sum(_CENTRAL_SIZE + len(info.filename) for info in infos)
    if archive.start_dir != offset:
        raise Damaged("its central directory does not follow its last member")
    handle.seek(offset + central)
    end = _END.unpack(handle.read(_END.size))
    # zipfile writes the central directory's offset from the file's start or from the
    # archive's (after HEADER), depending on how it was written; both name the same place.
    records = (b"PK\x05\x06", 0, 0, len(infos), len(infos), central)
    if end[:6] != records or end[6] not in (offset, offset - len(HEADER)) or end[7] != 0:
        raise Damaged("its zip end record is not a build's")
    if handle.seek(0, os.SEEK_END) != offset + central + _END.size:
        raise Damaged("it holds bytes after its zip archive")


def _check_archive(handle: BinaryIO) -> None:
    if handle.read(len(HEADER)) != HEADER:
        raise Damaged("it does not begin with the two lines every artifact begins with")
    with zipfile.ZipFile(handle) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if MANIFEST_NAME not in names:
            raise Damaged(f"it has no manifest ({MANIFEST_NAME})")
        if names[-1] != MANIFEST_NAME:
            raise Damaged(f"it holds {names[-1]} after {MANIFEST_NAME}, which does not list it")
        manifest = infos[-1]
        if manifest.file_size > MAX_MANIFEST_BYTES:
            raise Damaged(
                f"{MANIFEST_NAME} is {manifest.file_size} bytes, past the "
                f"{MAX_MANIFEST_BYTES} allowed"
            )
        entries = decode_manifest(b"".join(_content(archive, manifest)))
        members = infos[:-1]
        _same_names([info.filename for info in members], [name for name, _ in entries])
        _check_layout(handle, archive)
        for info, (name, digest) in zip(members, entries, strict=True):
            if info.file_size > MAX_MEMBER_BYTES:
                raise Damaged(
                    f"{name} is {info.file_size} bytes, past the {MAX_MEMBER_BYTES} allowed"
                )
            content = hashlib.sha256()
            for chunk in _content(archive, info):
                content.update(chunk)
            if content.hexdigest() != digest:
                raise Damaged(f"{name} does not match its SHA-256 in {MANIFEST_NAME}")


def verify(path: str) -> None:
    """Check the artifact at ``path`` whole: its first two lines are :data:`HEADER`, then a zip
    archive whose last member is the manifest, which lists every other member, once each and
    in order, with its SHA-256; every zip header holds what a build writes; each member's
    CRC-32 and SHA-256 match.

    Raises:
        Damaged: the file cannot be opened, or anything else; one sentence naming the file,
            what is wrong and what to do.
    """
    name = os.path.basename(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below; opening is told apart)
    except OSError as error:
        raise Damaged(f"{name} cannot be read: {error.strerror or error}") from None
    with handle:
        try:
            _check_archive(handle)
        except Damaged as error:
            raise Damaged(f"{name} is damaged: {error}; {REMEDY}") from None
        except Exception as error:
            # Whatever else reading these bytes raises (zipfile's BadZipFile, zlib.error,
            # struct.error, an OSError seeking to an offset a damaged header names, ...) says
            # the same: they are not what a build writes.
            raise Damaged(f"{name} is damaged: {type(error).__name__}: {error}; {REMEDY}") from None


# --- the runtime a role binds -------------------------------------------------


def runtime_name(digest: str) -> str:
    """The file name of the runtime whose SHA-256 is ``digest``: ``runtime-DIGEST.pyz``."""
    return f"{RUNTIME_PREFIX}{digest}{RUNTIME_SUFFIX}"


def encode_runtime(digest: str) -> bytes:
    """The ``RUNTIME`` member binding the runtime whose file's SHA-256 is ``digest``.

    Raises:
        Damaged: ``digest`` is not 64 lowercase hex digits.
    """
    return encode_manifest([(runtime_name(digest), digest)])


def decode_runtime(data: bytes) -> tuple[str, str]:
    """The (file name, SHA-256) a ``RUNTIME`` member binds: exactly one manifest line whose
    name is ``runtime-DIGEST.pyz`` for its own digest.

    Raises:
        Damaged: anything else.
    """
    entries = decode_manifest(data)
    if len(entries) != 1 or entries[0][0] != runtime_name(entries[0][1]):
        raise Damaged(f"{RUNTIME_NAME} must be one line 'DIGEST  {runtime_name('DIGEST')}'")
    return entries[0]


def bound_runtime(path: str) -> tuple[str, str]:
    """The (file name, SHA-256) of the runtime the artifact at ``path`` binds, read from its
    ``RUNTIME`` member; ``path`` has passed :func:`verify`.

    Raises:
        Damaged: the artifact has no ``RUNTIME`` member, or a bad one.
    """
    with zipfile.ZipFile(path) as archive:
        try:
            info = archive.getinfo(RUNTIME_NAME)
        except KeyError:
            raise Damaged(f"it has no {RUNTIME_NAME} member naming its runtime") from None
        if info.file_size > MAX_MANIFEST_BYTES:
            raise Damaged(f"{RUNTIME_NAME} is {info.file_size} bytes, past the bound")
        return decode_runtime(b"".join(_content(archive, info)))


def file_digest(path: str) -> str:
    """The SHA-256 of the file at ``path``, as 64 lowercase hex digits, read in chunks.

    Raises:
        OSError: it cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_runtime(path: str) -> str:
    """Check the runtime the artifact at ``path`` binds (``path`` has passed :func:`verify`):
    the file ``runtime-SHA256.pyz`` in the artifact's own folder, whose SHA-256 must be the
    one its ``RUNTIME`` member records. Return the runtime's path.

    Raises:
        Damaged: one sentence naming the artifact, the runtime, what is wrong and what to do:
            the binding is bad, the runtime is missing or unreadable, or its SHA-256 differs.
    """
    name = os.path.basename(path)
    try:
        file, digest = bound_runtime(path)
    except Damaged as error:
        raise Damaged(f"{name} is damaged: {error}; {REMEDY}") from None
    folder = os.path.dirname(os.path.abspath(path))
    runtime = os.path.join(folder, file)
    try:
        found = file_digest(runtime)
    except FileNotFoundError:
        raise Damaged(
            f"{name} cannot start: its runtime {file} is missing from {folder}; {REMEDY}"
        ) from None
    except OSError as error:
        raise Damaged(
            f"{name} cannot start: its runtime {file} cannot be read: "
            f"{error.strerror or error}; {REMEDY}"
        ) from None
    if found != digest:
        raise Damaged(
            f"{name} is damaged: its runtime {file} does not match the SHA-256 {name} binds "
            f"(it is {found}); {REMEDY}"
        )
    return runtime


def verify_role(path: str) -> str:
    """Check a role's artifact whole (:func:`verify`), then the runtime it binds
    (:func:`check_runtime`); return the runtime's path.

    Raises:
        Damaged: as those two.
    """
    verify(path)
    return check_runtime(path)


# --- the entry ----------------------------------------------------------------


def keep_own_alpha(runtime: str) -> bool:
    """Keep the modules of ``alpha`` this process has imported already only if every one of
    them came from the runtime at ``runtime``, which has just been checked; otherwise drop them
    all, so that the role imports its own from that runtime. Whether they were kept.

    A role forked by the warm starter (``alpha/launch/warm_server.py``) inherits the modules
    the starter imported once for all its children, from a runtime it checked as this loader
    does; a role of another runtime, or one started alone, finds none of them of its own."""
    names = [name for name in sys.modules if name == "alpha" or name.startswith("alpha.")]
    inside = runtime + os.sep
    for name in names:
        origin = getattr(sys.modules[name], "__file__", None)
        if not (isinstance(origin, str) and origin.startswith(inside)):
            for other in names:
                del sys.modules[other]
            return False
    return bool(names)


def main() -> int:
    """Check the running artifact (``sys.argv[0]``) and the runtime it binds, then run its
    role from that runtime; the exit code.

    A damaged artifact, or a runtime missing or not the one it binds, prints one line on
    stderr and returns :data:`EXIT_DAMAGED` (2); an interrupt during the checks prints one line
    and returns :data:`EXIT_INTERRUPTED` (1). Nothing of ``alpha`` is imported before the
    checks have passed.
    """
    path = sys.argv[0]
    try:
        runtime = verify_role(path)
    except Damaged as error:
        print(f"role ?: failed: ArtifactInvalid: {error}", file=sys.stderr, flush=True)
        return EXIT_DAMAGED
    except KeyboardInterrupt:
        name = os.path.basename(path)
        print(f"role ?: failed: interrupted while checking {name}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    # The hand-off, by name: the module alpha.artifact.loader that the toolchain imports (for
    # these constants and verify) never runs main(), so it depends on nothing of alpha; only
    # the program an artifact runs reaches the entry, once the check has passed.
    # The runtime goes first on the path: the package is imported from it, and from nothing
    # installed beside the interpreter.
    sys.path.insert(0, runtime)
    keep_own_alpha(runtime)
    module, function = ENTRY
    run_embedded = getattr(importlib.import_module(module), function)
    code = run_embedded()
    assert isinstance(code, int)
    return code


if __name__ == "__main__":
    sys.exit(main())
