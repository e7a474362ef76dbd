"""``alpha run --restarts K`` on real processes (docs/recovery.md): a role killed or stopped
mid-run is a failure a restart may end otherwise, so the next attempt starts from the latest
published generation as the run's next epoch and the run ends on the fault-free bits; a
diverging learner and an exhausted count are not retried; nothing of a failed attempt is lost
or counted twice."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alpha.checkpoint.store import published as list_published
from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.failpoints import FAILPOINTS_ENV
from alpha.learner.data import load_digits
from alpha.records.reports import ATTEMPTS_DIR
from harness.mounts import fill
from harness.processes import role_pids as running_roles
from harness.processes import state_of
from harness.runs import recorded_round
from tests.support import ALPHA, ROOT, Fault, mount_tmpfs, plans
from tests.support import run_with_faults as run_faulted

N = 4
ROUNDS = 12

pytestmark = pytest.mark.slow


def plan_file(
    tmp_path: Path,
    *,
    restarts: int,
    rate: float = 0.01,
    contributors: int | None = None,
    backoff: float = 0.1,
    folder: Path | None = None,
) -> Path:
    return plans.recovery_plan(
        tmp_path / "plan.toml",
        roles=N,
        rounds=ROUNDS,
        restarts=restarts,
        rate=rate,
        contributors=contributors,
        backoff=backoff,
        folder=folder,
    )


def role_pids(run: Path) -> dict[int, int]:
    """Each running participant of the run folder ``run``, as ``{role: pid}``."""
    return {role: pid for pid, role in running_roles(run).items()}


def last_round(run: Path) -> int:
    return recorded_round(run)


def run_with_faults(
    plan: Path, run: Path, faults: list[tuple[int, int, signal.Signals]], *argv: str
) -> tuple[int, dict[str, Any], str]:
    """``alpha run PLAN -o RUN --json ARGV``, sending each ``(round, role, signal)`` of
    ``faults`` in turn to that role once role 0 recorded that round (of whichever attempt
    runs then: a fault's round counts from the run's start); its exit code, summary, stderr."""

    def send(role: int, number: signal.Signals) -> Callable[[], bool]:
        def act() -> bool:
            pid = role_pids(run).get(role)
            if pid is None:
                return False  # not up yet
            os.kill(pid, number)
            return True

        return act

    acts: list[Fault] = [(at, send(role, number)) for at, role, number in faults]
    return run_faulted(["run", str(plan), "-o", str(run), "--json", *argv], run, acts)


def fault_free(plan: Path) -> str:
    return replicate(load_plan(plan), load_digits()).digest


@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGSTOP], ids=["SIGKILL", "SIGSTOP"])
def test_a_lost_role_is_restarted_from_the_latest_generation_and_ends_on_the_fault_free_bits(
    tmp_path: Path, number: signal.Signals
) -> None:
    plan = plan_file(tmp_path, restarts=2)
    run = tmp_path / "run"
    code, summary, err = run_with_faults(plan, run, [(5, 2, number)])
    assert code == 0, err
    assert summary["ok"] is True and summary["distributed"] == fault_free(plan)
    # Compared with the replicated learner from round 0, not from the attempt's generation.
    assert summary["replicated"] == summary["distributed"]
    first, second = summary["attempts"]
    assert first["failure"] in ("lost", "budget") and first["retried"] is True
    assert second["failure"] == "" and second["retried"] is False
    # The next attempt is the run's next epoch, from a generation the first one published.
    assert (first["epoch"], second["epoch"]) == (0, 1)
    assert 2 <= second["resumed_at"] <= first["reached"] and second["resumed_at"] % 2 == 0
    assert summary["recomputed_rounds"] == first["reached"] - second["resumed_at"]
    assert "run: attempt 1 of at most 3 resumes from " in err
    # The failed attempt's files are kept; the history has every round once.
    kept = run / ATTEMPTS_DIR / "000"
    assert (kept / "logs" / "role-000002.log").is_file()
    assert (kept / "progress" / "role-000000.jsonl").is_file()
    with (run / "history.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [int(row["round"]) for row in rows] == list(range(1, ROUNDS + 1))
    assert [int(row["round"]) for row in rows if row["resumed"] == "1"] == [
        second["resumed_at"] + 1
    ]
    # No generation was written twice: each round's, over both attempts, by one attempt.
    published = []
    for progress in (kept, run):
        for line in (progress / "progress" / "role-000000.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "checkpoint":
                published.append(record["round"])
    assert len(published) == len(set(published)), published
    # Every attempt's generations are the run's: `keep` (2) counts them together.
    assert len(list_published(run / "checkpoints")) == 2
    assert not role_pids(run), "a participant outlived the run"


def test_restarts_are_counted_and_the_last_failure_ends_the_run(tmp_path: Path) -> None:
    plan = plan_file(tmp_path, restarts=0)
    run = tmp_path / "run"
    faults = [(3, 1, signal.SIGKILL), (7, 3, signal.SIGKILL)]
    code, summary, err = run_with_faults(plan, run, faults, "--restarts", "1")
    assert code == 1, err
    assert [each["failure"] for each in summary["attempts"]] == ["lost", "lost"]
    assert [each["retried"] for each in summary["attempts"]] == [True, False]
    assert summary["cause"].endswith("(no restart left: all 1 were used)")
    assert summary["ok"] is False and summary["distributed"] is None
    # The run's plots and history, written once, as it ended: every round done, the resume
    # marked (none is drawn for the failed attempt a restart followed).
    second = summary["attempts"][1]
    with Path(summary["history_csv"]).open() as file:
        rows = list(csv.DictReader(file))
    assert [int(row["round"]) for row in rows] == list(range(1, second["reached"] + 1))
    assert [int(row["round"]) for row in rows if row["resumed"] == "1"] == [
        second["resumed_at"] + 1
    ]
    assert Path(summary["loss_png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_diverging_learner_is_not_retried(tmp_path: Path) -> None:
    plan = plan_file(tmp_path, restarts=3, rate=1e6)
    assert replicate(load_plan(plan), load_digits()).diverged_at is not None
    run = tmp_path / "run"
    code, summary, err = run_with_faults(plan, run, [])
    assert code == 1, err
    (only,) = summary["attempts"]
    assert (only["failure"], only["retried"]) == ("divergence", False)
    assert summary["failure"] == "divergence" and not (run / ATTEMPTS_DIR).exists()


def test_with_contributors_a_lost_role_is_dropped_and_the_bits_are_the_same(tmp_path: Path) -> None:
    plan = plan_file(tmp_path, restarts=2, contributors=N)
    run = tmp_path / "run"
    code, summary, err = run_with_faults(plan, run, [(5, 3, signal.SIGKILL)])
    assert code == 0, err
    assert [each["roles"] for each in summary["attempts"]] == [N, N - 1]
    assert summary["ok"] is True and summary["distributed"] == fault_free(plan)
    assert f"on {N - 1} roles (recovery.lost_role = 'drop')" in err


def test_a_signal_between_attempts_stops_the_run_with_its_one_line(tmp_path: Path) -> None:
    plan = plan_file(tmp_path, restarts=3, backoff=30.0)
    run = tmp_path / "run"
    command = [*ALPHA, "run", str(plan), "-o", str(run)]
    with subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        while last_round(run) < 5 or 2 not in role_pids(run):
            assert process.poll() is None, "the run ended before its fault"
            time.sleep(0.01)
        os.kill(role_pids(run)[2], signal.SIGKILL)
        said = []
        for line in process.stderr:
            said.append(line)
            if " resumes from " in line:
                process.send_signal(signal.SIGINT)  # in the 30 s of backoff
        code = process.wait(timeout=60)
    assert code == 128 + signal.SIGINT, said
    assert said[-1].startswith("run: interrupted (SIGINT) at round ")
    assert not role_pids(run)


def _until_stopped(pid: int) -> None:
    """Wait until ``pid`` stopped itself at a failpoint (state T)."""
    while state_of(pid) != "T":
        assert state_of(pid) not in ("", "Z"), f"process {pid} ended before its failpoint"
        time.sleep(0.01)


def _damage(generation: Path) -> None:
    """Flip one byte of every shard of ``generation``: what a failing disk does."""
    shards = sorted((generation / "shards").iterdir())
    assert shards
    for shard in shards:
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))


def test_a_generation_damaged_before_the_next_attempt_is_a_usage_failure_not_retried(
    tmp_path: Path,
) -> None:
    """The generation the next attempt resumes from is damaged after alpha run checked it and
    before its roles load it: each refuses it (CheckpointCorrupt, exit 2), which is the same
    at any attempt, so the run ends there with nothing more tried."""
    plan = plan_file(tmp_path, restarts=3)
    run = tmp_path / "run"
    command = [*ALPHA, "run", str(plan), "-o", str(run), "--json"]
    env = {**os.environ, FAILPOINTS_ENV: "run.compiling@0"}  # alpha run stops before compiling
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        _until_stopped(process.pid)  # attempt 0
        os.kill(process.pid, signal.SIGCONT)
        while last_round(run) < 5 or 2 not in role_pids(run):
            assert process.poll() is None, "the run ended before its fault"
            time.sleep(0.01)
        os.kill(role_pids(run)[2], signal.SIGKILL)
        _until_stopped(process.pid)  # attempt 1: its generation is chosen and checked
        for generation in list_published(run / "checkpoints"):
            _damage(generation)
        while process.poll() is None:  # a later attempt, were there one, stops there too
            if state_of(process.pid) == "T":
                os.kill(process.pid, signal.SIGCONT)
            time.sleep(0.01)
        out, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    summary = json.loads(out)
    first, second = summary["attempts"]
    assert (first["failure"], first["retried"]) in (("lost", True), ("budget", True))
    assert (second["failure"], second["retried"]) == ("usage", False)
    assert summary["failure"] == "usage"
    assert "attempt 2" not in err
    assert "CheckpointCorrupt" in summary["cause"], summary["cause"]
    assert not role_pids(run)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: room for the checkpoint folder's first generations, then filled."""
    yield from mount_tmpfs(tmp_path / "tmpfs", "size=512k")


