"""Checkpoints: learning state in logical shards, published atomically, restored from a path.

A checkpoint folder holds generations, one per published state, and a pointer to the latest::

    CHECKPOINT/
      LATEST                      {"format": "alpha-checkpoint-pointer/1", "generation": ...}
      gen-000000020/              a published generation (immutable)
        manifest.json             the root manifest: the state's arrays and every owner manifest
        owner-000000.json         owner 0's manifest: its shards
        shards/w.000000000000-000000000600.bin
      gen-000000030.staged/       a generation being written (never read)

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
raises :class:`CheckpointCorrupt` naming it, and nothing is loaded from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from alpha._files import fsync_folder, read_regular_file, write_bytes_atomically
from alpha.errors import CheckpointCorrupt, GenerationExists

__all__ = [
    "DTYPES",
    "FORMAT",
    "MANIFEST",
    "OWNER_FORMAT",
    "POINTER",
    "POINTER_FORMAT",
    "STAGED_SUFFIX",
    "Generation",
    "Part",
    "Shard",
    "generation_name",
    "move_pointer",
    "open_generation",
    "owner_manifest_name",
    "owner_ranges",
    "parts_of",
    "prune",
    "publish",
    "published",
    "staged_folder",
    "write_shards",
]

FORMAT: Final = "alpha-checkpoint/1"
OWNER_FORMAT: Final = "alpha-checkpoint-owner/1"
POINTER_FORMAT: Final = "alpha-checkpoint-pointer/1"
POINTER: Final = "LATEST"
MANIFEST: Final = "manifest.json"
STAGED_SUFFIX: Final = ".staged"
SHARDS: Final = "shards"
DTYPES: Final = ("float32", "float64")
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
"""A manifest lists shards, never their bytes: 16 MiB is far beyond any real one, and the bound
keeps a damaged or hostile file from being read whole."""

Array = npt.NDArray[np.floating]


def generation_name(round: int, nonce: str) -> str:
    """The folder of the generation holding the state after ``round`` rounds, written by the
    segment whose nonce is ``nonce`` (8 hex digits, drawn when the segment is compiled)."""
    if len(nonce) != 8 or any(c not in "0123456789abcdef" for c in nonce):
        raise ValueError(f"a generation's nonce is 8 lowercase hex digits, got {nonce!r}")
    return f"gen-{round:09d}-{nonce}"


def _round_of(name: str) -> int | None:
    """The round a generation folder's name records, or None for another name."""
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "gen" and parts[1].isdigit() and len(parts[2]) == 8:
        return int(parts[1])
    return None


