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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from alpha.core.digests import DTYPES
from alpha.errors import (
    CheckpointCorrupt,
    CheckpointFolderHeld,
    CheckpointWriteFailed,
    GenerationExists,
)
from alpha.files import fsync_folder, read_regular_file, write_bytes_atomically

__all__ = [
    "FORMAT",
    "LOCK",
    "MANIFEST",
    "OWNER_FORMAT",
    "POINTER",
    "POINTER_FORMAT",
    "REMOVING_PREFIX",
    "STAGED_SUFFIX",
    "Generation",
    "GenerationName",
    "Part",
    "Shard",
    "check_room",
    "generation_name",
    "generation_size",
    "hold_checkpoint_folder",
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

FORMAT: Final = "alpha-checkpoint/2"
"""/2: the generation's folder name is sealed by its root manifest's digest, and ``about``
records the plan's identity (``docs/checkpoints.md``)."""
OWNER_FORMAT: Final = "alpha-checkpoint-owner/1"
POINTER_FORMAT: Final = "alpha-checkpoint-pointer/1"
POINTER: Final = "LATEST"
MANIFEST: Final = "manifest.json"
STAGED_SUFFIX: Final = ".staged"
REMOVING_PREFIX: Final = ".removing-"
"""A generation being removed is first renamed to this prefix and its name: out of sight of
every reader (no generation's name starts with a dot), so a removal that dies half way leaves
nothing that looks like a generation; the next prune finishes it."""
LOCK: Final = ".alpha-checkpoint.lock"
"""The file a run holds locked (``flock``) for as long as it writes the folder; its content
names the holder."""
SEAL_DIGITS: Final = 16
"""Hex digits of the root manifest's SHA-256 a generation's folder name ends with: 64 bits,
so an edited manifest is noticed by its own folder's name (the pointer holds all 64 digits)."""
MAX_ELEMENTS: Final = 2**34
"""Elements of one array: far beyond any learner this project runs (a 16 GiB float32 array),
and a bound that keeps a hostile shape from asking for an allocation it cannot have."""
MAX_DIMENSIONS: Final = 8
"""Dimensions of one array's shape; the state's arrays are flat, 8 is generous."""
SHARDS: Final = "shards"
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
"""A manifest lists shards, never their bytes: 16 MiB is far beyond any real one, and the bound
keeps a damaged or hostile file from being read whole."""

Array = npt.NDArray[np.floating]


def generation_name(round: int, nonce: str) -> str:
    """The base name of the generation holding the state after ``round`` rounds, written by
    the segment whose nonce is ``nonce`` (8 hex digits, drawn when the segment is compiled).
    Staged, it is ``BASE.staged``; published, ``BASE-SEAL`` (:func:`sealed_name`)."""
    if len(nonce) != 8 or any(c not in "0123456789abcdef" for c in nonce):
        raise ValueError(f"a generation's nonce is 8 lowercase hex digits, got {nonce!r}")
    if not 0 <= round < 10**_ROUND_DIGITS_MAX:
        raise ValueError(f"a generation's round is 0..{10**_ROUND_DIGITS_MAX - 1}, got {round}")
    return f"gen-{round:09d}-{nonce}"


def sealed_name(base: str, manifest_sha256: str) -> str:
    """A published generation's folder name: its base name and the first
    :data:`SEAL_DIGITS` hex digits of its root manifest's SHA-256."""
    return f"{base}-{manifest_sha256[:SEAL_DIGITS]}"


_ROUND_DIGITS_MAX: Final = 10  # MAX_ROUNDS (2**32 - 1) has 10 digits
_SEALED: Final = re.compile(
    rf"gen-([0-9]{{9,{_ROUND_DIGITS_MAX}}})-([0-9a-f]{{8}})-([0-9a-f]{{{SEAL_DIGITS}}})"
)


@dataclass(frozen=True, slots=True)
class GenerationName:
    """A published generation's folder name, read: its round, nonce and seal."""

    round: int
    nonce: str
    seal: str

    @property
    def base(self) -> str:
        return generation_name(self.round, self.nonce)

    def __str__(self) -> str:
        return f"{self.base}-{self.seal}"


def parse_generation(name: str) -> GenerationName | None:
    """The round, nonce and seal a published generation's folder name records, or None for
    any other name (a staged or removed one, ``LATEST``, a name with a NUL, a slash, ``..``,
    or a round not written as :func:`generation_name` writes it)."""
    found = _SEALED.fullmatch(name)
    if found is None:
        return None
    digits, nonce, seal = found.groups()
    round = int(digits)
    if f"{round:09d}" != digits:
        return None  # one spelling per round: 000000001, never 0000000001
    return GenerationName(round, nonce, seal)


def _round_of(name: str) -> int | None:
    """The round a published generation's folder name records, or None for another name."""
    parsed = parse_generation(name)
    return None if parsed is None else parsed.round


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


def staged_folder(folder: Path, round: int, nonce: str) -> Path:
    """Where the segment with ``nonce`` stages its generation of ``round``: named by its
    writer, so no other writer's prune or cleanup takes it for its own."""
    return folder / f"{generation_name(round, nonce)}{STAGED_SUFFIX}"


def owner_manifest_name(owner: int) -> str:
    return f"owner-{owner:06d}.json"


def owner_ranges(size: int, owners: int) -> list[tuple[int, int]]:
    """``owners`` contiguous ranges covering ``[0, size)`` in order, sizes differing by at most
    one, the larger first (as the tree cuts a subtree into chunks); some are empty when
    ``owners > size``."""
    if owners < 1 or size < 0:
        raise ValueError(f"cannot cut {size} elements among {owners} owners")
    q, rem = divmod(size, owners)
    ranges = []
    start = 0
    for owner in range(owners):
        stop = start + q + (1 if owner < rem else 0)
        ranges.append((start, stop))
        start = stop
    return ranges


def _canonical(value: object) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=1, allow_nan=False) + "\n").encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Shard:
    """One logical shard: elements ``[start, stop)`` of array ``name``, and where they lie."""

    name: str
    global_shape: tuple[int, ...]
    start: int
    stop: int
    dtype: str
    bytes: int
    sha256: str
    file: str

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "global_shape": list(self.global_shape),
            "start": self.start,
            "stop": self.stop,
            "dtype": self.dtype,
            "bytes": self.bytes,
            "sha256": self.sha256,
            "file": self.file,
        }

    @staticmethod
    def from_dict(data: object, where: str) -> Shard:
        """
        Raises:
            CheckpointCorrupt: a field is missing or wrong.
        """
        if not isinstance(data, dict):
            raise CheckpointCorrupt(f"{where}: a shard must be a table")
        try:
            name, shape, start, stop = (
                data["name"],
                data["global_shape"],
                data["start"],
                data["stop"],
            )
            dtype, size, digest, file = data["dtype"], data["bytes"], data["sha256"], data["file"]
        except KeyError as error:
            raise CheckpointCorrupt(f"{where}: a shard lacks {error}") from None
        ints = (start, stop, size)
        if not isinstance(name, str) or not name or not all(type(v) is int for v in ints):
            raise CheckpointCorrupt(f"{where}: a shard's name or range is wrong: {data!r}")
        if _ARRAY_NAME.fullmatch(name) is None:
            raise CheckpointCorrupt(f"{where}: a shard's array name {name!r} is not a name")
        total = _elements(shape, f"{where}: shard {name}: global_shape")
        if dtype not in DTYPES:
            raise CheckpointCorrupt(
                f"{where}: shard {name}: dtype {dtype!r} is not one of {DTYPES}"
            )
        if not 0 <= start < stop <= total or size != (stop - start) * np.dtype(dtype).itemsize:
            raise CheckpointCorrupt(
                f"{where}: shard {name}[{start}:{stop}] does not fit its array of {total} "
                f"elements, or its byte length {size} does not match"
            )
        if not isinstance(digest, str) or _HEX64.fullmatch(digest) is None:
            raise CheckpointCorrupt(f"{where}: shard {name}: sha256 is wrong: {digest!r}")
        if file != shard_file(name, start, stop):
            # One spelling per shard: no other path (absolute, with .., a NUL) is ever opened.
            raise CheckpointCorrupt(
                f"{where}: shard {name}: file {file!r} is not {shard_file(name, start, stop)!r}"
            )
        return Shard(name, tuple(shape), start, stop, dtype, size, digest, file)

    @property
    def label(self) -> str:
        return f"{self.name}[{self.start}:{self.stop}] ({self.file})"


