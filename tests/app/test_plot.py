"""A run's plots and data (alpha.app.plot): ``history.csv`` gives back every value exactly,
``loss.png`` is a real PNG of the promised size, a diverged or empty run still gets both, and
both are replaced whole or not at all."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.app.plot import (
    DPI,
    FIGURE_INCHES,
    HISTORY_HEADER,
    RunPlots,
    _loss_scale,
    diverged_round,
    history_csv,
    write_run_plots,
)
from tests.support import ROOT

Row = tuple[int, float, float, float]

# A run that learns: the loss falls from 0.9 to 0.09, the accuracies rise.
LEARNING: list[Row] = [
    (i, 0.9 / (1 + i / 3), 0.1 + 0.8 * i / 29, 0.1 + 0.7 * i / 29) for i in range(30)
]

# A run that diverges: the loss grows, is infinite at round 49 (index 48), NaN after.
DIVERGED: list[Row] = [(i, 0.9 * 1.2**i, 0.3, 0.25) for i in range(48)] + [
    (48, math.inf, 0.1, 0.098),
    (49, math.nan, 0.1, 0.098),
]


def read_csv(path: Path) -> list[Row]:
    """The rows of a ``history.csv``, rounds counted from 0 again."""
    header, *lines = path.read_text(encoding="ascii").splitlines()
    assert header == HISTORY_HEADER
    rows = []
    for line in lines:
        number, loss, train, held, resumed = line.split(",")
        assert resumed == "0"
        rows.append((int(number) - 1, float(loss), float(train), float(held)))
    return rows


def same(a: float, b: float) -> bool:
    """The same float: equal with the same sign (0.0 and -0.0 differ), or both NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def assert_same_rows(found: list[Row], expected: list[Row]) -> None:
    assert len(found) == len(expected)
    for got, want in zip(found, expected, strict=True):
        assert got[0] == want[0]
        assert all(same(a, b) for a, b in zip(got[1:], want[1:], strict=True)), (got, want)


def png_shape(path: Path) -> tuple[int, ...]:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return tuple(imread(path).shape)


PNG_SHAPE = (round(FIGURE_INCHES[1] * DPI), round(FIGURE_INCHES[0] * DPI), 4)


# --- history.csv ----------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40),
            st.floats(),
            st.floats(),
            st.floats(),
        ),
        max_size=20,
    )
)
def test_history_csv_gives_back_every_float_exactly(history: list[Row]) -> None:
    header, *lines = history_csv(history).splitlines()
    assert header == HISTORY_HEADER
    found = []
    for line in lines:
        number, loss, train, held, resumed = line.split(",")
        assert resumed == "0"
        found.append((int(number) - 1, float(loss), float(train), float(held)))
    assert_same_rows(found, history)


def test_history_csv_counts_rounds_from_1_and_spells_non_finite_values() -> None:
    history = [(0, 0.5, 0.25, math.nan), (1, math.inf, 0.1, -math.inf)]
    assert history_csv(history) == (
        "round,loss,train_accuracy,holdout_accuracy,resumed\n1,0.5,0.25,nan,0\n2,inf,0.1,-inf,0\n"
    )


# --- the loss axis's scale ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("losses", "scale"),
    [
        ([0.9, 0.5, 0.2], "linear"),
        ([1.0, 0.1], "linear"),  # a span of exactly 10: still linear
        ([1.0, 0.0999], "log"),  # just over 10
        ([2.5, 1e-4], "log"),
        ([math.inf, 5.0, 0.1], "log"),  # only finite losses count
        ([math.nan, 1.0, 0.5], "linear"),
        ([1.0, 0.0], "linear"),  # a log axis cannot show 0
        ([1.0, 0.01, -0.5], "linear"),
        ([0.3], "linear"),
        ([], "linear"),
    ],
)
def test_the_loss_axis_is_logarithmic_when_the_losses_span_more_than_10(
    losses: list[float], scale: str
) -> None:
    assert _loss_scale(losses) == scale


# --- divergence -----------------------------------------------------------------------------


def test_diverged_round_is_the_first_non_finite_loss_counted_from_1() -> None:
    assert diverged_round(LEARNING) is None
    assert diverged_round([]) is None
    assert diverged_round(DIVERGED) == 49
    assert diverged_round([(0, math.nan, 0.1, 0.1)]) == 1
    assert diverged_round([(4, 1.0, 0.1, 0.1), (5, -math.inf, 0.1, 0.1)]) == 6


