"""Finding participant processes, by what their command line names, by their parent or by the
log their stderr goes to, and what a launch left behind, for tests, gates and benchmarks.
Everything here reads /proc (Linux)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from alpha.launch import read_stat
from alpha.records import LOGS_DIR

if TYPE_CHECKING:
    from alpha.launch import LaunchResult, RoleOutcome

__all__ = [
    "EXEC_POLL",
    "alive_children",
    "children_of",
    "pid_running",
    "role_pids",
    "running",
    "state_of",
    "unreaped",
]

# How often pid_running looks again: a process shows its command line within milliseconds of
# its start, and a look reads every /proc entry, so a few milliseconds apart is enough.
EXEC_POLL = 0.005

# A role's log, ``role-NNNNNN.log`` (``alpha.files.role_file``: six digits, more past 999,999).
_ROLE_LOG = re.compile(r"role-(\d{6,})\.log")


def running(needle: str | Path, *, whole: bool = False) -> list[int]:
    """The pids of processes whose command line contains ``needle`` (an artifact, a role
    description, a run folder): as one argument with ``whole``, else anywhere in it.

    A process that exits meanwhile is skipped. A process just started may not show its
    command line yet: the kernel sets it at the end of exec.
    """
    text = str(needle).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it exited meanwhile
        if (text in cmdline.split(b"\0")) if whole else (text in cmdline):
            found.append(int(entry.name))
    return found


def role_pids(run_dir: str | Path) -> dict[int, int]:
    """The participants of the run in ``run_dir`` now running, as ``{pid: role}``: each process
    whose stderr (``/proc/PID/fd/2``) is the role's log, ``run_dir/logs/role-NNNNNN.log``,
    where the launcher points every participant's stderr, whether it started the role itself
    or the warm starter forked it.

    Neither the launcher nor the warm starter writes its stderr there, so neither is found; a
    process that exits meanwhile, or whose descriptors this process may not read, is skipped.
    A role is found under two pids only while an old attempt's process outlives the start of
    a new one.
    """
    logs = Path(os.path.realpath(Path(run_dir) / LOGS_DIR))
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            target = Path(os.readlink(f"/proc/{entry}/fd/2"))
        except OSError:
            continue  # it exited meanwhile, has no fd 2, or is not ours to read
        matched = _ROLE_LOG.fullmatch(target.name)
        if matched is not None and target.parent == logs:
            found[int(entry)] = int(matched.group(1))
    return found


async def pid_running(argument: str | Path) -> int:
    """The pid of a process whose command line holds ``argument`` as one argument (a role's
    artifact), once one does.

    A process just started may not show its command line yet: the kernel sets it at the end
    of exec, after the parent learned that exec succeeded. The wait has no bound of its own:
    call it from a hook of a launch (``on_announce``, ``route``), which a launch that cannot
    go on fails and cancels by the run's own budgets.
    """
    while True:
        found = running(argument, whole=True)
        if found:
            return found[0]
        await trio.sleep(EXEC_POLL)


def _stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the parenthesised command name (the state
    first, then the parent pid), or None once the process is gone: alpha's one reader of it
    (``alpha.launch.read_stat``)."""
    stat = read_stat(pid)
    return None if stat is None else list(stat.fields)


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid``, or None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (zombies included)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(entry)
        if fields is None:
            continue  # it exited meanwhile
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children


def descendants_of(pid: int) -> list[int]:
    """Every process below ``pid``: its children, theirs, and so on (zombies included)."""
    found: list[int] = []
    below = children_of(pid)
    while below:
        found += below
        below = [grandchild for child in below for grandchild in children_of(child)]
    return found


def alive_children() -> list[int]:
    """Processes below this one, children and theirs (zombies included): a test's
    participants that the launcher did not reap, whether it started them itself or the warm
    starter forked them."""
    return descendants_of(os.getpid())


def state_of(pid: int) -> str:
    """The process's state letter (R, S, T, Z, ...), or "" once it is gone."""
    fields = _stat(pid)
    return "" if fields is None else fields[0]


def unreaped(result: LaunchResult) -> list[RoleOutcome]:
    """The roles of a finished launch that it did not see end: started (not ``absent``) and
    with no exit status, so possibly still running. Empty when the launch left no process."""
    return [
        outcome
        for outcome in result.outcomes.values()
        if outcome.returncode is None and "absent" not in outcome.cause
    ]
