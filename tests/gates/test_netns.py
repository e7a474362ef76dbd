"""A namespace of the harness's own, one segment damaged in it and one connection reset
(harness/netns.py), on real processes: a socket pair in a namespace made by ``isolated``, found
by ``connections``, one of its segments rewritten by ``corrupt_segment`` and no other, the rule
gone after; its sending end destroyed by ``reset_connection`` and a reset read at the other;
the host's own namespace is refused and its ruleset left as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from harness.netns import (
    TOOLS,
    Connection,
    corrupt_segment,
    enter,
    isolated,
    probe,
    probe_reset,
    reset_connection,
    unavailable,
)


def _host_ruleset() -> str:
    return subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout


@pytest.fixture
def usable() -> None:
    if any(shutil.which(tool) is None for tool in TOOLS):
        pytest.skip(f"needs {', '.join(TOOLS)}")
    why = unavailable()
    if why:
        pytest.skip(why)


@pytest.mark.usefixtures("usable")
def test_one_segment_of_a_pair_in_its_own_namespace_arrives_changed_and_no_other() -> None:
    before = _host_ruleset()
    seen = probe()
    assert seen.other_namespace
    # Both directions of the one connection, each end the pair's own process.
    (one, other) = seen.found
    assert (one.peer_port, other.peer_port) == (other.port, one.port)
    assert one.pid == one.peer_pid == other.pid
    assert seen.applied and seen.changed == 1 and seen.sent >= 1
    assert seen.tables_left == ""  # the rule's table was removed
    assert _host_ruleset() == before


def test_this_process_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="shares this process's network namespace"):
        enter(os.getpid())
    with pytest.raises(ValueError):
        corrupt_segment(
            os.getpid(), Connection(1, os.getpid(), 2, os.getpid()), offset=0, longer=60,
            within=0.1,
        )  # fmt: skip


def test_bytes_that_do_not_fit_the_segment_are_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        corrupt_segment(1, Connection(1, 1, 2, 1), offset=16, longer=71, within=0.1)


@pytest.fixture
def resettable() -> None:
    why = unavailable("reset")
    if why:
        pytest.skip(why)


@pytest.mark.usefixtures("resettable")
def test_a_destroyed_end_of_a_pair_in_its_own_namespace_is_read_as_a_reset_by_its_peer() -> None:
    seen = probe_reset()
    assert seen.other_namespace
    (one, other) = seen.found
    assert (one.peer_port, other.peer_port) == (other.port, one.port)
    assert seen.destroyed
    assert seen.read.startswith("ConnectionResetError(")


@pytest.mark.usefixtures("resettable")
def test_a_connection_that_is_not_there_is_not_destroyed() -> None:
    with subprocess.Popen(isolated(["sleep", "10"])) as sleeper:
        try:
            for _ in range(200):  # until unshare has made the namespace and exec'd sleep
                if os.readlink(f"/proc/{sleeper.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                    break
                time.sleep(0.01)
            gone = Connection(1, sleeper.pid, 2, sleeper.pid)
            assert reset_connection(sleeper.pid, gone) is False
        finally:
            sleeper.kill()


def test_a_reset_in_this_process_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="shares this process's network namespace"):
        reset_connection(os.getpid(), Connection(1, os.getpid(), 2, os.getpid()))
