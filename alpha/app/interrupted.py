"""One interrupt path for every command: SIGINT, SIGTERM and SIGHUP become one line on stderr
and the exit code 128 + the signal (``docs/cli.md``, "Interrupts"; ``docs/exit-codes.md``).

Python turns SIGINT into ``KeyboardInterrupt``, and trio delivers it at a safe point; SIGTERM
and SIGHUP would kill the process where it stands, with no cleanup. :func:`signals_as_interrupts`
(``cli.main`` holds it for the whole command) gives those two a handler that goes down the
same path as SIGINT, through whatever SIGINT handler is installed now (trio's, inside
``trio.run``), and remembers the number, so the one line names the signal that came. A signal
the command's parent made it ignore (``nohup``) stays ignored.

A launch catches the three signals itself (``alpha.launch.launcher``), stops and reaps every
participant, and says which one came; an app module turns that into :class:`Interrupted`.
Whatever form the interrupt takes, a ``KeyboardInterrupt``, an :class:`Interrupted`, or either
inside trio's ``BaseExceptionGroup``, :func:`signal_of` finds its signal.

The line of ``alpha run``, with where the run stands and the command that goes on, is
:func:`run_line`: it reads what the checkpoint folder holds (never what the run believes it
published) and names a ``--resume`` only when that generation opens and verifies.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Final, TypeVar

from alpha.errors import CheckpointCorrupt
from alpha.exitcodes import signal_exit_code

if TYPE_CHECKING:
    from alpha.checkpoint.store import Generation

__all__ = [
    "INTERRUPTS",
    "Interrupted",
    "RunTrack",
    "found_in",
    "interrupt_line",
    "interrupted_by",
    "run_line",
    "signal_name",
    "signal_of",
    "signals_as_interrupts",
]

INTERRUPTS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals every command turns into one line and 128 + the signal: Ctrl-C, ``kill``, and
the terminal going away."""

_received: list[int] = []  # the signals the handlers saw, first first (one command a process)


class Interrupted(KeyboardInterrupt):
    """A command stopped by ``signal`` (a number, :data:`INTERRUPTS`), with what it did about
    it (``detail``: what was stopped, removed or kept), for its one line. A
    ``KeyboardInterrupt``, so that every ``except KeyboardInterrupt`` (a compile's clean-up, a
    participant's) treats it as Ctrl-C."""

    def __init__(self, number: int, detail: str = "", records: Sequence[object] = ()) -> None:
        super().__init__(number, detail)
        self.signal = number
        self.detail = detail
        self.records = list(records)  # what the interrupted part recorded (a launch: its rounds)

    @property
    def exit_code(self) -> int:
        """128 + the signal, what shells expect (130: Ctrl-C)."""
        return signal_exit_code(self.signal)


def signal_name(number: int) -> str:
    """``SIGINT`` for 2, ...; a number without a name as ``signal N``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _on_signal(number: int, frame: FrameType | None) -> None:
    """SIGTERM or SIGHUP: remembered, then handled as SIGINT is now handled."""
    _received.append(number)
    current = signal.getsignal(signal.SIGINT)
    if callable(current) and current is not signal.default_int_handler:
        # trio's handler inside trio.run: it raises at a safe point (or defers to one).
        current(signal.SIGINT, frame)
        return
    raise Interrupted(number)


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While held, SIGTERM and SIGHUP take the path of SIGINT, their number kept (unless this
    process was started with them ignored); on exit the handlers are put back as they were."""
    _received.clear()
    saved: dict[int, object] = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is signal.SIG_DFL:
            saved[number] = signal.signal(number, _on_signal)
    try:
        yield
    finally:
        for put_back, handler in saved.items():
            signal.signal(put_back, handler)  # type: ignore[arg-type]


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


_E = TypeVar("_E", bound=BaseException)


def found_in(error: BaseException, kind: type[_E]) -> _E | None:
    """``error`` itself when it is a ``kind``, else the first ``kind`` inside it when it is
    a ``BaseExceptionGroup`` (what trio raises from a nursery); None when there is none."""
    for leaf in _leaves(error):
        if isinstance(leaf, kind):
            return leaf
    return None


def signal_of(error: BaseException) -> int | None:
    """The signal that ``error`` stands for: an :class:`Interrupted`'s own, a plain
    ``KeyboardInterrupt``'s (SIGTERM or SIGHUP when one of them came first, else SIGINT), either
    of them anywhere inside a ``BaseExceptionGroup``; None when ``error`` is no interrupt."""
    for leaf in _leaves(error):
        if isinstance(leaf, Interrupted):
            return leaf.signal
        if isinstance(leaf, KeyboardInterrupt):
            return _received[0] if _received else signal.SIGINT
    return None