_ARRAY_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


def shard_file(name: str, start: int, stop: int) -> str:
    """The file of array ``name``'s shard ``[start, stop)``, inside its generation."""
    return f"{SHARDS}/{name}.{start:012d}-{stop:012d}.bin"


def _elements(shape: object, what: str) -> int:
    """The elements of ``shape`` (a list of non-negative ints), at most :data:`MAX_ELEMENTS`.

    Raises:
        CheckpointCorrupt: it is not such a list, or its product is past the bound (computed
            exactly: a product that would overflow a 64-bit integer is refused, not wrapped).
    """
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMENSIONS
        or not all(type(v) is int and v >= 0 for v in shape)
    ):
        raise CheckpointCorrupt(f"{what} is wrong: {shape!r}")
    total = math.prod(shape)  # Python integers: exact, whatever the sizes
    if total > MAX_ELEMENTS:
        raise CheckpointCorrupt(
            f"{what} {shape!r} has {total} elements, past the bound of {MAX_ELEMENTS}"
        )
    return total


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


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
            Shard(part.name, part.shape, start, stop, dtype, len(data), _sha256(data), file)
        )
        if on_shard is not None:
            on_shard(len(shards) - 1)
    fsync_folder(shards_dir)
    manifest = _canonical(
        {"format": OWNER_FORMAT, "owner": owner, "shards": [s.to_dict() for s in shards]}
    )
    write_bytes_atomically(staged / owner_manifest_name(owner), manifest)
    return _sha256(manifest)


