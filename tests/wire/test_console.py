"""The launcher-participant bytes (alpha.wire.console): each writer and its parser agree, on
any value, and the parsers take nothing a writer does not write."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.wire.console import (
    FAILURE_CLOCK,
    MAX_PORT,
    PORT_BYTES,
    cause_of,
    clock_line,
    clock_of,
    decode_ports,
    encode_port,
    encode_ports,
    failed_line,
    failure_of,
    role_line,
)

ports = st.integers(0, MAX_PORT)
roles = st.one_of(st.integers(0, 2**31), st.just("?"))
clocks = st.floats(0, 1e9, allow_nan=False)
# A log line as a participant or anything it runs writes it: any text without a line break.
lines = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80).map(
    lambda text: " ".join(text.split())
)


@given(st.lists(ports, max_size=64))
def test_ports_round_trip(values: list[int]) -> None:
    data = encode_ports(values)
    assert len(data) == PORT_BYTES * len(values)
    assert decode_ports(data) == tuple(values)
    assert data == b"".join(encode_port(port) for port in values)


def test_a_port_is_two_big_endian_bytes() -> None:
    assert encode_ports([1, 258, MAX_PORT]) == b"\x00\x01\x01\x02\xff\xff"
    assert MAX_PORT == 65535


@pytest.mark.parametrize("port", [-1, MAX_PORT + 1, 2**63, True, 1.0])
def test_a_port_outside_two_bytes_is_refused(port: object) -> None:
    with pytest.raises(ValueError, match="a port is an int"):
        encode_port(port)  # type: ignore[arg-type]


@given(st.binary(max_size=65).filter(lambda data: len(data) % PORT_BYTES))
def test_a_partial_port_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="whole number"):
        decode_ports(data)


@given(roles, clocks)
def test_the_failure_clock_round_trips_to_its_digits(role: int | str, clock: float) -> None:
    line = clock_line(role, clock)
    assert line == role_line(role, f"{FAILURE_CLOCK} {clock:.6f}")
    found = clock_of(line)
    assert found is not None and found == float(f"{clock:.6f}")
    assert math.isclose(found, clock, abs_tol=1e-6)


@given(lines)
def test_a_line_without_the_clock_word_has_no_clock(line: str) -> None:
    if f" {FAILURE_CLOCK} " not in line:
        assert clock_of(line) is None


@given(st.lists(lines, max_size=6), roles, clocks, lines.filter(bool))
def test_the_cause_is_the_last_line_and_the_clock_the_one_before(
    before: list[str], role: int | str, clock: float, cause: str
) -> None:
    log = "\n".join([*before, clock_line(role, clock), role_line(role, cause), "", "  "])
    assert cause_of(log) == (role_line(role, cause), float(f"{clock:.6f}"))


@given(st.lists(lines, max_size=6))
def test_a_log_without_a_clock_line_names_its_last_line_and_no_time(log: list[str]) -> None:
    kept = [line for line in log if line]
    cause, clock = cause_of("\n".join(log))
    assert cause == (kept[-1] if kept else "")
    if len(kept) < 2 or f" {FAILURE_CLOCK} " not in kept[-2]:
        assert clock is None


@given(st.lists(lines, max_size=6), roles, lines)
def test_the_failure_line_round_trips_whatever_came_before(
    before: list[str], role: int | str, what: str
) -> None:
    line = failed_line(role, what)
    assert line == f"role {role}: failed: {what}"
    log = "\n".join([*before, clock_line(role, 1.5), line])
    assert failure_of(log) == what
    assert cause_of(log) == (line.strip(), 1.5)


@given(st.lists(lines.filter(lambda line: ": failed: " not in line), max_size=6))
def test_a_log_without_a_failure_line_names_no_failure(log: list[str]) -> None:
    assert failure_of("\n".join(log)) == ""


def test_the_last_failure_line_is_the_one_named() -> None:
    log = "\n".join([failed_line(2, "PeerLost: first"), "role 2: done", failed_line(2, "later")])
    assert failure_of(log) == "later"
