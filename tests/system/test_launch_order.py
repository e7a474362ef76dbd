"""The launcher starts every participant at once and relays each port as soon as it is known,
in each connector's edge order: real processes on 127.0.0.1, participants compiled from a plan
or played by small scripts that only announce ports, or only read them."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from alpha.core.budgets import Budgets
from alpha.core.topology import ParticipantTree
from alpha.launch.launcher import (
    ANNOUNCE_WAIT,
    START_SHARE,
    LaunchSpec,
    _cores,
    announce_bound,
    launch,
)
from alpha.runtime.endpoint import PORT_BYTES
from harness.compiled import CompiledRun
from harness.processes import alive_children, children_of, unreaped

pytestmark = pytest.mark.slow

# Small budgets keep failure cases short; they are the code's own bounds, not test timeouts.
FAST = Budgets(connect_attempts=20, connect_interval=0.1, accept=2.0, receive=10.0, deadline=60.0)

# A tree of 13 roles, fan-out 3: role 0 has children 1, 5 and 9; role 1 has 2, 3 and 4.
TREE = ParticipantTree(13, 3)

# A participant played by a script: it announces the ports given on its command line (two
# bytes each, big-endian, as a participant does), once the file named after them exists when
# one is; then it reads stdin to its end. It gives up by itself after a minute of waiting.
LISTENER = """
import os, sys, time
ports, after = sys.argv[1].split(","), sys.argv[2]
give_up = time.monotonic() + 60
while after and not os.path.exists(after):
    if time.monotonic() > give_up:
        sys.exit(f"{after} never appeared")
    time.sleep(0.01)
os.write(1, b"".join(int(port).to_bytes(2, "big") for port in ports))
sys.stdin.buffer.read()
"""

# A connector played by a script: it reads COUNT ports from stdin, marks each one's arrival
# with the file OUT-INDEX, then reads to the end of stdin (the launcher closes it once every
# port is written) and writes every byte it got to OUT.
CONNECTOR = """
import os, sys
count, out = int(sys.argv[1]), sys.argv[2]
got = b""
for index in range(count):
    port = b""
    while len(port) < 2:
        chunk = os.read(0, 2 - len(port))
        if not chunk:
            sys.exit(f"stdin ended after {len(got) + len(port)} bytes")
        port += chunk
    got += port
    with open(f"{out}-{index}", "wb") as mark:
        mark.write(port)
got += sys.stdin.buffer.read()
with open(out, "wb") as whole:
    whole.write(got)
