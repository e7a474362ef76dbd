"""The warm starter's faults, at every moment of a launch, on real processes: killed (SIGKILL)
or stopped (SIGSTOP) before it is ready, while it forks, mid-run and after the last role.
Each gives one line naming the exact class (``WarmStarterLost``, ``WarmStarterStalled``),
falls back to cold starts where it was never ready, and leaves nothing running. The starter's
failpoints (``warm.ready@0``, ``warm.forking@ROLE``, ``warm.closing@0``) stop it at exactly
the moment; a test then kills it, or leaves it stopped for the launcher's watchdog."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

import alpha.launch.warm
from alpha.app.run import DEFAULT_PLAN
from alpha.compiler.plan import parse_plan
from alpha.core.budgets import Budgets
from alpha.core.topology import ParticipantTree
from alpha.errors import AlphaError, WarmStarterLost, WarmStarterStalled
from alpha.exitcodes import EXIT_FAILURE
from alpha.failpoints import FAILPOINTS_ENV
from alpha.launch.launcher import ANNOUNCE_WAIT, LaunchResult, LaunchSpec, _Launch
from alpha.launch.warm import WarmStarter
from alpha.records.commit import COMMIT_NAME
from harness.compiled import CompiledRun
from harness.processes import (
    EXEC_POLL,
    alive_children,
    children_of,
    descendants_of,
    parent_of,
    pid_running,
    running,
    state_of,
)
from tests.support import ALPHA

pytestmark = pytest.mark.slow

BUDGETS = Budgets(accept=30.0, receive=30.0, deadline=120.0)
TREE = ParticipantTree(4, 2)
_SERVER_MARK = "alpha: the warm starter of a launch"  # the first line of its text (its argv)


def _exchange(tmp_path: Path) -> CompiledRun:
    return CompiledRun.exchange(tmp_path, TREE, budgets=BUDGETS)


def _starter() -> int | None:
    """This process's warm starter, if it runs: a child whose command line is the server's
    text (its forked children show their artifacts instead)."""
    for pid in children_of(os.getpid()):
        try:
            if _SERVER_MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


async def _stopped_starter() -> int:
    """The starter, once it stopped itself at its failpoint. Unbounded here: the launcher's
    own bounds (the watchdog, READY_WAIT) end the launch this runs beside."""
    while True:
        pid = _starter()
        if pid is not None and state_of(pid) == "T":
            return pid
        await trio.sleep(EXEC_POLL)


async def _launch_signalling_the_starter(
    run: CompiledRun,
    signum: signal.Signals | None,
    on_announce: Callable[[int, tuple[int, ...]], Awaitable[None]] | None = None,
) -> tuple[LaunchResult, int]:
    """Launch ``run`` and, once its starter stopped itself at its failpoint, send it
    ``signum`` (None: leave it stopped, for the launcher's watchdog); return the launch's
    result and the starter's pid."""
    found: list[int] = []

    async def act() -> None:
        pid = await _stopped_starter()
        found.append(pid)
        if signum is not None:
            os.kill(pid, signum)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(act)
        result = await run.launch(warm=True, on_announce=on_announce)
        nursery.cancel_scope.cancel()
    assert found, "the starter never reached its failpoint"
    return result, found[0]


async def _launch_killing_the_starter(run: CompiledRun) -> tuple[LaunchResult, int]:
    return await _launch_signalling_the_starter(run, signal.SIGKILL)


async def _launch_leaving_it_stopped(run: CompiledRun) -> tuple[LaunchResult, int]:
    return await _launch_signalling_the_starter(run, None)


def _nothing_left(run: CompiledRun, starter: int) -> None:
    assert alive_children() == []
    assert running(run.folder) == []
    assert state_of(starter) == ""  # reaped


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watchdog that waits long for a stopped starter, so that the test's SIGKILL, not the
    watchdog, ends it (on a loaded host finding it stopped may take a while)."""
    monkeypatch.setattr(alpha.launch.warm, "STALL_GRACE", 600.0)


async def _cold_parents(run: CompiledRun, result: LaunchResult) -> None:
    assert result.ok, result.first_to_fail
    assert (run.reports / COMMIT_NAME).exists()


# --- before it is ready: the launch goes on cold ------------------------------------------


async def test_a_starter_killed_before_it_is_ready_is_named_and_every_role_starts_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.ready@0")
    run = _exchange(tmp_path)
    parents: dict[int, int | None] = {}

    async def look(role: int, ports: tuple[int, ...]) -> None:
        parents[role] = parent_of(await pid_running(run.specs[role].argv[-1]))

    result, starter = await _launch_signalling_the_starter(run, signal.SIGKILL, look)
    assert result.ok, result.first_to_fail
    assert result.notes == [
        f"WarmStarterLost: the warm starter (pid {starter}) was killed by SIGKILL before it "
        "was ready; every role starts in an interpreter of its own instead, as with --cold; "
        "if it happens again, run with `alpha launch --cold`, which starts every role in an "
        "interpreter of its own"
    ]
    assert set(parents.values()) == {os.getpid()}, "every role started cold"
    _nothing_left(run, starter)


async def test_a_starter_stopped_before_it_is_ready_is_killed_and_every_role_starts_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.ready@0")
    run = _exchange(tmp_path)
    result, starter = await _launch_leaving_it_stopped(run)
    assert result.ok, result.first_to_fail
    (note,) = result.notes
    assert note.startswith(
        f"WarmStarterStalled: the warm starter (pid {starter}) was stopped (SIGSTOP or another "
        "stop signal) before it was ready; the launcher killed it; every role starts in an "
        "interpreter of its own instead"
    )
    _nothing_left(run, starter)


# --- while it forks: the run fails, naming it --------------------------------------------


async def test_a_starter_killed_while_forking_fails_the_run_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.forking@2")
    run = _exchange(tmp_path)
    result, starter = await _launch_killing_the_starter(run)
    failure = result.first_to_fail
    assert failure is not None
    assert type(failure.error) is WarmStarterLost
    assert failure.cause.startswith(
        f"WarmStarterLost: the warm starter (pid {starter}) was killed by SIGKILL while it was "
        "starting "
    )
    assert "the launcher stopped every role it had started, and nothing was committed" in (
        failure.cause
    )
    assert 2 not in result.outcomes or "never started" in result.outcomes[2].cause
    assert not (run.reports / COMMIT_NAME).exists()
    _nothing_left(run, starter)


async def test_a_starter_stopped_while_forking_is_killed_and_the_run_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.forking@2")
    run = _exchange(tmp_path)
    result, starter = await _launch_leaving_it_stopped(run)
    failure = result.first_to_fail
    assert failure is not None
    assert type(failure.error) is WarmStarterStalled
    assert failure.cause.startswith(
        f"WarmStarterStalled: the warm starter (pid {starter}) was stopped (SIGSTOP or another "
        "stop signal) while it was starting "
    )
    assert not (run.reports / COMMIT_NAME).exists()
    _nothing_left(run, starter)


# --- mid-run ------------------------------------------------------------------------------


def _learner(tmp_path: Path, rounds: int) -> CompiledRun:
    text = DEFAULT_PLAN.read_text().replace("rounds = 30", f"rounds = {rounds}")
    return CompiledRun(parse_plan(text, source="test"), tmp_path / "run")


async def test_a_starter_stopped_mid_run_is_named_once_its_roles_end_and_nothing_waits(
    tmp_path: Path,
) -> None:
    # Its roles run on (their parent lives) and end; it cannot report how. The launcher does
    # not wait for those reports forever: the watchdog names it, kills it, and the statuses
    # are said to be lost (the commit record says whether the run committed).
    run = _learner(tmp_path, 6)
    stopped: list[int] = []

    async def stop_the_starter() -> None:
        log = run.log_path(0)
        while "round 2 " not in (log.read_text() if log.exists() else ""):
            await trio.sleep(0.02)
        pid = parent_of(await pid_running(run.specs[0].argv[-1]))
        assert pid is not None and pid != os.getpid()
        stopped.append(pid)
        os.kill(pid, signal.SIGSTOP)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_the_starter)
        result = await run.launch(warm=True)
        nursery.cancel_scope.cancel()
    (starter,) = stopped
    failure = result.first_to_fail
    assert failure is not None
    assert type(failure.error) is WarmStarterStalled
    assert failure.cause.startswith(
        f"WarmStarterStalled: the warm starter (pid {starter}) was stopped (SIGSTOP or another "
        "stop signal) "
    )
    lost = [o for o in result.outcomes.values() if "exit status was lost" in o.cause]
    assert lost, result.outcomes
    assert all(not o.failed for o in lost), "the starter's loss is the failure, not theirs"
    _nothing_left(run, starter)


# --- after the last role: the run's result stands, with a note ----------------------------


async def test_a_starter_killed_after_the_last_role_leaves_the_result_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.closing@0")
    run = _exchange(tmp_path)
    result, starter = await _launch_killing_the_starter(run)
    assert result.ok, result.first_to_fail
    assert result.notes == [
        f"WarmStarterLost: the warm starter (pid {starter}) was killed by SIGKILL after every "
        "role it started had ended; every role's outcome was known by then, so the run's "
        "result stands; if it happens again, run with `alpha launch --cold`, which starts "
        "every role in an interpreter of its own"
    ]
    _nothing_left(run, starter)


async def test_a_starter_stopped_after_the_last_role_is_killed_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.closing@0")
    run = _exchange(tmp_path)
    result, starter = await _launch_leaving_it_stopped(run)
    assert result.ok, result.first_to_fail
    (note,) = result.notes
    assert note.startswith(
        f"WarmStarterStalled: the warm starter (pid {starter}) was stopped (SIGSTOP or another "
        "stop signal) after every role it started had ended; the launcher killed it; every "
        "role's outcome was known by then, so the run's result stands"
    )
    _nothing_left(run, starter)


# --- the command line: one line, exit 1, nothing left ---------------------------------------


def _starter_of(launcher: int) -> int | None:
    for pid in children_of(launcher):
        try:
            if _SERVER_MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def test_alpha_launch_names_a_starter_killed_while_forking_in_one_line(tmp_path: Path) -> None:
    run = _exchange(tmp_path)
    err = tmp_path / "launch.err"
    environment = {**os.environ, FAILPOINTS_ENV: "warm.forking@2"}
    with err.open("wb") as out:
        launcher = subprocess.Popen(
            [*ALPHA, "launch", str(run.folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=environment,
        )
    below: list[int] = []
    try:
        # The launcher's watchdog ends the launch if this loop never sees the starter stop.
        while (starter := _starter_of(launcher.pid)) is None or state_of(starter) != "T":
            assert launcher.poll() is None, err.read_text()
            time.sleep(EXEC_POLL)
        below = descendants_of(launcher.pid)
        os.kill(starter, signal.SIGKILL)
        assert launcher.wait() == EXIT_FAILURE
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    text = err.read_text()
    assert "Traceback" not in text and "Exception" not in text, text
    named = [line for line in text.splitlines() if "WarmStarterLost" in line]
    assert len(named) == 1, text
    assert named[0].startswith("launch: role ")
    assert (
        f"failed first: WarmStarterLost: the warm starter (pid {starter}) was killed by "
        in (named[0])
    )
    assert [pid for pid in below if state_of(pid) not in ("", "Z")] == []
    assert running(run.folder) == []


# --- a start that finds the starter gone --------------------------------------------------


async def test_a_start_after_the_starter_was_lost_raises_its_fault(tmp_path: Path) -> None:
    # Killed while it owed nothing (no child, no start): a note, not a failure; the next
    # start raises that very fault, which the launcher then names as the run's.
    lost: list[tuple[AlphaError, bool]] = []
    starter = WarmStarter(
        dict(os.environ), on_lost=lambda error, harmful: lost.append((error, harmful))
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(starter.serve)
        os.kill(starter.pid, signal.SIGKILL)
        while not lost:
            await trio.sleep(EXEC_POLL)
        ((error, harmful),) = lost
        assert type(error) is WarmStarterLost and not harmful
        run = _exchange(tmp_path)
        log = tmp_path / "role.log"
        with log.open("wb") as out, pytest.raises(WarmStarterLost) as raised:
            await starter.spawn(run.specs[0].argv, out.fileno(), 0)
        assert raised.value is error
        starter.close()
    assert alive_children() == []


class _StarterGoneAtStart(_Launch):
    """A launch whose warm starter is found gone by a role's start itself."""

    async def open(self, spec: LaunchSpec, log: int) -> trio.Process:
        raise WarmStarterLost(pid=1234, how="was killed by SIGKILL", when="w", outcome="o")


class _CannotStart(_Launch):
    """A launch in which creating a role's process fails (no memory, no descriptors)."""

    async def open(self, spec: LaunchSpec, log: int) -> trio.Process:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")


@pytest.mark.parametrize("kind", [_StarterGoneAtStart, _CannotStart])
async def test_a_start_that_fails_is_the_runs_named_failure_not_a_traceback(
    tmp_path: Path, kind: type[_Launch]
) -> None:
    run = _exchange(tmp_path)
    state = kind(run.specs, fail_fast=True)
    async with trio.open_nursery() as nursery:
        await state.start(run.specs[1], nursery, ANNOUNCE_WAIT, None)
    await state.reap()
    failure = state.result.first_to_fail
    assert failure is not None
    if kind is _CannotStart:
        assert failure.role == 1
        assert failure.cause == (
            "role 1 could not be started: [Errno 11] Resource temporarily unavailable; "
            f"its log: {run.log_path(1)}"
        )
    else:
        assert type(failure.error) is WarmStarterLost
        assert failure.cause.startswith("WarmStarterLost: the warm starter (pid 1234) was ")
        assert state.result.outcomes[1].cause == "never started: WarmStarterLost"
    assert state.processes == {}


async def test_a_starter_stopped_before_it_is_ready_and_continued_serves_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    # Continued within its grace, it says it is ready and forks every role as ever.
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.ready@0")
    run = _exchange(tmp_path)
    parents: dict[int, int | None] = {}

    async def look(role: int, ports: tuple[int, ...]) -> None:
        parents[role] = parent_of(await pid_running(run.specs[role].argv[-1]))

    result, starter = await _launch_signalling_the_starter(run, signal.SIGCONT, look)
    assert result.ok, result.first_to_fail
    assert result.notes == []
    assert set(parents.values()) == {starter}, "every role forked by the starter"
    _nothing_left(run, starter)


async def test_a_child_forked_for_a_start_the_launch_gave_up_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    # The launch stops while the starter, stopped before forking role 0, owes that start;
    # continued, it forks role 0 and says so: that child has no one waiting for it, and the
    # launcher kills it at once (through a pidfd of its own, before the starter may reap it).
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.forking@0")
    run = _exchange(tmp_path)
    state = _Launch(run.specs, fail_fast=True)
    starter = WarmStarter(state.environment, on_lost=state.starter_lost)
    async with trio.open_nursery() as nursery:
        await nursery.start(starter.serve)
        state.starter = starter

        async def start_role_0() -> None:
            with state.starting:
                await state.start(run.specs[0], nursery, ANNOUNCE_WAIT, None)

        nursery.start_soon(start_role_0)
        pid = await _stopped_starter()
        state.stop_all()  # another role's failure, say: the start is given up
        await trio.sleep(0)
        os.kill(pid, signal.SIGCONT)
        starter.close()  # after role 0's start: the starter forks it first, then ends
    assert state.processes == {}  # never one of the launch's roles
    (child,) = starter.discarded
    while state_of(child) not in ("", "Z"):  # killed: a SIGKILL takes milliseconds
        await trio.sleep(EXEC_POLL)
    # Killed, it said nothing: left alone it would have failed (its launcher gone).
    assert "failed:" not in run.log(0), run.log(0)
    assert alive_children() == []
    assert starter.lost is None  # it ended as asked


def _marked(mark: str) -> list[int]:
    """Processes whose environment holds ``ALPHA_TEST_MARK=mark``: this test's starter and
    everything it forked, whoever their parent is now."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"ALPHA_TEST_MARK={mark}".encode() in environ:
                found.append(int(entry))
    return found


async def test_a_child_forked_just_before_the_starter_dies_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patient: None
) -> None:
    # Forked, its pid not yet told to the launcher, when the starter is killed: no one knows
    # of it, so it must not run its role. It waits for the starter's word and exits at once.
    monkeypatch.setenv(FAILPOINTS_ENV, "warm.forked@1")
    monkeypatch.setenv("ALPHA_TEST_MARK", str(tmp_path))
    run = _exchange(tmp_path)
    result, starter = await _launch_killing_the_starter(run)
    failure = result.first_to_fail
    assert failure is not None and type(failure.error) is WarmStarterLost
    while [pid for pid in _marked(str(tmp_path)) if state_of(pid) not in ("", "Z")]:
        await trio.sleep(EXEC_POLL)  # left alone, role 1 would stop on LauncherLost
    log = run.log_path(1)
    assert not log.exists() or "failed:" not in log.read_text(), log.read_text()
    _nothing_left(run, starter)
