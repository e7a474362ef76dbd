"""Progress records: what role 0 writes after each round, and what the launcher reads as they
come. Standard library only, so a participant imports it without paying for more.

A progress file holds one JSON object per line (``docs/progress.md``)::

    {"kind": "round", "round": 3, "loss": 0.61, "train_accuracy": 0.5, "holdout_accuracy": 0.47}

``round`` counts from 1. Each float is written as Python's shortest repr, so it reads back
bit for bit; strict JSON has no infinities or NaN, so those are the strings ``"inf"``,
``"-inf"`` and ``"nan"``. A line is accepted only in exactly the form :func:`encode` writes.

:class:`RecordReader` reads a growing file from where it stopped: each call costs what was
appended since the last, never the whole file.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from alpha.checked import int_in
from alpha.errors import ProgressRecordInvalid
from alpha.records.folder import PROGRESS_DIR, progress_name

__all__ = [
    "MAX_GENERATION_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_ROUND",
    "PROGRESS_DIR",
    "CheckpointRecord",
    "RecordReader",
    "RecordWriter",
    "RoundRecord",
    "decode",
    "encode",
    "progress_path",
]

MAX_ROUND: Final = 2**32 - 1
"""The largest round a record names: a plan's most rounds (``compiler.plan.MAX_ROUNDS``, which a
participant does not import)."""

MAX_RECORD_BYTES: Final = 512
"""The longest record line, its newline included. The longest a record can be is about 170
bytes (a 10-digit round and four floats of 24 characters each); a longer line, or a partial
line that grows past this, is not a progress file, and a reader refuses it rather than buffer
it without end."""

_KIND: Final = "round"
_FLOATS: Final = ("loss", "train_accuracy", "holdout_accuracy")
_FIELDS: Final = ("kind", "round", *_FLOATS)
_NON_FINITE: Final = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


@final
@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One round's progress, as role 0 observed it.

    Attributes:
        round: the round, counted from 1 (a resumed run's first is the one after its start).
        loss: the mean training loss over the round's batches.
        train_accuracy: the fraction of the round's batches classified right.
        holdout_accuracy: the fraction of the held-out samples classified right after the
            round's update (NaN without a held-out part).
    """

    round: int
    loss: float
    train_accuracy: float
    holdout_accuracy: float


@final
@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """A checkpoint generation role 0 published and pointed at, while the run goes on
    (``docs/checkpoints.md``).

    Attributes:
        round: the rounds the generation holds (its round), 1..``MAX_ROUND``.
        generation: its sealed folder name (``gen-...``), printable ASCII, at most 100 bytes.
    """

    round: int
    generation: str


_CHECKPOINT_KIND: Final = "checkpoint"
_CHECKPOINT_FIELDS: Final = ("kind", "round", "generation")
MAX_GENERATION_CHARS: Final = 100


def _encode_checkpoint(record: CheckpointRecord) -> bytes:
    if not int_in(record.round, 1, MAX_ROUND):
        raise ProgressRecordInvalid(
            f"a checkpoint record's round is an int in 1..{MAX_ROUND}, not {record.round!r:.60}"
        )
    name = record.generation
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= MAX_GENERATION_CHARS
        or not all("!" <= c <= "~" and c not in '"\\' for c in name)
    ):
        raise ProgressRecordInvalid(
            f"a checkpoint record's generation is a name of 1..{MAX_GENERATION_CHARS} "
            f"printable characters, not {name!r:.60}"
        )
    values = {"kind": _CHECKPOINT_KIND, "round": record.round, "generation": name}
    return (json.dumps(values) + "\n").encode()


def _number(value: float) -> float | str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def encode(record: RoundRecord | CheckpointRecord) -> bytes:
    """The record's line, its newline included.

    Raises:
        ProgressRecordInvalid: the round is not an int in ``1..MAX_ROUND``, or a value is not
            a float.
    """
    if isinstance(record, CheckpointRecord):
        return _encode_checkpoint(record)
    if not int_in(record.round, 1, MAX_ROUND):
        raise ProgressRecordInvalid(
            f"a progress record's round is an int in 1..{MAX_ROUND}, not {record.round!r:.60}"
        )
    values: dict[str, object] = {"kind": _KIND, "round": record.round}
    for name in _FLOATS:
        value = getattr(record, name)
        if not isinstance(value, float):
            raise ProgressRecordInvalid(f"a progress record's {name} is a float, not {value!r:.60}")
        values[name] = _number(value)
    return (json.dumps(values, allow_nan=False) + "\n").encode()


def _refuse_constant(name: str) -> float:
    raise ProgressRecordInvalid(
        f"a progress record holds {name}, which is not JSON: a record writes it as a string"
    )


