"""Checkpoints: learning state in logical shards, published atomically, restored from a path.

A checkpoint folder holds generations, one per published state, and a pointer to the latest::

    CHECKPOINT/
      .alpha-checkpoint.lock      held (flock) by the one run that writes the folder
      LATEST                      {"format": "alpha-checkpoint-pointer/1", "generation": ...}
      gen-000000020-3fa94c1e-0b5e61c2d4a7f913/   a published generation (immutable), sealed:
        manifest.json             its name ends with its root manifest's digest prefix
        owner-000000.json         owner 0's manifest: its shards
        shards/w.000000000000-000000000600.bin
      gen-000000030-a0b1c2d3.staged/   a generation being written by segment a0b1c2d3
      .removing-gen-.../          a generation being removed (out of sight: never read)

A **logical shard** is one contiguous element range ``[start, stop)`` of one named array of
the state (the parameters ``w``, an optimizer's ``m`` and ``v``, ...), with the array's global
shape and dtype, its byte length and SHA-256: what it holds does not depend on which role
wrote it, so a generation written by N owners restores on any other number. Shard files are
raw little-endian bytes.

Publication (``docs/checkpoints.md``): every owner writes its shards and its owner manifest
into the staged generation (each file and folder fsynced); at the run's commit point role 0
writes the root manifest, fsyncs, and renames the staged folder to its final name, one atomic
step after which the generation never changes; a generation is published once (a second
publication of the same name is refused: :class:`GenerationExists`). Then the pointer
``LATEST`` is replaced atomically. Older generations are removed only after a newer one is
published and pointed to; a removal that fails is reported, never fatal.

Reading needs nothing but a path (a checkpoint folder, through its pointer, or a generation
folder): every manifest is checked against the digest that names it, and every shard file
whole (size and SHA-256) before a byte of it is used; a damaged, truncated or missing one
raises :class:`CheckpointCorrupt` naming it, and nothing is loaded from it. A generation is
never opened unpinned: its root manifest is checked against the pointer's digest, or against
the seal its folder's name carries, and its round and name against the folder's.

Writing refuses what the system refuses with :class:`CheckpointWriteFailed` (the path and the
errno's words), never a bare ``OSError``.

This module is the store: files, fsync, the folder's lock, publishing, pruning. What the names
and manifests mean, and each manifest's encoding and checks, are pure and in
:mod:`alpha.checkpoint.manifest`; the names it exports are exported here too, for callers of
the store.
"""

from __future__ import annotations

import contextlib
import errno as errnos
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from alpha.checkpoint.manifest import (
    FORMAT,
    HISTORY_FILE,
    LOCK,
    MANIFEST,
    MAX_ELEMENTS,
    MAX_MANIFEST_BYTES,
    OWNER_FORMAT,
    POINTER,
    POINTER_FORMAT,
    REMOVING_PREFIX,
    SHARDS,
    ArraySpecs,
    GenerationName,
    RecordedHistory,
    Shard,
    check_cover,
    decode_history,
    decode_history_lines,
    decode_history_ref,
    decode_json,
    decode_owner_manifest,
    decode_pointer,
    decode_root_manifest,
    encode_history_lines,
    encode_owner_manifest,
    encode_pointer,
    encode_root_manifest,
    generation_name,
    history_ref,
    owner_manifest_name,
    owner_ranges,
    parse_generation,
    sealed_name,
    sha256_hex,
    shard_file,
    staged_name,
)
from alpha.errors import (
    CheckpointCorrupt,
    CheckpointFolderHeld,
    CheckpointWriteFailed,
    GenerationExists,
    GenerationNotFound,
)
from alpha.files import STAGED_SUFFIX, fsync_folder, read_regular_file, write_bytes_atomically

__all__ = [
    "FORMAT",
    "LOCK",
    "MANIFEST",
    "MAX_ELEMENTS",
    "OWNER_FORMAT",
    "POINTER",
    "POINTER_FORMAT",
    "REMOVING_PREFIX",
    "STAGED_SUFFIX",
    "Generation",
    "GenerationName",
    "HistoryWriter",
    "Listed",
    "Part",
    "Shard",
    "check_room",
    "generation_name",
    "generation_of_round",
    "generation_size",
    "hold_checkpoint_folder",
    "list_generations",
    "move_pointer",
    "open_generation",
    "owner_manifest_name",
    "owner_ranges",
    "parse_generation",
    "parts_of",
    "pointed",
    "prune",
    "publish",
    "published",
    "remove_staged",
    "sealed_name",
    "shard_file",
    "staged_folder",
    "write_shards",
]


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


