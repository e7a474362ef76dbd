"""Checkpoint manifests, pure: the format ``alpha-checkpoint/2`` as names and bytes.

What a checkpoint folder's names mean (a generation's base, staged and sealed names, an owner
manifest's and a shard file's name, the pointer), how the state is cut among owners, and each
manifest's one encoding and its checks: the owner manifests (an owner's shards), the root
manifest (the generation: its round, owners, arrays and ``about``) and the pointer
(``LATEST``). Every function here takes values or bytes and returns values or bytes, or raises
:class:`alpha.errors.CheckpointCorrupt` naming what is wrong; none opens a file. The store
(``alpha.checkpoint.store``) reads and writes them: files, fsync, the folder's lock, pruning.
The layout is documented in ``docs/checkpoints.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from alpha.core.digests import DTYPES
from alpha.errors import CheckpointCorrupt
from alpha.files import STAGED_SUFFIX

__all__ = [
    "ARRAY_NAME",
    "DTYPES",
    "FORMAT",
    "HEX64",
    "HISTORY",
    "HISTORY_FILE",
    "LOCK",
    "MANIFEST",
    "MAX_DIMENSIONS",
    "MAX_ELEMENTS",
    "MAX_MANIFEST_BYTES",
    "OWNER_FORMAT",
    "POINTER",
    "POINTER_FORMAT",
    "REMOVING_PREFIX",
    "RESUMES",
    "SEAL_DIGITS",
    "SHARDS",
    "STAGED_SUFFIX",
    "ArraySpecs",
    "GenerationName",
    "HistoryRef",
    "HistoryRow",
    "RecordedHistory",
    "RootManifest",
    "Shard",
    "canonical_json",
    "check_cover",
    "decode_history",
    "decode_history_lines",
    "decode_history_ref",
    "decode_json",
    "decode_owner_manifest",
    "decode_pointer",
    "decode_root_manifest",
    "elements_of",
    "encode_history",
    "encode_history_lines",
    "encode_owner_manifest",
    "encode_pointer",
    "encode_root_manifest",
    "encode_rows",
    "generation_name",
    "history_ref",
    "owner_manifest_name",
    "owner_ranges",
    "parse_generation",
    "sealed_name",
    "sha256_hex",
    "shard_file",
    "staged_name",
]

FORMAT: Final = "alpha-checkpoint/2"
"""/2: the generation's folder name is sealed by its root manifest's digest, and ``about``
records the plan's identity (``docs/checkpoints.md``)."""
OWNER_FORMAT: Final = "alpha-checkpoint-owner/1"
POINTER_FORMAT: Final = "alpha-checkpoint-pointer/1"
POINTER: Final = "LATEST"
MANIFEST: Final = "manifest.json"
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


def canonical_json(value: object) -> bytes:
    """The one encoding of every manifest and the pointer: sorted keys, no NaN, a newline."""
    return (json.dumps(value, sort_keys=True, indent=1, allow_nan=False) + "\n").encode()


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 that names a manifest, pins a pointer and checks a shard."""
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
        if ARRAY_NAME.fullmatch(name) is None:
            raise CheckpointCorrupt(f"{where}: a shard's array name {name!r} is not a name")
        total = elements_of(shape, f"{where}: shard {name}: global_shape")
        if dtype not in DTYPES:
            raise CheckpointCorrupt(
                f"{where}: shard {name}: dtype {dtype!r} is not one of {DTYPES}"
            )
        if not 0 <= start < stop <= total or size != (stop - start) * np.dtype(dtype).itemsize:
            raise CheckpointCorrupt(
                f"{where}: shard {name}[{start}:{stop}] does not fit its array of {total} "
                f"elements, or its byte length {size} does not match"
            )
        if not isinstance(digest, str) or HEX64.fullmatch(digest) is None:
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


#: An array's name in a manifest: a short identifier, so a shard's file name is safe as it is.
ARRAY_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: A SHA-256 as the manifests write it: 64 lowercase hex digits.
HEX64: Final = re.compile(r"[0-9a-f]{64}")


def shard_file(name: str, start: int, stop: int) -> str:
    """The file of array ``name``'s shard ``[start, stop)``, inside its generation."""
    return f"{SHARDS}/{name}.{start:012d}-{stop:012d}.bin"


def elements_of(shape: object, what: str) -> int:
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


