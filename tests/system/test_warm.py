"""Warm starts (``launch.warm``): the launcher forks every local role from one interpreter that
imported trio and numpy once. Real participant processes throughout: a warm run is the same
run, each participant shows its artifact, and every fault of the starter or of a role stops
the run, names its cause, commits nothing and leaves nothing running."""

from __future__ import annotations

import ast
import contextlib
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from alpha.app.run import DEFAULT_PLAN
from alpha.compiler.plan import parse_plan
from alpha.compiler.replicate import replicate
from alpha.errors import WarmStarterLost
from alpha.launch.warm import _SERVER, WarmProcess
from alpha.learner.data import load_digits
from alpha.records.commit import COMMIT_NAME
from alpha.records.reports import committed_reports
from harness.compiled import CompiledRun
from harness.processes import (
    alive_children,
    children_of,
    parent_of,
    pid_running,
    running,
    state_of,
    unreaped,
)
from tests.support import ROOT

pytestmark = pytest.mark.slow


def _parent(pid: int) -> int:
    parent = parent_of(pid)
    assert parent is not None, f"process {pid} is gone"
    return parent


def _learner(tmp_path: Path, rounds: int) -> CompiledRun:
    text = DEFAULT_PLAN.read_text().replace("rounds = 30", f"rounds = {rounds}")
    return CompiledRun(parse_plan(text, source="test"), tmp_path / "run")


async def _when_round(log: Path, number: int) -> None:
    while f"round {number} " not in (log.read_text() if log.exists() else ""):
        await trio.sleep(0.02)


async def test_a_warm_run_is_the_same_run_and_each_participant_shows_its_artifact(
    tmp_path: Path,
) -> None:
    run = _learner(tmp_path, 5)
    parents: dict[int, int] = {}

    async def look(role: int, ports: tuple[int, ...]) -> None:
        pid = await pid_running(run.specs[role].argv[-1])  # its command line names its artifact
        parents[role] = _parent(pid)

    result = await run.launch(warm=True, on_announce=look)
    assert result.ok, result.first_to_fail
    # Forked by one warm starter, not by this process.
    assert len(set(parents.values())) == 1 and os.getpid() not in parents.values()
    _, reports = committed_reports(run.reports, run.plan.tree.children)
    expected = replicate(run.plan, load_digits())
    assert {report["digests"]["w"] for report in reports.values()} == {expected.digest}
    assert unreaped(result) == [] and alive_children() == []


async def test_a_warm_role_killed_mid_run_is_named_and_nothing_is_committed(
    tmp_path: Path,
) -> None:
    run = _learner(tmp_path, 100_000)

    async def kill_role_2() -> None:
        await _when_round(run.log_path(0), 3)
        os.kill(await pid_running(run.specs[2].argv[-1]), signal.SIGKILL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_role_2)
        result = await run.launch(warm=True)
        nursery.cancel_scope.cancel()
    failure = result.first_to_fail
    assert failure is not None and failure.role == 2
    assert failure.cause == f"role 2 was killed by SIGKILL; its log: {run.log_path(2)}"
    assert result.outcomes[2].returncode == -signal.SIGKILL
    assert not (run.reports / COMMIT_NAME).exists()
    assert unreaped(result) == [] and alive_children() == []
    assert running(run.folder) == []


async def test_the_warm_starter_killed_mid_run_stops_every_role_and_commits_nothing(
    tmp_path: Path,
) -> None:
    run = _learner(tmp_path, 100_000)
    starter: list[int] = []

    async def kill_the_starter() -> None:
        await _when_round(run.log_path(0), 3)
        starter.append(_parent(await pid_running(run.specs[0].argv[-1])))
        os.kill(starter[0], signal.SIGKILL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_the_starter)
        result = await run.launch(warm=True)
        nursery.cancel_scope.cancel()
    failure = result.first_to_fail
    assert failure is not None
    assert type(failure.error) is WarmStarterLost
    assert failure.cause.startswith(
        f"WarmStarterLost: the warm starter (pid {starter[0]}) was killed by SIGKILL while "
    )
    # Every role it had started ended, killed by the launcher through its pidfd.
    assert sorted(result.outcomes) == list(range(run.plan.participants))
    assert all(outcome.returncode is not None for outcome in result.outcomes.values())
    assert not (run.reports / COMMIT_NAME).exists()
    assert unreaped(result) == [] and alive_children() == []
    assert running(run.folder) == [] and state_of(starter[0]) in ("", "Z")


async def test_with_a_blas_thread_the_starter_stays_out_and_every_role_starts_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A thread in the starter would make forking unsafe: it refuses, and the launch goes on
    # with an interpreter per role, as with --cold.
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    run = _learner(tmp_path, 2)
    parents: dict[int, int] = {}

    async def look(role: int, ports: tuple[int, ...]) -> None:
        parents[role] = _parent(await pid_running(run.specs[role].argv[-1]))

    result = await run.launch(warm=True, on_announce=look)
    assert result.ok, result.first_to_fail
    assert set(parents.values()) == {os.getpid()}
    assert children_of(os.getpid()) == []


def test_the_warm_starter_imports_no_alpha() -> None:
    # Each child runs the alpha its artifact carries: the starter must not have one loaded.
    tree = ast.parse(_SERVER.read_text())
    imported = {
        alias.name.partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert "alpha" not in imported
    assert {"trio", "numpy"} <= imported


def test_no_select_select_anywhere() -> None:
    # select() takes no descriptor numbered past FD_SETSIZE (1024), and a launch of a thousand
    # roles holds thousands: poll, selectors or trio wait on any.
    root = ROOT
    found = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("alpha", "harness", "gates")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "select.select(" in line
    ]
    assert found == []


def test_a_warm_child_numbered_past_fd_setsize_is_seen_to_end() -> None:
    # The launcher's pidfds of a large launch are numbered past 1024: has_ended must see one.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if hard != resource.RLIM_INFINITY and hard <= high:
        pytest.skip(f"the hard limit on open files ({hard}) is below {high}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, high + 1), hard))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        pidfd = os.pidfd_open(child.pid)
        os.dup2(pidfd, high)
        os.close(pidfd)
        process = WarmProcess.__new__(WarmProcess)
        process.pidfd, process.exited_at, process.returncode = high, None, None
        child.wait()
        assert process.has_ended()
    finally:
        with contextlib.suppress(OSError):
            os.close(high)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