Array = npt.NDArray[np.floating]


@contextlib.contextmanager
def _writing(action: str, path: Path) -> Iterator[None]:
    """Turn what the system refuses while writing into :class:`CheckpointWriteFailed`,
    naming the path it refused (the error's own when it says) and its errno's words."""
    try:
        yield
    except OSError as error:
        code = error.errno if error.errno is not None else errnos.EIO
        # A rename names its destination (the pointer, not its temporary file), if it says.
        named = [each for each in (error.filename2, error.filename) if isinstance(each, str)]
        where = named[0] if named else str(path)
        raise CheckpointWriteFailed(
            path=where, action=action, errno=code, reason=os.strerror(code)
        ) from error


def _read_prefix(path: Path, size: int, what: str) -> bytes:
    """The first ``size`` bytes of the regular file at ``path``.

    Raises:
        CheckpointCorrupt: it cannot be opened or read, is not a regular file, or is shorter.
    """
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise CheckpointCorrupt(f"{what} cannot be read: {error.strerror or error}") from None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise CheckpointCorrupt(f"{what} is not a regular file")
        pieces, left = [], size
        while left:
            piece = os.read(handle, min(left, 1 << 20))
            if not piece:
                raise CheckpointCorrupt(
                    f"{what} is truncated: {size - left} of the {size} bytes its manifest names"
                )
            pieces.append(piece)
            left -= len(piece)
        return b"".join(pieces)
    except OSError as error:
        raise CheckpointCorrupt(f"{what} cannot be read: {error.strerror or error}") from None
    finally:
        os.close(handle)


# Why a history file cannot be linked into the next generation, where a copy still can be made:
# a file system without hard links, or with a limit on them, or the last generation removed.
_NO_LINK: Final = frozenset(
    {errnos.EXDEV, errnos.EPERM, errnos.EOPNOTSUPP, errnos.EMLINK, errnos.ENOENT}
)


class HistoryWriter:
    """Role 0's history file for one launch's generations (:data:`HISTORY_FILE`,
    ``docs/checkpoints.md``): every round's row once, appended as generations take them in, so
    that a generation costs the rows since the last one, never every row again.

    The launch's first generation gets a new file: the rows its launch carries and its own.
    Each later one gets the same file, its new rows appended, as a hard link in its folder:
    a generation's manifest names how many bytes from the start are its rows and their
    SHA-256, so the rows a later generation appends are not part of it. Where the link cannot
    be made (no hard links, the earlier generation removed), the generation gets a copy. Every
    write is fsynced before the generation's manifest names it.
    """

    def __init__(self, rows: Sequence[Sequence[object]] = ()) -> None:
        self._pending = encode_history_lines(rows)  # rows not yet written
        self._rows = len(rows)
        self._size = 0  # bytes written to the launch's file
        self._hash = hashlib.sha256()
        self._fd: int | None = None
        self._path: Path | None = None  # where the launch's file is now

    def add(self, rows: Sequence[Sequence[object]]) -> None:
        """Rows after the others, written at the next :meth:`put`."""
        self._pending += encode_history_lines(rows)
        self._rows += len(rows)

    def put(self, staged: Path) -> dict[str, object]:
        """Make ``staged`` hold the history file with every row added so far, durably; return
        ``about``'s :data:`~alpha.checkpoint.manifest.HISTORY` naming them.

        Raises:
            CheckpointWriteFailed: it cannot be written, linked or copied.
        """
        target = staged / HISTORY_FILE
        with _writing("write the checkpoint history at", target):
            data, self._pending = self._pending, b""
            if self._fd is not None:
                self._write(data)
                assert self._path is not None
                try:
                    os.link(self._path, target)
                except OSError as error:
                    if error.errno not in _NO_LINK:
                        raise
                    self._copy_to(target)
            else:
                self._create(target, data)
            self._path = target
        return history_ref(self._rows, self._size, self._hash.hexdigest())

    def moved(self, path: Path) -> None:
        """The generation holding the file was published as ``path``: link from there next."""
        self._path = path / HISTORY_FILE

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _create(self, target: Path, data: bytes) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        self._fd = os.open(target, flags, 0o644)
        self._write(data)

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        self._hash.update(data)
        self._size += len(data)

    def _copy_to(self, target: Path) -> None:
        """A new file at ``target`` with every byte of the old one, written from then on."""
        assert self._fd is not None
        old, self._fd = self._fd, None
        try:
            data = os.pread(old, self._size, 0)
        finally:
            os.close(old)
        size, self._size, self._hash = self._size, 0, hashlib.sha256()
        if len(data) != size:
            raise OSError(errnos.EIO, f"read {len(data)} of {size} bytes back")
        self._create(target, data)


