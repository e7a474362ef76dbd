"""A namespace of the harness's own and one segment damaged in it (harness/netns.py), on real
processes: a socket pair in a namespace made by ``isolated``, found by ``connections``, one of
its segments rewritten by ``corrupt_segment`` and no other, the rule gone after; the host's
own namespace is refused and its ruleset left as it was."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from harness.netns import TOOLS, Connection, corrupt_segment, enter, probe, unavailable


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