def decode(line: bytes) -> RoundRecord | CheckpointRecord:
    """The record on ``line`` (one line, with or without its newline).

    Raises:
        ProgressRecordInvalid: ``line`` is not exactly a line :func:`encode` writes: longer
            than ``MAX_RECORD_BYTES``, not UTF-8 JSON, not an object of the record's fields,
            another kind, a round out of range, a value neither a number nor one of
            ``"inf"``, ``"-inf"``, ``"nan"``, or not in canonical form (spacing, key order).
    """
    if len(line) > MAX_RECORD_BYTES:
        raise ProgressRecordInvalid(
            f"a progress record is at most {MAX_RECORD_BYTES} bytes; this line has {len(line)}"
        )
    body = line.removesuffix(b"\n")
    if b"\n" in body:
        raise ProgressRecordInvalid("a progress record is one line; this has several")
    try:
        text = body.decode()
    except UnicodeDecodeError as error:
        raise ProgressRecordInvalid(f"a progress record is not UTF-8: {error}") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise ProgressRecordInvalid(f"a progress record is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ProgressRecordInvalid(f"a progress record is a JSON object, not {value!r:.60}")
    if value.get("kind") == _CHECKPOINT_KIND and sorted(value) == sorted(_CHECKPOINT_FIELDS):
        checkpoint = CheckpointRecord(value["round"], value["generation"])
        if encode(checkpoint) != body + b"\n":  # encode checks the round and the name
            raise ProgressRecordInvalid("a checkpoint record is not in its canonical form")
        return checkpoint
    if sorted(value) != sorted(_FIELDS):
        raise ProgressRecordInvalid(
            f"a progress record's fields are {list(_FIELDS)}, not {sorted(value)}"
        )
    if value["kind"] != _KIND:
        raise ProgressRecordInvalid(f"a progress record's kind is 'round', not {value['kind']!r}")
    floats: list[float] = []
    for name in _FLOATS:
        number = value[name]
        if isinstance(number, str) and number in _NON_FINITE:
            floats.append(_NON_FINITE[number])
        elif isinstance(number, float):
            floats.append(number)
        else:
            raise ProgressRecordInvalid(
                f"a progress record's {name} is a float or one of 'inf', '-inf', 'nan', "
                f"not {number!r:.60}"
            )
    record = RoundRecord(value["round"], *floats)
    if encode(record) != body + b"\n":  # encode checks the round
        raise ProgressRecordInvalid("a progress record is not in its canonical form")
    return record


@final
class RecordWriter:
    """Role 0's progress file: a new file at ``path`` (one left by an earlier launch into the
    same folder is replaced), each record written and flushed as it comes, so the launcher
    sees every round as soon as it ends.

    Raises:
        OSError: the file cannot be made or written.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A new file, not the old one truncated: a reader that still holds the old one sees
        # another file (RecordReader) and reads this one from its start.
        path.unlink(missing_ok=True)
        self.path = path
        self._file = path.open("wb")

    def write(self, record: RoundRecord | CheckpointRecord) -> None:
        self._file.write(encode(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@final
class RecordReader:
    """Reads the records appended to the progress file at ``path`` since its last call.

    It keeps the file open and its byte offset, so each :meth:`read_new` reads only the bytes
    written since the one before; a partial last line waits for its newline. Nothing is read
    while the file does not exist. A file replaced under it (another launch into the folder:
    :class:`RecordWriter` makes a new file) is read from its start; one that disappears is let
    go, and the next file at ``path`` is read from its start.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # bytes of the current file read so far
        self.bytes_read = 0  # bytes read over the reader's life, for a reader's own checks
        self._fd: int | None = None
        self._partial = b""

    def _let_go(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self.offset = 0
        self._partial = b""

    def _current(self) -> int | None:
        """The open file at ``path``, or None when there is none."""
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            self._let_go()
            return None
        if self._fd is not None:
            held = os.fstat(self._fd)
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                return self._fd
            self._let_go()
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        return self._fd

    def read_new(self) -> list[RoundRecord | CheckpointRecord]:
        """The records whose lines were completed since the last call, in file order.

        Raises:
            ProgressRecordInvalid: a completed line is not a record, or a partial line is
                already longer than ``MAX_RECORD_BYTES``. What this call read is dropped with
                it; a later call reads what is appended after.
            OSError: the file exists but cannot be read.
        """
        fd = self._current()
        if fd is None:
            return []
        chunks = []
        while True:
            chunk = os.pread(fd, 1 << 16, self.offset)
            if not chunk:
                break
            chunks.append(chunk)
            self.offset += len(chunk)
            self.bytes_read += len(chunk)
        data = self._partial + b"".join(chunks)
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_RECORD_BYTES:
            self._partial = b""
            raise ProgressRecordInvalid(
                f"{self.path}: a line grows past {MAX_RECORD_BYTES} bytes without ending: "
                "this is not a progress file"
            )
        records = []
        for line in lines:
            try:
                records.append(decode(line))
            except ProgressRecordInvalid as error:
                raise ProgressRecordInvalid(f"{self.path}: {error}") from None
        return records

    def close(self) -> None:
        """Close the file; a later :meth:`read_new` opens it again from its start."""
        self._let_go()


def progress_path(folder: Path, role: int = 0) -> Path:
    """``role``'s progress file in the run folder ``folder`` (where its artifacts are)."""
    return folder / PROGRESS_DIR / progress_name(role)
