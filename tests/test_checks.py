"""The one integer check: an int, never a bool, within inclusive bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from alpha.checked import int_in

BOUND = st.none() | st.integers(-(2**70), 2**70)


@given(st.integers(-(2**70), 2**70), BOUND, BOUND)
def test_an_int_is_in_exactly_when_it_is_within_the_bounds_given(
    value: int, low: int | None, high: int | None
) -> None:
    expected = (low is None or value >= low) and (high is None or value <= high)
    assert int_in(value, low, high) is expected


@given(st.booleans() | st.floats() | st.text() | st.none() | st.just(1.0), BOUND, BOUND)
def test_anything_but_an_int_is_never_in_and_a_bool_is_not_an_int(
    value: object, low: int | None, high: int | None
) -> None:
    assert int_in(value, low, high) is False


def test_the_bounds_are_inclusive() -> None:
    assert int_in(0, 0, 0) and int_in(5, 5) and int_in(5, None, 5)
    assert not int_in(-1, 0) and not int_in(6, None, 5)
    assert not int_in(True, 0, 1) and not int_in(False)
