"""The control side's display (alpha/app/display.py) and what feeds it: role 0 writes a record a
round into its run folder, the launcher reads only what was appended, and shows it as a
terminal-sized bar or, off a terminal, as a few plain lines. Participants never load the
display's libraries."""

from __future__ import annotations

import io
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
import trio
from rich.console import Console

from alpha.app import display as progress_module
from alpha.app.display import RoundProgress, follow, summary_table
from alpha.compiler.plan import parse_plan
from alpha.compiler.work_learn import learner_setup
from alpha.learner.data import load_digits
from alpha.learner.state import LearnerState
from alpha.records.progress import (
    RecordReader,
    RecordWriter,
    RoundRecord,
    decode,
    encode,
    progress_path,
)
from harness.compiled import CompiledRun
from tests.support import plan_text

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    """Text written to a terminal, as far as ``isatty`` tells."""

    def isatty(self) -> bool:
        return True


def screen_lines(text: str) -> list[str]:
    """Every line a terminal would show at some point: control sequences removed, split at
    carriage returns and newlines."""
    return [line for line in re.split(r"[\r\n]", ESCAPE.sub("", text)) if line]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- off a terminal: plain lines --------------------------------------------------------------


def test_off_a_terminal_a_line_a_second_and_always_the_last() -> None:
    clock, out = Clock(), io.StringIO()
    display = RoundProgress(out, 100, clock=clock)
    assert not display.live
    for done in range(1, 101):
        clock.now += 0.25  # four rounds a second
        display.update(done, 0.5, 0.8)
    display.close()
    lines = out.getvalue().splitlines()
    rounds = [int(line.split()[1].split("/")[0]) for line in lines]
    assert rounds == [1, 5, 9, *range(13, 100, 4), 100]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue(), "no redraw, no colour"
    assert lines[-1] == (
        "round 100/100 loss 0.5 held-out accuracy 80.0% elapsed 0:00:25 rate 4 rounds/s eta 0:00:00"
    )
    assert lines[0].endswith("elapsed 0:00:00 rate 4 rounds/s eta 0:00:24")


def test_a_plain_line_shows_a_non_finite_loss_as_such_and_a_loss_in_four_digits() -> None:
    clock, out = Clock(), io.StringIO()
    display = RoundProgress(out, 3, label="replicated ", clock=clock)
    for done, loss in [(1, 0.123456789), (2, math.inf), (3, math.nan)]:
        clock.now += 2.0
        display.update(done, loss, 0.5)
    losses = [line.split()[4] for line in out.getvalue().splitlines()]
    assert losses == ["0.1235", "inf", "nan"]
    assert all(line.startswith("replicated round ") for line in out.getvalue().splitlines())


def test_a_resumed_runs_rate_counts_the_rounds_since_it_started() -> None:
    clock, out = Clock(), io.StringIO()
    display = RoundProgress(out, 200, start=100, clock=clock)
    clock.now += 10.0
    display.update(150, 0.5, 0.5)
    assert "rate 5 rounds/s eta 0:00:10" in out.getvalue()


# --- on a terminal: a bar sized to it ---------------------------------------------------------


def _drive(display: RoundProgress, clock: Clock, total: int) -> None:
    for done in range(1, total + 1):
        clock.now += 0.5
        display.update(done, 1.0 / done, done / total)
        if done == total // 2:
            time.sleep(0.4)  # rich redraws from its own thread, a few times a second
    display.close()


@pytest.mark.parametrize("width", [30, 60, 80, 200])
def test_on_a_terminal_every_line_fits_its_width(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")  # not a dumb terminal: redrawn in place
    clock, out = Clock(), io.StringIO()
    console = Console(file=out, force_terminal=True, width=width)
    display = RoundProgress(out, 200_000, console=console, clock=clock)
    assert display.live
    _drive(display, clock, 40)
    lines = screen_lines(out.getvalue())
    assert len(lines) >= 2, "the bar was drawn while it ran, and a last time"
    assert all(len(line) <= width for line in lines), lines
    last = lines[-1]
    assert last.startswith("40/200000" if width < 200 else "round 40/200000")
    assert "━" in last, "a bar"
    if width >= 60:
        assert re.search(r" 0:00:\d\d eta \d+:\d\d:\d\d", last), last  # elapsed and left
    if width >= 200:
        assert "rounds/s" in last and "loss 0.025" in last and "held-out 100.0%" in last


def test_a_bar_on_a_terminal_given_as_out_takes_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "60")  # what the terminal's width is, to rich
    clock, out = Clock(), Terminal()
    display = RoundProgress(out, 30, clock=clock)
    assert display.live
    _drive(display, clock, 30)
    lines = screen_lines(out.getvalue())
    assert all(len(line) <= 60 for line in lines), lines
    assert re.search(r"^30/30 ━+ 0:00:15 eta 0:00:00 loss 0\.0333", lines[-1]), lines[-1]
    assert ESCAPE.sub("", out.getvalue()).endswith("\n"), "what follows starts on its own line"