_STAGED: Final = re.compile(r"gen-([0-9]{9,})-([0-9a-f]{8})" + re.escape(STAGED_SUFFIX))


def staged_folder(folder: Path, round: int, nonce: str) -> Path:
    """Where the segment with ``nonce`` stages its generation of ``round``: named by its
    writer, so no other writer's prune or cleanup takes it for its own."""
    return folder / staged_name(round, nonce)


@dataclass(frozen=True, slots=True)
class Part:
    """What one owner writes of one array: ``values`` are elements ``[start, start +
    len(values))`` of the array ``name`` of global shape ``shape``."""

    name: str
    values: Array
    shape: tuple[int, ...]
    start: int


def parts_of(arrays: Mapping[str, Array], ranges: Mapping[str, tuple[int, int]]) -> list[Part]:
    """The parts of whole ``arrays`` (flattened) at ``ranges``, by name."""
    return [
        Part(name, arrays[name].reshape(-1)[start:stop], tuple(arrays[name].shape), start)
        for name, (start, stop) in sorted(ranges.items())
    ]


def write_shards(
    staged: Path,
    owner: int,
    parts: Sequence[Part],
    *,
    on_shard: Callable[[int], None] | None = None,
) -> str:
    """Write owner ``owner``'s shards (one per non-empty part) and its owner manifest into the
    staged generation ``staged``; return the owner manifest's SHA-256. Each file is fsynced,
    then the folders that name them. ``on_shard`` is called with each shard's index once its
    file is written (failpoints use it).

    Raises:
        CheckpointWriteFailed: a file or folder cannot be written (its path and why).
    """
    with _writing("stage the checkpoint generation at", staged):
        return _write_shards(staged, owner, parts, on_shard)


def _write_shards(
    staged: Path, owner: int, parts: Sequence[Part], on_shard: Callable[[int], None] | None
) -> str:
    shards_dir = staged / SHARDS
    shards_dir.mkdir(parents=True, exist_ok=True)
    shards = []
    for part in sorted(parts, key=lambda p: (p.name, p.start)):
        values = part.values.reshape(-1)
        if values.size == 0:
            continue
        start, stop = part.start, part.start + values.size
        dtype = str(values.dtype)
        raw = np.ascontiguousarray(values).astype(np.dtype(dtype).newbyteorder("<"), copy=False)
        data = raw.tobytes()
        file = shard_file(part.name, start, stop)
        _write_durably(staged / file, data)
        shards.append(
            Shard(part.name, part.shape, start, stop, dtype, len(data), sha256_hex(data), file)
        )
        if on_shard is not None:
            on_shard(len(shards) - 1)
    fsync_folder(shards_dir)
    manifest = encode_owner_manifest(owner, shards)
    write_bytes_atomically(staged / owner_manifest_name(owner), manifest)
    return sha256_hex(manifest)


def _read_json(path: Path, what: str, expect: str | None = None) -> tuple[dict[str, object], str]:
    """The JSON object in the file ``path`` and its SHA-256 (checked against ``expect``).

    Raises:
        CheckpointCorrupt: it cannot be read, is too large, or :func:`decode_json` refuses it.
    """
    try:
        data = read_regular_file(path, MAX_MANIFEST_BYTES)
    except OSError as error:
        raise CheckpointCorrupt(
            f"{what} ({path}) cannot be read: {error.strerror or error}"
        ) from None
    return decode_json(data, f"{what} ({path})", expect)


def _owner_shards(staged: Path, owner: int, expect: str | None) -> tuple[list[Shard], str]:
    what = f"owner {owner}'s manifest"
    data, digest = _read_json(staged / owner_manifest_name(owner), what, expect)
    return decode_owner_manifest(data, owner, what), digest


# What _plan_sha256 read of each published generation, by its folder's path. A generation
# is immutable and sealed by its name (the name's seal is its root manifest's SHA-256), so
# what was read once through the seal stays true of that name; without this a run that
# publishes every few rounds decoded every kept manifest, each holding the whole history,
# at every publication. Bounded: cleared past _PLAN_OF_MOST entries.
_PLAN_OF: dict[str, str] = {}
_PLAN_OF_MOST: Final = 4096


