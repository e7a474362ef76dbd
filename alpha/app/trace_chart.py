"""A sequence chart of a traced run (``alpha observe trace``, ``docs/trace.md``): one lifeline
per role, time going down, an arrow per frame of a window of rounds from its send to its
receive; a refused frame drawn in red to the refusal, marked with its class; the ABORT frames
of a failed run in orange, each role's failure marked where it struck.

matplotlib is imported only when a chart is drawn, on a ``Figure`` with its own Agg canvas (as
``alpha.app.plot`` draws): no global backend is chosen for anyone else in the process.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from alpha.errors import UsageError
from alpha.files import write_bytes_atomically
from alpha.records.trace import NONE_U32, Event, Phase, detail_names
from alpha.records.trace_table import Trace

__all__ = ["MAX_CHART_FRAMES", "default_window", "draw_sequence"]

MAX_CHART_FRAMES: Final = 2000
"""The most frames one chart draws (the first ones of its window): past a few thousand arrows a
chart is unreadable and slow to draw; a longer window belongs in Perfetto (the JSON)."""

_DPI: Final = 100
_HEIGHT: Final = 8.0  # inches
_WIDTH_PER_ROLE: Final = 1.2  # inches, between 6 and 24 in all
_LEGEND_WIDTH: Final = 2.2  # inches beside the lifelines
_COLORS: Final = {2: "tab:blue", 3: "tab:purple", 4: "tab:orange"}  # DATA, CHOICE, ABORT
_CONTROL: Final = "0.55"  # hellos, END, DONE, COMMIT
_REFUSED: Final = "tab:red"
_COMMITTED: Final = "tab:green"


@dataclass(frozen=True)
class _Row:
    """A record's fields the chart draws, one role's."""

    role: int
    event: int
    kind: int
    peer: int
    slot: int
    version: int
    start: int
    end: int
    names: tuple[str, ...]


def _last_round(traces: Mapping[int, Trace]) -> int:
    rounds = [
        int(t.records["round"][mask].max())
        for t in traces.values()
        if (mask := (t.records["phase"] == Phase.RUNNING) & (t.records["round"] != NONE_U32)).any()
    ]
    return max(rounds, default=0)


def _in_window(records: np.ndarray, window: tuple[int, int], last: int) -> np.ndarray:
    """Which records fall in the window of rounds: a running round in it; the establishing of
    edges (and work before the first round) with a window from round 0; the completion with
    one that reaches the last round."""
    low, high = window
    phase, round_ = records["phase"], records["round"]
    running = (phase == Phase.RUNNING) & (round_ != NONE_U32)
    inside = running & (round_ >= low) & (round_ <= high)
    if low == 0:
        inside |= (phase == Phase.ESTABLISHING) | ((phase == Phase.RUNNING) & ~running)
    if high >= last:
        inside |= phase == Phase.COMPLETING
    selected: np.ndarray = inside
    return selected


def _key(phase: int, round_: int, last: int) -> int:
    """Where a record falls among the rounds: -1 before the first (establishing, or work
    before the round loop), its round while running, ``last + 1`` in the completion."""
    if phase == Phase.COMPLETING:
        return last + 1
    if phase == Phase.ESTABLISHING or round_ == NONE_U32:
        return -1
    return round_


def default_window(traces: Mapping[int, Trace]) -> tuple[int, int]:
    """The rounds a chart shows unless told. A failed run: from the round before its first
    refusal or failure (by the clock) to the round of its last failure, so that the refused
    frame and the abort's spread are both in it. A committed run: its first two rounds."""
    last = _last_round(traces)
    struck: list[tuple[int, int]] = []  # (time, key) of every refusal and failure
    for trace in traces.values():
        records = trace.records
        for index in np.flatnonzero(np.isin(records["event"], (Event.REFUSED, Event.FAILED))):
            key = _key(int(records["phase"][index]), int(records["round"][index]), last)
            struck.append((int(records["start"][index]), key))
    if not struck:
        return 0, min(1, last)
    first = min(struck)[1]
    final = max(key for _, key in struck)
    return max(0, first - 1), min(max(final, 0), last)


def _rows(traces: Mapping[int, Trace], window: tuple[int, int], last: int) -> list[_Row]:
    rows = []
    for role, trace in sorted(traces.items()):
        found = trace.records[_in_window(trace.records, window, last)]
        for record in found:
            event = int(record["event"])
            rows.append(
                _Row(
                    role,
                    event,
                    int(record["kind"]),
                    int(record["peer"]),
                    int(record["slot"]),
                    int(record["version"]),
                    int(record["start"]),
                    int(record["end"]),
                    ()
                    if event in (Event.SEND, Event.RECEIVE) and record["kind"] != 4
                    else detail_names(bytes(record["detail"])),
                )
            )
    return rows


