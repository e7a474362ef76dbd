"""``alpha run --deploy`` on real sshds, one per node (harness/sshd.py), so that a node can be
made gone as a host that dies is (its sshd and everything under it killed): a run on the
nodes equals the replicated learner bit for bit, as on one host, and leaves nothing running;
with ``--restarts`` a spare takes a gone node's role and the run ends on the fault-free bits;
with no spare the next attempt runs on fewer roles where ``lost_role = "drop"`` allows it,
and otherwise the run ends with one line naming the node (docs/deploy.md, docs/recovery.md).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.learner.data import load_digits
from alpha.records.commit import COMMIT_NAME
from alpha.records.progress import RoundRecord, decode, encode
from alpha.records.reports import ATTEMPTS_DIR, committed_reports
from harness.sshd import Sshd, kill_host, running_sshd
from tests.support import (
    deployment_file,
    left_running,
    plans,
    run_alpha,
    run_with_faults,
    ssh_options,
)

pytestmark = pytest.mark.slow

ROLES = 3
ROUNDS = 60
KILLED_AT = 5  # a round past the generation of round 4 (one every 2 rounds)


@contextlib.contextmanager
def sshds(tmp_path: Path, count: int) -> Iterator[list[Sshd]]:
    """``count`` sshds of the test's own: a machine each."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_sshd(tmp_path / f"sshd-{k}")) for k in range(count)]


def run_argv(plan: Path, run: Path, deployment: Path, started: list[Sshd]) -> list[str]:
    return [
        "run",
        str(plan),
        "-o",
        str(run),
        "--json",
        "--deploy",
        str(deployment),
        f"--interpreter=x86_64={sys.executable}",
        *ssh_options(*started),
    ]


def fault_free(plan: Path) -> str:
    return replicate(load_plan(plan), load_digits()).digest


def history_rounds(run: Path) -> list[int]:
    with (run / "history.csv").open() as file:
        return [int(row["round"]) for row in csv.DictReader(file)]


def followed_rounds(run: Path) -> list[int]:
    """The rounds of the progress records brought from role 0's node for the last attempt,
    in the order they came: what the rounds bar showed."""
    text = (run / "progress" / "role-000000.jsonl").read_bytes()
    records = [decode(line) for line in text.splitlines()]
    return [record.round for record in records if isinstance(record, RoundRecord)]


def kill_once(sshd: Sshd) -> Callable[[], bool]:
    def act() -> bool:
        kill_host(sshd)
        return True

    return act


def test_a_run_on_a_deployment_equals_the_replicated_learner_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    rounds = 6
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=rounds, restarts=0)
    remote, run = tmp_path / "remote", tmp_path / "run"
    # What an earlier launch into the same remote root left on the nodes: role 0's progress
    # records of other rounds, and reports with a commit record. None of it is this run's.
    stale = RoundRecord(round=1, loss=9.0, train_accuracy=0.0, holdout_accuracy=0.0)
    (remote / "progress").mkdir(parents=True)
    (remote / "progress" / "role-000000.jsonl").write_bytes(encode(stale) * 3)
    (remote / "reports").mkdir()
    for name in (COMMIT_NAME, "role-000000.json", "role-000007.json"):
        (remote / "reports" / name).write_text("{}")
    with sshds(tmp_path, ROLES) as started:
        deployment = deployment_file(
            tmp_path / "deploy.json", remote, [(sshd, 0) for sshd in started]
        )
        done = run_alpha(*run_argv(plan, run, deployment, started))
        assert done.returncode == 0, done.stderr
        # Every ssh session, forward and tail ended with the run.
        assert left_running(remote, *started) == []
    summary: dict[str, Any] = json.loads(done.stdout)
    assert summary["ok"] is True and summary["equal"] is True
    assert summary["distributed"] == fault_free(plan)
    (only,) = summary["attempts"]
    assert only["nodes"] == ["node-0", "node-1", "node-2"]
    # The rounds were followed from role 0's node, and none of the earlier records was read.
    assert followed_rounds(run) == list(range(1, rounds + 1))
    assert history_rounds(run) == list(range(1, rounds + 1))
    with (run / "history.csv").open() as file:
        assert all(float(row["loss"]) != 9.0 for row in csv.DictReader(file))
    # The reports were brought back and are the committed ones, read as on one host.
    _, reports = committed_reports(run / "reports", load_plan(plan).tree.children)
    assert sorted(reports) == [0, 1, 2]
    assert not (remote / "reports" / "role-000007.json").exists()
    assert "run: copying 3 artifact(s) to their nodes" in done.stderr


