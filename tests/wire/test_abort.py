"""The ABORT cause record: a canonical, fixed-size codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.errors import AbortInvalid
from alpha.wire.abort import MAX_NAME, AbortCause, decode_cause, encode_cause
from alpha.wire.frame import ABORT_EXTENT

ROLE = st.integers(0, 2**32 - 2)
NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,63}", fullmatch=True)
ONE_LINE = st.text(max_size=300).map(lambda text: " ".join(text.split()))


@st.composite
def causes(draw: st.DrawFn) -> AbortCause:
    edge = draw(st.none() | st.tuples(ROLE, ROLE).filter(lambda e: e[0] < e[1]))
    return AbortCause(
        origin=draw(ROLE),
        cause=draw(NAME),
        edge=edge,
        round=draw(st.none() | st.integers(0, 2**64 - 2)),
        detail=draw(ONE_LINE),
    )


@given(causes())
def test_a_cause_round_trips_and_fills_the_extent_exactly(cause: AbortCause) -> None:
    data = encode_cause(cause)
    assert len(data) == ABORT_EXTENT
    back = decode_cause(data, role=1, peer=2)
    assert back.origin == cause.origin and back.cause == cause.cause
    assert back.edge == cause.edge and back.round == cause.round
    # A detail too long for the frame is cut, at a character boundary.
    assert cause.detail.startswith(back.detail)


@given(st.binary(min_size=ABORT_EXTENT, max_size=ABORT_EXTENT))
def test_any_payload_is_refused_or_is_the_encoding_of_what_it_decodes_to(data: bytes) -> None:
    try:
        cause = decode_cause(data, role=1, peer=2)
    except AbortInvalid as error:
        assert (error.role, error.peer, error.field) == (1, 2, "payload")
        return
    assert encode_cause(cause) == data


@given(causes(), st.integers(0, ABORT_EXTENT - 1), st.integers(1, 255))
def test_every_byte_changed_is_refused_or_decodes_canonically(
    cause: AbortCause, position: int, flip: int
) -> None:
    data = bytearray(encode_cause(cause))
    data[position] ^= flip
    try:
        other = decode_cause(bytes(data), role=1, peer=2)
    except AbortInvalid:
        return
    assert encode_cause(other) == bytes(data)
    assert other != cause


def test_a_non_zero_pad_byte_and_a_wrong_length_are_refused() -> None:
    data = bytearray(encode_cause(AbortCause(3, "Corrupted", (1, 3), 7, "bad bytes")))
    data[-1] = 1
    with pytest.raises(AbortInvalid):
        decode_cause(bytes(data), role=0, peer=1)
    with pytest.raises(AbortInvalid):
        decode_cause(bytes(data[:-1]), role=0, peer=1)


def test_a_name_that_is_not_an_identifier_travels_as_unknown() -> None:
    for name in ("", "x" * (MAX_NAME + 1), "Bad Name", "Ünïcode"):
        cause = decode_cause(encode_cause(AbortCause(0, name, None, None, "")), role=1, peer=0)
        assert cause.cause == "Unknown"


def test_a_long_multi_line_detail_is_cut_to_one_line_at_a_character_boundary() -> None:
    detail = "é\n" * 1000
    got = decode_cause(encode_cause(AbortCause(0, "X", None, None, detail)), role=1, peer=0)
    assert "\n" not in got.detail and got.detail.startswith("é é")
    assert len(got.detail.encode()) <= ABORT_EXTENT
