"""A trace file's records as one numpy structured array: read, checked and ordered at once,
for readers of millions of records (``alpha observe trace``, ``alpha observe diff``,
``docs/trace.md``).

:data:`RECORD_DTYPE` is :mod:`alpha.records.trace`'s record layout as a numpy dtype
(``np.frombuffer`` over a file's bytes), and :func:`read_trace` applies that module's checks to
every record at once: the mark, the check (a Horner loop over 23 words, vectorised), every
field's range, and the sequence. What it accepts is what :func:`alpha.records.trace.decode_record`
accepts, record by record (``tests/records/test_trace_records.py`` holds the two to each other).

Pure: bytes in, arrays out; the files are read by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

import numpy as np

from alpha.errors import TraceInvalid
from alpha.records.trace import (
    CHECK_PRIME,
    RECORD_MARK,
    TRACE_FLAGS,
    TRACE_HEADER_SIZE,
    TRACE_RECORD_SIZE,
    Event,
    Phase,
    TraceHeader,
    decode_header,
)

__all__ = ["RECORD_DTYPE", "Trace", "read_trace", "record_checks", "valid_records"]

RECORD_DTYPE: Final = np.dtype(
    [
        ("seq", "<u8"),
        ("start", "<i8"),
        ("end", "<i8"),
        ("event", "u1"),
        ("kind", "u1"),
        ("phase", "u1"),
        ("flags", "u1"),
        ("peer", "<u4"),
        ("slot", "<u4"),
        ("round", "<u4"),
        ("version", "<u8"),
        ("extent", "<u8"),
        ("detail", "V32"),
        ("mark", "V4"),
        ("check", "<u4"),
    ]
)
"""One record (``docs/trace.md``), field for field; ``detail`` is the 32-byte digest or names."""
assert RECORD_DTYPE.itemsize == TRACE_RECORD_SIZE

# The check covers 92 bytes: 23 little-endian u32 words, the first the lowest.
_WORDS: Final = 23
# 2^32 mod CHECK_PRIME: one word's weight over the next's, for the Horner loop.
_SHIFT: Final = np.uint64((1 << 32) % CHECK_PRIME)
_PRIME: Final = np.uint64(CHECK_PRIME)
# Steps of the Horner loop between two remainders: from a value below 2^32, k steps (times 140,
# plus a word below 2^32) stay below 1.01 * 140^k * 2^32, under 2^61 for k = 4; the remainder,
# a division, is the loop's dearest step.
_REDUCE_EVERY: Final = 4
# Records checked at once: a chunk's intermediates stay a few MiB however long the trace.
_CHUNK: Final = 1 << 18
_EVENTS: Final = np.array([int(e) for e in Event], dtype=np.uint8)
_PHASES: Final = np.array([int(p) for p in Phase], dtype=np.uint8)
_MAX_KIND: Final = 7
_MARK: Final = np.frombuffer(RECORD_MARK, dtype="<u4")[0]


def record_checks(records: np.ndarray) -> np.ndarray:
    """The check each record's bytes give (:func:`alpha.records.trace.check_of`), vectorised:
    a Horner loop over the 23 words from the highest, reduced every ``_REDUCE_EVERY`` steps."""
    words = records.view(np.uint32).reshape(len(records), TRACE_RECORD_SIZE // 4)
    out = np.empty(len(records), dtype=np.uint64)
    for at in range(0, len(records), _CHUNK):
        block = words[at : at + _CHUNK, :_WORDS].astype(np.uint64)
        value = block[:, _WORDS - 1].copy()
        for step, index in enumerate(range(_WORDS - 2, -1, -1), 1):
            value *= _SHIFT
            value += block[:, index]
            if step % _REDUCE_EVERY == 0:
                value %= _PRIME
        out[at : at + _CHUNK] = value % _PRIME
    return out


def valid_records(records: np.ndarray) -> np.ndarray:
    """Which records are whole and well formed (a boolean per record): the mark, the check, and
    every field in its range, as :func:`alpha.records.trace.decode_record` checks one."""
    marks = records["mark"].view("<u4") == _MARK
    checked = record_checks(records) == records["check"]
    flags = records["flags"]
    valid: np.ndarray = (
        marks
        & checked
        & np.isin(records["event"], _EVENTS)
        & np.isin(records["phase"], _PHASES)
        & (records["kind"] <= _MAX_KIND)
        & ((flags & ~np.uint8(TRACE_FLAGS)) == 0)
        & (records["end"] >= records["start"])
    )
    return valid


@final
@dataclass(frozen=True)
class Trace:
    """One role's trace, read.

    Attributes:
        header: the file's header.
        records: its records, in the order they were written (``seq`` ascending, contiguous).
        torn: a last record cut short or damaged (a participant killed while writing it) was
            ignored.
        overwritten: records a ``ring`` trace wrote over (its first ``seq``); 0 otherwise.
    """

    header: TraceHeader
    records: np.ndarray
    torn: bool = False
    overwritten: int = 0

    @property
    def full(self) -> bool:
        """Whether the trace reached its limit: records past it were not kept (``first``) or
        may have overwritten older ones (``ring``)."""
        return len(self.records) + int(self.torn) >= self.header.bounds.limit

    @property
    def whole(self) -> bool:
        """Whether it holds every record its role wrote: not cut at the limit, none
        overwritten."""
        return not self.full and self.overwritten == 0


def read_trace(data: bytes | bytearray | memoryview, name: str = "a trace") -> Trace:
    """The trace in ``data`` (a whole trace file's bytes). A last record cut short, or a last
    written one damaged, is a participant killed while writing it: ignored (``torn``). Zero
    records at the end are room the writer reserved and never wrote: not records.

    Raises:
        TraceInvalid: the header is not a trace header (:func:`decode_header`); a record other
            than the last written is damaged or out of sequence; more records than the limit.
            The message starts with ``name`` and says which record.
    """
    header = decode_header(data, name)
    view = memoryview(data)[TRACE_HEADER_SIZE:]
    count = len(view) // TRACE_RECORD_SIZE
    torn = len(view) % TRACE_RECORD_SIZE != 0  # a record cut short at the end
    if count:
        # Room the writer reserved and never wrote (a killed role's file is not cut to its
        # records): whole records of zeros at the end. A zero record before a written one is
        # not room: it is damage, and the checks below refuse it.
        words = np.frombuffer(view[: count * TRACE_RECORD_SIZE], dtype="<u8")
        written = np.flatnonzero(words.reshape(count, TRACE_RECORD_SIZE // 8).any(axis=1))
        count = int(written[-1]) + 1 if len(written) else 0
    bounds = header.bounds
    if count > bounds.limit:
        raise TraceInvalid(
            f"{name} holds {count} records, more than its limit ({bounds.limit}): not one "
            "file a participant wrote"
        )
    records = np.frombuffer(view[: count * TRACE_RECORD_SIZE], dtype=RECORD_DTYPE)
    valid = valid_records(records)
    bad = np.flatnonzero(~valid)
    seq = records["seq"]
    if bounds.mode == "first":
        if len(bad) and bad[0] == count - 1 and not torn:
            torn, bad, records = True, bad[1:], records[:-1]  # the last one, cut by a kill
        if len(bad):
            raise TraceInvalid(f"{name}: record {bad[0]} is damaged (its mark or check fails)")
        wrong = np.flatnonzero(records["seq"] != np.arange(len(records), dtype=np.uint64))
        if len(wrong):
            raise TraceInvalid(
                f"{name}: record {wrong[0]} has seq {records['seq'][wrong[0]]}, not "
                f"{wrong[0]}: records are out of sequence"
            )
        return Trace(header, records, torn)
    # A ring: record seq is in slot seq % limit; the newest is the highest seq, and only the
    # slot after it may hold a record the kill cut (it was overwriting the oldest there).
    good = np.flatnonzero(valid)
    if not len(good):
        if len(bad) > 1:
            raise TraceInvalid(f"{name}: record {bad[0]} is damaged (its mark or check fails)")
        return Trace(header, records[:0], torn or len(bad) == 1)
    newest = int(seq[good].max())
    after = (newest + 1) % bounds.limit
    if len(bad) > 1 or (len(bad) == 1 and int(bad[0]) != after):
        raise TraceInvalid(f"{name}: record {bad[0]} is damaged (its mark or check fails)")
    if len(bad) == 1:
        torn = True
    kept = records[good]
    order = np.argsort(kept["seq"], kind="stable")
    kept = kept[order]
    slots = good[order]
    first = int(kept["seq"][0])
    expected = np.arange(first, first + len(kept), dtype=np.uint64)
    if not np.array_equal(kept["seq"], expected) or not np.array_equal(
        kept["seq"] % np.uint64(bounds.limit), slots.astype(np.uint64)
    ):
        raise TraceInvalid(
            f"{name}: its ring's records are out of sequence (each record seq belongs in slot "
            f"seq mod {bounds.limit}, seqs contiguous)"
        )
    return Trace(header, kept, torn, first)