def test_a_spare_takes_the_role_of_a_node_gone_mid_run_and_the_run_ends_on_the_fault_free_bits(
    tmp_path: Path,
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=ROUNDS, restarts=2)
    remote, run = tmp_path / "remote", tmp_path / "run"
    with sshds(tmp_path, ROLES + 1) as started:
        *nodes, spare = started
        deployment = deployment_file(
            tmp_path / "deploy.json", remote, [(sshd, 0) for sshd in nodes], spares=[spare]
        )
        argv = run_argv(plan, run, deployment, started)
        # Node 1's host dies: its sshd, its sessions and role 1's participant, all at once.
        code, summary, err = run_with_faults(argv, run, [(KILLED_AT, kill_once(nodes[1]))])
        assert code == 0, err
        assert left_running(remote, *started) == []
    assert summary["ok"] is True
    # Compared with the replicated learner from round 0, not from the attempt's generation.
    assert summary["distributed"] == summary["replicated"] == fault_free(plan)
    first, second = summary["attempts"]
    assert (first["failure"], first["retried"]) == ("lost", True)
    assert (second["failure"], second["retried"]) == ("", False)
    assert first["nodes"] == ["node-0", "node-1", "node-2"]
    assert second["nodes"] == ["node-0", "spare-0", "node-2"]
    assert [first["roles"], second["roles"]] == [ROLES, ROLES]
    assert 2 <= second["resumed_at"] <= first["reached"] and second["resumed_at"] % 2 == 0
    said = [line for line in err.splitlines() if "does not answer" in line]
    assert len(said) == 1, err
    assert said[0].startswith(
        f"run: node node-1 does not answer (ssh: connect to host 127.0.0.1 port {nodes[1].port}"
    )
    assert said[0].endswith("); spare spare-0 takes role 1")
    # Every round once, over both attempts; the failed attempt's records are kept apart, and
    # the next attempt followed its own rounds only (node 0 held the failed attempt's records).
    assert history_rounds(run) == list(range(1, ROUNDS + 1))
    assert followed_rounds(run) == list(range(second["resumed_at"] + 1, ROUNDS + 1))
    assert (run / ATTEMPTS_DIR / "000" / "progress" / "role-000000.jsonl").is_file()


def test_with_no_spare_and_lost_role_drop_the_next_attempt_runs_on_fewer_roles(
    tmp_path: Path,
) -> None:
    plan = plans.recovery_plan(
        tmp_path / "plan.toml", roles=ROLES, rounds=ROUNDS, restarts=2, contributors=ROLES
    )
    remote, run = tmp_path / "remote", tmp_path / "run"
    with sshds(tmp_path, ROLES) as started:
        deployment = deployment_file(
            tmp_path / "deploy.json", remote, [(sshd, 0) for sshd in started]
        )
        argv = run_argv(plan, run, deployment, started)
        code, summary, err = run_with_faults(argv, run, [(KILLED_AT, kill_once(started[1]))])
        assert code == 0, err
        assert left_running(remote, *started) == []
    assert summary["ok"] is True
    assert summary["distributed"] == summary["replicated"] == fault_free(plan)
    assert [each["roles"] for each in summary["attempts"]] == [ROLES, ROLES - 1]
    assert [each["nodes"] for each in summary["attempts"]] == [
        ["node-0", "node-1", "node-2"],
        ["node-0", "node-2"],
    ]
    assert [each["failure"] for each in summary["attempts"]] == ["lost", ""]
    assert (
        f"and no spare is left: the attempt runs on {ROLES - 1} role(s), without role 1 "
        "(recovery.lost_role = 'drop')"
    ) in err
    assert history_rounds(run) == list(range(1, ROUNDS + 1))


