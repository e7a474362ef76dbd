"""The one reader of ``/proc/PID/stat``: a process's state, parent and flags as Linux shows them.

The line is ``PID (COMM) STATE PPID ...`` (proc(5)). The command name ``COMM`` is whatever the
process called itself, up to 15 bytes of any value: spaces, parentheses and ``)`` included, so
the fields are read after the *last* ``)`` of the line, which no field after it can hold.
:func:`parse_stat` does that over bytes; :func:`read_stat` reads the file.

``alpha/launch/warm_server.py`` reads its own ``/proc/self/stat`` the same way with a copy of
the rule: it runs from its text with ``python -c`` and imports nothing of alpha.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "PF_EXITING",
    "STAT_BYTES",
    "STOPPED_HOW",
    "ProcStat",
    "parse_stat",
    "process_state",
    "read_stat",
]

PF_EXITING: Final = 0x4
"""The kernel's flag of a task inside exit (``include/linux/sched.h``), in
:attr:`ProcStat.flags`."""

STOPPED_HOW: Final = {
    "T": "stopped (SIGSTOP or another stop signal)",
    "t": "stopped by a tracer (a debugger)",
}
"""The stopped states of ``/proc/PID/stat``, in words."""

STAT_BYTES: Final = 4096
"""How much of ``/proc/PID/stat`` is read: the line is some 300 bytes (52 numbers and a command
name of at most 15 bytes), so a page holds it whole."""


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One ``/proc/PID/stat`` line: the command name, and the fields after it as text
    (``fields[0]`` is field 3 of proc(5), the state)."""

    pid: int
    comm: bytes
    fields: tuple[str, ...]

    @property
    def state(self) -> str:
        """The state letter: ``R`` running, ``S`` sleeping, ``T`` stopped by a signal, ``t``
        stopped by a tracer, ``Z`` a zombie, ..."""
        return self.fields[0]

    @property
    def ppid(self) -> int:
        """The parent's pid (field 4)."""
        return int(self.fields[1])

    @property
    def flags(self) -> int:
        """The kernel's flags of the task (field 9), ``PF_*``."""
        return int(self.fields[6])

    def field(self, number: int) -> str:
        """Field ``number`` as proc(5) numbers them from 1 (3 and beyond: after the name).

        Raises:
            IndexError: the line has no such field (an older kernel's shorter line).
        """
        if number < 3:
            raise IndexError(f"fields 1 and 2 are the pid and the name, not field {number}")
        return self.fields[number - 3]


def parse_stat(data: bytes) -> ProcStat:
    """The fields of one ``/proc/PID/stat`` line.

    Raises:
        ValueError: ``data`` is not ``PID (COMM) STATE PPID ...``: no parenthesised name, a pid
            that is not a number, or fewer than the state and the parent after the name.
    """
    head, open_, rest = data.partition(b"(")
    comm, close, tail = rest.rpartition(b")")
    if not open_ or not close:
        raise ValueError("a /proc/PID/stat line holds its command name in parentheses")
    pid = head.strip()
    if not pid.isdigit():
        raise ValueError(f"a /proc/PID/stat line begins with its pid, not {pid[:20]!r}")
    fields = tuple(field.decode("ascii", errors="replace") for field in tail.split())
    if len(fields) < 2 or not fields[1].lstrip("-").isdigit():
        raise ValueError("a /proc/PID/stat line holds the state and the parent after its name")
    return ProcStat(int(pid), comm, fields)


def read_stat(pid: int | str) -> ProcStat | None:
    """``/proc/PID/stat`` of ``pid`` (``"self"`` for this process), or None when it cannot be
    read or parsed: the process is gone (reaped), or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read(STAT_BYTES)
    except OSError:
        return None
    try:
        return parse_stat(data)
    except ValueError:
        return None


def process_state(pid: int) -> str:
    """A process's state letter from ``/proc/PID/stat`` (``T`` stopped by a signal, ``t``
    stopped by a tracer), or ``""`` where it cannot be read (it was reaped, no /proc)."""
    stat = read_stat(pid)
    return "" if stat is None else stat.state
