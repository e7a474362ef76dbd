"""Warm starts (``launch.warm``): the launcher forks every local role from one interpreter that
imported trio and numpy once. Real participant processes throughout: a warm run is the same
run, each participant shows its artifact, and every fault of the starter or of a role stops
the run, names its cause, commits nothing and leaves nothing running."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from alpha.app.compile import compile_plan, parse_roles
from alpha.app.run import DEFAULT_PLAN
from alpha.compiler.plan import load_plan, parse_plan
from alpha.compiler.replicate import replicate
from alpha.errors import WarmStarterLost
from alpha.launch.warm import _SERVER, WarmProcess, WarmStarter
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


def test_the_warm_starter_imports_no_alpha_of_its_own() -> None:
    # Each child runs the alpha its artifact carries: the starter has none loaded but what it
    # preloads from the runtime the roles bind, checked first (alpha.launch.warm_server.preload).
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


# As a warm child runs its role: the starter's preload of the runtime argv[1], then the
# artifact argv[2] as `python ARTIFACT` (with an empty stdin: it stops at its first wait).
_PRELOAD_THEN_RUN = """
import runpy, sys
import numpy, trio
server = runpy.run_path(sys.argv[1])
assert server["preload"](sys.argv[2]) is None
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("same", [True, False])
def test_a_warm_child_of_another_runtime_imports_its_own(same: bool, tmp_path: Path) -> None:
    # Two compiles of the same plan: the same runtime bytes, in two folders. A role of the
    # folder the starter preloaded from keeps the starter's modules; a role of the other one
    # drops them all and imports its own, from the runtime its own artifact binds.
    plan = load_plan(ROOT / "alpha" / "data" / "plans" / "tree.toml")
    for name in ("a", "b"):
        compile_plan(plan, tmp_path / name, parse_roles("1", plan.participants))
    (runtime,) = (tmp_path / "a").glob("runtime-*.pyz")
    artifact = tmp_path / ("a" if same else "b") / "role-000001.pyz"
    paths = [str(_SERVER), str(runtime), str(artifact)]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PRELOAD_THEN_RUN, *paths],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert "failed: PortMissing" in done.stderr, done.stderr[-2000:]
    imported = [
        line
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
        and line.rpartition("|")[2].strip() == "alpha.runtime.session"
    ]
    assert len(imported) == (1 if same else 2)  # the preload's, and then the role's own


# Says, on stdout, how many objects its garbage collector never walks and which descriptors it
# holds: run by the warm starter as a role's artifact would be.
_PROBE = """
import gc, json, os, sys
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
print(json.dumps({"frozen": gc.get_freeze_count(), "fds": fds}))
"""


async def test_a_warm_child_walks_none_of_the_starters_objects_and_holds_none_of_its_fds(
    tmp_path: Path,
) -> None:
    # The starter's objects are frozen before it forks (gc.freeze): a child's collector would
    # otherwise write to each, copying every page of them into the child. And each child holds
    # its stdin, stdout and stderr only (the listing's own descriptor aside), not the pidfds of
    # the children forked before it.
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    found = []
    with (tmp_path / "log").open("wb") as log:
        async with trio.open_nursery() as nursery:
            starter = WarmStarter(os.environ, on_lost=lambda error, harmful: None)
            await nursery.start(starter.serve)
            for role in range(3):
                child = await starter.spawn([sys.executable, str(probe)], log.fileno(), role)
                assert child.stdin is not None and child.stdout is not None
                await child.stdin.aclose()
                out = b""
                while chunk := await child.stdout.receive_some():
                    out += chunk
                await child.stdout.aclose()
                assert await child.wait() == 0
                found.append(json.loads(out))
            starter.close()
    assert all(one["frozen"] > 10_000 for one in found), found
    assert [len(one["fds"]) for one in found] == [4, 4, 4], found


# As a warm child runs its role: the starter's preload of the runtime argv[1] and, with a
# fourth argument, its compile of the loader of the artifact argv[2]; then that artifact as
# `python ARTIFACT` (an empty stdin: it stops at its first wait), counting on stderr the
# loaders compiled meanwhile.
_COUNT_LOADER_COMPILES = """
import builtins, runpy, sys
import numpy, trio
server = runpy.run_path(sys.argv[1])
assert server["preload"](sys.argv[2]) is None
if len(sys.argv) > 4:
    assert server["precompile_loader"](sys.argv[3]) is None
compiled = []
plain = builtins.compile
def counting(source, filename, *rest, **options):
    if filename == "alpha/artifact/loader.py":
        compiled.append(filename)
    return plain(source, filename, *rest, **options)
builtins.compile = counting
sys.argv = [sys.argv[3]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
print(f"loaders compiled: {len(compiled)}", file=sys.stderr)
"""


@pytest.mark.parametrize("precompiled", [True, False])
def test_a_warm_child_runs_the_loader_its_starter_compiled(
    precompiled: bool, tmp_path: Path
) -> None:
    # The starter compiled the loader its roles' artifacts carry, under its SHA-256: a child
    # whose own loader checks runs that code instead of compiling the same text again.
    plan = load_plan(ROOT / "alpha" / "data" / "plans" / "tree.toml")
    compile_plan(plan, tmp_path, parse_roles("1", plan.participants))
    (runtime,) = tmp_path.glob("runtime-*.pyz")
    paths = [str(_SERVER), str(runtime), str(tmp_path / "role-000001.pyz")]
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_LOADER_COMPILES, *paths, *(["precompiled"] * precompiled)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert "failed: PortMissing" in done.stderr, done.stderr[-2000:]  # it ran its role
    assert done.stderr.splitlines()[-1] == f"loaders compiled: {0 if precompiled else 1}"
