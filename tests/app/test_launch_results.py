"""What ``alpha launch`` shows and leaves, on real processes (docs/launch.md): a status line a
phase instead of a line per role; for a learner folder the rounds, the summary ``alpha run``
prints (but for the replicated learner) and a loss curve and history written fresh from this
launch; for a sum check what was checked; and a fresh attempt area per launch and per compile,
so no commit record, report, log or progress file of an earlier launch or a larger build sits
beside this one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.learner.data import load_digits
from alpha.records.folder import (
    COMMIT_NAME,
    HISTORY_CSV,
    LOGS_DIR,
    LOSS_PNG,
    PROGRESS_DIR,
    REPORTS_DIR,
    log_name,
    report_name,
)
from tests.support import plan_text, run_alpha

pytestmark = pytest.mark.slow

BUDGETS = {"accept": 20.0, "receive": 30.0}

#: A failpoint no participant knows: every role refuses to start with it, exit 2, so the launch
#: fails on real processes, before any role commits (alpha/failpoints.py).
BROKEN = {**os.environ, "ALPHA_FAILPOINTS": "no.such.point@0"}


def _sum_check(tmp_path: Path, roles: int, choice: str | None = None) -> Path:
    plan = tmp_path / f"sums-{roles}.toml"
    plan.write_text(
        plan_text(
            "sums",
            roles=roles,
            rounds=2,
            topology={"shape": "tree", "fanout": 2},
            budgets=BUDGETS,
            work={"kind": "sum-check", "size": 8, "choice": choice},
        )
    )
    return plan


def _learner(tmp_path: Path) -> Path:
    plan = tmp_path / "learn.toml"
    plan.write_text(
        plan_text(
            "learn",
            roles=2,
            rounds=3,
            topology={"shape": "tree", "fanout": 2},
            budgets=BUDGETS,
            contract={"dtype": "float32", "delivery": "all"},
            work={"kind": "learn"},
            learner={"kind": "mlp", "hidden": 8, "rate": 0.1, "seed": 3, "dataset": "digits"},
        )
    )
    return plan


def _compile(plan: Path, folder: Path) -> None:
    done = run_alpha("compile", str(plan), "-o", str(folder))
    assert done.returncode == 0, done.stderr


def _files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


def test_a_sum_check_launch_says_what_was_checked_one_line_a_phase(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _compile(_sum_check(tmp_path, 5, choice="parity"), folder)
    done = run_alpha("launch", str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "launch: sum check: 5 roles, 2 rounds, every combined sum equal to the expected one "
        "(checked by every role); arm 1 (negated) in 1 of 2 rounds; 4 of 4 edge(s) carried frames "
        "both ways"
    ]
    lines = done.stderr.splitlines()
    assert "announced" not in done.stderr  # one line a phase, not one a role
    assert len(lines) == 3, lines
    assert lines[0].startswith("launch: checked 5 artifacts in ")
    assert lines[1].startswith("launch: 5 roles up in ")
    assert lines[2].startswith("launch: 5 role(s) finished in ")
    as_json = run_alpha("launch", str(folder), "--json")
    value = json.loads(as_json.stdout)
    for key in ("ok", "directory", "roles", "elapsed_s", "first_failure", "signal", "logs"):
        assert key in value  # the keys it had keep their meaning
    assert value["ok"] is True and value["work"] == "sum-check" and value["learner"] is None
    assert value["sum_check"] == {
        "roles": 5,
        "rounds": 2,
        "checked_by": "every role",
        "arms": [1, 1],
        "edges": 4,
        "edges_both_ways": 4,
    }


def test_a_failed_launch_leaves_nothing_of_the_launch_before(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _compile(_sum_check(tmp_path, 3), folder)
    first = run_alpha("launch", str(folder))
    assert first.returncode == 0, first.stderr
    assert (folder / REPORTS_DIR / COMMIT_NAME).is_file()
    for log in (folder / LOGS_DIR).glob("*.log"):
        with log.open("a") as file:
            file.write("a line of the first launch\n")
    failed = run_alpha("launch", str(folder), env=BROKEN)
    assert failed.returncode == 1, failed.stderr
    assert "failed first" in failed.stderr and "sum check" not in failed.stdout
    # Not the earlier launch's commit record, nor any of its reports.
    assert _files(folder / REPORTS_DIR) == []
    # Every log is this launch's (a role stopped before it wrote a line has an empty one).
    logs = [log.read_text() for log in sorted((folder / LOGS_DIR).glob("*.log"))]
    assert len(logs) == 3 and any("no.such.point" in text for text in logs)
    assert not any("the first launch" in text for text in logs)


def test_compiling_fewer_roles_into_a_folder_leaves_only_theirs(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _compile(_sum_check(tmp_path, 8), folder)
    assert run_alpha("launch", str(folder)).returncode == 0
    assert len(_files(folder / LOGS_DIR)) == 8 and len(_files(folder / REPORTS_DIR)) == 9
    _compile(_sum_check(tmp_path, 4), folder)
    # Nothing of the 8-role run is left: its artifacts, logs, reports and commit record.
    assert sorted(path.name for path in folder.glob("role-*.pyz")) == [
        f"role-{role:06d}.pyz" for role in range(4)
    ]
    assert _files(folder / LOGS_DIR) == [] and _files(folder / REPORTS_DIR) == []
    again = run_alpha("launch", str(folder))
    assert again.returncode == 0, again.stderr
    assert _files(folder / LOGS_DIR) == [log_name(role) for role in range(4)]
    assert _files(folder / REPORTS_DIR) == sorted(
        [COMMIT_NAME, *(report_name(role) for role in range(4))]
    )


def test_a_learner_launch_shows_the_run_summary_and_writes_its_own_results(
    tmp_path: Path,
) -> None:
    plan = _learner(tmp_path)
    folder = tmp_path / "run"
    _compile(plan, folder)
    # What an earlier run left, which this launch must not leave in place.
    (folder / LOSS_PNG).write_bytes(b"an earlier run's plot")
    (folder / HISTORY_CSV).write_text("an earlier run's history\n")
    done = run_alpha("launch", str(folder))
    assert done.returncode == 0, done.stderr
    rows = {line[:19].rstrip(): line[20:] for line in done.stdout.splitlines()}
    replica = replicate(load_plan(plan), load_digits())
    assert rows["final parameters"] == replica.digest  # the same bits alpha run would show
    assert rows["all roles agree"] == "yes (2 of 2)"
    assert rows["replicated learner"].startswith("not compared")
    assert rows["held-out accuracy"].endswith("%")
    assert rows["loss curve"] == str(folder / LOSS_PNG)
    assert rows["history"] == str(folder / HISTORY_CSV)
    assert (folder / LOSS_PNG).read_bytes().startswith(b"\x89PNG")
    history = (folder / HISTORY_CSV).read_text().splitlines()
    assert len(history) == 1 + 3 and history[1].startswith("1,")
    assert "round 3/3" in done.stderr and "launch: 2 roles up in " in done.stderr
    as_json = json.loads(run_alpha("launch", str(folder), "--json").stdout)
    assert as_json["work"] == "learn" and as_json["sum_check"] is None
    learner = as_json["learner"]
    assert learner["final_parameters"] == replica.digest and learner["agree"] is True
    assert (learner["rounds"], learner["rounds_done"], learner["replicated"]) == (3, 3, None)
    # A launch that fails before its first round leaves no plot or history at all: none of
    # the launch before.
    failed = run_alpha("launch", str(folder), env=BROKEN)
    assert failed.returncode == 1
    assert not (folder / LOSS_PNG).exists() and not (folder / HISTORY_CSV).exists()
    assert _files(folder / PROGRESS_DIR) == [] and _files(folder / REPORTS_DIR) == []