def publish(
    folder: Path,
    round: int,
    nonce: str,
    *,
    owners: int,
    arrays: ArraySpecs,
    about: Mapping[str, object],
    expect: Sequence[str] | None = None,
) -> tuple[str, str]:
    """Publish the staged generation of ``round`` in ``folder``: check that every owner's
    manifest is there (with ``expect``, each owner's SHA-256 as the owner said it wrote it,
    durably) and its shards cover each array (``name -> (shape, dtype)``) exactly,
    write the root manifest (with ``about``: the run, the plan's identity, what restoring
    needs), and rename the staged folder to its sealed name (:func:`sealed_name`). Return that
    name and the root manifest's SHA-256.

    Raises:
        GenerationExists: that generation was already published; nothing changes.
        CheckpointCorrupt: an owner manifest is missing or wrong, or the shards do not cover.
        CheckpointWriteFailed: a file cannot be written or renamed (its path and why).
    """
    base = generation_name(round, nonce)
    staged = staged_folder(folder, round, nonce)
    if any(parsed.base == base for parsed, _ in _generations(folder)):
        raise GenerationExists(
            f"generation {base} is already published in {folder}; a generation is published "
            "once: resume from it, or start the run with another checkpoint folder"
        )
    entries = []
    shards: dict[str, list[Shard]] = {}
    for owner in range(owners):
        found, digest = _owner_shards(staged, owner, None if expect is None else expect[owner])
        entries.append({"owner": owner, "file": owner_manifest_name(owner), "sha256": digest})
        for shard in found:
            shards.setdefault(shard.name, []).append(shard)
    check_cover(shards, arrays)
    manifest = encode_root_manifest(base, round, entries, arrays, about)
    digest = sha256_hex(manifest)
    name = sealed_name(base, digest)
    final = folder / name
    with _writing("publish the checkpoint generation at", staged):
        write_bytes_atomically(staged / MANIFEST, manifest)
        fsync_folder(staged)
        try:
            # One atomic step: the generation appears whole, under its final name, or not at
            # all.
            os.rename(staged, final)
        except OSError:
            if final.exists():
                raise GenerationExists(
                    f"generation {name} is already published in {folder}"
                ) from None
            raise
        fsync_folder(folder)
    plan = about.get("plan_sha256")
    if isinstance(plan, str):
        if len(_PLAN_OF) >= _PLAN_OF_MOST:
            _PLAN_OF.clear()
        _PLAN_OF[str(final)] = plan  # what prune reads of it, known without reading it back
    return name, digest


def move_pointer(folder: Path, generation: str, manifest_sha256: str) -> None:
    """Point ``LATEST`` at the published generation ``generation`` (its sealed folder name):
    one atomic replacement.

    Raises:
        CheckpointWriteFailed: the pointer cannot be written (its path and why); the old
            pointer stays as it was.
    """
    with _writing("point", folder / POINTER):
        write_bytes_atomically(folder / POINTER, encode_pointer(generation, manifest_sha256))


def _generations(folder: Path) -> list[tuple[GenerationName, Path]]:
    """The published generations' folders in ``folder`` (real folders with a sealed name;
    never a link), as their names read."""
    found = []
    for path in folder.iterdir():
        parsed = parse_generation(path.name)
        if parsed is not None and path.is_dir() and not path.is_symlink():
            found.append((parsed, path))
    return found


def published(folder: Path) -> list[Path]:
    """The published generations in ``folder``, oldest first (by round, then by when they
    were published)."""
    found = [
        (parsed.round, path.stat().st_mtime_ns, path.name, path)
        for parsed, path in _generations(folder)
    ]
    return [path for *_, path in sorted(found)]


def _put_out_of_sight(path: Path) -> Path:
    """Rename ``path`` (in its folder) to a name every reader ignores, and make that durable;
    return the new path. Raises ``OSError``."""
    hidden = path.parent / f"{REMOVING_PREFIX}{path.name}"
    os.rename(path, hidden)
    fsync_folder(path.parent)
    return hidden


def _remove(path: Path, failures: list[str], on_hidden: Callable[[], None] | None = None) -> None:
    """Remove the folder ``path``: out of sight first, then deleted; a failure is appended to
    ``failures`` as the refusal's sentence. ``on_hidden`` is called between the two steps
    (failpoints use it)."""
    try:
        with _writing("remove", path):
            hidden = path if path.name.startswith(REMOVING_PREFIX) else _put_out_of_sight(path)
            if on_hidden is not None:
                on_hidden()
            shutil.rmtree(hidden)
    except CheckpointWriteFailed as error:
        failures.append(str(error))


