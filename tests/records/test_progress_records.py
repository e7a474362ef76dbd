"""Progress records (docs/progress.md): the codec reads back every float bit for bit, refuses
every line it does not write with ``ProgressRecordInvalid``, and the reader returns the same
records however the file grows, reading each byte once."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.plan import MAX_ROUNDS
from alpha.errors import ProgressRecordInvalid
from alpha.records.progress import (
    MAX_RECORD_BYTES,
    MAX_ROUND,
    RecordReader,
    RecordWriter,
    RoundRecord,
    decode,
    encode,
    progress_path,
)

records = st.builds(
    RoundRecord,
    round=st.integers(1, MAX_ROUND),
    loss=st.floats(),
    train_accuracy=st.floats(),
    holdout_accuracy=st.floats(),
)


def same(a: RoundRecord, b: RoundRecord) -> bool:
    """Equal field by field, bit for bit, NaN equal to NaN (its sign and payload aside)."""

    def bits(x: float) -> bytes:
        return b"nan" if math.isnan(x) else struct.pack("<d", x)

    return a.round == b.round and all(
        bits(getattr(a, name)) == bits(getattr(b, name))
        for name in ("loss", "train_accuracy", "holdout_accuracy")
    )


# --- the codec ------------------------------------------------------------------------------


def test_a_record_is_one_json_object_on_one_line() -> None:
    line = encode(RoundRecord(3, 0.25, 0.5, 0.75))
    assert line == (
        b'{"kind": "round", "round": 3, "loss": 0.25, "train_accuracy": 0.5, '
        b'"holdout_accuracy": 0.75}\n'
    )
    assert json.loads(line) == {
        "kind": "round",
        "round": 3,
        "loss": 0.25,
        "train_accuracy": 0.5,
        "holdout_accuracy": 0.75,
    }


def test_non_finite_values_are_strings_so_the_line_stays_strict_json() -> None:
    line = encode(RoundRecord(1, math.inf, -math.inf, math.nan))
    value = json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in strict JSON"))
    assert [value[k] for k in ("loss", "train_accuracy", "holdout_accuracy")] == [
        "inf",
        "-inf",
        "nan",
    ]


@settings(max_examples=300)
@given(records)
def test_every_record_reads_back_bit_for_bit(record: RoundRecord) -> None:
    line = encode(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert len(line) <= MAX_RECORD_BYTES
    assert same(decode(line), record)
    assert same(decode(line.removesuffix(b"\n")), record)


def test_the_round_bound_is_the_plans() -> None:
    assert MAX_ROUND == MAX_ROUNDS


@pytest.mark.parametrize("bad", [0, -1, MAX_ROUND + 1, 2**64, True])
def test_a_round_out_of_range_is_not_encoded(bad: int) -> None:
    with pytest.raises(ProgressRecordInvalid):
        encode(RoundRecord(bad, 0.0, 0.0, 0.0))


def test_the_rounds_bounds_encode() -> None:
    for good in (1, MAX_ROUND):
        assert decode(encode(RoundRecord(good, 0.0, 0.0, 0.0))).round == good


def test_a_value_that_is_not_a_float_is_not_encoded() -> None:
    with pytest.raises(ProgressRecordInvalid):
        encode(RoundRecord(1, 1, 0.0, 0.0))


GOOD = encode(RoundRecord(7, 0.5, 0.25, 0.125))

MALFORMED = {
    "empty": b"",
    "blank": b"\n",
    "not-utf8": b"\xff\xfe\n",
    "not-json": b"{round 7}\n",
    "array": b"[1, 2]\n",
    "number": b"7\n",
    "two-lines": GOOD + GOOD,
    "crlf": GOOD.removesuffix(b"\n") + b"\r\n",
    "too-long": b" " * MAX_RECORD_BYTES + GOOD,
    "other-kind": GOOD.replace(b'"round", "round"', b'"epoch", "round"'),
    "missing-field": b'{"kind": "round", "round": 7, "loss": 0.5, "train_accuracy": 0.25}\n',
    "extra-field": GOOD.replace(b"}", b', "x": 1}'),
    "round-zero": GOOD.replace(b'"round": 7', b'"round": 0'),
    "round-past-max": GOOD.replace(b'"round": 7', f'"round": {MAX_ROUND + 1}'.encode()),
    "round-float": GOOD.replace(b'"round": 7', b'"round": 7.0'),
    "round-bool": GOOD.replace(b'"round": 7', b'"round": true'),
    "round-string": GOOD.replace(b'"round": 7', b'"round": "7"'),
    "loss-int": GOOD.replace(b'"loss": 0.5', b'"loss": 1'),
    "loss-null": GOOD.replace(b'"loss": 0.5', b'"loss": null'),
    "loss-word": GOOD.replace(b'"loss": 0.5', b'"loss": "Infinity"'),
    "loss-NaN-literal": GOOD.replace(b'"loss": 0.5', b'"loss": NaN'),
    "loss-Infinity-literal": GOOD.replace(b'"loss": 0.5', b'"loss": Infinity'),
    "not-shortest-float": GOOD.replace(b'"loss": 0.5', b'"loss": 0.50'),
    "exponent-form": GOOD.replace(b'"loss": 0.5', b'"loss": 5e-1'),
    "compact": GOOD.replace(b", ", b",").replace(b": ", b":"),
    "key-order": b'{"round": 7, "kind": "round", "loss": 0.5, "train_accuracy": 0.25, '
    b'"holdout_accuracy": 0.125}\n',
    "duplicate-key": GOOD.replace(b'"round": 7,', b'"round": 7, "round": 7,'),
    "leading-space": b" " + GOOD,
}


def test_the_good_line_of_the_malformed_ones_is_good() -> None:
    assert decode(GOOD) == RoundRecord(7, 0.5, 0.25, 0.125)


@pytest.mark.parametrize("line", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_line_is_refused(line: bytes) -> None:
    with pytest.raises(ProgressRecordInvalid) as refused:
        decode(line)
    assert type(refused.value) is ProgressRecordInvalid


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_a_record_or_refused_with_the_one_class(line: bytes) -> None:
    try:
        record = decode(line)
    except ProgressRecordInvalid as error:
        assert type(error) is ProgressRecordInvalid
    else:
        assert encode(record) == line.removesuffix(b"\n") + b"\n"


@settings(max_examples=200)
@given(records, st.integers(0, 200), st.binary(min_size=1, max_size=1))
def test_every_one_byte_change_of_a_line_is_refused_or_another_canonical_record(
    record: RoundRecord, at: int, byte: bytes
) -> None:
    line = bytearray(encode(record))
    line[at % len(line)] = byte[0]
    try:
        again = decode(bytes(line))
    except ProgressRecordInvalid as error:
        assert type(error) is ProgressRecordInvalid
    else:
        assert encode(again) == bytes(line).removesuffix(b"\n") + b"\n"


# --- the reader -----------------------------------------------------------------------------


def test_nothing_is_read_while_the_file_does_not_exist(tmp_path: Path) -> None:
    reader = RecordReader(tmp_path / "progress" / "role-000000.jsonl")
    assert reader.read_new() == [] and reader.read_new() == []
    assert reader.bytes_read == 0


def test_a_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    reader = RecordReader(path)
    first, second = encode(RoundRecord(1, 1.0, 0.0, 0.0)), encode(RoundRecord(2, 0.5, 0.5, 0.5))
    path.write_bytes(first + second[:10])
    assert reader.read_new() == [RoundRecord(1, 1.0, 0.0, 0.0)]
    assert reader.read_new() == []
    with path.open("ab") as out:
        out.write(second[10:])
    assert reader.read_new() == [RoundRecord(2, 0.5, 0.5, 0.5)]
    assert reader.bytes_read == len(first + second) == reader.offset
    reader.close()


@settings(max_examples=100, deadline=None)
@given(st.lists(records, max_size=12), st.data())
def test_any_split_of_the_stream_gives_the_same_records(
    tmp_path_factory: pytest.TempPathFactory, stream: list[RoundRecord], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("split") / "p.jsonl"
    whole = b"".join(encode(record) for record in stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=8)))
    reader = RecordReader(path)
    seen = reader.read_new()
    path.touch()
    for start, end in zip([0, *cuts], [*cuts, len(whole)], strict=True):
        with path.open("ab") as out:
            out.write(whole[start:end])
        seen += reader.read_new()
    assert len(seen) == len(stream)
    assert all(same(a, b) for a, b in zip(seen, stream, strict=True))
    assert reader.bytes_read == len(whole), "each byte is read once"
    reader.close()


def test_a_bad_line_is_refused_and_reading_goes_on_after_it(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    reader = RecordReader(path)
    path.write_bytes(b"not a record\n")
    with pytest.raises(ProgressRecordInvalid) as refused:
        reader.read_new()
    assert type(refused.value) is ProgressRecordInvalid and str(path) in str(refused.value)
    with path.open("ab") as out:
        out.write(GOOD)
    assert reader.read_new() == [decode(GOOD)]
    reader.close()


def test_a_line_that_never_ends_is_refused_at_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    reader = RecordReader(path)
    path.write_bytes(b"x" * MAX_RECORD_BYTES)
    assert reader.read_new() == []  # at the bound it may still be a record's partial line
    with path.open("ab") as out:
        out.write(b"x")
    with pytest.raises(ProgressRecordInvalid) as refused:
        reader.read_new()
    assert type(refused.value) is ProgressRecordInvalid
    reader.close()


def test_a_new_file_from_the_writer_is_read_from_its_start(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    assert path == tmp_path / "progress" / "role-000000.jsonl"
    reader = RecordReader(path)
    first = RecordWriter(path)
    for round in (1, 2, 3):
        first.write(RoundRecord(round, 1.0, 0.5, 0.5))
    first.close()
    assert [r.round for r in reader.read_new()] == [1, 2, 3]
    again = RecordWriter(path)  # another launch into the same folder
    again.write(RoundRecord(4, 1.0, 0.5, 0.5))
    assert [r.round for r in reader.read_new()] == [4]
    again.close()
    path.unlink()
    assert reader.read_new() == []
    reader.close()
