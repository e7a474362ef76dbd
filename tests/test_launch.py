"""Endpoints and the local launcher, with real participant processes on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
import trio

from alpha.budgets import Budgets
from alpha.frame import FrameKind, FrameSpec, SendSlot
from alpha.identity import RunIdentity
from alpha.launch import (
    LAUNCH_SLACK,
    LaunchResult,
    LaunchSpec,
    launch,
    specs_from_dir,
    write_roles,
)
from alpha.role import RoleDescription, exchange_payload, exchange_roles
from alpha.runtime.endpoint import HELLO_SLOT
from alpha.topology import ParticipantTree, pair, star

pytestmark = pytest.mark.slow

# Small budgets keep failure cases short; they are the code's own bounds, not test timeouts.
FAST = Budgets(connect_attempts=20, connect_interval=0.1, accept=2.0, receive=10.0, deadline=60.0)
# A parent accepts its children as they start one after another: give big trees room.
ROOMY = Budgets(accept=60.0, receive=30.0, deadline=240.0)


class Run:
    """A folder of role descriptions, their reports and logs, for one launch."""

    def __init__(
        self, base: Path, tree: ParticipantTree, *, budgets: Budgets, exchange: int = 512
    ) -> None:
        self.tree = tree
        self.roles = base / "roles"
        self.reports = base / "reports"
        self.reports.mkdir(parents=True)
        write_roles(
            self.roles,
            exchange_roles(tree, exchange=exchange, budgets=budgets, report_dir=str(self.reports)),
        )
        self.specs, self.deadline = specs_from_dir(self.roles)
        self.pids: list[int] = []

    async def launch(self, **options: object) -> LaunchResult:
        result = await launch(self.specs, deadline=self.deadline, **options)  # type: ignore[arg-type]
        return result

    def description(self, role: int) -> RoleDescription:
        return RoleDescription.from_json((self.roles / f"role-{role:06d}.json").read_text())

    def found_reports(self) -> dict[int, dict[str, object]]:
        return {
            int(data["role"]): data
            for data in (json.loads(p.read_text()) for p in self.reports.glob("role-*.json"))
        }

    def log(self, role: int) -> str:
        return (self.roles / "logs" / f"role-{role:06d}.log").read_text()


def assert_no_process_left(result: LaunchResult) -> None:
    for outcome in result.outcomes.values():
        assert outcome.returncode is not None or "absent" in outcome.cause, outcome


def alive_children() -> list[int]:
    """Processes whose parent is this test process (zombies included)."""
    me = os.getpid()
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The parent pid is the second field after the parenthesised command name.
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == me:
            children.append(int(entry))
    return children


@pytest.mark.parametrize(
    "tree",
    [pair(), star(6), ParticipantTree(13, 3), ParticipantTree(64, 4)],
    ids=["pair", "star-6", "tree-13-3", "tree-64-4"],
)
async def test_every_edge_is_established_once_and_checked(
    tree: ParticipantTree, tmp_path: Path
) -> None:
    run = Run(tmp_path, tree, budgets=ROOMY, exchange=3000)
    result = await run.launch()
    assert result.ok, result.first_failure
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
            expected = hashlib.sha256(exchange_payload(peer, role, 3000)).hexdigest()
            assert edge["received_sha256"] == expected
            assert edge["sent_bytes"] == edge["received_bytes"] > 3000
    assert_no_process_left(result)
    assert alive_children() == []


@pytest.mark.parametrize(
    ("tree", "absent", "budget"),
    [
        (pair(), 1, "accept"),  # role 0 listens for 1, which never comes
        (pair(), 0, "connect"),  # role 1 never gets role 0's port
        (star(6), 0, "connect"),  # every leaf waits for the hub
    ],
    ids=["pair-without-1", "pair-without-0", "star-without-hub"],
)
async def test_a_peer_that_never_starts_exhausts_every_other_budget(
    tree: ParticipantTree, absent: int, budget: str, tmp_path: Path
) -> None:
    run = Run(tmp_path, tree, budgets=FAST)
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
        # Bounds the code enforces: the role's own budget, plus the documented slack for
        # starting and exiting.
        assert outcome.ended_s - outcome.started_s <= seconds + LAUNCH_SLACK
    last_start = max(o.started_s for o in result.outcomes.values())
    assert result.elapsed_s <= last_start + seconds + LAUNCH_SLACK
    assert_no_process_left(result)
    assert alive_children() == []


async def test_the_launcher_fails_fast_and_leaves_no_process(tmp_path: Path) -> None:
    tree = ParticipantTree(7, 2)
    run = Run(tmp_path, tree, budgets=FAST)
    result = await run.launch(absent=frozenset({1}))
    assert result.first_failure is not None
    # A neighbour of role 1 (its parent 0 or a child 2, 3) hits its budget first; the launcher
    # stops every other role then.
    assert result.first_failure.role in tree.edges(1)
    assert "BudgetExhausted" in result.first_failure.cause
    assert "for role 1" in result.first_failure.cause
    assert any(outcome.killed for outcome in result.outcomes.values())
    last_start = max(o.started_s for o in result.outcomes.values())
    assert result.elapsed_s <= last_start + max(FAST.accept, FAST.connect) + LAUNCH_SLACK
    assert_no_process_left(result)
    assert alive_children() == []


async def test_a_peer_that_starts_late_within_budget_succeeds(tmp_path: Path) -> None:
    late = Budgets(connect_attempts=60, connect_interval=0.1, accept=6.0, deadline=60.0)
    run = Run(tmp_path, star(4), budgets=late)
    result = await run.launch(delays={2: 2.0})
    assert result.ok, result.first_failure
    assert sorted(run.found_reports()) == [0, 1, 2, 3]


def _stranger(port: int, data: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(data)
    return conn


def _hello_from(run: Run, identity: RunIdentity, sender: int) -> bytes:
    spec = FrameSpec(identity, FrameKind.HELLO, sender, 0, HELLO_SLOT, 0)
    return SendSlot(spec).prepare(b"").join()


@pytest.mark.parametrize(
    ("what", "refusal"),
    [
        ("http", "WrongFrame"),
        ("other-run", "IdentityMismatch"),
        ("other-edge", "WrongEdge"),
    ],
)
async def test_a_stranger_before_the_real_peer_is_refused_and_the_run_aborts(
    what: str, refusal: str, tmp_path: Path
) -> None:
    run = Run(tmp_path, star(3), budgets=FAST)
    identity = run.description(0).identity
    strangers: list[socket.socket] = []
    if what == "http":
        data = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    elif what == "other-run":
        other = RunIdentity(
            learner=identity.learner, contract=identity.contract, membership=bytes(32)
        )
        data = _hello_from(run, other, 1)
    else:
        data = _hello_from(run, identity, 2)  # role 2's hello on role 1's listener

    async def intrude(role: int, ports: tuple[int, ...]) -> None:
        if role == 0:
            strangers.append(await trio.to_thread.run_sync(_stranger, ports[0], data))

    try:
        result = await run.launch(on_announce=intrude)
    finally:
        for conn in strangers:
            conn.close()
    assert result.first_failure is not None
    assert result.first_failure.role == 0
    assert refusal in result.first_failure.cause
    assert f"failed: {refusal}" in run.log(0)
    assert_no_process_left(result)
    assert alive_children() == []


async def test_a_participant_whose_description_is_broken_exits_2(tmp_path: Path) -> None:
    run = Run(tmp_path, pair(), budgets=FAST)
    (run.roles / "role-000001.json").write_text('{"format": "alpha-role/1", "role": 1}')
    specs = run.specs
    result = await launch(specs, deadline=run.deadline)
    assert result.first_failure is not None
    assert result.first_failure.role == 1
    assert result.outcomes[1].returncode == 2
    assert "RoleDescriptionInvalid" in result.first_failure.cause
    assert_no_process_left(result)


def test_launch_spec_is_built_from_descriptions(tmp_path: Path) -> None:
    run = Run(tmp_path, ParticipantTree(13, 3), budgets=FAST)
    spec = run.specs[5]
    assert isinstance(spec, LaunchSpec)
    assert spec.role == 5
    assert spec.lower == (0,)
    assert spec.higher == (6, 7, 8)
    assert run.deadline == FAST.deadline


def test_the_launch_and_exchange_commands(tmp_path: Path) -> None:
    import subprocess
    import sys

    exchange = subprocess.run(
        [sys.executable, "-m", "alpha", "exchange", "5", "2", "--dir", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert exchange.returncode == 0, exchange.stderr
    assert "4 of 4 edge(s) established once and checked both ways" in exchange.stdout
    again = subprocess.run(
        [sys.executable, "-m", "alpha", "launch", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "5 role(s) finished" in again.stderr
    # A folder without descriptions is a usage error: one line, exit 2.
    (tmp_path / "empty").mkdir()
    empty = subprocess.run(
        [sys.executable, "-m", "alpha", "launch", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert empty.returncode == 2
    assert len(empty.stderr.splitlines()) == 1 and "role-NNNNNN.json" in empty.stderr
    # A run whose role fails: exit 1, naming the role that failed first.
    (tmp_path / "x" / "role-000003.json").write_text(
        (tmp_path / "x" / "role-000003.json")
        .read_text()
        .replace('"exchange": 4096', '"exchange": 4095')
    )
    failed = subprocess.run(
        [sys.executable, "-m", "alpha", "launch", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 1
    assert "failed first" in failed.stderr
