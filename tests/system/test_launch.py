"""Endpoints and the local launcher, with real participant processes on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from alpha.app.compile import compile_plan
from alpha.artifact import artifact_name
from alpha.compiler.plan import parse_plan
from alpha.core.budgets import Budgets
from alpha.core.identity import RunIdentity
from alpha.core.topology import ParticipantTree, pair, star
from alpha.launch.launcher import (
    ANNOUNCE_WAIT,
    CAUSE_TAIL_BYTES,
    EXIT_NOTICE,
    LAUNCH_SLACK,
    LaunchSpec,
    RoleOutcome,
    _Launch,
    first_to_fail,
    launch,
    read_cause,
)
from alpha.runtime.parent import LAUNCHER_POLL
from alpha.wire.frame import HELLO_SLOT, FrameKind, FrameSpec
from alpha.wire.send import SendSlot
from harness.compiled import CompiledRun
from harness.processes import (
    alive_children,
    children_of,
    descendants_of,
    pid_running,
    running,
    state_of,
    unreaped,
)
from tests.support import ALPHA, run_alpha

pytestmark = pytest.mark.slow

# Small budgets keep failure cases short; they are the code's own bounds, not test timeouts.
FAST = Budgets(connect_attempts=20, connect_interval=0.1, accept=2.0, receive=10.0, deadline=60.0)
# A parent accepts its children as they start one after another: give big trees room.
ROOMY = Budgets(accept=60.0, receive=30.0, deadline=240.0)


def established_on(port: int) -> bool:
    """Whether a TCP connection to local port ``port`` on 127.0.0.1 is established (accepted by
    the kernel, whether or not the listener took it yet)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if int(local.split(":")[1], 16) == port and state == "01":
            return True
    return False


@pytest.mark.parametrize(
    "tree",
    [pair(), star(6), ParticipantTree(13, 3), ParticipantTree(64, 4)],
    ids=["pair", "star-6", "tree-13-3", "tree-64-4"],
)
async def test_every_edge_is_established_once_and_checked(
    tree: ParticipantTree, tmp_path: Path
) -> None:
    run = CompiledRun.exchange(tmp_path, tree, budgets=ROOMY, payload=3000)
    result = await run.launch()
    assert result.ok, result.first_to_fail
    found = run.found_reports()
    assert sorted(found) == list(range(tree.n))
    for role, report in found.items():
        edges = report["edges"]
        assert isinstance(edges, list)
        assert [edge["peer"] for edge in edges] == list(tree.edges(role)), "each edge once"
        for edge in edges:
            peer = edge["peer"]
            assert edge["listened"] == (peer > role), "the lower role listens"
            peer_edges = found[peer]["edges"]
            assert isinstance(peer_edges, list)
            mirror = next(e for e in peer_edges if e["peer"] == role)
            assert (edge["local_port"], edge["remote_port"]) == (
                mirror["remote_port"],
                mirror["local_port"],
            ), "both ends describe one and the same connection"
            # A contribution up and the checked total down: one region of 3000 bytes each way.
            assert edge["sent_bytes"] == edge["received_bytes"] > 3000
    assert unreaped(result) == []
    assert alive_children() == []


@pytest.mark.parametrize(
    ("tree", "absent", "budget"),
    [
        (pair(), 1, "accept"),  # role 0 listens for 1, which never comes
        (pair(), 0, "accept"),  # role 1 never gets role 0's port: it waits for it to come up
        (star(6), 0, "accept"),  # every leaf waits for the hub
    ],
    ids=["pair-without-1", "pair-without-0", "star-without-hub"],
)
async def test_a_peer_that_never_starts_exhausts_every_other_budget(
    tree: ParticipantTree, absent: int, budget: str, tmp_path: Path
) -> None:
    run = CompiledRun.exchange(tmp_path, tree, budgets=FAST)
    # Without fail-fast each participant runs until its own budget ends it.
    result = await run.launch(absent=frozenset({absent}), fail_fast=False)
    assert not result.ok
    seconds = FAST.accept if budget == "accept" else FAST.connect
    for role in range(tree.n):
        if role == absent:
            continue
        outcome = result.outcomes[role]
        assert outcome.returncode == 1, outcome
        assert "BudgetExhausted" in outcome.cause
        assert f"for role {absent}" in outcome.cause, outcome.cause
        assert f"{budget} budget ({seconds:g} s)" in outcome.cause
        if role > absent:  # a connector: never given the absent listener's port
            assert f"waiting for the port of role {absent} on stdin" in outcome.cause
        # Bounds the code enforces: the role's own budget, plus the documented slack for
        # starting and exiting.
        assert outcome.ended_s - outcome.started_s <= seconds + LAUNCH_SLACK
    last_start = max(o.started_s for o in result.outcomes.values())
    assert result.elapsed_s <= last_start + seconds + LAUNCH_SLACK
    assert unreaped(result) == []
    assert alive_children() == []