def remove_staged(folder: Path, nonce: str) -> list[str]:
    """Remove every generation the segment ``nonce`` staged and did not publish (after that
    segment failed or was stopped: nothing will publish them), each out of sight first; return
    the failures. One listing of the folder, however many rounds the segment had: a restart
    after a failure waits on this."""
    failures: list[str] = []
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return failures
    except OSError as error:
        return [f"cannot list the checkpoint folder {folder}: {error.strerror or error}"]
    for name in names:
        round = _staged_round(name, nonce)
        if round is None:
            continue
        staged = folder / name
        if staged.is_dir() and not staged.is_symlink():
            _remove(staged, failures)
    return failures


def _staged_round(name: str, nonce: str) -> int | None:
    """The round of the generation the segment ``nonce`` stages under ``name``; None when
    ``name`` is not one of its staged generations, as :func:`staged_folder` names them."""
    found = _STAGED.fullmatch(name)
    if found is None or found.group(2) != nonce:
        return None
    round = int(found.group(1))
    return round if staged_name(round, nonce) == name else None


def _plan_sha256(path: Path) -> str | None:
    """The plan identity digest a published generation records, read pinned by its seal
    (once per generation folder in this process); None when it cannot be read or records
    none."""
    key = str(path)
    known = _PLAN_OF.get(key)
    if known is not None:
        return known
    try:
        found = _open_folder(path, None).about.get("plan_sha256")
    except CheckpointCorrupt:
        return None
    if not isinstance(found, str):
        return None
    if len(_PLAN_OF) >= _PLAN_OF_MOST:
        _PLAN_OF.clear()
    _PLAN_OF[key] = found
    return found


def prune(
    folder: Path,
    keep: int,
    plan_sha256: str | None = None,
    *,
    on_hidden: Callable[[], None] | None = None,
) -> list[str]:
    """Remove the published generations of the plan whose identity digest is ``plan_sha256``
    that are older than its ``keep`` newest (never the one the pointer names), and what an
    earlier removal left out of sight; return one line per removal that failed (reported,
    not raised). A generation of another plan, one that does not read, and every staged
    generation (another writer's work) are never touched. Each removal renames the
    generation out of sight first (:data:`REMOVING_PREFIX`), then deletes it; ``on_hidden``
    is called between the two (failpoints use it)."""
    failures: list[str] = []
    try:
        pointed_name = pointed(folder)
    except CheckpointCorrupt:
        return [f"{folder / POINTER} cannot be read: nothing removed"]
    try:
        done = published(folder)
        leftovers = [p for p in folder.iterdir() if p.name.startswith(REMOVING_PREFIX)]
    except OSError as error:
        return [f"cannot list {folder}: {error.strerror or error}: nothing removed"]
    mine = [path for path in done if _plan_sha256(path) == plan_sha256]
    old = mine[: max(0, len(mine) - keep)]
    for path in old:
        if path.name != pointed_name:
            _remove(path, failures, on_hidden)
    for path in leftovers:
        _remove(path, failures)
    return failures


def pointed(folder: Path) -> str:
    """The generation ``folder``'s pointer names (a sealed folder name), read without
    following a link.

    Raises:
        CheckpointCorrupt: the pointer is missing, a link, damaged or names no generation.
    """
    return _read_pointer(folder)[0]


def _read_pointer(folder: Path) -> tuple[str, str]:
    path = folder / POINTER
    try:
        if path.is_symlink():
            raise CheckpointCorrupt(
                f"{path} is a symbolic link ({os.readlink(path)!r}): a pointer is a file of its "
                "folder, never followed"
            )
    except OSError as error:
        raise CheckpointCorrupt(f"{path} cannot be read: {error.strerror or error}") from None
    pointer, _ = _read_json(path, "the checkpoint pointer")
    return decode_pointer(pointer, str(path))