def test_a_diverged_run_gets_its_plot_and_its_whole_history(tmp_path: Path) -> None:
    plots = write_run_plots(
        tmp_path, DIVERGED, title="diverged", diverged_at=diverged_round(DIVERGED)
    )
    assert plots == RunPlots(png=tmp_path / "loss.png", csv=tmp_path / "history.csv")
    assert png_shape(plots.png) == PNG_SHAPE
    rows = read_csv(plots.csv)
    assert_same_rows(rows, DIVERGED)
    assert plots.csv.read_text().splitlines()[-2:] == ["49,inf,0.1,0.098,0", "50,nan,0.1,0.098,0"]


def test_a_run_diverged_at_its_first_round_still_gets_both_files(tmp_path: Path) -> None:
    history = [(0, math.inf, 0.1, 0.1)]
    plots = write_run_plots(tmp_path, history, title="at once", diverged_at=1)
    assert png_shape(plots.png) == PNG_SHAPE
    assert plots.csv.read_text() == f"{HISTORY_HEADER}\n1,inf,0.1,0.1,0\n"


# --- the files ------------------------------------------------------------------------------


def test_a_learning_run_writes_a_png_of_800_by_600_and_its_csv(tmp_path: Path) -> None:
    plots = write_run_plots(tmp_path, LEARNING, title="digits")
    assert png_shape(plots.png) == PNG_SHAPE == (600, 800, 4)
    assert_same_rows(read_csv(plots.csv), LEARNING)


def test_a_run_without_held_out_set_or_with_one_round_is_drawn(tmp_path: Path) -> None:
    plots = write_run_plots(tmp_path, [(0, 0.7, 0.5, math.nan)], title="one round")
    assert png_shape(plots.png) == PNG_SHAPE
    assert plots.csv.read_text() == f"{HISTORY_HEADER}\n1,0.7,0.5,nan,0\n"


def test_an_empty_history_writes_a_png_and_the_header_alone(tmp_path: Path) -> None:
    plots = write_run_plots(tmp_path, [], title="nothing yet")
    assert png_shape(plots.png) == PNG_SHAPE
    assert plots.csv.read_text() == f"{HISTORY_HEADER}\n"


def test_the_folder_holds_the_two_files_alone_each_replaced_whole(tmp_path: Path) -> None:
    first = write_run_plots(tmp_path, LEARNING, title="first")
    png = first.png.read_bytes()
    second = write_run_plots(tmp_path, LEARNING[:3], title="second")
    assert second == first
    assert sorted(path.name for path in tmp_path.iterdir()) == ["history.csv", "loss.png"]
    assert_same_rows(read_csv(second.csv), LEARNING[:3])
    assert second.png.read_bytes() != png
    assert png_shape(second.png) == PNG_SHAPE
    for path in (second.png, second.csv):
        assert path.stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_files_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plots = write_run_plots(tmp_path, LEARNING, title="kept")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    def broken_replace(source: object, target: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_run_plots(tmp_path, DIVERGED, title="lost", diverged_at=49)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    assert plots.csv.exists() and plots.png.exists()


@pytest.mark.parametrize(
    ("history", "diverged_at"),
    [
        ([(0, 1.0, 0.5)], None),  # three fields
        ([(-1, 1.0, 0.5, 0.5)], None),  # a round before the first
        ([(True, 1.0, 0.5, 0.5)], None),  # a bool is not a round
        ([(0.0, 1.0, 0.5, 0.5)], None),  # nor a float
        ([(0, "loss", 0.5, 0.5)], None),  # a value that is not a number
        ([(0, None, 0.5, 0.5)], None),
        (LEARNING, 0),  # rounds are counted from 1
        (LEARNING, True),
    ],
)
def test_a_malformed_history_is_refused_before_anything_is_written(
    tmp_path: Path, history: list[Row], diverged_at: int | None
) -> None:
    with pytest.raises(ValueError):
        write_run_plots(tmp_path, history, title="bad", diverged_at=diverged_at)
    assert list(tmp_path.iterdir()) == []


# --- the cost of importing ------------------------------------------------------------------


def test_importing_alpha_plot_imports_no_matplotlib() -> None:
    code = "import alpha.app.plot, sys; print('matplotlib' in sys.modules, alpha.app.plot.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded, where = done.stdout.split()
    assert Path(where) == ROOT / "alpha" / "app" / "plot.py", "the module under test was imported"
    assert loaded == "False"
