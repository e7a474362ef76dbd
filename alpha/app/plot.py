"""A run's results as files beside it: ``loss.png``, its plots, and ``history.csv``, its data.

The plots are drawn with matplotlib, on the control side only (``alpha run``): a participant
never calls this module, and importing it imports no matplotlib, which is loaded inside
:func:`write_run_plots` and drawn through a ``Figure`` on its own Agg canvas, so no global
backend (pyplot's) is chosen or changed for anyone else in the process.

A history row is ``(round, loss, training accuracy, held-out accuracy)`` as the learner records
it (``alpha.learner.state``, ``alpha.compiler.replicate``): the round counted from 0, the
round's training loss, the share of the round's batch predicted right (0..1), and the share of
the held-out set predicted right after the round's step (0..1, or NaN without a held-out set).

A resumed run's history goes from round 1 through each resume (the rounds before it, as its
generation records them): each resume is marked on the plot with a labelled vertical line and
in the CSV's ``resumed`` column. A history that starts after round 1 (resumed from a generation
that records none) says on the plot that the rounds before it are not recorded.

A run whose loss stops being finite has diverged: that is a result to show, not an error. The
files are still written; the loss curve stops before the first non-finite loss, the round of
that loss is marked, and the CSV keeps every row as it was, ``inf`` and ``nan`` included.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, final

from alpha.checked import int_in
from alpha.files import write_bytes_atomically

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "HISTORY_HEADER",
    "LOSS_NAME",
    "RunPlots",
    "diverged_round",
    "history_csv",
    "resume_label",
    "unrecorded_note",
    "write_run_plots",
]

LOSS_NAME: Final = (
    "training loss (squared error to one-hot labels, summed over 10 classes, mean per sample)"
)
"""What the learner's loss is (``alpha.learner.model.contribute``): per sample, the squared
error of the 10 scores against the one-hot label, summed over the classes; per round, the mean
over the round's whole batch (every contributor's), at the parameters the round started from."""

HISTORY_HEADER: Final = "round,loss,train_accuracy,holdout_accuracy,resumed"
"""The first line of ``history.csv``; each further line is one round, counted from 1, and
``resumed`` is 1 on the first round a resume ran (the run started there from a generation),
else 0."""

PNG_NAME: Final = "loss.png"
CSV_NAME: Final = "history.csv"

LOG_SPAN: Final = 10.0
"""The loss axis is logarithmic when the largest plotted loss is more than this many times the
smallest: beyond one decade a linear axis flattens every late round against the floor."""

LABELLED_DECADES: Final = 3.0
"""A log loss axis spanning up to this many decades labels 1, 2 and 5 times each power of ten;
a wider one labels the powers of ten alone, so that the labels do not crowd."""

MARKERS_UP_TO: Final = 60
"""Rounds up to which each point also gets a marker: a short run's single points stay visible,
a long run's curve is not buried under them."""

FIGURE_INCHES: Final = (8.0, 6.0)
DPI: Final = 100
"""800 x 600 pixels: two readable panels on any screen, a PNG of some tens of kilobytes."""

_LOSS_COLOR: Final = "tab:blue"
_TRAIN_COLOR: Final = "tab:orange"
_HOLDOUT_COLOR: Final = "tab:green"
_DIVERGED_COLOR: Final = "tab:red"
_RESUMED_COLOR: Final = "tab:purple"

Row = tuple[int, float, float, float]


@final
@dataclass(frozen=True)
class RunPlots:
    """The two files :func:`write_run_plots` wrote."""

    png: Path
    csv: Path


def write_run_plots(
    folder: Path,
    history: Sequence[Row],
    *,
    title: str,
    loss_name: str = LOSS_NAME,
    diverged_at: int | None = None,
    resumes: Sequence[int] = (),
) -> RunPlots:
    """Write ``folder/history.csv`` and ``folder/loss.png`` for ``history``, one row a round.

    The CSV is :data:`HISTORY_HEADER` and one line per row: the round counted from 1, then the
    three values as ``repr`` writes them, so that ``float`` reads back the same value (``inf``,
    ``-inf``, ``nan`` included). The PNG has two panels over the rounds: the loss (named
    ``loss_name``; logarithmic when it spans more than :data:`LOG_SPAN`) and the training and
    held-out accuracy in percent. ``diverged_at``, the round counted from 1 whose loss was not
    finite (:func:`diverged_round`), is marked on both; so is each of ``resumes`` (the rounds
    done when a resume started, each below the last row's round), a labelled vertical line
    between its round and the next, and the CSV's ``resumed`` column is 1 on the row after it.
    A history whose first row is past round 1 says so on the plot (the rounds before it are
    not recorded). Each file is written through a
    temporary file and renamed into place: a reader sees the old file or the whole new one.
    The CSV is written first, so that a run's data survives a plot that cannot be drawn.

    Raises:
        ValueError: a row is not four fields, its round not an ``int`` from 0, or a value not
            a number; ``diverged_at`` is not an ``int`` from 1; or a resume is not an ``int``
            from 0. Nothing is written.
        OSError: a file cannot be written; the one that failed is left as it was.
    """
    rows = _checked(history)
    if diverged_at is not None and not int_in(diverged_at, 1):
        raise ValueError(f"diverged_at must be a round counted from 1, got {diverged_at!r}")
    marks = sorted(set(_resumes(resumes)))
    plots = RunPlots(png=folder / PNG_NAME, csv=folder / CSV_NAME)
    write_bytes_atomically(plots.csv, history_csv(rows, marks).encode("ascii"))
    write_bytes_atomically(plots.png, _render(rows, title, loss_name, diverged_at, marks))
    return plots