def draw_sequence(traces: Mapping[int, Trace], path: Path, window: tuple[int, int]) -> int:
    """Draw the sequence chart of ``traces`` for the rounds of ``window`` (from 0, both
    included) as a PNG at ``path``; return how many frames it drew (at most
    :data:`MAX_CHART_FRAMES`).

    Raises:
        UsageError: no trace holds a record of those rounds.
    """
    last = _last_round(traces)
    rows = _rows(traces, window, last)
    if not rows:
        raise UsageError(
            f"observe trace: no trace holds rounds {window[0]} to {window[1]} (they hold rounds "
            f"0 to {last}); choose others with --rounds A:B"
        )
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    roles = sorted(traces)
    column = {role: n for n, role in enumerate(roles)}
    origin = min(row.start for row in rows)

    def ms(ns: int) -> float:
        return (ns - origin) / 1e6

    width = min(24.0, max(6.0, _WIDTH_PER_ROLE * len(roles))) + _LEGEND_WIDTH
    figure = Figure(figsize=(width, _HEIGHT), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    bottom = max(ms(row.end) for row in rows)
    for role in roles:
        axes.plot([column[role]] * 2, [0, bottom], color="0.8", linewidth=1, zorder=0)
    sends: dict[tuple[int, int, int, int, int], _Row] = {}
    for row in rows:
        if row.event == Event.SEND:
            sends.setdefault((row.role, row.peer, row.kind, row.slot, row.version), row)
        elif row.event == Event.OPERATION:
            x = column[row.role]
            axes.plot([x, x], [ms(row.start), ms(row.end)], color="black", linewidth=4, alpha=0.3)
    drawn = 0
    received: set[tuple[int, int, int, int, int]] = set()
    for row in rows:
        if drawn >= MAX_CHART_FRAMES:
            break
        if row.event == Event.RECEIVE:
            key = (row.peer, row.role, row.kind, row.slot, row.version)
            sent = sends.get(key)
            if sent is None or row.peer not in column:
                continue
            received.add(key)
            color = _COLORS.get(row.kind, _CONTROL)
            _arrow(axes, column[row.peer], ms(sent.start), column[row.role], ms(row.end), color,
                   dashed=row.kind == 4)  # fmt: skip
            drawn += 1
        elif row.event == Event.REFUSED:
            key = (row.peer, row.role, row.kind, row.slot, row.version)
            sent = sends.get(key)
            x, y = column[row.role], ms(row.end)
            if sent is not None and row.peer in column:
                received.add(key)
                _arrow(axes, column[row.peer], ms(sent.start), x, y, _REFUSED, dashed=False)
                drawn += 1
            axes.plot([x], [y], marker="X", markersize=12, color=_REFUSED, zorder=3)
            label = row.names[0] if row.names else "refused"
            axes.annotate(f"refused: {label}", (x, y), xytext=(6, 0),
                          textcoords="offset points", color=_REFUSED, fontsize=8)  # fmt: skip
        elif row.event == Event.FAILED:
            x, y = column[row.role], ms(row.start)
            axes.plot([x], [y], marker="o", markersize=8, color=_REFUSED, zorder=3)
            label = row.names[0] if row.names else "failed"
            if len(row.names) > 1:
                label += f" ({row.names[1]})"
            axes.annotate(label, (x, y), xytext=(6, -10), textcoords="offset points",
                          color=_REFUSED, fontsize=7)  # fmt: skip
        elif row.event == Event.COMMITTED:
            axes.plot([column[row.role]], [ms(row.start)], marker="^", color=_COMMITTED)
    # The ABORTs no role received (its peer had gone): a stub from the sender.
    for key, sent in sends.items():
        if sent.kind == 4 and key not in received and sent.peer in column:
            x = column[sent.role]
            toward = 0.3 if column[sent.peer] > x else -0.3
            _arrow(axes, x, ms(sent.start), x + toward, ms(sent.end), _COLORS[4], dashed=True)
    axes.set_xticks(range(len(roles)), [f"role {role}" for role in roles])
    axes.xaxis.tick_top()
    axes.set_xlim(-0.6, len(roles) - 0.4)
    axes.set_ylim(bottom * 1.02 + 1e-3, 0)  # time goes down
    axes.set_ylabel("ms from the window's first record")
    shown = f"rounds {window[0]} to {window[1]}" if window[0] != window[1] else f"round {window[0]}"
    more = f" (the first {MAX_CHART_FRAMES} frames)" if drawn >= MAX_CHART_FRAMES else ""
    axes.set_title(f"{shown}: {drawn} frames{more}", fontsize=10)
    handles = [
        Line2D([], [], color=_COLORS[2], label="DATA"),
        Line2D([], [], color=_COLORS[3], label="CHOICE"),
        Line2D([], [], color=_CONTROL, label="HELLO, END, DONE, COMMIT"),
        Line2D([], [], color=_COLORS[4], linestyle="--", label="ABORT"),
        Line2D([], [], color=_REFUSED, marker="X", label="refused frame"),
        Line2D([], [], color=_REFUSED, marker="o", linestyle="", label="role failed"),
        Line2D([], [], color=_COMMITTED, marker="^", linestyle="", label="learned of the commit"),
    ]
    # Beside the lifelines, never over them: the last frames of a window are what it is for.
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    write_bytes_atomically(path, out.getvalue())
    return drawn


def _arrow(axes: object, x0: float, y0: float, x1: float, y1: float, color: str, *,
           dashed: bool) -> None:  # fmt: skip
    from matplotlib.axes import Axes

    assert isinstance(axes, Axes)
    axes.annotate(
        "",
        xy=(x1, y1),
        xytext=(x0, y0),
        arrowprops={
            "arrowstyle": "->",
            "color": color,
            "linestyle": "--" if dashed else "-",
            "linewidth": 0.8,
            "shrinkA": 0,
            "shrinkB": 0,
        },
    )