async def test_the_launcher_fails_fast_and_leaves_no_process(tmp_path: Path) -> None:
    tree = ParticipantTree(7, 2)
    run = CompiledRun.exchange(tmp_path, tree, budgets=FAST)
    # Every role starts at once, so the roles about role 1 run out of budget within moments of
    # each other and the others follow them by themselves (lost peers, aborts). Role 6, a leaf,
    # is played by a process that would run on for ten minutes: only the launcher stops it.
    sleeper = (sys.executable, "-c", "import time; time.sleep(600)")
    specs = [
        dataclasses.replace(spec, argv=sleeper) if spec.role == 6 else spec for spec in run.specs
    ]
    result = await launch(specs, deadline=run.deadline, absent=frozenset({1}))
    assert result.first_to_fail is not None
    # A neighbour of role 1 (its parent 0 or a child 2, 3) hits its budget first; the launcher
    # stops every other role then.
    assert result.first_to_fail.role in tree.edges(1)
    assert "BudgetExhausted" in result.first_to_fail.cause
    assert "for role 1" in result.first_to_fail.cause
    assert result.outcomes[6].killed
    assert result.outcomes[6].returncode == -signal.SIGKILL
    last_start = max(o.started_s for o in result.outcomes.values())
    assert result.elapsed_s <= last_start + max(FAST.accept, FAST.connect) + LAUNCH_SLACK
    assert unreaped(result) == []
    assert alive_children() == []


async def test_a_peer_that_starts_late_within_budget_succeeds(tmp_path: Path) -> None:
    late = Budgets(connect_attempts=60, connect_interval=0.1, accept=6.0, deadline=60.0)
    run = CompiledRun.exchange(tmp_path, star(4), budgets=late)
    result = await run.launch(delays={2: 2.0})
    assert result.ok, result.first_to_fail
    assert sorted(run.found_reports()) == [0, 1, 2, 3]


