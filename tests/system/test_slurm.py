"""``alpha run --slurm`` on a real Slurm cluster of the tests' own (harness/slurm.py: munged,
slurmctld and three ``slurmd -N`` on 127.0.0.2-4): a learner across three nodes equals the
replicated learner bit for bit; a role killed on one node is named and retried from the
latest generation; ``scancel``, the job's time limit, a node whose slurmd is stopped and a
task that cannot exec each end the run with their exact class, nothing committed and
nothing left running; ``alpha run`` killed with SIGKILL leaves neither a task nor the
allocation it made; and the job script docs/slurm.md gives runs as written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from alpha.artifact.payload import read_artifact
from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.learner.data import load_digits
from alpha.records.commit import COMMIT_NAME
from harness.processes import running
from harness.runs import recorded_round
from harness.slurm import ClusterUnavailable, SlurmCluster, running_cluster
from tests.support import ALPHA, ROOT, plans, run_alpha, run_with_faults

pytestmark = pytest.mark.slow

NODES = ("n1", "n2", "n3")
ROLES = 8  # blocks of 3, 3 and 2 on the three nodes
PLACED = ["n1", "n1", "n1", "n2", "n2", "n2", "n3", "n3"]


@pytest.fixture(scope="module")
def cluster_once() -> Iterator[SlurmCluster]:
    """One cluster for this module, stopped when its last test ends: its daemons are this
    process's children, and later modules count what is left below it."""
    try:
        with running_cluster(len(NODES)) as started:
            yield started
    except ClusterUnavailable as error:
        pytest.skip(f"no Slurm cluster here: {error}")