def interrupted_by(error: BaseException) -> Interrupted | None:
    """``error`` as an :class:`Interrupted` (itself, or the first one inside a group), a plain
    ``KeyboardInterrupt`` given its signal; None when ``error`` is no interrupt."""
    number = signal_of(error)
    if number is None:
        return None
    for leaf in _leaves(error):
        if isinstance(leaf, Interrupted):
            return leaf
    return Interrupted(number)


def interrupt_line(command: str, number: int, detail: str = "") -> str:
    """The one line a command prints when a signal stopped it:
    ``compile: interrupted (SIGTERM); removed the 38 file(s) this build wrote ...``."""
    tail = f"; {detail}" if detail else ""
    return f"{command}: interrupted ({signal_name(number)}){tail}"


@dataclass
class RunTrack:
    """Where ``alpha run`` stands, kept as it goes, for its line when a signal stops it: the
    plan's file, rounds and first round, the rounds recorded (``history``, shared with the
    run, rows as ``history.csv`` has them), the checkpoint folder and the generation it
    started from, the segment being run (its last round and nonce), and the final digest
    once every round committed (the replicated learner runs then); ``stop`` ends the live
    display. ``directory`` is the run folder, which the go-on command names with ``-o``, and
    ``options`` the overrides it repeats."""

    plan_source: str
    rounds: int
    first: int = 0
    history: list[tuple[int, float, float, float]] = field(default_factory=list)
    resumes: list[int] = field(default_factory=list)  # the rounds it was resumed at
    folder: Path | None = None
    resume: Path | None = None
    directory: Path | None = None
    options: tuple[str, ...] = ()  # the run's overrides (--rounds 5, --set k=v), as typed
    segment: tuple[int, int, str] | None = None  # (first, end, nonce)
    committed: str = ""
    stop: Callable[[], None] = lambda: None  # ends the live display, where one is drawn

    @property
    def done(self) -> int:
        """The last round recorded, counted from 1 (the first round when none was)."""
        return self.history[-1][0] + 1 if self.history else self.first


def _verified(path: Path) -> Generation | None:
    # Imported here: cli.main holds this module for every command, `alpha --help` included.
    from alpha.checkpoint.store import open_generation

    try:
        generation = open_generation(path)
        generation.verify()
    except CheckpointCorrupt:
        return None
    return generation


def run_line(track: RunTrack, number: int) -> str:
    """``alpha run``'s one line for a signal ``number`` that stopped it, read from what the
    checkpoint folder holds: ``interrupted (SIGINT) at round 4/6; nothing committed after
    checkpoint gen-... (round 4); go on with: alpha run PLAN --resume FOLDER``. The go-on
    command is given only when the generation it names opens and verifies; otherwise the line
    says to run it again from the start."""
    name = signal_name(number)
    if track.committed:
        return (
            f"interrupted ({name}) while the replicated learner ran: the run committed its "
            f"{track.rounds} rounds (final parameters {track.committed}) but was not compared; "
            f"alpha replicate {shlex.quote(track.plan_source)} prints the replicated digest"
        )
    latest = None if track.folder is None else _verified(track.folder)
    if latest is not None and latest.round >= track.rounds:
        # Its last generation is the run's commit point: nothing is left to go on with.
        return (
            f"interrupted ({name}) after the run committed its {track.rounds} rounds "
            f"(checkpoint {latest.path.name}); it was not compared with the replicated learner: "
            f"alpha replicate {shlex.quote(track.plan_source)} prints the replicated digest"
        )
    go_on: Path | None = track.folder if latest is not None else None
    if go_on is None and track.resume is not None and _verified(track.resume) is not None:
        go_on = track.resume  # nothing new published: go on from where this run started
    at = max(track.done, 0 if latest is None else latest.round)
    head = f"interrupted ({name}) at round {at}/{track.rounds}"
    if latest is not None:
        said = f"nothing committed after checkpoint {latest.path.name} (round {latest.round})"
    elif go_on is not None:
        said = f"nothing committed; the run started from {go_on}"
    else:
        said = "nothing committed"
    if go_on is None:
        return f"{head}; {said}; no checkpoint to go on from: run it again from the start"
    words = ["alpha", "run", track.plan_source, "--resume", str(go_on)]
    words += track.options
    if track.directory is not None:
        words += ["-o", str(track.directory)]
    return f"{head}; {said}; go on with: {shlex.join(words)}"