def _stranger(port: int, data: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(data)
    return conn


def _hello_from(run: CompiledRun, identity: RunIdentity, sender: int) -> bytes:
    """A stranger's hello to role 0 in the run's layout (keyed), under a key of its own: its
    header fields are checked, in order, before its MAC."""
    spec = FrameSpec(identity, FrameKind.HELLO, sender, 0, HELLO_SLOT, 0)
    return SendSlot(spec, key=secrets.token_bytes(32)).prepare(b"").join()


@pytest.mark.parametrize(
    ("what", "refusal"),
    [
        ("http", "WrongFrame"),
        ("other-run", "IdentityMismatch"),
        ("other-edge", "WrongEdge"),
        ("keyless", "Forged"),  # every header field right: only the edge's key is missing
    ],
)
async def test_a_stranger_before_the_real_peer_is_refused_and_the_run_aborts(
    what: str, refusal: str, tmp_path: Path
) -> None:
    run = CompiledRun.exchange(tmp_path, star(3), budgets=FAST)
    identity = run.description(0).identity
    strangers: list[socket.socket] = []
    if what == "http":
        data = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    elif what == "other-run":
        other = RunIdentity(
            learner=identity.learner, contract=identity.contract, membership=bytes(32)
        )
        data = _hello_from(run, other, 1)
    elif what == "other-edge":
        data = _hello_from(run, identity, 2)  # role 2's hello on role 1's listener
    else:
        data = _hello_from(run, identity, 1)  # role 1's hello, but not under role 1's key

    async def intrude(role: int, ports: tuple[int, ...]) -> None:
        if role == 0:
            strangers.append(await trio.to_thread.run_sync(_stranger, ports[0], data))

    try:
        result = await run.launch(on_announce=intrude)
    finally:
        for conn in strangers:
            conn.close()
    assert result.first_to_fail is not None
    assert result.first_to_fail.role == 0
    assert refusal in result.first_to_fail.cause
    assert f"failed: {refusal}" in run.log(0)
    assert unreaped(result) == []
    assert alive_children() == []


def test_launch_spec_is_built_from_the_compiled_folder(tmp_path: Path) -> None:
    run = CompiledRun.exchange(tmp_path, ParticipantTree(13, 3), budgets=FAST)
    spec = run.specs[5]
    assert isinstance(spec, LaunchSpec)
    assert spec.role == 5
    assert spec.argv == (sys.executable, str((run.folder / artifact_name(5)).resolve()))
    assert spec.lower == (0,)
    assert spec.higher == (6, 7, 8)
    assert spec.log == run.folder / "logs" / "role-000005.log"
    assert run.deadline == FAST.deadline


def _failing_run(base: Path) -> Path:
    """A compiled run whose role 0 fails in its first round: its choice's selector gives 2,
    which no choice word can carry (SelectorOutOfRange)."""
    plan = parse_plan(f"""
[run]
name = "fails"
rounds = 2
[membership]
group = "(group (stride 0 1 3))"
[topology]
shape = "tree"
fanout = 2
[budgets]
accept = {FAST.accept}
receive = {FAST.receive}
[work]
kind = "sum-check"
size = 8
choice = "const-2"
""")
    compile_plan(plan, base, range(3))
    return base


def test_the_launch_and_exchange_commands(tmp_path: Path) -> None:
    exchange = run_alpha("exchange", "5", "2", "--dir", str(tmp_path / "x"))
    assert exchange.returncode == 0, exchange.stderr
    assert "4 of 4 edge(s) established once and checked both ways" in exchange.stdout
    again = run_alpha("launch", str(tmp_path / "x"))
    assert again.returncode == 0, again.stderr
    assert "5 role(s) finished" in again.stderr
    # A folder that `alpha compile` did not write is a usage error: one line, exit 2.
    (tmp_path / "empty").mkdir()
    empty = run_alpha("launch", str(tmp_path / "empty"))
    assert empty.returncode == 2
    assert len(empty.stderr.splitlines()) == 1 and "run.json" in empty.stderr
    # A run whose role fails: exit 1, naming the role that failed first.
    failed = run_alpha("launch", str(_failing_run(tmp_path / "fails")))
    assert failed.returncode == 1
    assert "failed first" in failed.stderr


# --- which role failed first: signals, stopped roles, logs ----------------------------------


async def test_a_role_killed_by_a_signal_is_named_first_with_its_log(tmp_path: Path) -> None:
    # Role 0 (the hub) waits to accept role 2, which starts late; role 1, connected to role 0,
    # waits on it. Killing role 0 then breaks role 1's connection at once: role 1 logs its own
    # failure about as soon as the launcher sees role 0 die, and must not take the blame.
    waiting = Budgets(connect_attempts=20, connect_interval=0.1, accept=60.0, receive=30.0)
    run = CompiledRun.exchange(tmp_path, star(3), budgets=waiting)
    late = 30.0  # role 2's start delay: the launcher, stopping, must not sit it out
    listener: list[int] = []

    async def kill_role_0_once_role_1_is_connected(role: int, ports: tuple[int, ...]) -> None:
        if role == 0:
            listener.append(ports[0])  # role 0's listener for role 1
        if role == 1:
            # Roles announce in any order: role 1 (a leaf, with nothing to announce) may be
            # first; it connects once role 0's port reached it.
            while not (listener and established_on(listener[0])):
                await trio.sleep(0.01)
            os.kill(await pid_running(run.specs[0].argv[-1]), signal.SIGKILL)

    result = await run.launch(delays={2: late}, on_announce=kill_role_0_once_role_1_is_connected)
    failure = result.first_to_fail
    assert failure is not None
    assert failure.role == 0
    assert failure.cause == f"role 0 was killed by SIGKILL; its log: {run.log_path(0)}"
    assert result.outcomes[0].returncode == -signal.SIGKILL
    assert not result.outcomes[0].killed, "the launcher did not send it"
    peer = result.outcomes[1]
    assert peer.killed or peer.cause.startswith("role 1: failed: "), peer
    assert peer.cause.endswith(f"; its log: {run.log_path(1)}")
    assert 2 not in result.outcomes, "the launcher stopped before role 2's turn"
    assert result.elapsed_s < late
    assert unreaped(result) == []
    assert alive_children() == []


async def test_a_stopped_role_is_blamed_not_the_peer_whose_budget_ran_out(tmp_path: Path) -> None:
    budgets = Budgets(connect_attempts=20, connect_interval=0.1, accept=3.0, receive=10.0)
    run = CompiledRun.exchange(tmp_path, star(3), budgets=budgets)
    stopped: list[int] = []

    async def stop_role_2(role: int, ports: tuple[int, ...]) -> None:
        if role == 2:  # a leaf announces no port: it is stopped while it starts
            pid = await pid_running(run.specs[2].argv[-1])
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    try:
        result = await run.launch(on_announce=stop_role_2)
        left = alive_children()
    finally:
        for pid in stopped:
            if pid in alive_children():  # only if the launcher failed to kill and reap it
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    failure = result.first_to_fail
    assert failure is not None
    assert failure.role == 2
    assert failure.stopped
    assert failure.cause == (
        "role 2 was stopped (SIGSTOP or another stop signal) and stopped answering; "
        f"its log: {run.log_path(2)}"
    )
    assert result.outcomes[2].returncode == -signal.SIGKILL, "killed by the launcher at last"
    # Role 0's accept budget ran out waiting for role 2: by the clocks it failed first.
    hub = result.outcomes[0]
    assert hub.logged
    assert "BudgetExhausted" in hub.cause and "for role 2" in hub.cause
    assert hub.cause.endswith(f"; its log: {run.log_path(0)}")
    assert left == []
    assert unreaped(result) == []


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_participants_die_with_a_launcher_killed_by_sigkill(tmp_path: Path, start: str) -> None:
    # A pair that would go on for a million rounds. Warm, the participants are the warm
    # starter's children, which ends when the launcher does; cold, the launcher's own.
    run = CompiledRun.exchange(tmp_path, pair(), budgets=ROOMY, rounds=1_000_000)
    progress = tmp_path / "launcher.err"
    with progress.open("wb") as err:
        launcher = subprocess.Popen(
            [
                *ALPHA,
                "launch",
                str(run.folder),
                *(["--cold"] if start == "cold" else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    # A participant's own exit once it noticed: closing its connections and the
    # interpreter's shutdown, seconds on a loaded host.
    exit_margin = 10.0
    participants: list[int] = []
    below: list[int] = []
    try:
        # Both roles started and announced (off a terminal, alpha launch says so in one line,
        # docs/launch.md); the launcher's own ANNOUNCE_WAIT bounds this.
        while "launch: 2 roles up in " not in progress.read_text():
            assert launcher.poll() is None, progress.read_text()
            time.sleep(0.02)
        participants = [pid for spec in run.specs for pid in running(spec.argv[-1], whole=True)]
        assert len(participants) == 2
        below = descendants_of(launcher.pid)
        assert set(participants) <= set(below)
        if start == "cold":
            assert sorted(children_of(launcher.pid)) == sorted(participants)
        else:  # the warm starter, and its children
            assert len(below) == 3 and len(children_of(launcher.pid)) == 1
        launcher.kill()
        assert launcher.wait() == -signal.SIGKILL
        give_up = time.monotonic() + LAUNCHER_POLL + exit_margin
        while left := [pid for pid in below if state_of(pid) not in ("", "Z")]:
            assert time.monotonic() < give_up, f"still running: {left}"
            time.sleep(0.02)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid in [*participants, *below]:
            if state_of(pid) not in ("", "Z"):
                os.kill(pid, signal.SIGKILL)
    causes = []
    for role in (0, 1):
        clock, cause = run.log(role).splitlines()[-2:]
        assert clock.startswith(f"role {role}: failure-clock "), run.log(role)
        assert cause.startswith(f"role {role}: failed: "), cause
        causes.append(cause.split(": ")[2])
    # At least the first to look found its launcher gone; the other may see that peer go first.
    assert "LauncherLost" in causes, causes


class _StopsWhileStarting(_Launch):
    """A launch in which another role's failure arrives while a role's process starts."""

    async def open(self, spec: LaunchSpec, log: int) -> trio.Process:
        process = await super().open(spec, log)
        self.stop_all()
        return process


async def test_a_role_started_while_the_launcher_stops_is_killed_at_once(tmp_path: Path) -> None:
    run = CompiledRun.exchange(tmp_path, pair(), budgets=FAST)
    state = _StopsWhileStarting(run.specs, fail_fast=True)
    async with trio.open_nursery() as nursery:
        # Returns without waiting for an announcement; the nursery ends when watch() saw the
        # role exit, which it would do by itself only after its accept budget.
        await state.start(run.specs[0], nursery, ANNOUNCE_WAIT, None)
    await state.reap()
    outcome = state.result.outcomes[0]
    assert outcome.killed
    assert outcome.returncode == -signal.SIGKILL
    assert not outcome.failed
    assert state.failures == []
    assert alive_children() == []


async def test_no_role_is_started_once_the_launcher_stops(tmp_path: Path) -> None:
    run = CompiledRun.exchange(tmp_path, pair(), budgets=FAST)
    state = _Launch(run.specs, fail_fast=True)
    state.stop_all()
    async with trio.open_nursery() as nursery:
        await state.start(run.specs[0], nursery, ANNOUNCE_WAIT, None)
    assert state.processes == {}
    assert not run.specs[0].log.exists()


def test_alpha_launch_names_the_first_failure_and_its_log(tmp_path: Path) -> None:
    folder = _failing_run(tmp_path / "fails")
    failed = run_alpha("launch", str(folder))
    assert failed.returncode == 1
    line = next(x for x in failed.stderr.splitlines() if "failed first" in x)
    role = int(line.removeprefix("launch: role ").split(" ", 1)[0])
    assert line.startswith(f"launch: role {role} failed first: role {role}: failed: ")
    assert role == 0 and "SelectorOutOfRange" in line
    assert line.endswith(f"; its log: {folder / 'logs' / 'role-000000.log'}")


# --- the blame order, as values -------------------------------------------------------------


def _failed(role: int, at: float, **fields: object) -> RoleOutcome:
    return RoleOutcome(role, 1, f"role {role} failed", failed_at=at, **fields)  # type: ignore[arg-type]


def test_a_stopped_role_is_named_before_any_earlier_failure() -> None:
    early = _failed(3, 1.0, logged=True)
    stopped = _failed(5, 50.0, stopped=True)
    also = _failed(4, 60.0, stopped=True)
    assert first_to_fail([early, stopped]) is stopped
    assert first_to_fail([early, stopped, also]) is also, "the lowest stopped role"


@pytest.mark.parametrize(
    ("seen_after", "first"),
    [
        (EXIT_NOTICE - 0.01, "exit"),  # its peer may have seen its connection break first
        (EXIT_NOTICE + 0.01, "logged"),  # too late to be the cause
    ],
)
def test_an_exit_the_launcher_saw_is_placed_exit_notice_earlier(
    seen_after: float, first: str
) -> None:
    logged = _failed(1, 100.0, logged=True)
    exit_ = RoleOutcome(0, -signal.SIGKILL, "killed", failed_at=100.0 + seen_after, exit_seen=True)
    chosen = first_to_fail([logged, exit_])
    assert chosen is (exit_ if first == "exit" else logged)


def test_the_earliest_clock_is_first_and_no_failure_is_none() -> None:
    diagnosed = RoleOutcome(2, None, "silent", failed_at=10.5)
    logged = _failed(1, 10.0, logged=True)
    assert first_to_fail([diagnosed, logged]) is logged
    assert first_to_fail([diagnosed]) is diagnosed
    killed = RoleOutcome(3, -signal.SIGKILL, "stopped by the launcher", killed=True)
    assert first_to_fail([killed, RoleOutcome(0, 0)]) is None
    assert first_to_fail([]) is None


def test_the_cause_is_read_from_the_end_of_a_long_log(tmp_path: Path) -> None:
    log = tmp_path / "role-000000.log"
    progress = b"role 0: round 1 loss 0.5\n" * (3 * CAUSE_TAIL_BYTES // 25)
    log.write_bytes(progress + b"role 0: failure-clock 12.500000\nrole 0: failed: PeerLost: x\n")
    assert read_cause(log) == ("role 0: failed: PeerLost: x", 12.5)
    log.write_bytes(progress)
    assert read_cause(log) == ("role 0: round 1 loss 0.5", None)
    assert read_cause(tmp_path / "absent.log") == ("", None)


# --- reading role descriptions a user named -------------------------------------------------


def test_a_hard_limit_on_open_files_below_the_launch_is_refused_before_any_role_starts(
    tmp_path: Path,
) -> None:
    """16 roles started at once need (4 + 1) * 16 + 64 = 144 descriptors in the launcher at
    least; under a hard limit of 100 it refuses in one line, exit 2, and starts nothing."""
    from alpha.exitcodes import EXIT_USAGE
    from tests.support import plan_text

    plan = tmp_path / "sixteen.toml"
    plan.write_text(plan_text("sixteen", roles=16, rounds=1, topology={"fanout": 4}))
    folder = tmp_path / "run"
    compiled = run_alpha("compile", str(plan), "-o", str(folder))
    assert compiled.returncode == 0, compiled.stderr
    before = sorted(path.name for path in folder.rglob("*"))

    def low_limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))

    refused = subprocess.run(
        [*ALPHA, "launch", str(folder)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=low_limit,
    )
    assert refused.returncode == EXIT_USAGE, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]  # after the artifacts' check, one line
    assert last.startswith("alpha: error: starting 16 roles at once needs at least 144 open")
    assert "hard limit (RLIMIT_NOFILE) is 100" in last and "Traceback" not in refused.stderr
    assert sorted(path.name for path in folder.rglob("*")) == before  # no log, no report
