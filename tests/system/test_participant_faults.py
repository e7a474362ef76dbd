"""A participant's own faults, on real processes: one whose launcher died while it announced
stops with ``LauncherLost`` (never a ``BrokenPipeError`` traceback), and any exception that is
not one of Alpha's is one line with its class on stderr, which the launcher reports as the
role's cause (``ALPHA_TRACEBACK=1`` adds the traceback before it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alpha.artifact.participant import TRACEBACK_ENV
from alpha.core.budgets import Budgets
from alpha.core.topology import ParticipantTree
from alpha.failpoints import FAILPOINTS_ENV
from alpha.files import STAGED_SUFFIX
from alpha.runtime.parent import LAUNCHER_POLL
from harness.compiled import CompiledRun
from harness.processes import EXEC_POLL, alive_children, descendants_of, running, state_of
from tests.support import ALPHA

pytestmark = pytest.mark.slow

BUDGETS = Budgets(accept=30.0, receive=30.0, deadline=120.0)
TREE = ParticipantTree(4, 2)


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_role_whose_launcher_died_while_it_announced_stops_with_launcher_lost(
    tmp_path: Path, start: str
) -> None:
    # Role 1 stops itself with its listeners up, before it announces; the launcher is killed
    # then; role 1 goes on and writes its ports to a stdout no one reads (EPIPE).
    run = CompiledRun.exchange(tmp_path, TREE, budgets=BUDGETS)
    artifact = run.specs[1].argv[-1]
    environment = {**os.environ, FAILPOINTS_ENV: "participant.announcing@1"}
    err = tmp_path / "launch.err"
    with err.open("wb") as out:
        launcher = subprocess.Popen(
            [
                *ALPHA,
                "launch",
                str(run.folder),
                *(["--cold"] if start == "cold" else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=environment,
        )
    below: list[int] = []
    role_1 = 0
    try:
        # Role 1 reaches its failpoint; the launcher's announce bound ends this otherwise.
        while not (found := running(artifact, whole=True)) or state_of(found[0]) != "T":
            assert launcher.poll() is None, err.read_text()
            time.sleep(EXEC_POLL)
        role_1 = found[0]
        below = descendants_of(launcher.pid)
        assert role_1 in below
        launcher.kill()
        assert launcher.wait() == -signal.SIGKILL
        os.kill(role_1, signal.SIGCONT)
        # A participant's own exit once it noticed: seconds on a loaded host.
        give_up = time.monotonic() + LAUNCHER_POLL + 10.0
        while left := [pid for pid in below if state_of(pid) not in ("", "Z")]:
            assert time.monotonic() < give_up, f"still running: {left}"
            time.sleep(0.02)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid in below:
            if state_of(pid) not in ("", "Z"):
                os.kill(pid, signal.SIGKILL)
    log = run.log(1)
    assert "Traceback" not in log and "BrokenPipeError" not in log, log
    clock, cause = log.splitlines()[-2:]
    assert clock.startswith("role 1: failure-clock "), log
    assert cause.startswith("role 1: failed: LauncherLost: the launcher (pid "), cause
    assert "(no one reads this participant's stdout, where it announces its ports)" in cause


def _broken_report(run: CompiledRun, role: int) -> Path:
    """Make ``role``'s staged report path a folder: its first write of the run (removing a
    stale report) fails with an OS error no check of Alpha's turns into a refusal."""
    staged = run.reports / f"role-{role:06d}.json{STAGED_SUFFIX}"
    staged.mkdir(parents=True)
    return staged


@pytest.mark.parametrize("traceback", [False, True])
async def test_an_unexpected_exception_is_one_line_and_the_launcher_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traceback: bool
) -> None:
    if traceback:
        monkeypatch.setenv(TRACEBACK_ENV, "1")
    run = CompiledRun.exchange(tmp_path, TREE, budgets=BUDGETS)
    staged = _broken_report(run, 1)
    result = await run.launch(warm=True)
    failure = result.first_to_fail
    assert failure is not None and failure.role == 1, result.outcomes
    one_line = (
        f"role 1: failed: IsADirectoryError: [Errno 21] Is a directory: '{staged}' (not one of "
        f"Alpha's refusals: set {TRACEBACK_ENV}=1 for its traceback)"
    )
    assert failure.cause == f"{one_line}; its log: {run.log_path(1)}"
    assert failure.logged  # timed by its own failure-clock line
    lines = run.log(1).splitlines()
    assert lines[-1] == one_line
    assert lines[-2].startswith("role 1: failure-clock ")
    assert ("Traceback (most recent call last):" in lines) == traceback
    assert alive_children() == []


def test_an_artifact_that_cannot_make_its_reports_folder_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    # Before the participant runs, the artifact's entry makes reports/ beside it: a plain file
    # of that name is an OSError no check turns into a refusal, told in one line, exit 2.
    run = CompiledRun.exchange(tmp_path, TREE, budgets=BUDGETS)
    reports = run.folder / "reports"
    if reports.is_dir():
        reports.rmdir()
    reports.write_text("not a folder")
    artifact = run.specs[1].argv[-1]
    done = subprocess.run(
        [sys.executable, artifact],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key != TRACEBACK_ENV},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("role 1: failed: FileExistsError: "), lines
    assert lines[0].endswith(
        "(not one of Alpha's refusals: set ALPHA_TRACEBACK=1 for its traceback)"
    )
    traced = subprocess.run(
        [sys.executable, artifact],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, TRACEBACK_ENV: "1"},
        timeout=60,
    )
    assert traced.returncode == 2
    assert "Traceback (most recent call last)" in traced.stderr
    assert traced.stderr.splitlines()[-1] == lines[0]
