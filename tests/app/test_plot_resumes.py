"""A resumed run's results (alpha.app.plot): ``history.csv``'s ``resumed`` column marks the
first round of each resume, ``loss.png`` draws a labelled line at each, and a history that
starts after round 1 says on the plot that the rounds before it are not recorded."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from alpha.app.plot import (
    HISTORY_HEADER,
    history_csv,
    resume_label,
    unrecorded_note,
    write_run_plots,
)

ROWS = [(i, 1.0 / (1 + i), 0.1 + i / 100, math.nan) for i in range(12)]


def test_the_resumed_column_is_1_on_the_first_round_of_each_resume() -> None:
    text = history_csv(ROWS, [4, 9])
    header, *lines = text.splitlines()
    assert header == HISTORY_HEADER == "round,loss,train_accuracy,holdout_accuracy,resumed"
    assert [line.rsplit(",", 1)[1] for line in lines] == [
        "1" if index in (4, 9) else "0" for index in range(12)
    ]
    assert lines[4] == f"5,{1 / 5!r},{0.1 + 4 / 100!r},nan,1"
    assert history_csv(ROWS) == history_csv(ROWS, [])


def test_a_history_that_starts_after_round_1_is_said_not_recorded() -> None:
    assert unrecorded_note(ROWS) is None
    assert unrecorded_note([]) is None
    assert unrecorded_note(ROWS[10:]) == "history before round 11 is not recorded"
    assert resume_label(10) == "resumed at round 10"


def test_the_plot_draws_each_resume_and_the_rounds_not_recorded(tmp_path: Path) -> None:
    plain = write_run_plots(tmp_path / "a", ROWS, title="t").png.read_bytes()
    resumed = write_run_plots(tmp_path / "b", ROWS, title="t", resumes=[4]).png.read_bytes()
    later = write_run_plots(tmp_path / "c", ROWS[4:], title="t", resumes=[4]).png.read_bytes()
    assert len({plain, resumed, later}) == 3
    assert (tmp_path / "c" / "history.csv").read_text().splitlines()[1].endswith(",1")


def test_the_plot_says_what_it_marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The texts drawn on the figure: each resume's label and the note on the rounds missing.
    from matplotlib.axes import Axes

    drawn: list[str] = []
    original = Axes.text

    def text(self: Axes, x: float, y: float, s: str, *args: object, **kwargs: object) -> object:
        drawn.append(s.strip())
        return original(self, x, y, s, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "text", text)
    write_run_plots(tmp_path, ROWS[6:], title="t", resumes=[6, 9])
    assert drawn == [
        "history before round 7 is not recorded",
        "resumed at round 6",
        "resumed at round 9",
    ]


@pytest.mark.parametrize("resumes", [[-1], [1.5], [True]])
def test_a_resume_that_is_not_a_round_is_refused_before_anything_is_written(
    tmp_path: Path, resumes: list[object]
) -> None:
    with pytest.raises(ValueError, match="a resume is a round"):
        write_run_plots(tmp_path, ROWS, title="bad", resumes=resumes)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
