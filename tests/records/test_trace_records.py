"""Trace records (docs/trace.md, alpha/records/trace.py and trace_table.py): every record reads
back field for field; every change of a record's bytes is refused by the scalar decoder and
found by the vectorised reader alike; a last record cut short or damaged (a kill while it was
written) is ignored and nothing else is; a ``first`` trace keeps the first records and a
``ring`` the last."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.errors import TraceInvalid
from alpha.records.trace import (
    CHECK_PRIME,
    DETAIL_SIZE,
    MAX_TRACE_LIMIT,
    NONE_U32,
    TRACE_HEADER_SIZE,
    TRACE_RECORD_SIZE,
    Event,
    Phase,
    TraceBounds,
    TraceHeader,
    TraceRecord,
    bounds_problem,
    check_of,
    decode_header,
    decode_record,
    detail_names,
    encode_header,
    encode_record,
    names_detail,
    record_offset,
)
from alpha.records.trace_table import RECORD_DTYPE, read_trace, record_checks, valid_records

u32 = st.integers(0, NONE_U32)
u64 = st.integers(0, 2**64 - 1)


@st.composite
def records(draw: st.DrawFn, seq: int | None = None) -> TraceRecord:
    start = draw(st.integers(-(2**63), 2**63 - 1))
    end = draw(st.integers(start, 2**63 - 1))
    return TraceRecord(
        seq=draw(u64) if seq is None else seq,
        start_ns=start,
        end_ns=end,
        event=draw(st.sampled_from(Event)),
        kind=draw(st.integers(0, 7)),
        phase=draw(st.sampled_from(Phase)),
        flags=draw(st.integers(0, 3)),
        peer=draw(u32),
        slot=draw(u32),
        round=draw(u32),
        version=draw(u64),
        extent=draw(u64),
        detail=draw(st.binary(min_size=DETAIL_SIZE, max_size=DETAIL_SIZE)),
    )


HEADER = TraceHeader(
    role=1,
    participants=4,
    identity=hashlib.sha256(b"a run").digest(),
    digest="sha256",
    bounds=TraceBounds(8, "first"),
    monotonic_ns=1_000,
    wall_ns=1_700_000_000_000_000_000,
)


def _record(seq: int, **fields: object) -> bytes:
    values: dict[str, object] = {
        "seq": seq,
        "start_ns": 10 * seq,
        "end_ns": 10 * seq + 5,
        "event": Event.SEND,
        "kind": 2,
        "phase": Phase.RUNNING,
        "flags": 0,
        "peer": 0,
        "slot": 1,
        "round": seq,
        "version": seq,
        "extent": 4096,
        "detail": hashlib.sha256(bytes([seq % 256])).digest(),
    }
    values.update(fields)
    return encode_record(TraceRecord(**values))  # type: ignore[arg-type]


def _file(bounds: TraceBounds, count: int) -> bytearray:
    """A trace as its writer leaves it after ``count`` records under ``bounds``."""
    data = bytearray(encode_header(dataclasses.replace(HEADER, bounds=bounds)))
    for seq in range(count):
        at = record_offset(seq, bounds)
        if at is not None:
            assert at <= len(data)  # each record goes at the end or over an older one
            data[at : at + TRACE_RECORD_SIZE] = _record(seq)
    return data


# --- the codec ------------------------------------------------------------------------------


@given(records())
def test_a_record_reads_back_field_for_field(record: TraceRecord) -> None:
    data = encode_record(record)
    assert len(data) == TRACE_RECORD_SIZE
    assert decode_record(data) == record
    # The vectorised reader sees the same fields.
    row = np.frombuffer(data, dtype=RECORD_DTYPE)
    assert valid_records(row).tolist() == [True]
    assert int(row["seq"][0]) == record.seq and int(row["version"][0]) == record.version
    assert bytes(row["detail"][0]) == record.detail


@given(records())
def test_the_check_is_the_first_92_bytes_modulo_the_prime(record: TraceRecord) -> None:
    data = encode_record(record)
    assert int.from_bytes(data[92:], "little") == int.from_bytes(data[:92], "little") % (
        CHECK_PRIME
    )
    assert record_checks(np.frombuffer(data, dtype=RECORD_DTYPE)).tolist() == [check_of(data)]


def test_every_single_byte_change_of_a_record_is_refused_and_found() -> None:
    data = _record(3)
    mutants = []
    for at in range(TRACE_RECORD_SIZE):
        for value in range(256):
            if value != data[at]:
                mutant = bytearray(data)
                mutant[at] = value
                mutants.append(bytes(mutant))
    for mutant in mutants[::97]:  # the scalar decoder: a sample of the 24,480
        with pytest.raises(TraceInvalid):
            decode_record(mutant)
    rows = np.frombuffer(b"".join(mutants), dtype=RECORD_DTYPE)
    assert not valid_records(rows).any()  # the vectorised reader: every one


@settings(max_examples=300)
@given(records(), st.data())
def test_any_change_of_a_record_is_refused_by_both_readers_alike(
    record: TraceRecord, data: st.DataObject
) -> None:
    block = bytearray(encode_record(record))
    where = data.draw(st.lists(st.integers(0, TRACE_RECORD_SIZE - 1), min_size=1, unique=True))
    for at in where:
        block[at] ^= data.draw(st.integers(1, 255))
    try:
        decode_record(block)
        scalar = True
    except TraceInvalid:
        scalar = False
    vector = bool(valid_records(np.frombuffer(bytes(block), dtype=RECORD_DTYPE))[0])
    assert scalar == vector
    assert not scalar  # a miss would be a 2^-32 chance: hypothesis does not find one


def test_a_record_out_of_range_is_not_written() -> None:
    with pytest.raises(TraceInvalid, match="kind"):
        _record(0, kind=8)
    with pytest.raises(TraceInvalid, match="before it starts"):
        _record(0, start_ns=5, end_ns=4)
    with pytest.raises(TraceInvalid, match="peer"):
        _record(0, peer=NONE_U32 + 1)
    with pytest.raises(TraceInvalid, match="detail"):
        _record(0, detail=b"short")


def test_names_fit_the_detail_field_cut_at_a_character() -> None:
    assert detail_names(names_detail("contribute", "g")) == ("contribute", "g")
    assert detail_names(names_detail()) == ()
    long = names_detail("é" * 40)
    assert len(long) == DETAIL_SIZE
    assert detail_names(long) == ("é" * 16,)


# --- the header -----------------------------------------------------------------------------


def test_the_header_reads_back_and_every_byte_change_is_refused() -> None:
    data = encode_header(HEADER)
    assert len(data) == TRACE_HEADER_SIZE
    assert decode_header(data) == HEADER
    for at in range(TRACE_HEADER_SIZE):
        mutant = bytearray(data)
        mutant[at] ^= 0x40
        with pytest.raises(TraceInvalid):
            decode_header(bytes(mutant))


def test_bounds_are_checked_at_their_limits() -> None:
    assert bounds_problem(1, "first") is None
    assert bounds_problem(MAX_TRACE_LIMIT, "ring") is None
    assert bounds_problem(MAX_TRACE_LIMIT + 1, "ring") is not None
    assert bounds_problem(0, "first") is not None
    assert bounds_problem(2**64 - 1, "first") is not None
    assert bounds_problem(True, "first") is not None
    assert bounds_problem(8, "last") is not None


# --- a file ---------------------------------------------------------------------------------


def test_a_torn_last_record_is_ignored_and_the_rest_read() -> None:
    bounds = TraceBounds(8, "first")
    data = _file(bounds, 5)
    whole = read_trace(bytes(data))
    assert whole.records["seq"].tolist() == [0, 1, 2, 3, 4] and not whole.torn
    cut = read_trace(bytes(data) + _record(5)[:40])  # a record cut short by a kill
    assert cut.records["seq"].tolist() == [0, 1, 2, 3, 4] and cut.torn
    damaged = bytearray(data) + _record(5)
    damaged[-10] ^= 1  # the last whole record written half: its check fails
    read = read_trace(bytes(damaged))
    assert read.records["seq"].tolist() == [0, 1, 2, 3, 4] and read.torn


def test_room_reserved_and_never_written_is_no_record() -> None:
    for mode in ("first", "ring"):
        bounds = TraceBounds(16, mode)
        data = _file(bounds, 5)
        reserved = bytes(data) + bytes(3 * TRACE_RECORD_SIZE)  # a killed writer's file
        trace = read_trace(reserved)
        assert trace.records["seq"].tolist() == [0, 1, 2, 3, 4] and not trace.torn
        # A record cut by the kill, then the room after it.
        cut = bytes(data) + _record(5)[:50] + bytes(TRACE_RECORD_SIZE - 50 + 96)
        trace = read_trace(cut)
        assert trace.records["seq"].tolist() == [0, 1, 2, 3, 4] and trace.torn
    # Zeros before a written record are damage, not room.
    data = _file(TraceBounds(16, "first"), 5)
    data[TRACE_HEADER_SIZE + TRACE_RECORD_SIZE : TRACE_HEADER_SIZE + 2 * TRACE_RECORD_SIZE] = bytes(
        TRACE_RECORD_SIZE
    )
    with pytest.raises(TraceInvalid, match="record 1 is damaged"):
        read_trace(bytes(data))


def test_a_damaged_record_before_the_last_is_refused() -> None:
    data = _file(TraceBounds(8, "first"), 5)
    data[TRACE_HEADER_SIZE + 2 * TRACE_RECORD_SIZE + 7] ^= 1
    with pytest.raises(TraceInvalid, match="record 2 is damaged"):
        read_trace(bytes(data))
    # Two bad at the end: only one record can have been cut by a kill.
    data = _file(TraceBounds(8, "first"), 5) + _record(5)
    data[-10] ^= 1
    with pytest.raises(TraceInvalid, match="record 5"):
        read_trace(bytes(data) + _record(6)[:10])


def test_records_out_of_sequence_are_refused() -> None:
    data = _file(TraceBounds(8, "first"), 3)
    first = TRACE_HEADER_SIZE
    swapped = (
        bytes(data[:first]) + _record(1) + _record(0) + bytes(data[first + 2 * TRACE_RECORD_SIZE :])
    )
    with pytest.raises(TraceInvalid, match="out of sequence"):
        read_trace(swapped)


def test_a_first_trace_keeps_the_first_records_up_to_its_limit() -> None:
    bounds = TraceBounds(4, "first")
    trace = read_trace(bytes(_file(bounds, 10)))
    assert trace.records["seq"].tolist() == [0, 1, 2, 3]
    assert trace.full and not trace.whole and trace.overwritten == 0
    with pytest.raises(TraceInvalid, match="more than its limit"):
        read_trace(bytes(_file(bounds, 4)) + _record(4))


def test_a_ring_keeps_the_last_records_in_order() -> None:
    bounds = TraceBounds(4, "ring")
    short = read_trace(bytes(_file(bounds, 3)))
    assert short.records["seq"].tolist() == [0, 1, 2] and short.whole
    trace = read_trace(bytes(_file(bounds, 10)))
    assert trace.records["seq"].tolist() == [6, 7, 8, 9]
    assert trace.overwritten == 6 and not trace.whole


def test_a_ring_torn_over_its_oldest_record_keeps_the_others() -> None:
    bounds = TraceBounds(4, "ring")
    data = _file(bounds, 10)  # slots hold 8 9 6 7; the next, 10, goes over 6 in slot 2
    at = TRACE_HEADER_SIZE + 2 * TRACE_RECORD_SIZE
    data[at : at + 40] = _record(10)[:40]  # the kill cut it after 40 bytes
    trace = read_trace(bytes(data))
    assert trace.records["seq"].tolist() == [7, 8, 9] and trace.torn
    data = _file(bounds, 10)
    data[TRACE_HEADER_SIZE + 5] ^= 1  # slot 0 (record 8), not the one after the newest
    with pytest.raises(TraceInvalid, match="damaged"):
        read_trace(bytes(data))


def test_a_file_that_is_not_a_trace_is_refused() -> None:
    for data in (b"", b"GET / HTTP/1.1\r\n" * 10, bytes(TRACE_HEADER_SIZE)):
        with pytest.raises(TraceInvalid):
            read_trace(data)