"""


def _listener(
    tmp_path: Path, role: int, higher: tuple[int, ...], port: int, after: str = ""
) -> LaunchSpec:
    """A listener for ``higher`` that announces ``port``, ``port + 1``, ..., one per peer."""
    ports = ",".join(str(port + index) for index in range(len(higher)))
    return LaunchSpec(
        role,
        (sys.executable, "-c", LISTENER, ports, after),
        (),
        higher,
        tmp_path / "logs" / f"role-{role}.log",
    )


def _connector(tmp_path: Path, role: int, lower: tuple[int, ...], out: Path) -> LaunchSpec:
    return LaunchSpec(
        role,
        (sys.executable, "-c", CONNECTOR, str(len(lower)), str(out)),
        lower,
        (),
        tmp_path / "logs" / f"role-{role}.log",
    )


def _ports(*ports: int) -> bytes:
    return b"".join(port.to_bytes(PORT_BYTES, "big") for port in ports)


async def test_every_role_is_started_before_the_first_announces(tmp_path: Path) -> None:
    # A star: role 0, the hub, announces only once this test has seen the process of every
    # role; a launcher that waited for an announcement before starting the next role never
    # would, and role 0 would give up.
    gate = tmp_path / "every-role-started"
    leaves = range(1, 6)
    specs = [
        _listener(tmp_path, 0, tuple(leaves), 4000, after=str(gate)),
        *(_connector(tmp_path, leaf, (0,), tmp_path / f"got-{leaf}") for leaf in leaves),
    ]
    seen: list[int] = []

    async def open_the_gate() -> None:
        while len(seen) < len(specs):
            seen[:] = children_of(os.getpid())
            await trio.sleep(0.01)
        gate.touch()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(open_the_gate)
        result = await launch(specs, deadline=FAST.deadline)
        nursery.cancel_scope.cancel()
    assert result.ok, result.first_to_fail
    assert len(seen) == len(specs), "every role's process, at once"
    for leaf in leaves:
        assert (tmp_path / f"got-{leaf}").read_bytes() == _ports(4000 + leaf - 1)
    assert unreaped(result) == []
    assert alive_children() == []


async def test_ports_reach_a_connector_in_edge_order_when_listeners_announce_out_of_order(
    tmp_path: Path,
) -> None:
    # Role 3 connects to roles 0, 1 and 2, in that order; role 0 starts a second late, so
    # roles 1 and 2 announce before it.
    out = tmp_path / "got"
    specs = [
        _listener(tmp_path, 0, (3,), 1000),
        _listener(tmp_path, 1, (3,), 1001),
        _listener(tmp_path, 2, (3,), 1002),
        _connector(tmp_path, 3, (0, 1, 2), out),
    ]
    known: list[int] = []

    async def route(listener: int, connector: int, port: int) -> int:
        known.append(listener)
        return port

    result = await launch(specs, deadline=FAST.deadline, delays={0: 1.0}, route=route)
    assert result.ok, result.first_to_fail
    assert known[-1] == 0, "role 0 announced last"
    assert out.read_bytes() == _ports(1000, 1001, 1002), "in edge order, then stdin closed"
    assert unreaped(result) == []
    assert alive_children() == []


async def test_a_port_goes_to_its_connector_as_soon_as_its_listener_announced(
    tmp_path: Path,
) -> None:
    # Role 2 connects to roles 0 and 1; role 1 announces only once role 2 has role 0's port:
    # a launcher that waited for both before writing either would never finish.
    out = tmp_path / "got"
    specs = [
        _listener(tmp_path, 0, (2,), 2000),
        _listener(tmp_path, 1, (2,), 2001, after=f"{out}-0"),
        _connector(tmp_path, 2, (0, 1), out),
    ]
    result = await launch(specs, deadline=FAST.deadline)
    assert result.ok, result.first_to_fail
    assert (tmp_path / "got-0").read_bytes() == _ports(2000)
    assert out.read_bytes() == _ports(2000, 2001)
    assert unreaped(result) == []
    assert alive_children() == []


async def test_an_absent_listeners_connectors_are_never_given_its_port(tmp_path: Path) -> None:
    run = CompiledRun.exchange(tmp_path, TREE, budgets=FAST)
    # Without fail-fast each participant runs until its own budget ends it.
    result = await run.launch(absent=frozenset({1}), fail_fast=False)
    assert not result.ok
    assert result.outcomes[1].cause == "never started (absent)"
    for child in TREE.children(1):
        outcome = result.outcomes[child]
        assert outcome.returncode == 1, outcome
        # It waited for the port, which never came, until its accept budget ran out.
        assert outcome.cause.startswith(
            f"role {child}: failed: BudgetExhausted: role {child} waited for role 1 past its "
            f"accept budget ({FAST.accept:g} s) while it was waiting for the port of role 1 "
            "on stdin"
        ), outcome.cause
    # Role 0 listens for role 1, which never connects.
    assert "waited for role 1 past its accept budget" in result.outcomes[0].cause
    assert unreaped(result) == []
    assert alive_children() == []


@pytest.mark.parametrize("how", ["killed", "exits"])
async def test_a_listener_that_dies_before_announcing_is_named_first(
    how: str, tmp_path: Path
) -> None:
    run = CompiledRun.exchange(tmp_path, TREE, budgets=FAST)
    code = {
        "killed": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        "exits": "import sys; sys.exit('role 1: failed: broken before it announced')",
    }[how]
    dies = (sys.executable, "-c", code)
    specs = [dataclasses.replace(s, argv=dies) if s.role == 1 else s for s in run.specs]
    result = await launch(specs, deadline=run.deadline)
    failure = result.first_to_fail
    assert failure is not None
    assert failure.role == 1
    log = run.log_path(1)
    if how == "killed":
        assert failure.cause == f"role 1 was killed by SIGKILL; its log: {log}"
        assert result.outcomes[1].returncode == -signal.SIGKILL
    else:
        assert failure.cause == f"role 1: failed: broken before it announced; its log: {log}"
        assert result.outcomes[1].returncode == 1
    assert failure.exit_seen
    for child in TREE.children(1):
        # Never given role 1's port: stopped by the launcher while it waited for it, or never
        # started at all when role 1's end was seen first (the launch stops at once).
        outcome = result.outcomes.get(child)
        if outcome is None:
            continue
        assert not outcome.ok
        assert "connecting to role 1" not in run.log(child)
        assert "greeting role 1" not in run.log(child)
    assert unreaped(result) == []
    assert alive_children() == []


async def test_a_role_that_never_announces_is_named_with_the_announce_bound(
    tmp_path: Path,
) -> None:
    # Role 0 never announces (it waits for a file that never appears); role 1 waits for its
    # port. The launcher's wait, not role 1's accept budget, ends the run.
    never = str(tmp_path / "never")
    specs = [
        _listener(tmp_path, 0, (1,), 3000, after=never),
        _connector(tmp_path, 1, (0,), tmp_path / "got"),
    ]
    wait = 0.5
    result = await launch(specs, deadline=FAST.deadline, announce_wait=wait)
    failure = result.first_to_fail
    assert failure is not None
    assert failure.role == 0
    bound = announce_bound(wait, 2, _cores())
    assert failure.cause == (
        f"role 0 announced 0 of 2 port bytes within {bound:g} s; its log: {specs[0].log}"
    )
    assert result.outcomes[1].killed
    assert not (tmp_path / "got-0").exists(), "role 1 was never given a port"
    assert unreaped(result) == []
    assert alive_children() == []


def test_the_announce_wait_grows_with_the_roles_that_share_the_cores() -> None:
    # Alone, a role has ANNOUNCE_WAIT; each role started beside it adds its start-up's share.
    assert announce_bound(ANNOUNCE_WAIT, 1, 1) == ANNOUNCE_WAIT + START_SHARE
    assert announce_bound(ANNOUNCE_WAIT, 512, 2) == ANNOUNCE_WAIT + 256 * START_SHARE
    assert announce_bound(ANNOUNCE_WAIT, 512, 512) == ANNOUNCE_WAIT + START_SHARE
    assert announce_bound(ANNOUNCE_WAIT, 0, 0) == ANNOUNCE_WAIT


_FAILS = """
import pathlib, sys
pathlib.Path(sys.argv[1]).touch()
sys.exit("role 0: failed: CheckpointWriteFailed: cannot point LATEST: Is a directory")
"""

_FINISHES = """
import pathlib, sys, time
go, done = map(pathlib.Path, sys.argv[1:3])
while not go.exists():
    time.sleep(0.01)
time.sleep(0.5)  # still publishing when role 0 fails
done.touch()
"""


@pytest.mark.parametrize("committed", [True, False])
async def test_a_failure_after_the_commit_point_stops_no_other_role(
    tmp_path: Path, committed: bool
) -> None:
    # Role 0 fails once the run committed (its pointer could not move): role 1, publishing
    # its final report, is left to finish; before the commit point fail-fast stops it.
    go, done = tmp_path / "go", tmp_path / "done"
    (tmp_path / "logs").mkdir()
    specs = [
        LaunchSpec(0, (sys.executable, "-c", _FAILS, str(go)), (), (), tmp_path / "logs" / "0"),
        LaunchSpec(
            1,
            (sys.executable, "-c", _FINISHES, str(go), str(done)),
            (),
            (),
            tmp_path / "logs" / "1",
        ),
    ]
    result = await launch(specs, deadline=FAST.deadline, committed=lambda: committed)
    assert result.first_to_fail is not None and result.first_to_fail.role == 0
    assert result.outcomes[1].killed is not committed
    assert done.exists() is committed
    assert result.outcomes[1].returncode == (0 if committed else -signal.SIGKILL)
