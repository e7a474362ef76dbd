"""What Slurm's commands print, read as values, and the files srun reads, written from values
(``alpha.launch.slurm_lines``). The lines are the ones Slurm 22.05 printed on the test
cluster (harness/slurm.py) for each case."""

from __future__ import annotations

import shlex
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.errors import SlurmUnavailable
from alpha.launch.slurm_lines import (
    CANCELLED,
    NODE_FAILURE,
    TIME_LIMIT,
    JobRecord,
    ended_by,
    field_of,
    hostfile,
    hostnames,
    job_record,
    multi_prog,
    node_address,
    srun_event,
    stepd_lines,
    task_ranks,
)
from tests.support import raises_exactly

NODE_LINE = (
    "NodeName=n2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=1.78 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.3 "
    "NodeHostName=vm Port=17002 Version=22.05.8 OS=Linux 6.18.44-fc-v1300 #1 SMP "
    "PREEMPT_DYNAMIC @0  RealMemory=2000 AllocMem=0 FreeMem=20085 Sockets=8 State=IDLE"
)
JOB_LINE = (
    "JobId=7 JobName=no-shell UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901753 Nice=0 Account=(null) QOS=(null) JobState=COMPLETING "
    "Reason=TimeLimit Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Reboot=0 "
    "ExitCode=0:0 RunTime=00:01:00 TimeLimit=00:01:00 NodeList=n[1-3] BatchHost=n1"
)


def test_hostnames_are_one_a_line_in_slurms_order() -> None:
    assert hostnames("n1\nn2\nn3\n") == ("n1", "n2", "n3")
    assert hostnames("  node-07.rack2 \n\n") == ("node-07.rack2",)
    raises_exactly(SlurmUnavailable, hostnames, "")
    raises_exactly(SlurmUnavailable, hostnames, "n1\nn[2-3]\n")


def test_a_field_is_read_by_its_key_though_values_hold_spaces() -> None:
    assert field_of(NODE_LINE, "NodeAddr") == "127.0.0.3"
    assert field_of(NODE_LINE, "OS") == "Linux"  # up to the space: never a field read
    assert field_of(NODE_LINE, "Addr") is None  # a key, not the end of one
    assert node_address(NODE_LINE + "\n", "n2") == "127.0.0.3"
    raises_exactly(SlurmUnavailable, node_address, NODE_LINE, "n3")
    raises_exactly(SlurmUnavailable, node_address, "NodeName=n2 NodeAddr= State=IDLE", "n2")


def test_a_job_record_says_how_slurm_ended_it() -> None:
    record = job_record(JOB_LINE, 7)
    assert record == JobRecord(7, "COMPLETING", "TimeLimit", "n[1-3]")
    assert record.ended_by == TIME_LIMIT
    assert JobRecord(7, "RUNNING", "None", "n1").ended_by is None
    assert JobRecord(7, "TIMEOUT", "None", "n1").ended_by == TIME_LIMIT
    assert JobRecord(7, "NODE_FAIL", "None", "n1").ended_by == NODE_FAILURE
    assert JobRecord(7, "COMPLETING", "NodeDown", "n1").ended_by == NODE_FAILURE
    # Right after scancel a job shows COMPLETING with no reason, then CANCELLED.
    assert JobRecord(7, "COMPLETING", "None", "n1").ended_by == CANCELLED
    assert JobRecord(7, "CANCELLED", "None", "n1").ended_by == CANCELLED
    raises_exactly(SlurmUnavailable, job_record, JOB_LINE, 8)


@pytest.mark.parametrize(
    ("line", "node", "tasks", "code"),
    [
        ("srun: error: n2: task 1: Exited with exit code 3", "n2", (1,), 3),
        ("srun: error: n1: tasks 0-2: Killed", "n1", (0, 1, 2), -signal.SIGKILL),
        ("srun: error: n3: tasks 6-7: Terminated", "n3", (6, 7), -signal.SIGTERM),
        ("srun: error: n1: tasks 0,2,5-6: Exited with exit code 143", "n1", (0, 2, 5, 6), 143),
        ("srun: error: n2: task 4: Segmentation fault", "n2", (4,), -signal.SIGSEGV),
        ("srun: error: n2: task 4: Something else", "n2", (4,), None),
    ],
)
def test_srun_reports_how_tasks_ended(
    line: str, node: str, tasks: tuple[int, ...], code: int | None
) -> None:
    event = srun_event(line)
    assert event is not None
    assert (event.node, event.tasks, event.code) == (node, tasks, code)
    assert not event.launch_failed and not event.node_failed


def test_srun_reports_a_node_that_did_not_start_its_tasks_or_failed() -> None:
    event = srun_event(
        "srun: error: Task launch for StepId=19.0 failed on node n3: "
        "Communication connection failure"
    )
    assert event is not None and event.launch_failed
    assert (event.node, event.reason) == ("n3", "Communication connection failure")
    event = srun_event("srun: error: Node failure on n2")
    assert event is not None and event.node_failed and event.node == "n2"


