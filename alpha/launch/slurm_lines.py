"""What Slurm's commands print, and the files ``srun`` reads, as values (``docs/slurm.md``).
Pure: text in, values out, and values in, text out; :mod:`alpha.launch.slurm` runs the
commands and reads the files.

- ``scontrol show hostnames LIST`` prints one node name a line (:func:`hostnames`);
  ``scontrol show node NAME -o`` one line of ``Key=Value`` fields, ``NodeAddr`` among them
  (:func:`node_address`); ``scontrol show job -o ID`` the job's ``JobState``, ``Reason`` and
  ``NodeList`` (:func:`job_record`). A value may hold spaces (``OS=Linux 6.1 #1 SMP``), so a
  field is read by its key, never by splitting the line.
- ``srun --multi-prog FILE`` runs line ``R WORDS`` as task ``R`` (:func:`multi_prog`), and
  ``srun --distribution=arbitrary`` puts task ``R`` on the node line ``R`` of
  ``SLURM_HOSTFILE`` names (:func:`hostfile`): task ``R`` is role ``R``.
- ``srun`` reports on its stderr each task that did not end well and each node it could not
  start tasks on (:func:`srun_event`); it says nothing of a task that exited 0.
- ``slurmstepd`` writes its own lines into a task's stderr file, hence into a role's log:
  ``slurmstepd-n1: error: *** STEP 7.0 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***``
  (:func:`stepd_lines` takes them out, so the role's own last lines stay its cause, and
  :func:`ended_by` reads why Slurm ended the step).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, final

from alpha.errors import SlurmUnavailable

__all__ = [
    "CANCELLED",
    "NODE_FAILURE",
    "TIME_LIMIT",
    "JobRecord",
    "SrunEvent",
    "ended_by",
    "field_of",
    "hostfile",
    "hostnames",
    "job_record",
    "multi_prog",
    "node_address",
    "srun_event",
    "stepd_lines",
    "task_ranks",
]

_NODE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""A node name as Slurm prints it (a host name): what a hostfile line may hold."""

# Why Slurm ended a step, as this module names it.
CANCELLED: Final = "cancelled"
TIME_LIMIT: Final = "time limit"
NODE_FAILURE: Final = "node failure"


def hostnames(text: str) -> tuple[str, ...]:
    """The node names ``scontrol show hostnames`` printed, one a line, in its order.

    Raises:
        SlurmUnavailable: no name, or a line that is not a node name.
    """
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not names:
        raise SlurmUnavailable("scontrol show hostnames printed no node")
    for name in names:
        if _NODE_NAME.fullmatch(name) is None:
            raise SlurmUnavailable(f"scontrol show hostnames printed {name!r}, not a node name")
    return names


def field_of(line: str, key: str) -> str | None:
    """The value of ``key`` in one ``Key=Value ...`` line of ``scontrol show ... -o``, up to
    the next space, or None when the line has no such field."""
    found = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", line)
    return None if found is None else found.group(1)


def node_address(text: str, name: str) -> str:
    """``NodeAddr`` of the node ``name`` in what ``scontrol show node NAME -o`` printed.

    Raises:
        SlurmUnavailable: no line of that node, or it has no address.
    """
    for line in text.splitlines():
        if field_of(line, "NodeName") == name:
            address = field_of(line, "NodeAddr")
            if not address:
                break
            return address
    raise SlurmUnavailable(f"scontrol show node {name} gives no NodeAddr: {text.strip()[:200]!r}")


