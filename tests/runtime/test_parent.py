"""A launched participant dies with its launcher: the watch on the parent pid."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
import trio.testing

import alpha.runtime.parent as parent
from alpha.app.compile import compile_plan
from alpha.compiler.work_sum_check import exchange_plan
from alpha.core.budgets import Budgets
from alpha.errors import LauncherLost, UsageError
from alpha.runtime.parent import (
    FAILURE_CLOCK,
    LAUNCHER_PID_ENV,
    LAUNCHER_POLL,
    launcher_pid,
    watch_for_launcher_loss,
)


def test_without_the_variable_nothing_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    def getppid() -> int:
        raise AssertionError("a participant started by hand must not watch its parent")

    monkeypatch.setattr(parent.os, "getppid", getppid)
    assert launcher_pid({}) is None
    trio.run(watch_for_launcher_loss, {})  # returns at once


@pytest.mark.parametrize("text", ["2", "4194304", "9999999999"])
def test_the_variable_names_a_process_id(text: str) -> None:
    assert launcher_pid({LAUNCHER_PID_ENV: text}) == int(text)


@pytest.mark.parametrize(
    "text",
    ["", " 12", "12 ", "abc", "-5", "+5", "0", "1", "12345678901", "\u0663", "1e3", "0x10"],
)
def test_a_variable_that_is_not_a_process_id_is_refused(text: str) -> None:
    with pytest.raises(UsageError) as info:
        launcher_pid({LAUNCHER_PID_ENV: text})
    assert type(info.value) is UsageError
    assert LAUNCHER_PID_ENV in str(info.value)


def _parents(monkeypatch: pytest.MonkeyPatch, seen: list[int]) -> None:
    """The parent pids getppid() answers, one per look, on a host without pidfds (the watch
    then polls): the pid answered is no process of the test's."""
    answers = iter(seen)
    monkeypatch.setattr(parent.os, "getppid", lambda: next(answers))

    def no_pidfds(pid: int) -> int:
        raise OSError(errno.ENOSYS, "no pidfd_open here")

    monkeypatch.setattr(parent.os, "pidfd_open", no_pidfds)


async def test_the_watch_sleeps_on_its_launchers_pidfd_and_polls_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real process stands for the launcher, this process's parent as getppid() says: the
    # watch waits on its pidfd, and wakes when it ends, never on a timer.
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    adopted: list[int] = []
    monkeypatch.setattr(parent.os, "getppid", lambda: adopted[0] if adopted else launcher.pid)

    async def never(seconds: float) -> None:
        raise AssertionError("the watch polled")

    monkeypatch.setattr(parent, "trio", SimpleNamespace(lowlevel=trio.lowlevel, sleep=never))
    lost: list[LauncherLost] = []

    async def watch() -> None:
        with pytest.raises(LauncherLost) as info:
            await watch_for_launcher_loss({LAUNCHER_PID_ENV: str(launcher.pid)})
        lost.append(info.value)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await trio.testing.wait_all_tasks_blocked()
            adopted.append(1)
            launcher.kill()
    finally:
        launcher.kill()
        launcher.wait()
    assert [(error.launcher, error.parent) for error in lost] == [(launcher.pid, 1)]


async def test_the_watch_raises_launcher_lost_when_the_parent_changes(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    _parents(monkeypatch, [4321, 4321, 4321, 1])
    start = trio.current_time()
    with pytest.raises(LauncherLost) as info:
        await watch_for_launcher_loss({LAUNCHER_PID_ENV: "4321"})
    assert type(info.value) is LauncherLost
    assert (info.value.launcher, info.value.parent) == (4321, 1)
    assert "pid 4321" in str(info.value) and "alpha launch" in str(info.value)
    # Three looks found the launcher, one poll apart; the fourth found another parent.
    assert trio.current_time() - start == pytest.approx(3 * LAUNCHER_POLL)


async def test_a_parent_gone_before_the_first_look_is_found_at_once(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    _parents(monkeypatch, [1])
    start = trio.current_time()
    with pytest.raises(LauncherLost):
        await watch_for_launcher_loss({LAUNCHER_PID_ENV: "4321"})
    assert trio.current_time() == start


# --- a real participant -------------------------------------------------------------------


def _role_zero(tmp_path: Path) -> Path:
    """Role 0 of a pair: it listens for role 1 (never started) and waits on its accept budget,
    reading nothing from stdin."""
    compile_plan(exchange_plan(2, 1, payload=64, budgets=Budgets(accept=2.0)), tmp_path, range(2))
    return tmp_path / "role-000000.pyz"


def _participant(artifact: Path, launcher: str | None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != LAUNCHER_PID_ENV}
    if launcher is not None:
        environment[LAUNCHER_PID_ENV] = launcher
    return subprocess.run(
        [sys.executable, str(artifact)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # the port announcement: bytes
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        check=False,
    )


@pytest.mark.slow
def test_a_participant_whose_launcher_is_gone_stops_with_launcher_lost(tmp_path: Path) -> None:
    # The named launcher is not this participant's parent (this test process is).
    done = _participant(_role_zero(tmp_path), str(os.getppid()))
    assert done.returncode == 1, done.stderr
    clock, cause = done.stderr.splitlines()[-2:]
    assert clock.startswith(f"role 0: {FAILURE_CLOCK} ")
    assert cause.startswith("role 0: failed: LauncherLost: "), cause
    assert f"pid {os.getppid()}" in cause


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [None, "parent"], ids=["by-hand", "by-its-launcher"])
def test_a_participant_with_its_launcher_or_none_is_not_stopped(
    launcher: str | None, tmp_path: Path
) -> None:
    named = None if launcher is None else str(os.getpid())
    done = _participant(_role_zero(tmp_path), named)
    # It runs until its own accept budget ends it: the watch never fired.
    assert done.returncode == 1, done.stderr
    assert "LauncherLost" not in done.stderr
    cause = done.stderr.splitlines()[-1]
    assert cause.startswith("role 0: failed: BudgetExhausted: "), cause
    assert "for role 1" in cause