@pytest.mark.parametrize(
    "line",
    [
        "srun: forcing job termination",
        "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.",
        "srun: error: Application launch failed: Communication connection failure",
        "srun: launch/slurm: _step_signal: Terminating StepId=2.0",
        "srun: error: n1: tasks 2-0: Killed",  # no such list of ranks
        "",
    ],
)
def test_every_other_line_is_no_event(line: str) -> None:
    assert srun_event(line) is None


@given(st.sets(st.integers(0, 5000), min_size=1))
def test_ranks_in_srun_s_ranges_read_back(ranks: set[int]) -> None:
    ordered = sorted(ranks)
    runs: list[str] = []
    start = previous = ordered[0]
    for rank in [*ordered[1:], None]:
        if rank is not None and rank == previous + 1:
            previous = rank
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if rank is not None:
            start = previous = rank
    assert task_ranks(",".join(runs)) == tuple(ordered)


@pytest.mark.parametrize("text", ["", "a", "1-", "-1", "3-1", "1,,2"])
def test_a_list_that_is_not_ranks_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        task_ranks(text)


_WORDS = st.text(st.characters(codec="utf-8", exclude_characters="'\"\\%"), min_size=1).filter(
    str.isprintable
)


@given(st.lists(st.lists(_WORDS, min_size=1, max_size=4), min_size=1, max_size=20))
def test_a_multi_prog_line_runs_its_words_as_its_task(argvs: list[list[str]]) -> None:
    lines = multi_prog(argvs).split("\n")[:-1]  # srun reads lines ended by a newline
    assert len(lines) == len(argvs)
    for rank, (line, argv) in enumerate(zip(lines, argvs, strict=True)):
        # Slurm's reader takes a single-quoted word whole, as a POSIX shell does.
        assert shlex.split(line) == [str(rank), *argv]


def test_the_multi_prog_file_of_a_run() -> None:
    text = multi_prog([("/venv/bin/python", "/runs/x/role-000000.pyz"), ("/a b/py", "c")])
    assert text == "0 /venv/bin/python /runs/x/role-000000.pyz\n1 '/a b/py' c\n"
    for word in ("it's", 'say "x"', "a\nb", "back\\slash", "tab\there", "\x1e", "role-%t.pyz"):
        raises_exactly(SlurmUnavailable, multi_prog, [("python", word)])


def test_the_hostfile_puts_task_r_on_line_r() -> None:
    assert hostfile(["n1", "n1", "n2"]) == "n1\nn1\nn2\n"
    raises_exactly(SlurmUnavailable, hostfile, ["n1", "n 2"])


def test_slurmstepd_s_lines_are_taken_out_of_a_role_s_log() -> None:
    log = (
        "role 0: failure-clock 1796624589.897700\n"
        "role 0: failed: PeerLost: gone\n"
        "slurmstepd-n1: error: *** STEP 16.0 ON n1 CANCELLED AT 2026-12-07T06:23:10 ***\n"
    )
    own, stepd = stepd_lines(log)
    assert own.splitlines()[-1] == "role 0: failed: PeerLost: gone"
    assert stepd == [
        "slurmstepd-n1: error: *** STEP 16.0 ON n1 CANCELLED AT 2026-12-07T06:23:10 ***"
    ]


def test_slurmstepd_says_why_slurm_ended_the_step() -> None:
    cancelled = "slurmstepd-n1: error: *** STEP 17.0 ON n1 CANCELLED AT 2026-12-07T06:23:19 ***"
    limit = (
        "slurmstepd-n1: error: *** STEP 18.0 ON n1 CANCELLED AT 2026-12-07T06:23:38 "
        "DUE TO TIME LIMIT ***"
    )
    failure = (
        "slurmstepd-n2: error: *** JOB 9 ON n2 CANCELLED AT 2026-12-07T06:23:38 "
        "DUE TO NODE FAILURE ***"
    )
    assert ended_by([]) is None
    assert ended_by(["slurmstepd-n3: error: execve(): x: No such file"]) is None
    assert ended_by([cancelled]) == (
        CANCELLED,
        "*** STEP 17.0 ON n1 CANCELLED AT 2026-12-07T06:23:19 ***",
    )
    found = ended_by([cancelled, limit])
    assert found is not None and found[0] == TIME_LIMIT  # the time limit, whatever its order
    found = ended_by([failure, cancelled])
    assert found is not None and found[0] == NODE_FAILURE


def test_a_node_starters_log_under_srun_label_is_read_without_its_labels() -> None:
    log = (
        "1: node starter: each role imports its own: no runtime named\n"
        "0: slurmstepd-n1: error: *** STEP 4.0 ON n1 CANCELLED AT 2026-12-07T06:37:01 "
        "DUE TO TIME LIMIT ***\n"
    )
    own, stepd = stepd_lines(log, labelled=True)
    assert own == "node starter: each role imports its own: no runtime named\n"
    found = ended_by(stepd)
    assert found is not None and found[0] == TIME_LIMIT
    # Unlabelled, a role's own line that starts with digits keeps them.
    assert stepd_lines("12: not a label\n") == ("12: not a label\n", [])
