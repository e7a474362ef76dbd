"""The one /proc/PID/stat reader: any command name, spaces and parentheses included, leaves
the fields after it intact; a line that is not one is refused, and a real process reads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.launch.proc import PF_EXITING, parse_stat, process_state, read_stat

# A command name is up to 15 bytes of anything but NUL (the kernel's TASK_COMM_LEN less one);
# ')', '(', spaces and newlines included.
names = st.binary(max_size=15).filter(lambda name: b"\0" not in name)
names_with_trouble = st.lists(st.sampled_from([b")", b"(", b" ", b") S 1 (", b"\n", b"x"])).map(
    lambda parts: b"".join(parts)[:15]
)
states = st.sampled_from(list("RSDZTtXIP"))


def _line(pid: int, comm: bytes, state: str, ppid: int, rest: list[int]) -> bytes:
    tail = " ".join([state, str(ppid), *map(str, rest)])
    return b"%d (%s) %s\n" % (pid, comm, tail.encode())


@given(
    st.integers(1, 2**22),
    st.one_of(names, names_with_trouble),
    states,
    st.integers(0, 2**22),
    st.lists(st.integers(0, 2**63), min_size=5, max_size=50),
)
def test_any_command_name_leaves_the_fields_after_it(
    pid: int, comm: bytes, state: str, ppid: int, rest: list[int]
) -> None:
    stat = parse_stat(_line(pid, comm, state, ppid, rest))
    assert (stat.pid, stat.comm, stat.state, stat.ppid) == (pid, comm, state, ppid)
    assert stat.flags == rest[4]
    assert stat.fields == (state, str(ppid), *map(str, rest))
    assert stat.field(3) == state and stat.field(4) == str(ppid)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"", "in parentheses"),
        (b"12 comm S 1 2 3", "in parentheses"),
        (b"12 (comm S 1 2 3", "in parentheses"),
        (b"12 comm) S 1 2 3", "in parentheses"),
        (b"x (comm) S 1 2 3", "begins with its pid"),
        (b"12 (comm) S", "the state and the parent"),
        (b"12 (comm)", "the state and the parent"),
        (b"12 (comm) S x 3", "the state and the parent"),
    ],
)
def test_a_line_that_is_not_a_stat_line_is_refused(line: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_stat(line)


def test_fields_one_and_two_are_not_after_the_name() -> None:
    stat = parse_stat(b"12 (a) S 1 2 3 4 5 6")
    with pytest.raises(IndexError):
        stat.field(2)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="no /proc on this host")
def test_a_real_process_reads_and_a_stopped_one_shows_it() -> None:
    me = read_stat(os.getpid())
    assert me is not None and me.pid == os.getpid() and me.ppid == os.getppid()
    assert me.state in "RS" and not me.flags & PF_EXITING
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, 19)  # SIGSTOP
        os.waitpid(child.pid, os.WUNTRACED)  # returns once it is stopped
        assert process_state(child.pid) == "T"
        stat = read_stat(child.pid)
        assert stat is not None and stat.ppid == os.getpid()
    finally:
        child.kill()
        child.wait()
    assert read_stat(child.pid) is None and process_state(child.pid) == ""