def test_a_labelled_bar_keeps_its_label_before_its_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    clock, out = Clock(), io.StringIO()
    console = Console(file=out, force_terminal=True, width=60)
    display = RoundProgress(out, 30, label="replicated ", console=console, clock=clock)
    _drive(display, clock, 30)
    lines = screen_lines(out.getvalue())
    assert all(len(line) <= 60 for line in lines), lines
    assert re.search(r"^replicated round 30/30 ━+ 0:00:15 eta 0:00:00$", lines[-1]), lines[-1]


def test_a_dumb_terminal_gets_the_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")  # it cannot move its cursor to redraw a bar
    clock, out = Clock(), Terminal()
    display = RoundProgress(out, 2, clock=clock)
    assert not display.live
    for done in (1, 2):
        clock.now += 2.0
        display.update(done, 0.5, 0.5)
    display.close()
    assert [line.split()[1] for line in out.getvalue().splitlines()] == ["1/2", "2/2"]


def test_a_closed_bar_is_drawn_again_below_and_a_note_goes_above(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    clock, out = Clock(), io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    display = RoundProgress(out, 4, console=console, clock=clock)
    display.update(2, 0.5, 0.5)
    display.close()
    display.note("run: checkpoint gen-000002 published (round 2)")
    display.update(3, 0.5, 0.5)
    display.note("progress: something to say")
    display.update(4, 0.5, 0.5)
    display.close()
    lines = screen_lines(out.getvalue())
    counts = [line.split()[1] for line in lines if line.startswith("round")]
    assert counts[0] == "2/4" and counts[-1] == "4/4"
    assert lines.index("run: checkpoint gen-000002 published (round 2)") < len(lines) - 1
    assert "progress: something to say" in lines


# --- follow: records read as they are appended -------------------------------------------------


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[RecordReader, list[int]]]:
    """Each reader ``follow`` makes, with the number of records each of its reads returned."""
    made: list[tuple[RecordReader, list[int]]] = []

    def make(path: Path) -> RecordReader:
        reader, reads = RecordReader(path), []
        read_new = reader.read_new

        def counted() -> list[RoundRecord]:
            found = read_new()
            reads.append(len(found))
            return found

        monkeypatch.setattr(reader, "read_new", counted)
        made.append((reader, reads))
        return reader

    monkeypatch.setattr(progress_module, "RecordReader", make)
    return made


def record(round: int) -> RoundRecord:
    return RoundRecord(round, 1.0 / round, 0.5, round / 100)


async def test_follow_shows_each_round_as_it_is_appended_reading_each_byte_once(
    tmp_path: Path, readers: list[tuple[RecordReader, list[int]]]
) -> None:
    path = progress_path(tmp_path)
    out = io.StringIO()
    display = RoundProgress(out, 20)
    history: list[RoundRecord] = []

    async def polls(count: int) -> None:
        """Wait until ``follow`` has read the file ``count`` more times."""
        while not readers:
            await trio.sleep(0.001)
        reads = readers[0][1]
        target = len(reads) + count
        while len(reads) < target:
            await trio.sleep(0.001)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: follow(path, display, interval=0.005, history=history))
        await polls(3)  # while there is no file yet
        writer = RecordWriter(path)
        for round in range(1, 21):
            line = encode(record(round))
            writer._file.write(line[:30])  # half a line, flushed: it waits for its end
            writer._file.flush()
            await polls(2)
            assert len(history) == round - 1
            writer._file.write(line[30:])
            writer._file.flush()
            await polls(2)
            assert len(history) == round
        writer.close()
        await polls(5)  # a file that no longer grows
        nursery.cancel_scope.cancel()
    assert history == [record(round) for round in range(1, 21)]
    ((reader, reads),) = readers
    assert len(reads) >= 3 + 20 * 4 + 5 and sum(reads) == 20, "it read the file many times"
    assert reader.bytes_read == path.stat().st_size, "and each byte once"
    assert out.getvalue().splitlines()[-1].startswith("round 20/20 loss 0.05 ")


async def test_follow_reads_the_last_rounds_when_it_is_cancelled(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    out = io.StringIO()
    history: list[RoundRecord] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: follow(path, RoundProgress(out, 3), history=history))
        await trio.sleep(0)
        writer = RecordWriter(path)
        for round in (1, 2, 3):
            writer.write(record(round))
        writer.close()
        nursery.cancel_scope.cancel()  # before its next poll, 0.2 s away
    assert [r.round for r in history] == [1, 2, 3]
    assert "round 3/3" in out.getvalue()