def staged_folder(folder: Path, round: int, nonce: str) -> Path:
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
        if not isinstance(shape, list) or not all(type(v) is int and v >= 0 for v in shape):
            raise CheckpointCorrupt(f"{where}: shard {name}: global_shape is wrong: {shape!r}")
        total = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if dtype not in DTYPES:
            raise CheckpointCorrupt(
                f"{where}: shard {name}: dtype {dtype!r} is not one of {DTYPES}"
            )
        if not 0 <= start < stop <= total or size != (stop - start) * np.dtype(dtype).itemsize:
            raise CheckpointCorrupt(
                f"{where}: shard {name}[{start}:{stop}] does not fit its array of {total} "
                f"elements, or its byte length {size} does not match"
            )
        if not isinstance(digest, str) or len(digest) != 64 or not isinstance(file, str):
            raise CheckpointCorrupt(f"{where}: shard {name}: sha256 or file is wrong")
        if Path(file).is_absolute() or ".." in Path(file).parts:
            raise CheckpointCorrupt(f"{where}: shard {name}: file {file!r} leaves its generation")
        return Shard(name, tuple(shape), start, stop, dtype, size, digest, file)

    @property
    def label(self) -> str:
        return f"{self.name}[{self.start}:{self.stop}] ({self.file})"


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
        OSError: a file cannot be written.
    """
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
        file = f"{SHARDS}/{part.name}.{start:012d}-{stop:012d}.bin"
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
        total = int(np.prod(shape, dtype=np.int64)) if shape else 1
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
) -> str:
    """Publish the staged generation of ``round`` in ``folder``: check that every owner's
    manifest is there and its shards cover each array (``name -> (shape, dtype)``) exactly,
    write the root manifest (with ``about``: the run, the learner, what restoring needs),
    and rename the staged folder to its final name. Return the root manifest's SHA-256.

    Raises:
        GenerationExists: that generation was already published; nothing changes.
        CheckpointCorrupt: an owner manifest is missing or wrong, or the shards do not cover.
        OSError: a file cannot be written or renamed.
    """
    name = generation_name(round, nonce)
    staged, final = staged_folder(folder, round, nonce), folder / name
    if final.exists():
        raise GenerationExists(
            f"generation {name} is already published in {folder}; a generation is published "
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
            "generation": name,
            "round": round,
            "owners": entries,
            "arrays": specs,
            "about": dict(about),
        }
    )
    write_bytes_atomically(staged / MANIFEST, manifest)
    fsync_folder(staged)
    try:
        # One atomic step: the generation appears whole, under its final name, or not at all.
        os.rename(staged, final)
    except OSError as error:
        if final.exists():
            raise GenerationExists(f"generation {name} is already published in {folder}") from None
        raise error
    fsync_folder(folder)
    return _sha256(manifest)


def move_pointer(folder: Path, generation: str, manifest_sha256: str) -> None:
    """Point ``LATEST`` at the published generation ``generation`` (a folder name): one
    atomic replacement."""
    pointer = {
        "format": POINTER_FORMAT,
        "generation": generation,
        "manifest_sha256": manifest_sha256,
    }
    write_bytes_atomically(folder / POINTER, _canonical(pointer))


def published(folder: Path) -> list[Path]:
    """The published generations in ``folder``, oldest first (by round, then by when they
    were published)."""
    found = []
    for path in folder.iterdir():
        round = _round_of(path.name)
        if round is not None and path.is_dir():
            found.append((round, path.stat().st_mtime_ns, path.name, path))
    return [path for *_, path in sorted(found)]


def prune(folder: Path, keep: int) -> list[str]:
    """Remove the published generations older than the ``keep`` newest (never the one the
    pointer names), and staged generations of rounds already published; return one line per
    removal that failed (reported, not raised)."""
    failures = []
    try:
        pointer, _ = _read_json(folder / POINTER, "the pointer")
    except CheckpointCorrupt:
        return [f"{folder / POINTER} cannot be read: nothing removed"]
    pointed = pointer.get("generation")
    done = published(folder)
    newest = max((_round_of(path.name) or 0 for path in done), default=-1)
    old = done[: max(0, len(done) - keep)]
    for path in folder.iterdir():
        if path.name.endswith(STAGED_SUFFIX):
            round = _round_of(path.name[: -len(STAGED_SUFFIX)])
            if round is not None and round <= newest:
                old.append(path)
    for path in old:
        if path.name == pointed:
            continue
        try:
            shutil.rmtree(path)
        except OSError as error:
            failures.append(f"cannot remove {path}: {error.strerror or error}")
    if old:
        try:
            fsync_folder(folder)
        except OSError as error:
            failures.append(f"cannot fsync {folder}: {error.strerror or error}")
    return failures


@dataclass
class Generation:
    """A published generation, its manifests checked; shards are checked as they are read."""

    path: Path
    manifest_sha256: str
    round: int
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
        total = int(np.prod(shape, dtype=np.int64)) if shape else 1
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
    generation folder. ``expect_sha256`` pins the root manifest's digest.

    Raises:
        CheckpointCorrupt: the pointer, a manifest or its layout is missing, damaged or wrong.
    """
    if (path / MANIFEST).is_file() or not (path / POINTER).exists():
        folder = path
        if not (path / MANIFEST).exists():
            raise CheckpointCorrupt(
                f"{path} is neither a checkpoint folder (no {POINTER}) nor a published "
                f"generation (no {MANIFEST})"
            )
    else:
        pointer, _ = _read_json(path / POINTER, "the checkpoint pointer")
        name = pointer.get("generation")
        if pointer.get("format") != POINTER_FORMAT or not isinstance(name, str):
            raise CheckpointCorrupt(f"{path / POINTER} is not a {POINTER_FORMAT} pointer")
        if "/" in name or name in ("", ".", ".."):
            raise CheckpointCorrupt(f"{path / POINTER} names {name!r}, not a generation")
        folder = path / name
        sha = pointer.get("manifest_sha256")
        expect_sha256 = expect_sha256 or (sha if isinstance(sha, str) else None)
    data, digest = _read_json(folder / MANIFEST, f"the manifest of {folder.name}", expect_sha256)
    if data.get("format") != FORMAT:
        raise CheckpointCorrupt(f"{folder / MANIFEST} is not an {FORMAT} manifest")
    round = data.get("round")
    owners = data.get("owners")
    specs = data.get("arrays")
    about = data.get("about", {})
    if type(round) is not int or not isinstance(owners, list) or not isinstance(specs, dict):
        raise CheckpointCorrupt(f"{folder / MANIFEST}: round, owners or arrays is wrong")
    if not isinstance(about, dict):
        raise CheckpointCorrupt(f"{folder / MANIFEST}: about must be a table")
    arrays: dict[str, tuple[tuple[int, ...], str]] = {}
    for name, spec in specs.items():
        if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
            raise CheckpointCorrupt(f"{folder / MANIFEST}: array {name}: spec is wrong: {spec!r}")
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(type(v) is int and v >= 0 for v in shape):
            raise CheckpointCorrupt(f"{folder / MANIFEST}: array {name}: shape is wrong")
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
    return Generation(folder, digest, round, len(owners), arrays, shards, dict(about))