def _read_json(path: Path, what: str, expect: str | None = None) -> tuple[dict[str, object], str]:
    try:
        data = read_regular_file(path, MAX_MANIFEST_BYTES)
    except OSError as error:
        raise CheckpointCorrupt(
            f"{what} ({path}) cannot be read: {error.strerror or error}"
        ) from None
    digest = _sha256(data)
    if expect is not None and digest != expect:
        raise CheckpointCorrupt(
            f"{what} ({path}) is corrupt: its SHA-256 is {digest}, {expect} was recorded"
        )
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointCorrupt(f"{what} ({path}) is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise CheckpointCorrupt(f"{what} ({path}) must be a JSON object")
    return value, digest


def _owner_shards(staged: Path, owner: int, expect: str | None) -> tuple[list[Shard], str]:
    what = f"owner {owner}'s manifest"
    data, digest = _read_json(staged / owner_manifest_name(owner), what, expect)
    if data.get("format") != OWNER_FORMAT or data.get("owner") != owner:
        raise CheckpointCorrupt(f"{what} is not owner {owner}'s {OWNER_FORMAT} manifest")
    listed = data.get("shards")
    if not isinstance(listed, list):
        raise CheckpointCorrupt(f"{what}: shards must be a list")
    return [Shard.from_dict(item, what) for item in listed], digest


def _check_cover(
    shards: Mapping[str, list[Shard]], arrays: Mapping[str, tuple[tuple[int, ...], str]]
) -> None:
    """Each array's shards, in order, cover it exactly once."""
    unknown = sorted(set(shards) - set(arrays))
    if unknown:
        raise CheckpointCorrupt(f"shards of arrays the manifest does not list: {unknown}")
    for name, (shape, dtype) in arrays.items():
        parts = sorted(shards.get(name, []), key=lambda s: s.start)
        total = math.prod(shape)
        at = 0
        for shard in parts:
            if shard.start != at or shard.global_shape != shape or shard.dtype != dtype:
                raise CheckpointCorrupt(
                    f"array {name}: shard {shard.label} does not continue at element {at} "
                    f"of shape {shape} and dtype {dtype}",
                    shard=shard.label,
                )
            at = shard.stop
        if at != total:
            raise CheckpointCorrupt(f"array {name}: its shards cover {at} of {total} elements")


def publish(
    folder: Path,
    round: int,
    nonce: str,
    *,
    owners: int,
    arrays: Mapping[str, tuple[tuple[int, ...], str]],
    about: Mapping[str, object],
) -> tuple[str, str]:
    """Publish the staged generation of ``round`` in ``folder``: check that every owner's
    manifest is there and its shards cover each array (``name -> (shape, dtype)``) exactly,
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
        found, digest = _owner_shards(staged, owner, None)
        entries.append({"owner": owner, "file": owner_manifest_name(owner), "sha256": digest})
        for shard in found:
            shards.setdefault(shard.name, []).append(shard)
    _check_cover(shards, arrays)
    specs = {n: {"shape": list(shape), "dtype": dtype} for n, (shape, dtype) in arrays.items()}
    manifest = _canonical(
        {
            "format": FORMAT,
            "generation": base,
            "round": round,
            "owners": entries,
            "arrays": specs,
            "about": dict(about),
        }
    )
    digest = _sha256(manifest)
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
    return name, digest


def move_pointer(folder: Path, generation: str, manifest_sha256: str) -> None:
    """Point ``LATEST`` at the published generation ``generation`` (its sealed folder name):
    one atomic replacement.

    Raises:
        CheckpointWriteFailed: the pointer cannot be written (its path and why); the old
            pointer stays as it was.
    """
    pointer = {
        "format": POINTER_FORMAT,
        "generation": generation,
        "manifest_sha256": manifest_sha256,
    }
    with _writing("point", folder / POINTER):
        write_bytes_atomically(folder / POINTER, _canonical(pointer))


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


def remove_staged(folder: Path, round: int, nonce: str) -> list[str]:
    """Remove the staged generation the segment ``nonce`` left of ``round`` (after that
    segment failed: nothing will publish it), out of sight first; return the failures."""
    failures: list[str] = []
    staged = staged_folder(folder, round, nonce)
    if staged.is_dir() and not staged.is_symlink():
        _remove(staged, failures)
    return failures


def _plan_sha256(path: Path) -> str | None:
    """The plan identity digest a published generation records, read pinned by its seal;
    None when it cannot be read or records none."""
    try:
        return _open_folder(path, None).about.get("plan_sha256")  # type: ignore[return-value]
    except CheckpointCorrupt:
        return None


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
    name, sha = pointer.get("generation"), pointer.get("manifest_sha256")
    if pointer.get("format") != POINTER_FORMAT or not isinstance(name, str):
        raise CheckpointCorrupt(f"{path} is not a {POINTER_FORMAT} pointer")
    parsed = parse_generation(name)
    if parsed is None:
        raise CheckpointCorrupt(f"{path} names {name!r}, not a published generation's name")
    if not isinstance(sha, str) or _HEX64.fullmatch(sha) is None:
        raise CheckpointCorrupt(f"{path} pins no root manifest: manifest_sha256 is {sha!r}")
    if not sha.startswith(parsed.seal):
        raise CheckpointCorrupt(
            f"{path} names {name}, whose seal is not the digest it pins ({sha})"
        )
    return name, sha


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
        digest = _sha256(data)
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
    if data.get("format") != FORMAT:
        raise CheckpointCorrupt(f"{folder / MANIFEST} is not an {FORMAT} manifest")
    round = data.get("round")
    owners = data.get("owners")
    specs = data.get("arrays")
    about = data.get("about", {})
    if type(round) is not int or not isinstance(owners, list) or not isinstance(specs, dict):
        raise CheckpointCorrupt(f"{folder / MANIFEST}: round, owners or arrays is wrong")
    if round != parsed.round or data.get("generation") != parsed.base:
        raise CheckpointCorrupt(
            f"{folder / MANIFEST} records generation {data.get('generation')!r} of round "
            f"{round}, but its folder is {folder.name} (round {parsed.round})"
        )
    if not isinstance(about, dict):
        raise CheckpointCorrupt(f"{folder / MANIFEST}: about must be a table")
    arrays: dict[str, tuple[tuple[int, ...], str]] = {}
    for name, spec in specs.items():
        if _ARRAY_NAME.fullmatch(name) is None:
            raise CheckpointCorrupt(f"{folder / MANIFEST}: array name {name!r} is not a name")
        if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
            raise CheckpointCorrupt(f"{folder / MANIFEST}: array {name}: spec is wrong: {spec!r}")
        shape = spec.get("shape")
        _elements(shape, f"{folder / MANIFEST}: array {name}: shape")
        assert isinstance(shape, list)
        arrays[name] = (tuple(shape), str(spec["dtype"]))
    shards: dict[str, list[Shard]] = {}
    for index, entry in enumerate(owners):
        if not isinstance(entry, dict) or entry.get("owner") != index:
            raise CheckpointCorrupt(f"{folder / MANIFEST}: owner entry {index} is wrong")
        sha = entry.get("sha256")
        found, _ = _owner_shards(folder, index, sha if isinstance(sha, str) else "")
        for shard in found:
            shards.setdefault(shard.name, []).append(shard)
    _check_cover(shards, arrays)
    return Generation(folder, digest, round, parsed, len(owners), arrays, shards, dict(about))


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