def check_cover(
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


#: Each array of a generation by name: its global shape and dtype.
ArraySpecs = Mapping[str, tuple[tuple[int, ...], str]]


def staged_name(round: int, nonce: str) -> str:
    """The folder name under which the segment with ``nonce`` stages its generation of
    ``round``: named by its writer, so no other writer's prune or cleanup takes it for its
    own."""
    return f"{generation_name(round, nonce)}{STAGED_SUFFIX}"


def decode_json(
    data: bytes, where: str, expect: str | None = None
) -> tuple[dict[str, object], str]:
    """The JSON object ``data`` holds and its SHA-256; ``where`` names it in refusals.

    Raises:
        CheckpointCorrupt: its SHA-256 is not ``expect`` (when given), or it is not a JSON
            object.
    """
    digest = sha256_hex(data)
    if expect is not None and digest != expect:
        raise CheckpointCorrupt(
            f"{where} is corrupt: its SHA-256 is {digest}, {expect} was recorded"
        )
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointCorrupt(f"{where} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise CheckpointCorrupt(f"{where} must be a JSON object")
    return value, digest


def encode_owner_manifest(owner: int, shards: Sequence[Shard]) -> bytes:
    """Owner ``owner``'s manifest: the shards it wrote, in the order it wrote them."""
    return canonical_json(
        {"format": OWNER_FORMAT, "owner": owner, "shards": [s.to_dict() for s in shards]}
    )


def decode_owner_manifest(data: Mapping[str, object], owner: int, what: str) -> list[Shard]:
    """The shards owner ``owner``'s manifest (decoded JSON) lists; ``what`` names it.

    Raises:
        CheckpointCorrupt: it is not owner ``owner``'s manifest, or a shard is wrong.
    """
    if data.get("format") != OWNER_FORMAT or data.get("owner") != owner:
        raise CheckpointCorrupt(f"{what} is not owner {owner}'s {OWNER_FORMAT} manifest")
    listed = data.get("shards")
    if not isinstance(listed, list):
        raise CheckpointCorrupt(f"{what}: shards must be a list")
    return [Shard.from_dict(item, what) for item in listed]


def encode_root_manifest(
    base: str,
    round: int,
    owners: Sequence[Mapping[str, object]],
    arrays: ArraySpecs,
    about: Mapping[str, object],
) -> bytes:
    """The root manifest of generation ``base`` (the state after ``round`` rounds): each
    owner's manifest entry (``owner``, ``file``, ``sha256``), each array's spec, and
    ``about`` (the run, the plan's identity, what restoring needs)."""
    specs = {n: {"shape": list(shape), "dtype": dtype} for n, (shape, dtype) in arrays.items()}
    return canonical_json(
        {
            "format": FORMAT,
            "generation": base,
            "round": round,
            "owners": list(owners),
            "arrays": specs,
            "about": dict(about),
        }
    )


@dataclass(frozen=True, slots=True)
class RootManifest:
    """A root manifest, checked: its round, each owner's manifest digest (by owner, from 0),
    each array's spec and ``about``."""

    round: int
    owner_sha256: tuple[str, ...]
    arrays: dict[str, tuple[tuple[int, ...], str]]
    about: dict[str, object]


def decode_root_manifest(
    data: Mapping[str, object], name: GenerationName, folder: str, where: str
) -> RootManifest:
    """The root manifest (decoded JSON) of the generation whose folder is named ``name``
    (``folder``, as text); ``where`` names the manifest in refusals.

    Raises:
        CheckpointCorrupt: it is not an ``alpha-checkpoint/2`` manifest, its round or
            generation is not its folder's, or a field is wrong.
    """
    if data.get("format") != FORMAT:
        raise CheckpointCorrupt(f"{where} is not an {FORMAT} manifest")
    round = data.get("round")
    owners = data.get("owners")
    specs = data.get("arrays")
    about = data.get("about", {})
    if type(round) is not int or not isinstance(owners, list) or not isinstance(specs, dict):
        raise CheckpointCorrupt(f"{where}: round, owners or arrays is wrong")
    if round != name.round or data.get("generation") != name.base:
        raise CheckpointCorrupt(
            f"{where} records generation {data.get('generation')!r} of round "
            f"{round}, but its folder is {folder} (round {name.round})"
        )
    if not isinstance(about, dict):
        raise CheckpointCorrupt(f"{where}: about must be a table")
    arrays: dict[str, tuple[tuple[int, ...], str]] = {}
    for array, spec in specs.items():
        if ARRAY_NAME.fullmatch(array) is None:
            raise CheckpointCorrupt(f"{where}: array name {array!r} is not a name")
        if not isinstance(spec, dict) or spec.get("dtype") not in DTYPES:
            raise CheckpointCorrupt(f"{where}: array {array}: spec is wrong: {spec!r}")
        shape = spec.get("shape")
        elements_of(shape, f"{where}: array {array}: shape")
        assert isinstance(shape, list)
        arrays[array] = (tuple(shape), str(spec["dtype"]))
    digests: list[str] = []
    for index, entry in enumerate(owners):
        if not isinstance(entry, dict) or entry.get("owner") != index:
            raise CheckpointCorrupt(f"{where}: owner entry {index} is wrong")
        sha = entry.get("sha256")
        digests.append(sha if isinstance(sha, str) else "")
    return RootManifest(round, tuple(digests), arrays, dict(about))


def encode_pointer(generation: str, manifest_sha256: str) -> bytes:
    """The pointer naming the published generation ``generation`` (its sealed folder name) and
    pinning its root manifest's digest."""
    return canonical_json(
        {
            "format": POINTER_FORMAT,
            "generation": generation,
            "manifest_sha256": manifest_sha256,
        }
    )


def decode_pointer(pointer: Mapping[str, object], where: str) -> tuple[str, str]:
    """The generation a pointer (decoded JSON) names and the root manifest digest it pins;
    ``where`` names the pointer in refusals.

    Raises:
        CheckpointCorrupt: it is not a pointer, names no published generation's name, pins
            no digest, or its name's seal is not the digest it pins.
    """
    name, sha = pointer.get("generation"), pointer.get("manifest_sha256")
    if pointer.get("format") != POINTER_FORMAT or not isinstance(name, str):
        raise CheckpointCorrupt(f"{where} is not a {POINTER_FORMAT} pointer")
    parsed = parse_generation(name)
    if parsed is None:
        raise CheckpointCorrupt(f"{where} names {name!r}, not a published generation's name")
    if not isinstance(sha, str) or HEX64.fullmatch(sha) is None:
        raise CheckpointCorrupt(f"{where} pins no root manifest: manifest_sha256 is {sha!r}")
    if not sha.startswith(parsed.seal):
        raise CheckpointCorrupt(
            f"{where} names {name}, whose seal is not the digest it pins ({sha})"
        )
    return name, sha


# --- the history a generation carries ------------------------------------------------------

HISTORY: Final = "history"
"""The key of ``about`` that holds every round's record from round 0 up to the generation's:
``[[round from 0, loss, training accuracy, held-out accuracy], ...]``, a value that is not
finite (a held-out accuracy without a held-out set) written as null."""
RESUMES: Final = "resumes"
"""The key of ``about`` that lists the rounds at which the run that wrote the generation (or
one it goes on from) was resumed by ``--resume``: the rounds done when each resume started."""

#: One round's record: the round counted from 0, its loss, training and held-out accuracy.
HistoryRow = tuple[int, float, float, float]


@dataclass(frozen=True, slots=True)
class RecordedHistory:
    """What a generation records of the rounds before it: ``rows`` (their rounds rising, each
    below the generation's) and ``resumes`` (rising, each below it too)."""

    rows: tuple[HistoryRow, ...]
    resumes: tuple[int, ...]


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def encode_rows(rows: Sequence[HistoryRow]) -> list[list[float | int | None]]:
    """``rows`` as :data:`HISTORY` holds them: JSON values (canonical JSON has no NaN: a
    value that is not finite is null)."""
    return [[int(r), _number(a), _number(b), _number(c)] for r, a, b, c in rows]


def encode_history(
    rows: Sequence[HistoryRow], resumes: Sequence[int]
) -> dict[str, list[list[float | int | None]] | list[int]]:
    """``about``'s :data:`HISTORY` and :data:`RESUMES` for ``rows`` and ``resumes``."""
    return {HISTORY: encode_rows(rows), RESUMES: [int(each) for each in resumes]}


def _float(value: object) -> float | None:
    if value is None:
        return math.nan
    if type(value) in (int, float):
        return float(value)  # type: ignore[arg-type]
    return None


def decode_history(about: Mapping[str, object], round: int, where: str) -> RecordedHistory | None:
    """The history the generation of ``round`` records in ``about`` (:data:`HISTORY`,
    :data:`RESUMES`); None when it records none (a generation written before they were, or by
    a segment compiled by hand). ``where`` names it in refusals.

    Raises:
        CheckpointCorrupt: a row is not ``[round, three numbers or null]``, the rounds do not
            rise or reach the generation's round, or a resume is not a rising round below it.
    """
    if HISTORY not in about:
        return None
    listed, resumes = about.get(HISTORY), about.get(RESUMES, [])
    if not isinstance(listed, list) or not isinstance(resumes, list):
        raise CheckpointCorrupt(f"{where}: about.{HISTORY} and about.{RESUMES} must be lists")
    rows: list[HistoryRow] = []
    for position, row in enumerate(listed):
        values = [_float(v) for v in row[1:]] if isinstance(row, list) and len(row) == 4 else []
        at = row[0] if isinstance(row, list) and row else None
        before = rows[-1][0] if rows else -1
        if len(values) != 3 or None in values or type(at) is not int or not before < at < round:
            raise CheckpointCorrupt(
                f"{where}: about.{HISTORY}[{position}] is not [round, loss, train_accuracy, "
                f"holdout_accuracy] of a round after {before} and before {round}: {row!r}"
            )
        loss, train, held = (float(v) for v in values if v is not None)
        rows.append((at, loss, train, held))
    previous = -1
    for each in resumes:
        if type(each) is not int or not previous < each < round:
            raise CheckpointCorrupt(
                f"{where}: about.{RESUMES} must be rising rounds below {round}: {resumes!r}"
            )
        previous = each
    return RecordedHistory(tuple(rows), tuple(resumes))


# --- the history beside a generation's manifest --------------------------------------------

HISTORY_FILE: Final = "history.jsonl"
"""A generation's history file: every round's row before the generation, one JSON array a line
(``[round, loss, train_accuracy, holdout_accuracy]``, canonical JSON's compact numbers, a value
that is not finite as null). Its ``about.history`` names the file's first ``bytes`` bytes,
their SHA-256 and their ``rows``; the file may hold more lines after them (docs/checkpoints.md:
a launch appends to one file and links it into each of its generations), which are not this
generation's and never read as its."""

_HISTORY_REF_KEYS: Final = frozenset({"file", "rows", "bytes", "sha256"})


@dataclass(frozen=True, slots=True)
class HistoryRef:
    """What a root manifest's ``about.history`` says of its history file (:data:`HISTORY_FILE`):
    the rows and bytes that are the generation's, from the file's start, and their SHA-256."""

    rows: int
    bytes: int
    sha256: str


def encode_history_lines(rows: Sequence[Sequence[object]]) -> bytes:
    """``rows`` (as :func:`encode_rows` makes them) as lines of :data:`HISTORY_FILE`."""
    return b"".join(
        json.dumps(list(row), separators=(",", ":"), allow_nan=False).encode() + b"\n"
        for row in rows
    )


def history_ref(rows: int, size: int, sha256: str) -> dict[str, object]:
    """``about``'s :data:`HISTORY` for a history file whose first ``size`` bytes are ``rows``
    rows with SHA-256 ``sha256``."""
    return {"file": HISTORY_FILE, "rows": rows, "bytes": size, "sha256": sha256}


def decode_history_ref(about: Mapping[str, object], where: str) -> HistoryRef | None:
    """The history file ``about`` names (:func:`history_ref`); None when its :data:`HISTORY`
    is not an object (a history written inline, or none).

    Raises:
        CheckpointCorrupt: an object that is not a history file's reference.
    """
    ref = about.get(HISTORY)
    if not isinstance(ref, dict):
        return None
    rows, size, digest = ref.get("rows"), ref.get("bytes"), ref.get("sha256")
    if (
        set(ref) != _HISTORY_REF_KEYS
        or ref.get("file") != HISTORY_FILE
        or type(rows) is not int
        or type(size) is not int
        or not 0 <= rows <= size
        or not isinstance(digest, str)
        or HEX64.fullmatch(digest) is None
    ):
        raise CheckpointCorrupt(
            f"{where}: about.{HISTORY} must be {{file: {HISTORY_FILE!r}, rows, bytes, sha256}} "
            f"with rows <= bytes: {ref!r}"
        )
    return HistoryRef(rows, size, digest)


def decode_history_lines(
    data: bytes, ref: HistoryRef, about: Mapping[str, object], round: int, where: str
) -> RecordedHistory:
    """The history of the generation of ``round``: ``data``, the first ``ref.bytes`` bytes of
    its history file, already checked against ``ref.sha256``, and ``about``'s resumes.

    Raises:
        CheckpointCorrupt: a line is not a row, the rows are not ``ref.rows``, or they (or the
            resumes) break :func:`decode_history`'s rules.
    """
    lines = data.split(b"\n")
    if data and lines[-1] != b"":
        raise CheckpointCorrupt(f"{where}: its {HISTORY_FILE} does not end with a whole line")
    rows: list[object] = []
    for number, line in enumerate(lines[:-1], 1):
        try:
            rows.append(json.loads(line))
        except (ValueError, UnicodeDecodeError):
            raise CheckpointCorrupt(
                f"{where}: line {number} of its {HISTORY_FILE} is not JSON"
            ) from None
    if len(rows) != ref.rows:
        raise CheckpointCorrupt(
            f"{where}: its {HISTORY_FILE} holds {len(rows)} rows where about.{HISTORY} says "
            f"{ref.rows}"
        )
    recorded = decode_history({**about, HISTORY: rows}, round, f"{where}: {HISTORY_FILE}")
    assert recorded is not None  # HISTORY is given
    return recorded