def _resumes(resumes: Sequence[int]) -> list[int]:
    for each in resumes:
        if not int_in(each, 0):
            raise ValueError(f"a resume is a round counted from 0, got {each!r}")
    return list(resumes)


def history_csv(history: Sequence[Row], resumes: Sequence[int] = ()) -> str:
    """The text of ``history.csv`` for ``history`` and ``resumes`` (see
    :func:`write_run_plots`). Pure."""
    lines = [HISTORY_HEADER]
    marked = set(resumes)
    for index, loss, train, held in history:
        resumed = 1 if index in marked else 0
        lines.append(f"{index + 1},{float(loss)!r},{float(train)!r},{float(held)!r},{resumed}")
    return "\n".join(lines) + "\n"


def diverged_round(history: Sequence[Row]) -> int | None:
    """The round, counted from 1, of the first row whose loss is not finite; None when every
    loss is. Pure."""
    for index, loss, _, _ in history:
        if not math.isfinite(loss):
            return index + 1
    return None


def _checked(history: Sequence[Row]) -> list[Row]:
    """``history`` as a list of rows of an ``int`` and three ``float`` each.

    Raises:
        ValueError: a row is not four fields, its round not an ``int`` from 0, or a value not a
            real number.
    """
    rows: list[Row] = []
    for position, row in enumerate(history):
        if len(row) != 4:
            raise ValueError(f"history row {position} has {len(row)} fields, not 4: {row!r}")
        index, *values = row
        if not int_in(index, 0):
            raise ValueError(f"history row {position}: round must be an int from 0: {index!r}")
        try:
            loss, train, held = (float(value) for value in values)
        except (TypeError, ValueError):
            raise ValueError(f"history row {position}: values must be numbers: {row!r}") from None
        rows.append((index, loss, train, held))
    return rows


def _loss_scale(losses: Sequence[float]) -> Literal["log", "linear"]:
    """The loss axis's scale for the plotted ``losses``: ``"log"`` when every finite loss is
    positive and the largest is more than :data:`LOG_SPAN` times the smallest; else
    ``"linear"`` (a log axis could not show a loss of 0 or less). Pure."""
    finite = [loss for loss in losses if math.isfinite(loss)]
    if not finite or min(finite) <= 0:
        return "linear"
    return "log" if max(finite) > LOG_SPAN * min(finite) else "linear"


def _finite_prefix(values: Sequence[float]) -> list[float]:
    """``values`` up to, not including, the first one that is not finite."""
    prefix: list[float] = []
    for value in values:
        if not math.isfinite(value):
            break
        prefix.append(value)
    return prefix


