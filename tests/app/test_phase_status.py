"""The status from the first second (alpha/app/display.py PhaseStatus): before the rounds bar a
run shows one status line through its phases (compiling K/N artifacts, starting K/N roles up,
edges up), redrawn in place on a terminal and cleared for the bar; off a terminal one line a
phase as it ends, never a redraw."""

from __future__ import annotations

import io
from pathlib import Path

import trio

from alpha.app.display import PHASE_REDRAW_SECONDS, PhaseStatus, RoundProgress, follow
from alpha.records.progress import RecordWriter, RoundRecord, progress_path

CLEAR = "\r\x1b[2K"


class Terminal(io.StringIO):
    """Text written to a terminal, as far as ``isatty`` tells."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _phases(status: PhaseStatus, clock: Clock, artifacts: int, roles: int) -> None:
    for done in range(artifacts + 1):
        status.compiling(done, artifacts)
        clock.now += 0.2
    status.starting(0, roles)
    for _ in range(roles):
        clock.now += 0.3
        trio.run(status.announced, 0, ())


def test_off_a_terminal_each_phase_is_one_line_as_it_ends() -> None:
    out, clock = io.StringIO(), Clock()
    status = PhaseStatus(out, "run", clock=clock)
    assert not status.live
    _phases(status, clock, artifacts=8, roles=8)
    status.tick()
    status.close()
    assert out.getvalue().splitlines() == [
        "run: compiled 8 artifacts in 1.6 s",
        "run: 8 roles up in 2.4 s",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_on_a_terminal_one_line_goes_through_the_phases_and_is_cleared_for_the_bar() -> None:
    out, clock = Terminal(), Clock()
    status = PhaseStatus(out, "launch", waiting="waiting for round 1", clock=clock)
    assert status.live
    _phases(status, clock, artifacts=2, roles=3)
    text = out.getvalue()
    assert "\n" not in text  # redrawn in place, never a line of its own
    drawn = [part for part in text.split(CLEAR) if part]
    assert drawn == [
        "launch: compiling 0/2 artifacts (0.0 s)",
        "launch: compiling 1/2 artifacts (0.2 s)",
        "launch: compiling 2/2 artifacts (0.4 s)",
        "launch: starting: 0/3 roles up (0.0 s)",
        "launch: starting: 1/3 roles up (0.3 s)",
        "launch: starting: 2/3 roles up (0.6 s)",
        "launch: 3/3 roles up, edges up: waiting for round 1 (0.9 s)",
    ]
    clock.now += 2.0
    status.tick()  # a waiting phase's clock goes on
    assert out.getvalue().endswith(
        f"{CLEAR}launch: 3/3 roles up, edges up: waiting for round 1 (2.9 s)"
    )
    status.close()
    assert out.getvalue().endswith(CLEAR)
    end = len(out.getvalue())
    status.tick()  # closed: nothing is drawn again
    status.close()
    assert len(out.getvalue()) == end


def test_a_terminal_is_redrawn_at_most_every_redraw_interval_but_always_at_the_end() -> None:
    out, clock = Terminal(), Clock()
    status = PhaseStatus(out, "run", clock=clock)
    for done in range(4097):
        status.compiling(done, 4096)
        clock.now += PHASE_REDRAW_SECONDS / 10
    drawn = [part for part in out.getvalue().split(CLEAR) if part]
    assert len(drawn) <= 4096 // 10 + 2
    assert drawn[0].startswith("run: compiling 0/4096 artifacts")
    assert drawn[-1].startswith("run: compiling 4096/4096 artifacts")


def test_a_note_is_a_line_of_its_own_above_the_status_line() -> None:
    out, clock = Terminal(), Clock()
    status = PhaseStatus(out, "run", clock=clock)
    status.starting(1, 4)
    status.note("run: note: something")
    assert out.getvalue().endswith(
        f"{CLEAR}run: note: something\n{CLEAR}run: starting: 1/4 roles up (0.0 s)"
    )


def test_the_line_is_cut_to_the_terminal_width() -> None:
    from rich.console import Console

    out, clock = Terminal(), Clock()
    console = Console(file=out, force_terminal=True, width=20)
    status = PhaseStatus(out, "run", clock=clock, console=console)
    status.compiling(0, 1000)
    assert (
        out.getvalue() == f"{CLEAR}run: compiling 0/10"
    )  # 19 columns: the cursor stays on the line


async def test_the_rounds_bar_takes_the_status_line_at_the_first_record(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RoundProgress(out, 3)
    handed: list[int] = []
    path = progress_path(tmp_path)
    path.parent.mkdir()
    writer = RecordWriter(path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: follow(
                path, progress, interval=0.01, first=lambda: handed.append(len(out.getvalue()))
            )
        )
        await trio.sleep(0.05)
        assert handed == []  # no record yet: the status line stays
        for round_ in (1, 2, 3):
            writer.write(RoundRecord(round_, 0.5, 0.5, 0.5))
        await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    writer.close()
    assert handed == [0]  # once, before the first round was shown
    assert "round 3/3" in out.getvalue()


def test_a_folder_compiled_before_is_checked_as_a_phase_of_its_own() -> None:
    out, clock = io.StringIO(), Clock()
    status = PhaseStatus(out, "launch", clock=clock)
    status.checking(0, 200)
    clock.now += 1.25
    status.checking(200, 200)
    assert out.getvalue() == "launch: checked 200 artifacts in 1.2 s\n"
    terminal = Terminal()
    live = PhaseStatus(terminal, "launch", clock=clock)
    live.checking(0, 200)
    assert terminal.getvalue() == f"{CLEAR}launch: checking 200 artifacts (0.0 s)"