@final
@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as ``scontrol show job -o`` shows it: its state (``RUNNING``, ``CANCELLED``,
    ``TIMEOUT``, ``NODE_FAIL``, ``COMPLETING``, ...), the reason Slurm gives (``TimeLimit``,
    ``None``, ...) and the compact list of its nodes (``n[1-3]``)."""

    job: int
    state: str
    reason: str
    nodes: str

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended_by(self) -> str | None:
        """How Slurm ended the job, for a job that holds a run and so cannot end by itself
        while the run goes on: :data:`TIME_LIMIT`, :data:`NODE_FAILURE` or
        :data:`CANCELLED` (``scancel``, a preemption, a deadline, or a job still
        ``COMPLETING`` for a reason Slurm does not give, as right after ``scancel``); None
        while it runs."""
        if self.running:
            return None
        if self.state == "TIMEOUT" or self.reason == "TimeLimit":
            return TIME_LIMIT
        if self.state == "NODE_FAIL" or self.reason in ("NodeDown", "NodeFail"):
            return NODE_FAILURE
        return CANCELLED


def job_record(text: str, job: int) -> JobRecord:
    """The job ``job`` in what ``scontrol show job -o JOB`` printed.

    Raises:
        SlurmUnavailable: no line of that job (it ended longer ago than the cluster keeps
            records, or never was).
    """
    for line in text.splitlines():
        if field_of(line, "JobId") == str(job):
            return JobRecord(
                job,
                field_of(line, "JobState") or "",
                field_of(line, "Reason") or "",
                field_of(line, "NodeList") or "",
            )
    raise SlurmUnavailable(f"scontrol show job {job} shows no such job: {text.strip()[:200]!r}")


def _word(text: str) -> str:
    """One word of a multi-prog line: as it is when it needs no quoting, else in single
    quotes (Slurm's multi-prog reader takes a quoted word whole).

    Raises:
        SlurmUnavailable: a word no multi-prog line can carry (a quote, a backslash, a
            ``%``, which srun replaces, or a character that is not printable: a newline, a
            tab, a control character).
    """
    if re.fullmatch(r"[A-Za-z0-9_./:=+,@-]+", text):
        return text
    # srun puts the task's rank for %t and its offset for %o in a multi-prog line's words.
    if any(bad in text for bad in ("'", '"', "\\", "%")) or not text.isprintable():
        raise SlurmUnavailable(f"{text!r} cannot be a word of srun's --multi-prog file")
    return f"'{text}'"


def multi_prog(argvs: Sequence[Sequence[str]]) -> str:
    """The ``--multi-prog`` file that runs ``argvs[r]`` as task ``r``: one line per task, its
    rank, then its words.

    Raises:
        SlurmUnavailable: a word no multi-prog line can carry.
    """
    return "".join(
        f"{rank} {' '.join(_word(word) for word in argv)}\n" for rank, argv in enumerate(argvs)
    )


def hostfile(names: Iterable[str]) -> str:
    """The ``SLURM_HOSTFILE`` that puts task ``r`` on node ``names[r]``.

    Raises:
        SlurmUnavailable: a name that is not a node name.
    """
    lines = list(names)
    for name in lines:
        if _NODE_NAME.fullmatch(name) is None:
            raise SlurmUnavailable(f"{name!r} is not a node name")
    return "".join(f"{name}\n" for name in lines)


def task_ranks(text: str) -> tuple[int, ...]:
    """The ranks of srun's ``0-2,5`` (ascending, each once).

    Raises:
        ValueError: not a list of ranks and ranges.
    """
    ranks: set[int] = set()
    for part in text.split(","):
        found = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if found is None:
            raise ValueError(f"not a list of task ranks: {text!r}")
        low = int(found.group(1))
        high = low if found.group(2) is None else int(found.group(2))
        if high < low:
            raise ValueError(f"a reversed range of ranks: {part!r}")
        ranks.update(range(low, high + 1))
    return tuple(sorted(ranks))


#: What srun prints for a task killed by a signal: the C library's description of it
#: (``strsignal``), which Python's ``signal.strsignal`` gives on the same C library.
_SIGNAL_OF: Final = {
    description: int(number)
    for number in signal.Signals
    if (description := signal.strsignal(number)) is not None
}

_TASKS_ENDED: Final = re.compile(r"srun: error: (\S+): tasks? ([0-9,\-]+): (.+?)\s*$")
_EXITED: Final = re.compile(r"Exited with exit code (\d+)")
_NOT_LAUNCHED: Final = re.compile(
    r"srun: error: Task launch for \S+ failed on node (\S+): (.+?)\s*$"
)
_NODE_FAILED: Final = re.compile(r"srun: error: Node failure on (\S+)")


@final
@dataclass(frozen=True, slots=True)
class SrunEvent:
    """One line of srun's stderr that says how tasks ended or where they could not start.

    ``tasks`` ended with ``code`` (an exit code; minus a signal's number for one killed by
    it; None: srun gave no code), on ``node``; or, with ``launch_failed``, ``node`` did not
    start its tasks (``reason`` says why, as srun said it), or failed (``node_failed``)."""

    node: str
    tasks: tuple[int, ...] = ()
    code: int | None = None
    reason: str = ""
    launch_failed: bool = False
    node_failed: bool = False


def srun_event(line: str) -> SrunEvent | None:
    """The event one line of srun's stderr reports, or None for any other line.

    ``srun: error: n2: task 1: Exited with exit code 3``, ``srun: error: n1: tasks 0,2:
    Killed``, ``srun: error: Task launch for StepId=8.0 failed on node n3: Communication
    connection failure``, ``srun: error: Node failure on n2``."""
    found = _TASKS_ENDED.match(line)
    if found is not None:
        try:
            tasks = task_ranks(found.group(2))
        except ValueError:
            return None
        how = found.group(3)
        exited = _EXITED.fullmatch(how)
        if exited is not None:
            code: int | None = int(exited.group(1))
        else:
            number = _SIGNAL_OF.get(how)
            code = None if number is None else -number
        return SrunEvent(found.group(1), tasks, code, how)
    found = _NOT_LAUNCHED.match(line)
    if found is not None:
        return SrunEvent(found.group(1), reason=found.group(2), launch_failed=True)
    found = _NODE_FAILED.match(line)
    if found is not None:
        return SrunEvent(found.group(1), reason="node failure", node_failed=True)
    return None


_STEPD: Final = re.compile(r"^slurmstepd(?:-\S+)?: ")
_LABEL: Final = re.compile(r"^\d+: ")  # srun --label's ``TASK: `` before each line of a task


def stepd_lines(log: str, *, labelled: bool = False) -> tuple[str, list[str]]:
    """A log without the lines ``slurmstepd`` wrote into it, and those lines: a role's own
    last lines stay its failure clock and cause (``alpha.wire.console``). ``labelled``: a
    task's stderr file written under ``srun --label``, whose every line starts ``TASK: ``,
    which is taken off."""
    own: list[str] = []
    stepd: list[str] = []
    for line in log.splitlines(keepends=True):
        if labelled:
            line = _LABEL.sub("", line, count=1)
        (stepd if _STEPD.match(line) else own).append(line)
    return "".join(own), [line.rstrip("\n") for line in stepd]


_CANCEL: Final = re.compile(
    r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*"
)


def ended_by(lines: Iterable[str]) -> tuple[str, str] | None:
    """Why slurmstepd says Slurm ended the step, from its lines in the roles' logs: the
    reason (:data:`TIME_LIMIT`, :data:`NODE_FAILURE` or :data:`CANCELLED`) and the line
    itself (without slurmstepd's prefix); None when no line says it."""
    found: tuple[str, str] | None = None
    for line in lines:
        match = _CANCEL.search(line)
        if match is None:
            continue
        why = (match.group(1) or "").strip()
        said = match.group(0)
        if why == "TIME LIMIT":
            return TIME_LIMIT, said
        if why == "NODE FAILURE":
            found = (NODE_FAILURE, said)
        elif found is None:
            found = (CANCELLED, said)
    return found
