"""What the control side shows while a run goes and when it ends: a progress display of rounds
and a summary table. Only the control side imports this module (and rich with it);
participants write progress records (``alpha.records.progress``) and never import it.

On a terminal the display is a rich progress bar sized to the terminal and redrawn in place,
with rounds done, elapsed time, time left, rate and the latest loss and held-out accuracy; on a
narrow terminal the parts that do not fit are left out, least needed first. Off a terminal (a
log, a pipe, CI) it is plain lines, at most one a second and always the last round, each with
the elapsed time and rate, so a long run's log stays short and greppable.

:func:`follow` feeds a display from role 0's progress file as it grows, reading only what was
appended (``docs/progress.md``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO, final

import trio
from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID
from rich.table import Column, Table
from rich.text import Text

from alpha.errors import ProgressRecordInvalid
from alpha.records.progress import CheckpointRecord, RecordReader, RoundRecord

__all__ = [
    "LINE_SECONDS",
    "PHASE_REDRAW_SECONDS",
    "POLL_SECONDS",
    "PhaseStatus",
    "RoundProgress",
    "follow",
    "summary_table",
]

LINE_SECONDS: Final = 1.0
"""Off a terminal, at most one progress line this often (and always the last round): a line a
round would make a 200,000-round run's log 200,000 lines long."""

POLL_SECONDS: Final = 0.2
"""How often :func:`follow` reads the progress file: five times a second looks live, and a
read costs only the bytes appended since the last."""

BAR_MIN_WIDTH: Final = 10
"""The narrowest bar worth drawing; below it the terminal is too narrow for a bar at all."""

PHASE_REDRAW_SECONDS: Final = 0.1
"""On a terminal, the status line of a phase is redrawn at most this often (and always at a
phase's last step): a compile of 4,096 artifacts calls back 4,096 times."""

_TICK_SECONDS: Final = 0.25  # a waiting phase's clock on its status line

_REFRESH_PER_SECOND: Final = 4  # a live bar's redraws: its clocks tick between rounds too

_SUMMARY_NAME_WIDTH: Final = 19  # the plain summary's name column: "equal bit for bit   yes"