def test_with_no_spare_and_lost_role_restart_the_run_ends_with_one_line_naming_the_node(
    tmp_path: Path,
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=ROUNDS, restarts=2)
    remote, run = tmp_path / "remote", tmp_path / "run"
    with sshds(tmp_path, ROLES) as started:
        deployment = deployment_file(
            tmp_path / "deploy.json", remote, [(sshd, 0) for sshd in started]
        )
        argv = run_argv(plan, run, deployment, started)
        code, summary, err = run_with_faults(argv, run, [(KILLED_AT, kill_once(started[1]))])
        assert left_running(remote, *started) == []
    assert code == 1, err
    assert summary["ok"] is False and summary["failure"] == "lost"
    failed, unplaced = summary["attempts"]
    assert (failed["failure"], failed["retried"]) == ("lost", True)
    assert (unplaced["failure"], unplaced["retried"], unplaced["nodes"]) == ("lost", False, None)
    assert summary["recomputed_rounds"] == failed["reached"] - unplaced["resumed_at"]
    lines = [line for line in err.splitlines() if line.startswith("run: failed: ")]
    assert lines == [f"run: failed: {summary['cause']}"], err
    assert summary["cause"].startswith(
        f"node node-1 ({started[1].destination()} port {started[1].port}) does not answer (ssh: "
        "connect to "
    )
    assert summary["cause"].endswith(
        f'and no spare is left to take role 1: add a node to "spares" in {deployment} '
        '(docs/deploy.md), or run on fewer roles with [recovery] lost_role = "drop" and '
        "learner.contributors"
    )
    assert unplaced["cause"] == summary["cause"]


def _failing_ssh(folder: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put first on PATH an ``ssh`` for which the node at ``port`` goes at the first copy to
    it: that copy, and every later call to that node, fails as a refused connection does; any
    other call runs the real ssh. A node that answers the probe and is gone while staging."""
    real = shutil.which("ssh")
    assert real is not None
    gone = folder / "gone"
    wrapper = folder / "bin" / "ssh"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(
        "#!/bin/sh\n"
        "for word; do last=$word; done\n"
        f'case " $* " in *" -p {port} "*)\n'
        f'  case "$last" in *"cat >"*) touch {gone} ;; esac\n'
        f"  if [ -e {gone} ]; then\n"
        f'    echo "ssh: connect to host 127.0.0.1 port {port}: Connection refused" >&2\n'
        "    exit 255\n"
        "  fi ;;\n"
        "esac\n"
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")


def test_a_node_gone_while_its_artifacts_are_copied_is_a_lost_attempt_a_spare_then_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds = 6
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=rounds, restarts=1)
    remote, run = tmp_path / "remote", tmp_path / "run"
    with sshds(tmp_path, ROLES + 1) as started:
        *nodes, spare = started
        deployment = deployment_file(
            tmp_path / "deploy.json", remote, [(sshd, 0) for sshd in nodes], spares=[spare]
        )
        _failing_ssh(tmp_path / "ssh", nodes[1].port, monkeypatch)
        done = run_alpha(*run_argv(plan, run, deployment, started))
        assert done.returncode == 0, done.stderr
        assert left_running(remote, *started) == []
    summary = json.loads(done.stdout)
    assert summary["ok"] is True and summary["distributed"] == fault_free(plan)
    first, second = summary["attempts"]
    assert (first["failure"], first["retried"], first["reached"]) == ("lost", True, 0)
    assert first["cause"].startswith("cannot copy role 1's artifact to node-1 (")
    assert first["nodes"] == ["node-0", "node-1", "node-2"]
    assert second["nodes"] == ["node-0", "spare-0", "node-2"]
    assert "); spare spare-0 takes role 1" in done.stderr