@dataclass
class Generation:
    """A published generation, its manifests checked; shards are checked as they are read."""

    path: Path
    manifest_sha256: str
    round: int
    name: GenerationName
    owners: int
    arrays: dict[str, tuple[tuple[int, ...], str]]
    shards: dict[str, list[Shard]]
    about: dict[str, object]

    def _shard_bytes(self, shard: Shard) -> bytes:
        path = self.path / shard.file
        where = f"checkpoint {self.path.name}: shard {shard.label}"
        try:
            data = read_regular_file(path, shard.bytes)
        except OSError as error:
            raise CheckpointCorrupt(
                f"{where} cannot be read: {error.strerror or error}; nothing was loaded from it",
                shard=shard.label,
            ) from None
        if len(data) != shard.bytes:
            raise CheckpointCorrupt(
                f"{where} is truncated: {len(data)} of {shard.bytes} bytes; nothing was loaded "
                "from it",
                shard=shard.label,
            )
        digest = sha256_hex(data)
        if digest != shard.sha256:
            raise CheckpointCorrupt(
                f"{where} is corrupt: its SHA-256 is {digest}, the manifest says "
                f"{shard.sha256}; nothing was loaded from it",
                shard=shard.label,
            )
        return data

    def read(self, name: str, start: int = 0, stop: int | None = None) -> Array:
        """Elements ``[start, stop)`` of array ``name`` (flattened), from every shard that
        overlaps them, each checked whole first.

        Raises:
            KeyError: no such array.
            CheckpointCorrupt: a shard it needs is damaged, truncated or missing.
        """
        shape, dtype = self.arrays[name]
        total = math.prod(shape)
        stop = total if stop is None else stop
        if not 0 <= start <= stop <= total:
            raise ValueError(f"{name}[{start}:{stop}] is outside its {total} elements")
        out = np.empty(stop - start, dtype=dtype)
        for shard in self.shards.get(name, []):
            low, high = max(start, shard.start), min(stop, shard.stop)
            if low >= high:
                continue
            values = np.frombuffer(
                self._shard_bytes(shard), dtype=np.dtype(dtype).newbyteorder("<")
            )
            out[low - start : high - start] = values[low - shard.start : high - shard.start]
        return out

    def load(self) -> dict[str, Array]:
        """Every array whole, in its global shape."""
        return {
            name: self.read(name).reshape(shape) for name, (shape, _) in sorted(self.arrays.items())
        }

    def history(self) -> RecordedHistory | None:
        """What the generation records of the rounds before it: the rows of its history file
        (:data:`HISTORY_FILE`) that its manifest names, checked against their SHA-256, or the
        rows its manifest holds itself (a generation written before history files); None when
        it records none.

        Raises:
            CheckpointCorrupt: the history file is missing, shorter than the manifest says,
                another file than a regular one, or its rows are not the ones named.
        """
        where = f"checkpoint {self.path.name}"
        ref = decode_history_ref(self.about, where)
        if ref is None:
            return decode_history(self.about, self.round, where)
        data = _read_prefix(self.path / HISTORY_FILE, ref.bytes, f"{where}: {HISTORY_FILE}")
        digest = sha256_hex(data)
        if digest != ref.sha256:
            raise CheckpointCorrupt(
                f"{where}: {HISTORY_FILE} is corrupt: the SHA-256 of its first {ref.bytes} bytes "
                f"is {digest}, the manifest says {ref.sha256}"
            )
        return decode_history_lines(data, ref, self.about, self.round, where)

    def verify(self) -> int:
        """Check every shard file whole; return how many bytes were checked.

        Raises:
            CheckpointCorrupt: the first damaged, truncated or missing shard.
        """
        total = 0
        for name in sorted(self.shards):
            for shard in self.shards[name]:
                total += len(self._shard_bytes(shard))
        return total


def open_generation(path: Path, *, expect_sha256: str | None = None) -> Generation:
    """The generation at ``path``: a checkpoint folder (its pointer names the latest) or a
    generation folder. Never unpinned: the root manifest is checked against the pointer's
    digest (and ``expect_sha256`` when given) or, opened by its folder, against the seal the
    folder's name carries; its round and name are compared with the folder's.

    Raises:
        CheckpointCorrupt: the pointer, a manifest or its layout is missing, damaged or wrong,
            the pointer or the generation it names is a link, or a name is not a
            generation's.
    """
    manifest = path / MANIFEST
    if manifest.is_file() or not (path / POINTER).exists():
        if not manifest.exists():
            raise CheckpointCorrupt(
                f"{path} is neither a checkpoint folder (no {POINTER}) nor a published "
                f"generation (no {MANIFEST})"
            )
        return _open_folder(path, expect_sha256)
    name, sha = _read_pointer(path)
    if expect_sha256 is not None and expect_sha256 != sha:
        raise CheckpointCorrupt(
            f"{path / POINTER} pins {sha}, not the root manifest {expect_sha256} the run binds"
        )
    folder = path / name
    if folder.is_symlink() or not folder.is_dir():
        raise CheckpointCorrupt(
            f"{path / POINTER} names {name}, which is "
            f"{'a symbolic link' if folder.is_symlink() else 'not a folder'} in {path}"
        )
    return _open_folder(folder, sha)


