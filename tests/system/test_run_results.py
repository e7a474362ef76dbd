"""``alpha run`` as a result, whatever the run came to: a diverging learner stops at its first
non-finite loss everywhere and still gets its summary, history and plots (exit 1); a run
stopped by Ctrl-C exits 130 and commits nothing; a second run into a folder in use is refused;
``--json`` says all of it in one object. Real participant processes throughout."""

from __future__ import annotations

import csv
import json
import math
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from alpha.app.run import DEFAULT_PLAN
from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.errors import FolderInUse
from alpha.learner.data import load_digits
from alpha.records.commit import COMMIT_NAME
from harness.processes import running
from tests.support import ALPHA, ROOT, run_alpha


@pytest.mark.slow
def test_a_diverging_learner_stops_at_its_first_non_finite_loss_and_keeps_its_results(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "diverging.toml"
    plan.write_text(DEFAULT_PLAN.read_text().replace("rate = 0.15", "rate = 5.0"))
    expected = replicate(load_plan(plan), load_digits())
    assert expected.diverged_at is not None, "this rate must diverge for the test to mean much"
    folder = tmp_path / "run"
    done = run_alpha("run", str(plan), "-o", str(folder), "--json", cwd=ROOT)
    assert done.returncode == 1, done.stderr
    # One line says what happened; numpy's overflow warnings and tracebacks do not leak.
    said = [line for line in done.stderr.splitlines() if line.startswith("run: ")]
    assert said[-1] == (
        f"run: diverged: the training loss of round {expected.diverged_at} is inf, so the run "
        "stopped there and committed nothing (learner.rate is 5.0; a lower one usually helps)"
    )
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["equal"] is False
    assert result["diverged_at"] == result["replicated_diverged_at"] == expected.diverged_at
    assert result["rounds_done"] == expected.diverged_at and result["rounds"] == 30
    assert result["holdout_accuracy"] == expected.history[-2][3]  # the last finite round's
    # Role 0 stopped the round; every role aborted; nothing was committed or left running.
    assert not (folder / "reports" / COMMIT_NAME).exists()
    assert list((folder / "reports").glob("role-*.json")) == []
    log = (folder / "logs" / "role-000000.log").read_text()
    assert f"LossNotFinite: role 0: the training loss of round {expected.diverged_at}" in log
    # Every other role stopped for that cause: it says it was aborted by role 0 with
    # LossNotFinite, unless the launcher stopped it first (it then says nothing of its own).
    for role in range(1, 8):
        text = (folder / "logs" / f"role-{role:06d}.log").read_text()
        said = [line for line in text.splitlines() if line.startswith(f"role {role}: failed: ")]
        for line in said:
            assert re.search(r"aborted by role 0( \(relayed by role \d+\))?: LossNotFinite", line)
    assert running(folder) == []
    # The history, every round up to the non-finite one, equal to the replicated learner's.
    with open(result["history_csv"], newline="") as data:
        rows = list(csv.reader(data))
    assert rows[0] == ["round", "loss", "train_accuracy", "holdout_accuracy", "resumed"]
    assert [int(row[0]) for row in rows[1:]] == list(range(1, expected.diverged_at + 1))
    assert [float(row[1]) for row in rows[1:-1]] == [entry[1] for entry in expected.history[:-1]]
    assert math.isinf(float(rows[-1][1]))
    assert Path(result["loss_png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Off --json, the same as a table of plain lines.
    again = run_alpha("run", str(plan), "-o", str(tmp_path / "again"), cwd=ROOT)
    assert again.returncode == 1
    assert f"rounds              {expected.diverged_at} of 30: diverged at round" in again.stdout
    assert f"diverges at round {expected.diverged_at} too" in again.stdout

    # The replicated learner alone says the same, exit 1.
    alone = run_alpha("replicate", str(plan), "--json", cwd=ROOT)
    assert alone.returncode == 1
    assert json.loads(alone.stdout)["diverged_at"] == expected.diverged_at
    assert "Warning" not in alone.stderr


def _when(condition: object, within: float = 120.0) -> None:
    give_up = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < give_up, "the run never got there"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_run_holds_its_folder_and_ctrl_c_stops_it_with_130_committing_nothing(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "long.toml"
    plan.write_text(DEFAULT_PLAN.read_text().replace("rounds = 30", "rounds = 100000"))
    folder = tmp_path / "run"
    first = subprocess.Popen(
        [*ALPHA, "run", str(plan), "-o", str(folder), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        records = folder / "progress" / "role-000000.jsonl"
        _when(lambda: records.exists() and records.read_text().count("\n") >= 3)
        # A second run into the same folder is refused at once, touching nothing.
        second = run_alpha("run", str(plan), "-o", str(folder), cwd=ROOT)
        assert second.returncode == 2
        assert second.stderr == (
            f"alpha: error: {folder} is in use by alpha run (pid {first.pid}): wait for it to "
            "end, or pass another folder with -o\n"
        )
        assert first.poll() is None, "the first run goes on"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 130, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith("run: interrupted (SIGINT) at round "), err
    assert "Traceback" not in err
    result = json.loads(out)
    assert result["signal"] == "SIGINT" and result["ok"] is False
    assert result["rounds_done"] >= 3
    assert not (folder / "reports" / COMMIT_NAME).exists()
    assert running(folder) == []
    # The rounds it did are kept, whole.
    rows = (folder / "history.csv").read_text().splitlines()
    assert len(rows) == 1 + result["rounds_done"]


def test_a_folder_in_use_is_an_input_error() -> None:
    assert FolderInUse("runs/x", "alpha run (pid 1)").exit_code == 2
