"""The one interrupt path inside ``alpha``'s own process (alpha/app/interrupted.py): every form
an interrupt takes becomes one line and 128 + the signal; SIGTERM and SIGHUP take the path of
SIGINT while a command runs, and only then; an ignored signal stays ignored. The same on real
processes, signals sent to a run's group at many points: tests/system/test_interrupts.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import alpha.app.describe
from alpha.app.cli import main
from alpha.app.interrupted import (
    INTERRUPTS,
    Interrupted,
    RunTrack,
    interrupt_line,
    run_line,
    signal_of,
    signals_as_interrupts,
)
from tests.support import raises_exactly


def _groups(leaf: BaseException, depth: int) -> BaseException:
    for level in range(depth):
        leaf = BaseExceptionGroup(f"level {level}", [ValueError("beside"), leaf])
    return leaf


@given(
    number=st.sampled_from(INTERRUPTS),
    depth=st.integers(min_value=0, max_value=5),
    plain=st.booleans(),
)
def test_an_interrupt_is_found_however_deep_in_trio_groups(
    number: int, depth: int, plain: bool
) -> None:
    leaf: BaseException = KeyboardInterrupt() if plain else Interrupted(number)
    assert signal_of(_groups(leaf, depth)) == (signal.SIGINT if plain else number)


@given(depth=st.integers(min_value=0, max_value=5))
def test_a_group_without_an_interrupt_is_none(depth: int) -> None:
    assert signal_of(_groups(ValueError("no"), depth)) is None


def _raising(error: BaseException) -> object:
    def handler(args: object) -> int:
        raise error

    return handler


@pytest.mark.parametrize("number", INTERRUPTS, ids=lambda n: signal.Signals(n).name)
def test_an_interrupt_inside_an_exception_group_is_one_line_and_128_plus_it(
    number: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What trio raises when Ctrl-C lands in a nursery: the interrupt inside a group.
    group = BaseExceptionGroup("nursery", [_groups(Interrupted(number), 2)])
    monkeypatch.setattr(alpha.app.describe, "describe_tree", _raising(group))
    assert main(["describe", "tree", "3", "2"]) == 128 + number
    out, err = capsys.readouterr()
    name = signal.Signals(number).name
    assert (out, err) == ("", f"describe tree: interrupted ({name})\n")


def _signalling(number: int) -> object:
    def handler(args: object) -> int:
        os.kill(os.getpid(), number)
        while True:  # the handler raises at the next bytecode
            time.sleep(0.01)

    return handler


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_take_the_path_of_sigint_while_a_command_runs(
    number: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if signal.getsignal(number) is not signal.SIG_DFL:
        pytest.skip("this test process was started with the signal handled or ignored")
    monkeypatch.setattr(alpha.app.describe, "describe_tree", _signalling(number))
    assert main(["describe", "tree", "3", "2"]) == 128 + number
    name = signal.Signals(number).name
    assert capsys.readouterr().err == f"describe tree: interrupted ({name})\n"
    assert signal.getsignal(number) is signal.SIG_DFL, "the handler is put back"


def test_an_ignored_sighup_stays_ignored() -> None:
    # nohup alpha run ...: the terminal going away must not stop the run.
    saved = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals_as_interrupts():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing happens
    finally:
        signal.signal(signal.SIGHUP, saved)


def test_outside_trio_a_sigterm_raises_interrupted_with_its_number() -> None:
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("this test process was started with SIGTERM handled or ignored")

    def terminate() -> None:
        with signals_as_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            while True:
                time.sleep(0.01)

    stopped = raises_exactly(Interrupted, terminate)
    assert (stopped.signal, stopped.exit_code) == (signal.SIGTERM, 143)


def test_the_line_names_the_signal_and_what_was_done() -> None:
    assert interrupt_line("compile", signal.SIGTERM, "removed 3") == (
        "compile: interrupted (SIGTERM); removed 3"
    )
    assert interrupt_line("alpha", 99) == "alpha: interrupted (signal 99)"


def test_a_run_with_no_checkpoint_is_told_to_run_again(tmp_path: Path) -> None:
    track = RunTrack("my plan.toml", 30, history=[(0, 1.0, 0.5, 0.5), (1, 0.9, 0.6, 0.6)])
    assert run_line(track, signal.SIGINT) == (
        "interrupted (SIGINT) at round 2/30; nothing committed; no checkpoint to go on from: "
        "run it again from the start"
    )
    # A checkpoint folder that holds nothing (or nothing that verifies) is no go-on either.
    track.folder = tmp_path / "checkpoints"
    track.folder.mkdir()
    assert "run it again from the start" in run_line(track, signal.SIGHUP)