def test_a_checkpoint_folder_that_fills_up_is_an_error_not_retried(
    tmp_path: Path, small_tmpfs: Path
) -> None:
    """Role 0 stops after its first generation is published; the checkpoint folder's file
    system is then filled, so the next generation cannot be written (CheckpointWriteFailed):
    a fresh attempt would find the same full disk, so the run ends with one attempt."""
    plan = plan_file(tmp_path, restarts=3, folder=small_tmpfs / "checkpoints")
    run = tmp_path / "run"
    command = [*ALPHA, "run", str(plan), "-o", str(run), "--json"]
    env = {**os.environ, FAILPOINTS_ENV: "checkpoint.published@0"}
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        while 0 not in role_pids(run) or state_of(role_pids(run)[0]) != "T":
            assert process.poll() is None, "the run ended before its first generation"
            time.sleep(0.01)
        fill(small_tmpfs)
        os.kill(role_pids(run)[0], signal.SIGCONT)
        out, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    summary = json.loads(out)
    (only,) = summary["attempts"]
    assert (only["failure"], only["retried"]) == ("error", False)
    assert "CheckpointWriteFailed" in summary["cause"], summary["cause"]
    assert "No space left on device" in summary["cause"], summary["cause"]
    assert not (run / ATTEMPTS_DIR).exists() and not role_pids(run)