def _duration(seconds: float | None) -> str:
    """``H:MM:SS``, as rich writes times; ``-:--:--`` when unknown."""
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "-:--:--"
    whole = max(0, int(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _loss(loss: float) -> str:
    return f"{loss:.4g}"  # inf and nan as such, never a 30-digit number


def _accuracy(accuracy: float) -> str:
    return f"{100 * accuracy:.1f}%"


def _rate(rate: float | None) -> str:
    return f"{'-' if rate is None else format(rate, '.3g')} rounds/s"


class _Part(ProgressColumn):
    """One part of a live bar's line, as text made from the task."""

    def __init__(self, text: Callable[[Task], str]) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self.text = text

    def render(self, task: Task) -> Text:
        return Text(self.text(task))


class _FittedProgress(Progress):
    """rich's progress display of one task on one line that fits the console's width: the
    count always, then the parts in order of need (``priority``) while they fit, and the bar
    widens to take what is left.

    Each text part is given the widest it has been, so that the line does not jitter as
    numbers grow and shrink, and a part left out for want of room stays out until the
    terminal widens."""

    def __init__(
        self,
        parts: dict[str, ProgressColumn],
        priority: Sequence[str],
        console: Console,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(
            *parts.values(),
            console=console,
            get_time=clock,
            refresh_per_second=_REFRESH_PER_SECOND,
            redirect_stdout=False,  # a run's own lines are written above the bar by note()
            redirect_stderr=False,
        )
        self.parts = parts
        self.priority = priority
        self.widest = dict.fromkeys(parts, 0)
        self.widest["bar"] = BAR_MIN_WIDTH

    def get_renderables(self) -> Iterable[RenderableType]:
        for task in self.tasks:  # none while rich builds the display
            width = self.console.width
            chosen: dict[str, RenderableType] = {}
            used = -1  # no space before the first part
            for name in self.priority:
                cell = self.parts[name](task)
                if isinstance(cell, Text):
                    self.widest[name] = max(self.widest[name], cell.cell_len)
                if name != "count" and used + 1 + self.widest[name] > width:
                    break
                chosen[name] = cell
                used += 1 + self.widest[name]
            names = [name for name in self.parts if name in chosen]  # in display order
            grid = Table.grid(
                *(
                    Column()  # the bar: rich shrinks a column that may wrap to fit the line
                    if name == "bar"
                    else Column(no_wrap=True, min_width=self.widest[name])
                    for name in names
                ),
                padding=(0, 1),
                expand=True,
            )
            grid.add_row(*(chosen[name] for name in names))
            yield grid


@final
class RoundProgress:
    """A display of rounds done out of ``total``, with the latest loss and held-out accuracy.

    ``start`` is the rounds already done when it starts (a resumed run's starting round): the
    rate and time left count only the rounds done since. ``clock`` is the monotonic clock it
    reads (a seam for tests). ``console``, when given, is the rich console to draw on instead
    of one on ``out``. The display is live (a bar redrawn in place) when ``out``, or the
    console given, is a terminal that can move its cursor (not ``TERM=dumb``).

    :meth:`close` ends a live bar so what follows starts on a line of its own; an update after
    it draws the bar again below, its elapsed time going on.
    """

    def __init__(
        self,
        out: TextIO,
        total: int,
        label: str = "",
        *,
        start: int = 0,
        clock: Callable[[], float] = time.monotonic,
        console: Console | None = None,
    ) -> None:
        self.out = out
        self.total = total
        self.label = label
        self.start = start
        self.clock = clock
        self.started = clock()
        if console is None and out.isatty():
            console = Console(file=out, force_terminal=True)
        self.live = console is not None and console.is_terminal and not console.is_dumb_terminal
        self.last_line = -float("inf")
        self._console = console
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if self.live:
            self._bar, self._task = self._open()  # rich's clocks start now, as ``started``
        self._drawing = False  # the live bar is on the terminal, redrawn in place

    def update(self, done: int, loss: float, accuracy: float) -> None:
        """Show that ``done`` rounds of ``total`` are done, the last with ``loss`` and held-out
        ``accuracy`` (a fraction)."""
        if self.live:
            self._draw(done, loss, accuracy)
            return
        now = self.clock()
        if done < self.total and now - self.last_line < LINE_SECONDS:
            return
        self.last_line = now
        elapsed = now - self.started
        rate = (done - self.start) / elapsed if elapsed > 0 else None
        left = (self.total - done) / rate if rate else None
        self.out.write(
            f"{self.label}round {done}/{self.total} loss {_loss(loss)} "
            f"held-out accuracy {_accuracy(accuracy)} elapsed {_duration(elapsed)} "
            f"rate {_rate(rate)} eta {_duration(left)}\n"
        )
        self.out.flush()

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own: above a live bar, which stays below it."""
        if self._bar is not None and self._drawing:
            self._bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            self.out.write(f"{text}\n")
            self.out.flush()

    def close(self) -> None:
        """End a bar drawn in place, leaving it as last drawn."""
        if self._bar is not None and self._drawing:
            self._bar.stop()  # draws the bar a last time
            self._drawing = False

    def _draw(self, done: int, loss: float, accuracy: float) -> None:
        assert self._bar is not None and self._task is not None
        # rich redraws the bar a few times a second from its own thread, not at each update:
        # the replicated learner updates every round, thousands of times a second.
        self._bar.update(self._task, completed=done, loss=_loss(loss), accuracy=_accuracy(accuracy))
        if not self._drawing:
            self._bar.start()
            self._drawing = True

    def _open(self) -> tuple[Progress, TaskID]:
        def count(task: Task) -> str:
            return f"{task.completed:.0f}/{task.total:.0f}"

        parts: dict[str, ProgressColumn] = {
            "label": _Part(lambda task: f"{self.label}round"),
            "count": _Part(count),
            "bar": BarColumn(bar_width=None),
            "elapsed": _Part(lambda task: _duration(task.finished_time or task.elapsed)),
            "eta": _Part(
                lambda task: f"eta {_duration(0 if task.finished else task.time_remaining)}"
            ),
            "rate": _Part(lambda task: _rate(task.finished_speed or task.speed)),
            "loss": _Part(lambda task: f"loss {task.fields['loss']}"),
            "accuracy": _Part(lambda task: f"held-out {task.fields['accuracy']}"),
        }
        # What a narrow terminal leaves out first is last; a label says which bar this is.
        needed = ("count", "bar", "elapsed", "eta", "loss", "accuracy", "rate")
        priority = (*needed[:2], "label", *needed[2:]) if self.label else (*needed, "label")
        assert self._console is not None
        bar = _FittedProgress(parts, priority, self._console, self.clock)
        task = bar.add_task("", total=self.total, completed=self.start, loss="-", accuracy="-")
        return bar, task


@final
class PhaseStatus:
    """What a run shows before its first round: one status line through the phases that come
    before the rounds bar (``docs/progress.md``):

    - ``compiling K/N artifacts`` (:meth:`compiling`, compile's progress callback), or for a
      folder compiled before, ``checking N artifacts`` (:meth:`checking`);
    - ``starting: K/N roles up`` (:meth:`starting`, fed by the launcher's announcements: a role
      is up once it announced its listeners' ports);
    - ``N/N roles up, edges up: waiting for round 1`` (or the ``waiting`` text given) once
      every role announced, until :meth:`close` hands the line to the rounds bar.

    On a terminal that can move its cursor it is one line redrawn in place (at most every
    :data:`PHASE_REDRAW_SECONDS`), which :meth:`close` clears. Off a terminal it is one line a
    phase as the phase ends, never a redraw: ``run: compiled 8 artifacts in 1.2 s``, ``run: 8
    roles up in 0.9 s``. ``label`` names the command (``run``, ``launch``); ``clock`` is the
    monotonic clock it reads (a seam for tests); ``console``, when given, is the rich console
    to draw on instead of one on ``out``.
    """

    def __init__(
        self,
        out: TextIO,
        label: str,
        *,
        waiting: str = "waiting for round 1",
        clock: Callable[[], float] = time.monotonic,
        console: Console | None = None,
    ) -> None:
        self.out = out
        self.label = label
        self.waiting = waiting
        self.clock = clock
        if console is None and out.isatty():
            console = Console(file=out, force_terminal=True)
        self.live = console is not None and console.is_terminal and not console.is_dumb_terminal
        self._console = console
        self._phase = ""
        self._phase_started = clock()
        self._drawn_at = -float("inf")
        self._shown = ""  # the text on the terminal's status line, "" when none
        self._last = ""  # the phase's text, without its time
        self._up = self._total = 0  # roles up, of how many (the starting phase)

    def compiling(self, done: int, total: int) -> None:
        """``done`` of ``total`` artifacts are written (compile's progress callback)."""
        self._enter("compiling")
        if done >= total:
            self._ended(f"compiled {total} artifact{_plural(total)}")
        self._show(f"compiling {done}/{total} artifacts", final=done >= total)

    def checking(self, done: int, total: int) -> None:
        """``done`` of ``total`` artifacts are checked before a launch of a compiled folder
        (0 as the check starts, ``total`` once every one passed)."""
        self._enter("checking")
        if done >= total:
            self._ended(f"checked {total} artifact{_plural(total)}")
        self._show(f"checking {total} artifacts", final=done >= total)

    def starting(self, up: int, total: int) -> None:
        """``up`` of ``total`` roles are up (announced their ports); 0 when the launch starts."""
        self._enter("starting")
        self._up, self._total = up, total
        if up >= total:
            self._ended(f"{total} role{_plural(total)} up")
            self._show(f"{up}/{total} roles up, edges up: {self.waiting}", final=True)
            return
        self._show(f"starting: {up}/{total} roles up", final=False)

    def started(self, text: str) -> None:
        """Roles that announce nothing were started (by ``srun``, docs/slurm.md): the line
        says ``text`` until :meth:`close` hands it to the rounds bar; off a terminal, one
        line now."""
        self._enter("starting")
        if not self.live:
            self.out.write(f"{self.label}: {text}\n")
            self.out.flush()
        self._show(text, final=True)

    async def announced(self, role: int, ports: tuple[int, ...]) -> None:
        """The launcher's ``on_announce``: one more role is up, of the total the last
        :meth:`starting` named."""
        self._up += 1
        self.starting(self._up, self._total)

    def tick(self) -> None:
        """Redraw the status line with its phase's time going on (a waiting phase calls back
        nothing else); off a terminal, or before any phase, nothing."""
        if self._last:
            self._show(self._last, final=False)

    async def ticking(self, interval: float = _TICK_SECONDS) -> None:
        """:meth:`tick` every ``interval`` seconds, until cancelled."""
        while True:
            await trio.sleep(interval)
            self.tick()

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own; on a terminal the status line stays below it."""
        shown = self._shown
        self._clear()
        self.out.write(f"{text}\n")
        self.out.flush()
        if shown:
            self._draw(shown)

    def close(self) -> None:
        """Clear the status line from a terminal (the rounds bar or a result takes its place);
        off a terminal there is nothing to clear."""
        self._clear()

    def _enter(self, phase: str) -> None:
        if phase != self._phase:
            self._phase = phase
            self._phase_started = self.clock()
            self._drawn_at = -float("inf")

    def _ended(self, what: str) -> None:
        if not self.live:
            seconds = self.clock() - self._phase_started
            self.out.write(f"{self.label}: {what} in {seconds:.1f} s\n")
            self.out.flush()

    def _show(self, text: str, *, final: bool) -> None:
        if not self.live:
            return
        now = self.clock()
        if not final and now - self._drawn_at < PHASE_REDRAW_SECONDS:
            return
        self._drawn_at = now
        self._last = text
        seconds = now - self._phase_started
        self._draw(f"{self.label}: {text} ({seconds:.1f} s)")

    def _draw(self, text: str) -> None:
        assert self._console is not None
        width = max(self._console.width - 1, 1)  # the cursor never wraps to a line below
        self._shown = text
        self.out.write(f"\r\x1b[2K{text[:width]}")
        self.out.flush()

    def _clear(self) -> None:
        self._last = ""
        if self._shown:
            self._shown = ""
            self.out.write("\r\x1b[2K")
            self.out.flush()


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


async def follow(
    path: Path,
    progress: RoundProgress,
    *,
    interval: float = POLL_SECONDS,
    history: list[RoundRecord] | None = None,
    on_checkpoint: Callable[[CheckpointRecord], None] | None = None,
    first: Callable[[], None] | None = None,
) -> None:
    """Feed ``progress`` from the progress file at ``path`` every ``interval`` seconds, until
    cancelled; append every round's record read to ``history`` when given, so the caller keeps
    the rounds seen even when the run fails, and pass each checkpoint record to
    ``on_checkpoint`` (a generation published while the run goes on). ``first`` is called
    once, before the first round is shown (a :class:`PhaseStatus` gives the rounds bar its line).

    Each read costs only the bytes appended since the last (:class:`RecordReader`); nothing is
    shown while the file does not exist. When cancelled it reads once more, so the rounds
    written just before the run ended are shown and kept. A line that is not a record stops the
    following (the run is not stopped for it): the display says so once.
    """
    reader = RecordReader(path)
    refused = False

    def take() -> None:
        nonlocal refused, first
        try:
            records = reader.read_new()
        except ProgressRecordInvalid as error:
            refused = True
            progress.note(f"progress: {error}; progress is no longer shown")
            return
        if on_checkpoint is not None:
            for record in records:
                if isinstance(record, CheckpointRecord):
                    on_checkpoint(record)
        rounds = [record for record in records if isinstance(record, RoundRecord)]
        if history is not None:
            history.extend(rounds)
        if rounds:
            if first is not None:
                first()
                first = None
            last = rounds[-1]
            progress.update(last.round, last.loss, last.holdout_accuracy)

    try:
        while True:
            take()
            if refused:
                return
            await trio.sleep(interval)
    finally:
        try:
            if not refused:
                take()  # what was written since the last read, before the run ended
        finally:
            reader.close()


def summary_table(rows: Sequence[tuple[str, str]], out: TextIO) -> None:
    """Write ``rows`` (name, value) as a two-column table: a rich table on a terminal, and off
    a terminal one plain line a row, ``f"{name:<19} {value}"`` (``equal bit for bit   yes``),
    which scripts and tests read."""
    if not out.isatty():
        for name, value in rows:
            out.write(f"{name:<{_SUMMARY_NAME_WIDTH}} {value}\n")
        out.flush()
        return
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")  # a digest folds whole onto the next line
    for name, value in rows:
        table.add_row(name, value)
    Console(file=out, force_terminal=True).print(table)
