"""The history a generation carries (alpha.checkpoint.manifest): ``about.history`` and
``about.resumes`` round-trip every value, a generation without them reads as "not recorded",
and every malformed one is refused as ``CheckpointCorrupt``."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.checkpoint.manifest import (
    HISTORY,
    RESUMES,
    RecordedHistory,
    canonical_json,
    decode_history,
    encode_history,
)
from alpha.checkpoint.store import Generation
from alpha.errors import CheckpointCorrupt
from alpha.learner.saving import carried_history
from tests.support import raises_exactly

Row = tuple[int, float, float, float]

values = st.floats(
    allow_infinity=False
)  # NaN (no held-out set) is allowed; committed rows are finite


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Row], list[int], int]:
    rounds = sorted(set(draw(st.lists(st.integers(0, 500), max_size=30))))
    rows = [(r, draw(values), draw(values), draw(values)) for r in rounds]
    top = (rounds[-1] if rounds else 0) + draw(st.integers(1, 5))
    resumes = sorted(set(draw(st.lists(st.integers(0, top - 1), max_size=5))))
    return rows, resumes, top


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@given(histories())
def test_a_history_round_trips_through_canonical_json(
    case: tuple[list[Row], list[int], int],
) -> None:
    rows, resumes, top = case
    about = json.loads(canonical_json(encode_history(rows, resumes)))  # no NaN in the JSON
    found = decode_history(about, top, "test")
    assert found is not None and found.resumes == tuple(resumes)
    assert len(found.rows) == len(rows)
    for got, want in zip(found.rows, rows, strict=True):
        assert got[0] == want[0] and all(same(a, b) for a, b in zip(got[1:], want[1:], strict=True))


def test_a_held_out_accuracy_that_is_not_finite_is_null() -> None:
    assert encode_history([(0, 0.5, 0.25, math.nan)], [3]) == {
        HISTORY: [[0, 0.5, 0.25, None]],
        RESUMES: [3],
    }


def test_a_generation_without_a_history_records_none() -> None:
    assert decode_history({"run": "older"}, 10, "test") is None
    # A history without resumes is a run never resumed.
    assert decode_history({HISTORY: []}, 10, "test") == RecordedHistory((), ())


@pytest.mark.parametrize(
    "about",
    [
        {HISTORY: "rows"},
        {HISTORY: [], RESUMES: 3},
        {HISTORY: [[0, 0.5, 0.25]]},  # three fields
        {HISTORY: [[0, 0.5, 0.25, 0.1, 0]]},  # five
        {HISTORY: [(0, 0.5, 0.25, 0.1)]},  # not a list (decoded JSON never has tuples)
        {HISTORY: [[0.0, 0.5, 0.25, 0.1]]},  # a round that is not an int
        {HISTORY: [[True, 0.5, 0.25, 0.1]]},
        {HISTORY: [[-1, 0.5, 0.25, 0.1]]},  # before round 0
        {HISTORY: [[0, "0.5", 0.25, 0.1]]},  # a value that is not a number
        {HISTORY: [[0, 0.5, True, 0.1]]},
        {HISTORY: [[1, 0.5, 0.25, 0.1], [1, 0.5, 0.25, 0.1]]},  # rounds that do not rise
        {HISTORY: [[2, 0.5, 0.25, 0.1], [1, 0.5, 0.25, 0.1]]},
        {HISTORY: [[4, 0.5, 0.25, 0.1]]},  # the generation's own round (4) or later
        {HISTORY: [], RESUMES: [4]},  # a resume at or after the generation's round
        {HISTORY: [], RESUMES: [2, 2]},  # resumes that do not rise
        {HISTORY: [], RESUMES: [-1]},
        {HISTORY: [], RESUMES: ["2"]},
    ],
)
def test_a_malformed_history_is_refused(about: dict[str, object]) -> None:
    raises_exactly(CheckpointCorrupt, decode_history, about, 4, "gen-000000004")


def _inline(about: dict[str, object], round: int) -> Generation:
    """A generation whose manifest holds its history itself (as one written before history
    files did), as far as carried_history reads it."""
    return cast(
        Generation,
        SimpleNamespace(
            about=about, round=round, history=lambda: decode_history(about, round, "gen")
        ),
    )


def test_a_resumed_launch_carries_the_rounds_before_it_and_adds_its_resume() -> None:
    about = {HISTORY: [[0, 1.0, 0.1, None], [1, 0.9, 0.2, None], [2, 0.8, 0.3, 0.5]], RESUMES: [1]}
    start = _inline(about, 3)
    assert carried_history(start, 2) == ([[0, 1.0, 0.1, None], [1, 0.9, 0.2, None]], [1, 2])
    assert carried_history(start, 3) == (about[HISTORY], [1, 3])
    # An older generation records no history: only the resume is carried; none from the seed.
    assert carried_history(_inline({}, 3), 3) == ([], [3])
    assert carried_history(None, 0) == ([], [])
    # A malformed one is refused, as the run refuses it before it launches.
    broken = _inline({HISTORY: [[5, 1.0, 0.1, None]]}, 3)
    raises_exactly(CheckpointCorrupt, carried_history, broken, 3)