async def test_a_line_that_is_not_a_record_stops_the_display_not_the_run(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    path.parent.mkdir()
    path.write_bytes(encode(record(1)) + b"not a record\n" + encode(record(2)))
    out = io.StringIO()
    history: list[RoundRecord] = []
    with trio.fail_after(5):
        await follow(path, RoundProgress(out, 2), interval=0.01, history=history)  # returns
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("progress: ") and str(path) in lines[0]
    assert lines[0].endswith("progress is no longer shown")
    assert history == []


# --- the summary --------------------------------------------------------------------------------

ROWS = [
    ("final parameters", "3c30813a" * 8),
    ("replicated learner", "3c30813a" * 8),
    ("equal bit for bit", "yes"),
    ("held-out accuracy", "80.6%"),
    ("wall time", "8.5 s"),
    ("loss curve", "runs/digits-tree8/loss.png"),
]


def test_the_summary_off_a_terminal_is_the_plain_lines_scripts_read() -> None:
    out = io.StringIO()
    summary_table(ROWS, out)
    # As `alpha run` has always printed them (alpha/app/run.py, main_run).
    digest = "3c30813a" * 8
    assert out.getvalue() == (
        f"final parameters    {digest}\n"
        f"replicated learner  {digest}\n"
        "equal bit for bit   yes\n"
        "held-out accuracy   80.6%\n"
        "wall time           8.5 s\n"
        "loss curve          runs/digits-tree8/loss.png\n"
    )


def test_the_summary_on_a_terminal_is_a_table_that_fits_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = Terminal()
    summary_table(ROWS, out)
    lines = screen_lines(out.getvalue())
    assert all(len(line) <= 60 for line in lines), lines
    assert "\x1b[" in out.getvalue(), "styled"
    assert lines[0].startswith("final parameters") and lines[2].startswith("replicated learner")
    # A digest too long for the line folds whole onto the next: nothing is cut.
    assert lines[0].split()[-1] + lines[1].strip() == "3c30813a" * 8
    assert lines[4].split() == ["equal", "bit", "for", "bit", "yes"]


# --- role 0 writes the records --------------------------------------------------------------


def learn_plan(rounds: int) -> str:
    return plan_text(
        "progress-pair",
        roles=2,
        rounds=rounds,
        topology={"shape": "pair"},
        budgets={"accept": 60.0, "deadline": 120.0},
        work={"kind": "learn"},
        learner={"kind": "mlp", "hidden": 8, "rate": 0.15, "seed": 3, "batch": 8},
    )


def test_a_progress_file_that_cannot_be_written_is_said_once_and_the_rounds_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = LearnerState.for_role(learner_setup(parse_plan(learn_plan(3))), load_digits(), 0)
    (tmp_path / "progress").write_text("a file where the folder would be")
    state.progress_path = str(progress_path(tmp_path))
    w = np.zeros(state.model.size, state.model.dtype)
    g = np.ones(state.model.contribution_size, state.model.dtype)
    for round in range(3):
        state.observe(w, g, round, 0)
    state.release()
    log = capsys.readouterr().err.splitlines()
    assert [line.split()[3] for line in log if " round " in line] == ["1", "2", "3"]
    said = [line for line in log if "progress: cannot write" in line]
    assert len(said) == 1 and str(progress_path(tmp_path)) in said[0]
    assert len(state.history) == 3


DISPLAY_LIBRARIES = ("rich", "matplotlib", "tqdm")


@pytest.mark.slow
async def test_role_0_writes_a_record_a_round_and_no_participant_imports_the_display(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The launcher gives each participant its own environment (alpha/launch/launcher.py), so the
    # interpreter of every participant lists its imports on its stderr: its log.
    # Cold, each participant is an interpreter of its own, whose log lists every import; warm,
    # trio and numpy were imported by the warm starter (whose text imports nothing else,
    # tests/system/test_warm.py), and the log lists what the role imported after the fork.
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    run = CompiledRun(parse_plan(learn_plan(4)), tmp_path)
    for warm, listed in ((False, {"alpha", "numpy", "trio"}), (True, {"alpha"})):
        result = await run.launch(warm=warm)
        assert result.ok, result.first_to_fail
        for role in (0, 1):
            imported = {
                line.rpartition("|")[2].strip().split(".")[0]
                for line in run.log(role).splitlines()
                if line.startswith("import time:")
            }
            assert listed <= imported, "the log lists the imports"
            assert sorted(imported.intersection(DISPLAY_LIBRARIES)) == []
    lines = progress_path(tmp_path).read_bytes().splitlines(keepends=True)
    records = [decode(line) for line in lines]
    history = run.found_reports()[0]["history"]
    assert [(r.round - 1, r.loss, r.train_accuracy, r.holdout_accuracy) for r in records] == [
        tuple(entry) for entry in history
    ]
    assert [r.round for r in records] == [1, 2, 3, 4]
    assert "role 0: round 4 loss " in run.log(0), "the log keeps its line a round"
    assert not (tmp_path / "progress" / "role-000001.jsonl").exists(), "role 0 alone observes"