def _open_folder(folder: Path, expect_sha256: str | None) -> Generation:
    """The generation in ``folder``, its root manifest pinned by ``expect_sha256`` and by the
    seal of the folder's name."""
    parsed = parse_generation(folder.name)
    if parsed is None:
        raise CheckpointCorrupt(
            f"{folder} is not named as a published generation (gen-ROUND-NONCE-SEAL): its "
            "root manifest cannot be checked against its seal"
        )
    data, digest = _read_json(folder / MANIFEST, f"the manifest of {folder.name}", expect_sha256)
    if not digest.startswith(parsed.seal):
        raise CheckpointCorrupt(
            f"{folder / MANIFEST} is not the one {folder.name} was sealed with: its SHA-256 is "
            f"{digest}, the name's seal is {parsed.seal}"
        )
    root = decode_root_manifest(data, parsed, folder.name, str(folder / MANIFEST))
    shards: dict[str, list[Shard]] = {}
    for index, sha in enumerate(root.owner_sha256):
        found, _ = _owner_shards(folder, index, sha)
        for shard in found:
            shards.setdefault(shard.name, []).append(shard)
    check_cover(shards, root.arrays)
    return Generation(
        folder, digest, root.round, parsed, len(root.owner_sha256), root.arrays, shards, root.about
    )


# --- listing, and choosing a generation by its round -----------------------------------------


@dataclass(frozen=True, slots=True)
class Listed:
    """One published generation of a checkpoint folder, as ``alpha checkpoint list`` shows
    it: its folder, round, the run's name it records (``about.run``; None: none recorded),
    its plan identity digest, when its root manifest was written (seconds since the epoch),
    its bytes (every file in it), whether the pointer names it, and why it does not read
    (``problem``; empty when its manifests check: its shards are checked by ``verify``)."""

    path: Path
    round: int
    run: str | None
    plan_sha256: str | None
    written: float
    bytes: int
    latest: bool
    problem: str = ""