@pytest.fixture
def cluster(cluster_once: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster, every node idle; what a test leaves (a job, a stopped node)
    is cleared after it."""
    yield cluster_once
    for name in NODES:
        if f"slurmd-{name}" not in cluster_once.processes:
            cluster_once.start_node(name)
    cluster_once.clear()


def long_plan(path: Path, rounds: int = 100_000) -> Path:
    """A learner that runs long enough for a fault to strike it mid-run."""
    return plans.recovery_plan(path, roles=ROLES, rounds=rounds, restarts=0)


def summary_of(done: Any) -> dict[str, Any]:
    assert done.stdout, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def left_running(run: Path, job: int | None = None) -> list[int]:
    """Processes of the run still alive: a participant (its artifact in the run folder), or a
    step daemon of the job."""
    found = running(run)
    if job is not None:
        found += running(f"[{job}.")
    return found


def node_address(cluster: SlurmCluster, name: str) -> str:
    """``NodeAddr`` of node ``name``, as ``scontrol show node`` says it."""
    shown = cluster.command("scontrol", "show", "node", "-o", name).stdout
    return shown.split(" NodeAddr=", 1)[1].split()[0]


def nothing_committed(run: Path) -> None:
    reports = run / "reports"
    assert not (reports / COMMIT_NAME).exists()
    assert sorted(reports.glob("role-*.json")) == []  # no report was published


def job_of(cluster: SlurmCluster) -> int:
    """The one job the cluster runs now (the run's allocation), once it is running."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = cluster.jobs()
        if jobs:
            return int(jobs[0])
        time.sleep(0.1)
    raise AssertionError("no job appeared")


def test_a_learner_across_three_nodes_equals_the_replicated_learner(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=6, restarts=0)
    run = tmp_path / "run"
    # Inside an allocation, as an sbatch script or salloc runs it (docs/slurm.md).
    done = subprocess.run(
        ["salloc", "--nodes=3", "--time=10", *ALPHA, "run", str(plan), "-o", str(run),
         "--json", "--slurm"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = summary_of(done)
    assert summary["ok"] is True and summary["equal"] is True
    assert summary["distributed"] == replicate(load_plan(plan), load_digits()).digest
    (attempt,) = summary["attempts"]
    assert attempt["nodes"] == PLACED
    assert (run / "loss.png").is_file() and (run / "history.csv").is_file()
    assert len((run / "history.csv").read_text().splitlines()) == 1 + 6
    # Every edge listens on its listener's node, at the address Slurm gives that node.
    addresses = {name: node_address(cluster, name) for name in NODES}
    assert addresses == {"n1": "127.0.0.2", "n2": "127.0.0.3", "n3": "127.0.0.4"}
    tree = load_plan(plan).tree
    for role in range(ROLES):
        description = read_artifact(run / f"role-{role:06d}.pyz")["description"]
        assert isinstance(description, dict)
        for edge in description["edges"]:
            low = min(role, edge["peer"])
            assert edge["address"] == addresses[PLACED[low]]
            assert 23000 <= edge["port"] <= 23999  # the default range: the plan names none
        parent = tree.parent(role)
        assert parent is None or any(e["peer"] == parent for e in description["edges"])
    assert left_running(run) == []


def node_of(pid: int) -> tuple[str, str, str]:
    """The node name and task rank a participant's environment gives it (srun sets both:
    the task is its node's starter, its parent), and its parent's command line."""
    environ = dict(
        entry.split("=", 1)
        for entry in Path(f"/proc/{pid}/environ").read_text().split("\0")
        if "=" in entry
    )
    parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    starter = Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return environ["SLURMD_NODENAME"], environ["SLURM_PROCID"], starter


def test_a_role_killed_on_one_node_is_named_and_the_restart_ends_on_the_fault_free_bits(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    rounds = 40
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=rounds, restarts=1)
    run = tmp_path / "run"
    seen: list[tuple[str, str, str]] = []

    def kill_role_4() -> bool:
        pids = running(run / "role-000004.pyz")
        if not pids:
            return False
        seen.append(node_of(pids[0]))
        os.kill(pids[0], signal.SIGKILL)
        return True

    argv = ["run", str(plan), "-o", str(run), "--json", "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    code, summary, err = run_with_faults(argv, run, [(5, kill_role_4)], env=cluster.env)
    # Role 4 ran on the node the rule gives it, forked by that node's starter (task 1).
    ((node, task, starter),) = seen
    assert (node, task) == ("n2", "1")
    assert "slurm/node-starter.py --node" in starter and starter.endswith("node-1.json ")
    assert code == 0, err
    first, second = summary["attempts"]
    assert (first["failure"], first["retried"]) == ("lost", True)
    assert first["cause"].startswith("role 4: role 4 was killed by SIGKILL")
    assert first["nodes"] == second["nodes"] == PLACED
    kept = run / "attempts" / "000"
    nothing_committed(kept)
    assert summary["ok"] is True and summary["equal"] is True
    fault_free = replicate(load_plan(plan), load_digits()).digest
    assert summary["distributed"] == fault_free
    assert left_running(run) == []
    assert cluster.jobs() == []  # the allocation the run made is cancelled


def test_scancel_mid_run_is_job_cancelled_and_not_restarted(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=100_000, restarts=3)
    run = tmp_path / "run"
    jobs: list[int] = []

    def cancel() -> bool:
        jobs.append(job_of(cluster))
        cluster.command("scancel", str(jobs[0]))
        return True

    argv = ["run", str(plan), "-o", str(run), "--json", "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    code, summary, err = run_with_faults(argv, run, [(5, cancel)], env=cluster.env)
    assert code == 1, err
    (only,) = summary["attempts"]  # never restarted, though restarts remain
    assert (summary["failure"], only["failure"], only["retried"]) == (
        "cancelled",
        "cancelled",
        False,
    )
    assert summary["cause"].startswith(f"JobCancelled: job {jobs[0]} was cancelled (scancel)")
    nothing_committed(run)
    assert left_running(run, jobs[0]) == []


def test_the_job_s_time_limit_is_job_time_limit_and_not_restarted(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=100_000, restarts=3)
    run = tmp_path / "run"
    jobs: list[int] = []

    def end_soon() -> bool:
        # Slurm's own time limit, brought forward: a limit is whole minutes, so the test moves
        # the job's end to two seconds from now rather than wait one (docs/slurm.md).
        jobs.append(job_of(cluster))
        soon = (datetime.now() + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S")
        cluster.command("scontrol", "update", f"JobId={jobs[0]}", f"EndTime={soon}")
        return True

    argv = ["run", str(plan), "-o", str(run), "--json", "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    code, summary, err = run_with_faults(argv, run, [(5, end_soon)], env=cluster.env)
    assert code == 1, err
    (only,) = summary["attempts"]
    assert (summary["failure"], only["retried"]) == ("cancelled", False)
    assert summary["cause"].startswith(f"JobTimeLimit: Slurm ended job {jobs[0]} at its time limit")
    assert "DUE TO TIME LIMIT" in summary["cause"]  # slurmstepd's own words
    nothing_committed(run)
    assert left_running(run, jobs[0]) == []


def test_a_node_whose_slurmd_is_stopped_is_node_unreachable(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=6, restarts=0)
    run = tmp_path / "run"
    # slurmctld still counts n3 as up (until SlurmdTimeout), so the job gets it.
    cluster.stop_node("n3")
    done = run_alpha(
        "run",
        str(plan),
        "-o",
        str(run),
        "--json",
        "--slurm",
        "--slurm-option=--nodes=3",
        "--slurm-option=--time=10",
        env=cluster.env,
    )
    assert done.returncode == 1, done.stderr
    summary = summary_of(done)
    assert summary["failure"] == "lost"
    assert summary["cause"].startswith("role 6: NodeUnreachable: node n3 did not start roles 6, 7")
    nothing_committed(run)
    assert left_running(run) == []


def test_a_task_that_cannot_exec_is_a_usage_error_on_its_node(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = plans.recovery_plan(tmp_path / "plan.toml", roles=ROLES, rounds=6, restarts=2)
    run = tmp_path / "run"
    # A command this host has, whose exec fails on the nodes: its interpreter is missing.
    missing = tmp_path / "python3"
    missing.write_text(f"#!{tmp_path / 'no-such-python'}\n")
    missing.chmod(0o755)
    done = run_alpha(
        "run",
        str(plan),
        "-o",
        str(run),
        "--json",
        "--slurm",
        f"--interpreter=x86_64={missing}",  # the nodes' interpreter, as for --deploy
        "--slurm-option=--nodes=3",
        "--slurm-option=--time=10",
        env=cluster.env,
    )
    assert done.returncode == 1, done.stderr
    summary = summary_of(done)
    (only,) = summary["attempts"]  # a wrong command fails again: not restarted
    assert (summary["failure"], only["retried"]) == ("usage", False)
    # slurmstepd's own line, from the role's log, is its cause.
    assert (
        "slurmstepd-n" in summary["cause"]
        and "error: execve(): bad interpreter" in summary["cause"]
    )
    assert "no-such-python" in summary["cause"]
    nothing_committed(run)
    assert left_running(run) == []


def test_alpha_run_killed_with_sigkill_leaves_no_task_and_no_allocation(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    plan = long_plan(tmp_path / "plan.toml")
    run = tmp_path / "run"
    argv = [*ALPHA, "run", str(plan), "-o", str(run), "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    with subprocess.Popen(
        argv, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        job = job_of(cluster)
        while recorded_round(run) < 3:
            assert process.poll() is None
            time.sleep(0.05)
        process.kill()  # nothing of alpha's own runs after this
    # srun and salloc end with it (their parent-death signal), and with them the step and
    # the allocation.
    deadline = time.monotonic() + 60
    while (left_running(run, job) or cluster.jobs()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_running(run, job) == []
    assert cluster.jobs() == [], cluster.command("scontrol", "show", "job", check=False).stdout


def test_the_job_script_docs_slurm_md_gives_runs_as_written(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    text = (ROOT / "docs" / "slurm.md").read_text()
    script = text.split("## A job script to copy", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    # The user's folder: an install every node sees (this checkout's), and a shorter run.
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    script = script.replace("alpha run digits ", "alpha run digits --rounds 3 ")
    (tmp_path / "digits.sh").write_text(script)
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", "digits.sh"],
        cwd=tmp_path,
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    job = done.stdout.strip()
    assert done.returncode == 0, (done.stderr, (tmp_path / f"slurm-{job}.out").read_text())
    summary = json.loads((tmp_path / f"result-{job}.json").read_text())
    assert summary["ok"] is True and summary["equal"] is True
    assert summary["attempts"][0]["nodes"] == PLACED
    assert left_running(tmp_path / "runs", int(job)) == []


def test_a_role_stopped_on_its_node_runs_out_a_budget_and_the_step_is_ended(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    # A stopped role never exits by itself: its peers' budgets run out, and the launcher,
    # told by their node's starter, ends the step, the stopped role with it.
    plan = long_plan(tmp_path / "plan.toml")
    run = tmp_path / "run"
    stopped: list[int] = []

    def stop_role_4() -> bool:
        pids = running(run / "role-000004.pyz")
        if not pids:
            return False
        stopped.append(pids[0])
        os.kill(pids[0], signal.SIGSTOP)
        return True

    argv = ["run", str(plan), "-o", str(run), "--json", "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    code, summary, err = run_with_faults(argv, run, [(5, stop_role_4)], env=cluster.env)
    assert code == 1, err
    # The first budget to run out names it: role 4's, or one of a role that waited on a
    # role waiting on role 4 (a stopped role is not seen from the launcher's host, as on one
    # host it is: docs/slurm.md).
    assert summary["failure"] == "budget"
    assert "BudgetExhausted: role " in summary["cause"]
    assert "past its receive budget (3 s)" in summary["cause"]
    nothing_committed(run)
    assert left_running(run) == []


def test_alpha_run_killed_inside_a_job_leaves_no_task_and_the_job_running(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    # Inside the caller's allocation, which outlives alpha run here (the shell goes on), srun's
    # own parent-death signal is what ends the step.
    plan = long_plan(tmp_path / "plan.toml")
    run, pid_file = tmp_path / "run", tmp_path / "alpha.pid"
    command = " ".join([*ALPHA, "run", str(plan), "-o", str(run), "--slurm"])
    # A script file: a command line naming the run folder is a process of the run's.
    script = tmp_path / "job.sh"
    stop = tmp_path / "stop"  # the job's shell goes on until the test is done
    script.write_text(
        f"{command} >/dev/null 2>&1 & echo $! > {pid_file}; wait $!\n"
        f"while [ ! -e {stop} ]; do sleep 0.1; done\n"
    )
    with subprocess.Popen(
        ["salloc", "--nodes=3", "--time=10", "bash", str(script)],
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as holder:
        job = job_of(cluster)
        try:
            while recorded_round(run) < 3:
                assert holder.poll() is None
                time.sleep(0.05)
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            deadline = time.monotonic() + 30
            while left_running(run) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert left_running(run) == []
            assert cluster.steps(job) == []  # no step of the job is left
            assert str(job) in cluster.jobs()  # the caller's allocation is the caller's
        finally:
            stop.touch()  # the shell ends, and salloc gives the job back


@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_step_and_gives_the_allocation_back(
    cluster: SlurmCluster, tmp_path: Path, number: signal.Signals, code: int
) -> None:
    plan = long_plan(tmp_path / "plan.toml")
    run = tmp_path / "run"
    argv = [*ALPHA, "run", str(plan), "-o", str(run), "--slurm"]
    argv += ["--slurm-option=--nodes=3", "--slurm-option=--time=10"]
    with subprocess.Popen(
        argv, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        job = job_of(cluster)
        while recorded_round(run) < 3:
            assert process.poll() is None
            time.sleep(0.05)
        process.send_signal(number)
        _, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"run: interrupted ({number.name}) at round ")
    # The go-on command asks for an allocation again, with the same words.
    assert line.endswith(f"--slurm --slurm-option=--nodes=3 --slurm-option=--time=10 -o {run}")
    nothing_committed(run)
    assert left_running(run, job) == []
    assert cluster.jobs() == []