def _render(
    rows: Sequence[Row],
    title: str,
    loss_name: str,
    diverged_at: int | None,
    resumes: Sequence[int] = (),
) -> bytes:
    """The PNG of ``rows``: the loss panel above, the accuracy panel below, one round axis."""
    # Imported here: alpha.app.plot costs nothing to import, and a participant never loads these.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator, MultipleLocator, NullLocator, PercentFormatter

    figure = Figure(figsize=FIGURE_INCHES, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)  # the figure's own canvas: no backend chosen for the process
    loss_axes, accuracy_axes = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    figure.suptitle(title)
    rounds = [index + 1 for index, _, _, _ in rows]
    marker = "o" if len(rows) <= MARKERS_UP_TO else None

    losses = _finite_prefix([loss for _, loss, _, _ in rows])
    loss_axes.set_title(loss_name, fontsize="medium")
    if losses:
        loss_axes.plot(rounds[: len(losses)], losses, color=_LOSS_COLOR, marker=marker, ms=3)
        _loss_axis(loss_axes, losses)
    else:  # nothing to measure: no scale to show
        loss_axes.set_ylabel("loss")
        loss_axes.yaxis.set_major_locator(NullLocator())

    # Accuracies are finite whatever the loss does (shares of counts); NaN (no held-out set,
    # or a value not recorded) leaves a gap, and a curve of NaN only is left out.
    accuracy_axes.set_ylabel("accuracy")
    accuracy_axes.set_ylim(-2, 102)
    accuracy_axes.yaxis.set_major_locator(MultipleLocator(20))
    accuracy_axes.yaxis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    curves = ((2, "training (round's batch)", _TRAIN_COLOR), (3, "held-out", _HOLDOUT_COLOR))
    for column, label, color in curves:
        percents = [100 * row[column] if math.isfinite(row[column]) else math.nan for row in rows]
        if any(math.isfinite(value) for value in percents):
            accuracy_axes.plot(rounds, percents, color=color, marker=marker, ms=3, label=label)
    if accuracy_axes.lines:
        accuracy_axes.legend(loc="best")

    accuracy_axes.set_xlabel("round")
    note = unrecorded_note(rows)
    ends = [*rounds, *([] if diverged_at is None else [diverged_at])]
    if note is not None:
        ends.append(1)  # the axis shows the rounds not recorded, and says so
    if ends:
        # Half a round beyond the ends: the first and last points clear of the frame, and no
        # tick at round 0, which is not a round.
        accuracy_axes.set_xlim(min(ends) - 0.5, max(ends) + 0.5)
        accuracy_axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    else:
        accuracy_axes.xaxis.set_major_locator(NullLocator())
        for axes in (loss_axes, accuracy_axes):
            _note(axes, "no rounds")
    for axes in (loss_axes, accuracy_axes):
        axes.grid(True, color="0.9")
    if note is not None:
        _mark_unrecorded(loss_axes, accuracy_axes, rounds[0], note)
    if diverged_at is not None:
        _mark_divergence(loss_axes, accuracy_axes, diverged_at)
    if resumes:
        _mark_resumes(loss_axes, accuracy_axes, resumes)

    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _loss_axis(axes: Axes, losses: Sequence[float]) -> None:
    """The loss axis's scale (:func:`_loss_scale`), name and labelled ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    scale = _loss_scale(losses)
    axes.set_yscale(scale)
    if scale == "linear":
        axes.set_ylabel("loss")
        return
    axes.set_ylabel("loss (log scale)")
    # Over a few decades, label 1, 2 and 5 of each (0.05, 0.1, 0.2 ...) in plain numbers; over
    # more, matplotlib's own ticks: the powers of ten, written as such.
    if math.log10(max(losses) / min(losses)) <= LABELLED_DECADES:
        axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.yaxis.set_minor_formatter(NullFormatter())


def _note(axes: Axes, text: str) -> None:
    axes.text(0.5, 0.5, text, transform=axes.transAxes, ha="center", va="center", color="0.4")


def _mark_divergence(loss_axes: Axes, accuracy_axes: Axes, diverged_at: int) -> None:
    """A vertical line at round ``diverged_at`` on both panels, named in the loss panel's
    legend, which matplotlib places where it covers the fewest points."""
    for axes in (loss_axes, accuracy_axes):
        axes.axvline(diverged_at, color=_DIVERGED_COLOR, linestyle="--", linewidth=1.2)
    loss_axes.legend(
        handles=loss_axes.lines[-1:],
        labels=[f"loss not finite at round {diverged_at}"],
        loc="best",
        labelcolor=_DIVERGED_COLOR,
    )


def unrecorded_note(history: Sequence[Row]) -> str | None:
    """What the plot says of a history that starts after round 1 (a run resumed from a
    generation that records no history); None when it starts at round 1 or is empty. Pure."""
    if not history or history[0][0] == 0:
        return None
    return f"history before round {history[0][0] + 1} is not recorded"


def resume_label(at: int) -> str:
    """The label of the line that marks a resume at round ``at`` (rounds done). Pure."""
    return f"resumed at round {at}"


def _mark_unrecorded(loss_axes: Axes, accuracy_axes: Axes, first: int, note: str) -> None:
    """Shade rounds ``1..first-1``, whose history the run does not have, and say so."""
    for axes in (loss_axes, accuracy_axes):
        axes.axvspan(0.5, first - 0.5, color="0.93", zorder=0)
    loss_axes.text(
        0.01,
        0.5,
        note,
        transform=loss_axes.transAxes,
        ha="left",
        va="center",
        color="0.35",
        fontsize="small",
    )


def _mark_resumes(loss_axes: Axes, accuracy_axes: Axes, resumes: Sequence[int]) -> None:
    """A dotted vertical line between round R and R + 1 for each resume at round R, labelled
    at the top of the loss panel (:func:`resume_label`)."""
    from matplotlib.transforms import blended_transform_factory

    for at in resumes:
        for axes in (loss_axes, accuracy_axes):
            axes.axvline(at + 0.5, color=_RESUMED_COLOR, linestyle=":", linewidth=1.4)
        place = blended_transform_factory(loss_axes.transData, loss_axes.transAxes)
        loss_axes.text(
            at + 0.5,
            0.97,
            f" {resume_label(at)}",
            transform=place,
            rotation=90,
            ha="left",
            va="top",
            color=_RESUMED_COLOR,
            fontsize="small",
        )