def _folder_bytes(folder: Path) -> int:
    """The bytes of every regular file under ``folder`` (links not followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                found = os.lstat(os.path.join(root, name))
                total += found.st_size if stat.S_ISREG(found.st_mode) else 0
    return total


def list_generations(folder: Path) -> tuple[list[Listed], str, str]:
    """Every published generation in ``folder``, oldest first (as :func:`published` orders
    them), each opened pinned by its seal (its manifests checked, not its shards), the name
    the pointer names, and why the pointer does not read (``""`` for each when there is no
    pointer). A generation that does not open is listed with its ``problem``, never skipped.

    Raises:
        OSError: the folder cannot be listed.
    """
    try:
        pointer = pointed(folder)
        pointer_problem = ""
    except CheckpointCorrupt as error:
        pointer = ""
        pointer_problem = "" if not (folder / POINTER).exists() else str(error)
    listed = []
    for path in published(folder):
        parsed = parse_generation(path.name)
        assert parsed is not None  # published() lists sealed names only
        manifest = path / MANIFEST
        written = manifest.stat().st_mtime if manifest.is_file() else path.stat().st_mtime
        size = _folder_bytes(path)
        try:
            about = _open_folder(path, None).about
        except CheckpointCorrupt as error:
            latest = path.name == pointer
            listed.append(Listed(path, parsed.round, None, None, written, size, latest, str(error)))
            continue
        run, plan = about.get("run"), about.get("plan_sha256")
        listed.append(
            Listed(
                path,
                parsed.round,
                run if isinstance(run, str) else None,
                plan if isinstance(plan, str) else None,
                written,
                size,
                path.name == pointer,
            )
        )
    return listed, pointer, pointer_problem


def generation_of_round(path: Path, round: int, run: str | None = None) -> tuple[Path, int]:
    """The generation of round ``round`` in the checkpoint folder ``path`` (or ``path``
    itself, a generation folder of that round), and how many generations of that round the
    folder holds. Of several, the one of the run named ``run`` comes first, then the one the
    pointer names, then the one published last: it is opened and checked by the caller, like
    any ``--resume`` path.

    Raises:
        GenerationNotFound: no published generation of that round is there; the rounds that
            are are named.
    """
    own = parse_generation(path.name)
    if own is not None and (path / MANIFEST).is_file():
        if own.round != round:
            raise GenerationNotFound(str(path), round, (own.round,))
        return path, 1
    found = published(path) if path.is_dir() else []
    rounds = [parse_generation(each.name) for each in found]
    mine = [each for each, name in zip(found, rounds, strict=True) if name and name.round == round]
    if not mine:
        available = sorted({name.round for name in rounds if name is not None})
        raise GenerationNotFound(str(path), round, tuple(available))
    if len(mine) == 1:
        return mine[0], 1
    try:
        pointer = pointed(path)
    except CheckpointCorrupt:
        pointer = ""

    def rank(position: int) -> tuple[bool, bool, int]:
        each = mine[position]
        try:
            named = _open_folder(each, None).about.get("run")
        except CheckpointCorrupt:
            named = None
        return (run is not None and named == run, each.name == pointer, position)

    best = max(range(len(mine)), key=rank)
    return mine[best], len(mine)


# --- the folder's one writer, and the room it needs ------------------------------------------


def _holder_text(handle: int) -> str:
    raw = os.pread(handle, 1024, 0).decode("utf-8", "replace").strip()
    try:
        who = json.loads(raw)
        return f"run {who['run']!r} (pid {who['pid']} on host {who['host']}, since {who['since']})"
    except (ValueError, KeyError, TypeError):
        return raw or "another run"


@contextlib.contextmanager
def hold_checkpoint_folder(folder: Path, run: str) -> Iterator[Path]:
    """Make ``folder`` and hold it for the run ``run`` until the block ends: a second run told
    to write there is refused at once, naming this one. The lock is the kernel's (``flock`` on
    :data:`LOCK`), so it goes with the holding process however that ends; the descriptor is
    close-on-exec, so no participant keeps it. The lock file stays, its content naming the
    last holder, unless this call made the folder and nothing else was written into it: then
    both go again.

    Raises:
        CheckpointFolderHeld: another process holds the folder; it names that run.
        CheckpointWriteFailed: the folder or its lock file cannot be made.
    """
    created = not folder.exists()
    with _writing("make the checkpoint folder", folder):
        folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK
    with _writing("lock", lock):
        handle = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckpointFolderHeld(str(folder), _holder_text(handle)) from None
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "run": run, "since": since}
        with _writing("lock", lock):
            os.ftruncate(handle, 0)
            os.pwrite(handle, (json.dumps(holder, sort_keys=True) + "\n").encode(), 0)
        yield folder
    finally:
        if created and _holds_only(folder, LOCK):
            # A folder this call made that nothing was written into (the run was refused or
            # stopped first) goes again: no empty checkpoint folder is left behind.
            with contextlib.suppress(OSError):
                lock.unlink()
                folder.rmdir()
        os.close(handle)  # releases the lock


def _holds_only(folder: Path, name: str) -> bool:
    try:
        return [entry.name for entry in folder.iterdir()] == [name]
    except OSError:
        return False


def generation_size(
    arrays: Mapping[str, tuple[tuple[int, ...], str]], owners: int, block: int
) -> int:
    """About the bytes a generation of ``arrays`` written by ``owners`` takes on a file system
    of ``block``-byte blocks: each shard file and manifest rounded up to whole blocks (a small
    file takes a whole block, which dominates small states)."""

    def blocks(size: int) -> int:
        return -(-size // block) * block

    total = 0
    shards = 0
    for shape, dtype in arrays.values():
        size = math.prod(shape)
        item = np.dtype(dtype).itemsize
        for start, stop in owner_ranges(size, owners):
            if stop > start:
                total += blocks((stop - start) * item)
                shards += 1
    manifests = owners + 1  # every owner's, and the root manifest
    manifest_bytes = _MANIFEST_BYTES_PER_SHARD * shards + _MANIFEST_BYTES_BASE * manifests
    return total + blocks(manifest_bytes) + manifests * block


_MANIFEST_BYTES_PER_SHARD: Final = 400  # a shard's entry in its owner manifest, generously
_MANIFEST_BYTES_BASE: Final = 2048  # a manifest's own fields and the plan's identity


def check_room(
    folder: Path, arrays: Mapping[str, tuple[tuple[int, ...], str]], owners: int
) -> None:
    """Check, before a run's first round, that ``folder`` takes a file (written, fsynced and
    removed again) and has room (``os.statvfs``) for one generation of ``arrays`` written by
    ``owners`` (:func:`generation_size`): a read-only or full folder is found before any round
    runs, not after a segment's rounds.

    Raises:
        CheckpointWriteFailed: the probe file cannot be written (EROFS, EACCES, ENOSPC, ...),
            or fewer than ``need`` bytes are free (ENOSPC, with the figures).
    """
    probe = folder / f".alpha-probe-{os.getpid()}"
    with _writing("write into the checkpoint folder", folder):
        try:
            _write_durably(probe, b"alpha")
        finally:
            with contextlib.suppress(FileNotFoundError):
                probe.unlink()
        found = os.statvfs(folder)
    free = found.f_bavail * found.f_frsize
    need = generation_size(arrays, owners, max(1, found.f_frsize))
    if free < need:
        raise CheckpointWriteFailed(
            path=str(folder),
            action="stage a generation in",
            errno=errnos.ENOSPC,
            reason=os.strerror(errnos.ENOSPC),
            detail=f"{free} bytes free, a generation takes about {need}",
        )
