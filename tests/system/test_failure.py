"""A failed run commits nothing and every wait is bounded: faults injected by a relay on one
edge of a real multi-process learner run, at the first frame, the last frame and the frames of
the completion; every role must exit non-zero naming the original cause, within its budgets,
with no commit record, no final report, and no process left."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
import trio

from alpha.app.compile import compile_plan
from alpha.compiler.plan import parse_plan
from alpha.launch.launcher import launch, launch_specs
from alpha.records.reports import committed_reports
from alpha.wire.frame import FrameKind
from harness.compiled import CompiledRun
from harness.processes import running
from harness.relay import Fault, Relay
from harness.runs import Outcome, relayed_run
from tests.support import plan_text

pytestmark = pytest.mark.slow

# A 5-role tree of fan-out 2: role 0 has children 1 and 3; role 1 has child 2, role 3 child 4.
# Edge 0-1 joins the root to an inner node; edge 1-2 an inner node to a leaf.
N = 5
ROUNDS = 3
# The code's own bounds, small so that a silent peer costs seconds; not test timeouts.
RECEIVE = 4.0
START = 8.0


PLAN_TEXT = plan_text(
    "faults",
    roles=N,
    rounds=ROUNDS,
    topology={"shape": "tree", "fanout": 2},
    budgets={"accept": 30.0, "receive": RECEIVE, "start": START},
    work={"kind": "learn"},
    learner={"kind": "mlp", "hidden": 4, "rate": 0.1, "seed": 1, "batch": 4},
)
PLAN = parse_plan(PLAN_TEXT)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compiled")
    compile_plan(PLAN, folder, range(N))
    return folder


async def _run(compiled: Path, folder: Path, edge: tuple[int, int], fault: Fault | None) -> Outcome:
    outcome = await relayed_run(compiled, folder, edge, fault)
    assert outcome.relay is not None
    return outcome


# How long after the first failure every role must have stopped by its own hand: the abort
# reaches it at once, or its own budget (start, receive or connect) runs out.
SPAN = START + RECEIVE


def _assert_nothing_committed(outcome: Outcome) -> None:
    """Every role exited non-zero by itself (the launcher killed no one), within the budgets
    after the first failure; nothing is committed; no process is left."""
    clocks = []
    for role, each in outcome.result.outcomes.items():
        assert each.returncode not in (0, None), (role, each)
        assert not each.killed, (role, each)
        assert each.failed_at is not None and each.logged, (role, each)
        clocks.append(each.failed_at)
    assert max(clocks) - min(clocks) <= SPAN, clocks
    assert not outcome.committed()
    assert outcome.final_reports() == []
    assert not outcome.left_running(), "no participant is left running"


def _assert_everyone_names(outcome: Outcome, origin: int, cause: str) -> None:
    """The role at fault fails with ``cause``; every other role fails with the abort it
    relayed, naming the same origin and cause."""
    assert outcome.cause(origin) == cause, outcome.log(origin)
    for role in range(N):
        if role != origin:
            assert outcome.cause(role) == "RoundAborted", (role, outcome.log(role))
            assert f"aborted by role {origin}" in outcome.log(role)
            assert f": {cause}" in outcome.log(role)
    first = outcome.result.first_to_fail
    assert first is not None and first.role == origin, first


# --- the control run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frames(compiled: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[int]]:
    """A run through a relay that changes nothing commits, and tells how many frames each
    direction of the relayed edges carries."""
    counts: dict[str, list[int]] = {}
    for edge in ((0, 1), (1, 2)):
        folder = tmp_path_factory.mktemp("control") / "run"
        outcome = trio.run(_run, compiled, folder, edge, None)
        assert outcome.result.ok, outcome.result.first_to_fail
        record, _ = committed_reports(folder / "reports", PLAN.tree.children)
        assert record.rounds == ROUNDS and record.participants == N
        assert not list((folder / "reports").glob("*.staged"))
        down, up = outcome.relay.frames["down"], outcome.relay.frames["up"]
        assert down[0] == up[0] == FrameKind.HELLO
        assert down[-2:] == [FrameKind.END, FrameKind.COMMIT] and up[-1] == FrameKind.DONE
        counts[f"{edge[0]}-{edge[1]}"] = [len(down), len(up)]
    return counts


def test_a_relayed_run_without_a_fault_commits(frames: dict[str, list[int]]) -> None:
    assert frames["0-1"][0] > 3 and frames["1-2"][1] > 2


# --- faults before the commit point ---------------------------------------------------------


TRAILING = [
    # bytes appended after the schedule's last frame, toward the child and toward the parent
    pytest.param("insert", "down", FrameKind.END, 1, id="bytes-after-last-frame-down"),
    pytest.param("insert", "up", FrameKind.DONE, 0, id="bytes-after-last-frame-up"),
    # the last frame sent twice
    pytest.param("replay", "down", FrameKind.END, 1, id="last-frame-twice-down"),
    pytest.param("replay", "up", FrameKind.DONE, 0, id="last-frame-twice-up"),
]


@pytest.mark.parametrize(("kind", "direction", "at", "receiver_side"), TRAILING)
@pytest.mark.parametrize("edge", [(0, 1), (1, 2)], ids=["edge-0-1", "edge-1-2"])
async def test_bytes_after_the_last_frame_abort_every_role_and_commit_nothing(
    compiled: Path,
    tmp_path: Path,
    frames: dict[str, list[int]],
    edge: tuple[int, int],
    kind: str,
    direction: str,
    at: FrameKind,
    receiver_side: int,
) -> None:
    fault = Fault(kind, direction, at)  # type: ignore[arg-type]
    outcome = await _run(compiled, tmp_path / "run", edge, fault)
    assert outcome.relay.applied
    _assert_nothing_committed(outcome)
    _assert_everyone_names(outcome, edge[receiver_side], "TrailingBytes")


async def test_bytes_after_the_last_done_abort_before_the_commit(
    compiled: Path, tmp_path: Path, frames: dict[str, list[int]]
) -> None:
    outcome = await _run(compiled, tmp_path / "run", (1, 2), Fault("append", "up", FrameKind.DONE))
    _assert_nothing_committed(outcome)
    _assert_everyone_names(outcome, 1, "TrailingBytes")


@pytest.mark.parametrize(
    ("edge", "direction", "origin"),
    [((0, 1), "down", 1), ((0, 1), "up", 0), ((1, 2), "down", 2), ((1, 2), "up", 1)],
)
async def test_a_corrupted_last_frame_in_the_last_round_aborts_every_role(
    compiled: Path,
    tmp_path: Path,
    frames: dict[str, list[int]],
    edge: tuple[int, int],
    direction: str,
    origin: int,
) -> None:
    down, up = frames[f"{edge[0]}-{edge[1]}"]
    last = down - 3 if direction == "down" else up - 2  # the frame before END / DONE
    fault = Fault("corrupt", direction, last, offset=-1)  # type: ignore[arg-type]
    outcome = await _run(compiled, tmp_path / "run", edge, fault)
    _assert_nothing_committed(outcome)
    # The run is keyed (the default): a changed trailer is a failed MAC, Forged. Layout 2's
    # Corrupted is proved on the unkeyed gates (frames.corrupt-*-unkeyed) and in tests/wire.
    _assert_everyone_names(outcome, origin, "Forged")
    assert f"round {ROUNDS - 1}" in outcome.log(0)


@pytest.mark.parametrize("frame", [FrameKind.DONE, FrameKind.END])
async def test_a_corrupted_completion_frame_aborts_before_the_commit(
    compiled: Path, tmp_path: Path, frames: dict[str, list[int]], frame: FrameKind
) -> None:
    direction = "up" if frame == FrameKind.DONE else "down"
    fault = Fault("corrupt", direction, frame, offset=-1)  # type: ignore[arg-type]
    outcome = await _run(compiled, tmp_path / "run", (0, 1), fault)
    _assert_nothing_committed(outcome)
    _assert_everyone_names(outcome, 0 if frame == FrameKind.DONE else 1, "Forged")  # keyed


# --- every wait bounded, the first frame of an edge included --------------------------------


@pytest.mark.parametrize(
    ("fault", "budget"),
    [
        # a dropped first frame: both ends wait for a first frame within their start budget
        pytest.param(Fault("drop", "up", 1), "start", id="first-frame-dropped"),
        # a peer that sends its hello and then nothing
        pytest.param(Fault("stall", "up", 1), "start", id="silent-after-hello"),
        # a peer that goes silent in the middle of the run
        pytest.param(Fault("stall", "up", 3), "receive", id="silent-mid-run"),
    ],
)
async def test_a_silent_edge_is_bounded_by_its_budget_and_aborts_every_role(
    compiled: Path, tmp_path: Path, frames: dict[str, list[int]], fault: Fault, budget: str
) -> None:
    outcome = await _run(compiled, tmp_path / "run", (0, 1), fault)
    _assert_nothing_committed(outcome)
    # Both ends of the silent edge wait, and so may roles whose next frame depends on it: the
    # first whose budget runs out is the origin. Each says which budget, for whom, and when.
    first = outcome.result.first_to_fail
    assert first is not None
    origin = first.role
    assert outcome.cause(origin) == "BudgetExhausted"
    assert f"past its {budget} budget" in outcome.log(origin)
    # (A role that waits on the silent edge through others, e.g. for a broadcast its parent
    # cannot send, may run out first: docs/failure.md, "Silence".) Every role stops, by its
    # own budget or by the abort, which names an origin whose budget ran out.
    for role in range(N):
        assert outcome.cause(role) in ("BudgetExhausted", "RoundAborted"), outcome.log(role)
        if outcome.cause(role) == "RoundAborted":
            assert "BudgetExhausted" in outcome.log(role)


async def test_a_truncated_frame_aborts_every_role(
    compiled: Path, tmp_path: Path, frames: dict[str, list[int]]
) -> None:
    outcome = await _run(compiled, tmp_path / "run", (1, 2), Fault("truncate", "up", 2, offset=50))
    _assert_nothing_committed(outcome)
    # Role 1 sees its child's frame cut off; role 2 sees its connection end.
    assert outcome.cause(1) in ("Truncated", "PeerLost")
    for role in (0, 3, 4):
        assert outcome.cause(role) == "RoundAborted"


async def test_a_stranger_that_replays_a_hello_and_goes_silent_is_bounded(
    compiled: Path, tmp_path: Path
) -> None:
    from alpha.artifact import read_artifact
    from alpha.runtime.edge import edge_end
    from alpha.schedule.role import RoleDescription

    folder = tmp_path / "run"
    shutil.copytree(compiled, folder)
    specs, deadline = launch_specs(folder)
    # Role 3's own hello, its key included: the bytes a stranger copied off the wire.
    payload = read_artifact(folder / "role-000003.pyz")
    description = RoleDescription.from_dict(payload["description"])
    (to_parent,) = description.lower
    assert to_parent.peer == 0
    hello = edge_end(description, to_parent).hello_out().prepare(b"").join()
    strangers: list[socket.socket] = []

    async def stranger(role: int, ports: tuple[int, ...]) -> None:
        if role == 0:  # before role 3 starts, take its place on role 0's listener for it
            sock = socket.create_connection(("127.0.0.1", ports[1]))
            sock.sendall(hello)
            strangers.append(sock)

    result = await launch(specs, deadline=deadline, fail_fast=False, on_announce=stranger)
    for sock in strangers:
        sock.close()
    outcome = Outcome(result, folder, Relay(0))
    _assert_nothing_committed(outcome)
    # Role 0 took the stranger for role 3 (its hello was right), and waits for its first frame
    # within the start budget, unless a role whose next frame depends on it runs out first.
    # The real role 3, started with everyone, cannot greet role 0: its connection waited behind
    # the stranger's and was reset when role 0 closed that listener (PeerLost), or it came
    # after and was refused until its connect budget ran out.
    assert outcome.cause(3) in ("BudgetExhausted", "PeerLost")
    if outcome.cause(3) == "BudgetExhausted":
        assert "role 3 waited for role 0 past its connect budget" in outcome.log(3)
    else:
        assert "role 3 lost its connection to role 0 while it was greeting" in outcome.log(3)
    assert outcome.cause(0) in ("BudgetExhausted", "RoundAborted")
    if outcome.cause(0) == "BudgetExhausted":
        assert "role 0 waited for role 3 past its start budget" in outcome.log(0)
    for role in (0, 1, 2):
        assert outcome.cause(role) in ("BudgetExhausted", "RoundAborted"), outcome.log(role)
    # Role 4, role 3's child, loses role 3 when role 3 stops, or runs out of a budget first.
    assert outcome.cause(4) in ("BudgetExhausted", "RoundAborted", "PeerLost"), outcome.log(4)
    if outcome.cause(4) == "PeerLost":
        assert "role 4 lost its connection to role 3" in outcome.log(4)


# --- after the commit point -----------------------------------------------------------------


async def test_bytes_after_the_last_commit_are_refused_but_cannot_undo_the_commit(
    compiled: Path, tmp_path: Path, frames: dict[str, list[int]]
) -> None:
    outcome = await _run(
        compiled, tmp_path / "run", (1, 2), Fault("append", "down", FrameKind.COMMIT)
    )
    # The run committed before role 1 sent its COMMIT; role 2 refuses the bytes after it and
    # exits 1, but its report is final: it learned of the commit first.
    assert outcome.committed()
    assert outcome.cause(2) == "TrailingBytes"
    assert outcome.result.outcomes[2].returncode == 1
    assert len(outcome.final_reports()) == N
    assert all(outcome.result.outcomes[r].returncode == 0 for r in (0, 1, 3, 4))
    data = json.loads((outcome.folder / "reports" / "role-000002.json").read_text())
    assert data["rounds"] == ROUNDS


# --- a stopped participant, and the optional deadline ---------------------------------------


async def test_a_participant_stopped_between_hello_and_first_data_is_blamed(
    compiled: Path, tmp_path: Path
) -> None:
    import os
    import signal

    folder = tmp_path / "run"
    shutil.copytree(compiled, folder)
    specs, deadline = launch_specs(folder)
    # The relay holds role 1's hello to role 2 for a moment; role 2, the leaf that connects,
    # has sent its own hello by then and is stopped before it can send its first data.
    relay = Relay(0, Fault("delay", "down", 0, seconds=1.0))
    victim: list[int] = []

    async def stop_after_hello() -> None:
        while not relay.frames["up"]:
            await trio.sleep(0.005)
        (pid,) = running(folder / "role-000002.pyz")
        os.kill(pid, signal.SIGSTOP)
        victim.append(pid)

    async with trio.open_nursery() as nursery:

        async def route(listener: int, connector: int, port: int) -> int:
            if (listener, connector) != (1, 2):
                return port
            relay.target = port
            relayed = await relay.open()
            nursery.start_soon(relay.serve)
            nursery.start_soon(stop_after_hello)
            return relayed

        try:
            # Fail-fast, as `alpha launch` runs: the launcher stops everyone once one fails.
            result = await launch(specs, deadline=deadline, route=route)
        finally:
            nursery.cancel_scope.cancel()
            for pid in victim:
                if pid in running(folder):  # only if the launcher failed to kill it
                    os.kill(pid, signal.SIGKILL)
    outcome = Outcome(result, folder, relay)
    assert relay.frames["up"][:1] == [FrameKind.HELLO] and len(relay.frames["up"]) == 1
    first = result.first_to_fail
    assert first is not None and first.role == 2 and first.stopped, first
    assert "was stopped" in first.cause
    # A role waiting on it ran out of its start budget and aborted the run; the others heard
    # the abort or ran out of theirs too. Every role starts at once, so every role that waits
    # on role 2's subtree (its parent, role 0, the other leaves waiting for the total) starts
    # its start budget at about the same moment: any of them may be the one.
    logged = [role for role in range(N) if role != 2 and ": failed: " in outcome.log(role)]
    exhausted = [role for role in logged if outcome.cause(role) == "BudgetExhausted"]
    assert exhausted, logged
    for role in exhausted:
        assert "past its start budget" in outcome.log(role), outcome.log(role)
    assert not outcome.committed() and outcome.final_reports() == []
    assert result.outcomes[2].returncode == -signal.SIGKILL
    assert not outcome.left_running()


async def test_the_optional_deadline_names_the_step_the_peer_and_the_round(
    tmp_path: Path,
) -> None:
    plan = parse_plan(
        PLAN_TEXT.replace("rounds = 3", "rounds = 1000000").replace(
            "[budgets]", "[budgets]\ndeadline = 6.0"
        )
    )
    run = CompiledRun(plan, tmp_path)
    assert run.deadline == 6.0
    result = await run.launch(fail_fast=False)
    outcome = Outcome(result, tmp_path, Relay(0))
    assert not outcome.committed() and outcome.final_reports() == []
    first = result.first_to_fail
    assert first is not None
    log = outcome.log(first.role)
    assert outcome.cause(first.role) == "BudgetExhausted"
    assert "past its deadline budget (6 s) while it was" in log
    assert "(round " in log and "role ?" not in log


# --- every frame of an edge -----------------------------------------------------------------

PAIR_TEXT = PLAN_TEXT.replace(f"stride 0 1 {N}", "stride 0 1 2").replace(
    'shape = "tree"\nfanout = 2', 'shape = "pair"'
)


@pytest.fixture(scope="module")
def pair_compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pair")
    compile_plan(parse_plan(PAIR_TEXT), folder, range(2))
    return folder


@pytest.fixture(scope="module")
def pair_frames(pair_compiled: Path, tmp_path_factory: pytest.TempPathFactory) -> list[int]:
    folder = tmp_path_factory.mktemp("pair-control") / "run"
    outcome = trio.run(_run, pair_compiled, folder, (0, 1), None)
    assert outcome.result.ok and outcome.committed()
    return [len(outcome.relay.frames["down"]), len(outcome.relay.frames["up"])]


# Every frame the pair sends before the commit point, each way: the hello, every data frame of
# every round, END and DONE. (COMMIT, the last frame toward role 1, comes after it: below.)
PAIR_FRAMES = [("down", index) for index in range(ROUNDS + 2)] + [
    ("up", index) for index in range(ROUNDS + 2)
]


@pytest.mark.parametrize(("direction", "index"), PAIR_FRAMES, ids=lambda v: str(v))
async def test_a_corrupted_frame_anywhere_before_the_commit_aborts_both_roles(
    pair_compiled: Path, tmp_path: Path, pair_frames: list[int], direction: str, index: int
) -> None:
    down, up = pair_frames
    assert index < (down - 1 if direction == "down" else up), "the sweep covers every frame"
    fault = Fault("corrupt", direction, index, offset=-1)  # type: ignore[arg-type]
    outcome = await _run(pair_compiled, tmp_path / "run", (0, 1), fault)
    assert outcome.relay.applied
    for each in outcome.result.outcomes.values():
        assert each.returncode == 1 and not each.killed, each
    assert not outcome.committed() and outcome.final_reports() == []
    receiver, sender = (1, 0) if direction == "down" else (0, 1)
    assert outcome.cause(receiver) == "Forged"  # a keyed run: its trailer is a MAC
    assert outcome.cause(sender) == "RoundAborted"
    assert f"aborted by role {receiver}" in outcome.log(sender)
    assert not list((outcome.folder / "reports").glob("*.staged"))


def test_the_sweep_covers_every_frame_before_the_commit(pair_frames: list[int]) -> None:
    down, up = pair_frames
    assert len(PAIR_FRAMES) == (down - 1) + up


async def test_a_corrupted_commit_leaves_the_child_staged_and_the_run_committed(
    pair_compiled: Path, tmp_path: Path, pair_frames: list[int]
) -> None:
    fault = Fault("corrupt", "down", FrameKind.COMMIT, offset=-1)
    outcome = await _run(pair_compiled, tmp_path / "run", (0, 1), fault)
    # Role 0 committed; role 1 cannot learn it: it exits 1 and its report stays staged.
    assert outcome.committed()
    assert outcome.result.outcomes[0].returncode == 0
    assert outcome.result.outcomes[1].returncode == 1
    assert outcome.cause(1) == "CommitUnknown"
    reports = outcome.folder / "reports"
    assert [p.name for p in outcome.final_reports()] == ["role-000000.json"]
    assert (reports / "role-000001.json.staged").exists()
