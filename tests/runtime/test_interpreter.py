"""Running local schedules over real loopback channels: folds, choices, and their refusals."""

from __future__ import annotations

import numpy as np
import pytest
import trio

from alpha.compiler import Everyone, Local, Protocol, Region, project
from alpha.compiler.forms import Choice, Combine, Dissemination, Seq
from alpha.compiler.work_sum_check import SUM_CHECK_OPERATIONS
from alpha.core.topology import pair
from alpha.errors import NoncanonicalWord, SelectorOutOfRange, WrongEdge
from alpha.runtime import channel as channel_module
from alpha.runtime import interpreter as interpreter_module
from alpha.runtime.channel import FrameChannel
from alpha.runtime.interpreter import Interpreter, _Receives, _Sends, encode_word
from alpha.schedule.local import Choose, Fold, LocalSchedule, Op, Recv, Send
from alpha.wire.frame import FrameKind, FrameSpec
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, connected

REGIONS = (Region("x", "float64", 4),)


def schedule(role: int, *body: object) -> LocalSchedule:
    return LocalSchedule(role=role, regions=REGIONS, scratch=(), body=tuple(body))  # type: ignore[arg-type]


async def test_a_pair_combines_and_both_hold_the_total() -> None:
    proto = Protocol(
        participants=2,
        tree=pair(),
        regions={"x": REGIONS[0]},
        operations=SUM_CHECK_OPERATIONS,
        body=Seq(
            (Local(Everyone(), "fill", "x"), Combine("x"), Local(Everyone(), "check_sum", "x"))
        ),
    )
    async with connected() as (low, high):
        a = Interpreter(project(proto, 0), IDENTITY, 2, {1: low})
        b = Interpreter(project(proto, 1), IDENTITY, 2, {0: high})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run)
            nursery.start_soon(b.run)
    assert np.array_equal(a.buffers["x"], np.full(4, 3.0))
    assert np.array_equal(b.buffers["x"], a.buffers["x"])


async def test_a_participant_on_the_other_arm_is_refused_on_the_first_frame() -> None:
    # Role 0 decides arm 1; role 1 (wrongly) runs arm 0. The arms' transfers use slots 2 and
    # 3, so the first data frame that crosses is refused by its slot.
    choice = Choice(
        0,
        "const-1",
        Dissemination.tree(),
        Combine("x"),
        Seq((Local(Everyone(), "fill", "x"), Combine("x"))),
    )
    proto = Protocol(
        participants=2,
        tree=pair(),
        regions={"x": REGIONS[0]},
        operations=SUM_CHECK_OPERATIONS,
        body=choice,
    )
    honest = project(proto, 0)
    (choose,) = project(proto, 1).body
    assert isinstance(choose, Choose)
    async with connected() as (low, high):
        authority = Interpreter(honest, IDENTITY, 2, {1: low})

        async def other_arm() -> None:
            # Receive the word as the schedule says, then run the wrong arm.
            word_slot = choose.slot
            receiver = Interpreter(schedule(1), IDENTITY, 2, {0: high})
            slot = ReceiveSlot(FrameSpec(IDENTITY, FrameKind.CHOICE, 0, 1, word_slot, 8))
            assert bytes(await high.receive(slot)) == encode_word(1)
            await receiver._body(choose.arm0, depth=1)

        refused = pytest.RaisesExc(WrongEdge, check=lambda error: error.field == "slot")
        with pytest.RaisesGroup(refused):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(other_arm)
                await authority.run()


async def test_a_selector_out_of_range_is_refused_at_the_authority() -> None:
    body = Choose(1, "const-2", None, (1,), (), ())
    async with connected() as (low, _high):
        interpreter = Interpreter(schedule(0, body), IDENTITY, 2, {1: low})
        with pytest.raises(SelectorOutOfRange):
            await interpreter.run()


@pytest.mark.parametrize("word", [encode_word(2), b"\x01" + bytes(7), b"\xff" * 8])
async def test_a_noncanonical_word_is_refused(word: bytes) -> None:
    async with connected() as (low, high):
        await low.send(SendSlot(FrameSpec(IDENTITY, FrameKind.CHOICE, 0, 1, 1, 8)), word)
        receiver = Interpreter(
            schedule(1, Choose(1, None, 0, (), (Op("fill", "x"),), (Op("fill_neg", "x"),))),
            IDENTITY,
            2,
            {0: high},
        )
        with pytest.raises(NoncanonicalWord):
            await receiver.run()
        assert not receiver.buffers["x"].any(), "no arm ran"


async def test_a_relay_forwards_the_word_it_received() -> None:
    # 0 -> 1 -> 2 on a chain: role 1 relays what it got, and never evaluates anything.
    async with connected(0, 1) as (a0, a1), connected(1, 2) as (b1, b2):
        arms = ((Op("fill", "x"),), (Op("fill_neg", "x"),))
        roles = [
            Interpreter(schedule(0, Choose(1, "const-1", None, (1,), *arms)), IDENTITY, 3, {1: a0}),
            Interpreter(schedule(1, Choose(1, None, 0, (2,), *arms)), IDENTITY, 3, {0: a1, 2: b1}),
            Interpreter(schedule(2, Choose(1, None, 1, (), *arms)), IDENTITY, 3, {1: b2}),
        ]
        async with trio.open_nursery() as nursery:
            for interpreter in roles:
                nursery.start_soon(interpreter.run)
    for interpreter in roles:
        assert interpreter.arms == [0, 1]
        assert (interpreter.buffers["x"] < 0).all()


# --- receives and sends at once; each region hashed once ------------------------------------

HUB_REGIONS = (
    Region("x", "float32", 3),
    Region("x#1", "float32", 3),
    Region("x#2", "float32", 3),
    Region("x#3", "float32", 3),
)


@pytest.fixture(autouse=True)
def _group_any_size(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """The grouping tests use small regions: let regions of any size run at once, except in
    the test of the threshold itself."""
    if "threshold" not in request.node.name:
        monkeypatch.setattr(interpreter_module, "GROUP_MIN", 0)


def test_regions_below_the_threshold_move_one_at_a_time() -> None:
    recvs = tuple(Recv(peer, f"x#{peer}", 1) for peer in (1, 2, 3))
    fold = Fold("x", ("x", "x#1", "x#2", "x#3"))
    sends = tuple(Send(peer, "x", 1) for peer in (1, 2, 3))
    body = (*recvs, fold, *sends)
    assert HUB_REGIONS[0].nbytes < interpreter_module.GROUP_MIN
    assert hub(*body)._grouped(body) == body


def hub(*body: object, regions: tuple[Region, ...] = HUB_REGIONS) -> Interpreter:
    schedule = LocalSchedule(role=0, regions=regions, scratch=(), body=tuple(body))  # type: ignore[arg-type]
    return Interpreter(schedule, IDENTITY, 4, {})


def test_a_hubs_receives_fold_and_sends_are_grouped() -> None:
    recvs = tuple(Recv(peer, f"x#{peer}", 1) for peer in (1, 2, 3))
    fold = Fold("x", ("x", "x#1", "x#2", "x#3"))
    sends = tuple(Send(peer, "x", 1) for peer in (1, 2, 3))
    body = (Op("fill", "x"), *recvs, fold, *sends, Op("check_sum", "x"))
    interpreter = hub(*body)
    assert interpreter._grouped(body) == (
        Op("fill", "x"),
        _Receives(recvs, fold),
        _Sends(sends),
        Op("check_sum", "x"),
    )


def test_only_what_may_run_at_once_is_grouped() -> None:
    interpreter = hub(
        regions=(
            *HUB_REGIONS,
            Region("w", "float32", 4),
            Region("w@0", "float32", 2, "w", 0),
            Region("w@1", "float32", 2, "w", 1),  # overlaps w@0
        )
    )
    same_peer = (Recv(1, "x#1", 1), Recv(1, "x#2", 2))
    assert interpreter._grouped(same_peer) == same_peer
    overlapping = (Recv(1, "w@0", 1), Recv(2, "w@1", 1))
    assert interpreter._grouped(overlapping) == overlapping
    # A fold that writes a buffer a receive fills waits for the receives.
    into_received = (Recv(1, "x#1", 1), Recv(2, "x#2", 1), Fold("x#1", ("x#1", "x#2")))
    assert interpreter._grouped(into_received) == (
        _Receives(into_received[:2], None),
        into_received[2],
    )
    # One receive and its fold gain nothing from running at once.
    single = (Recv(1, "x#1", 1), Fold("x", ("x", "x#1")))
    assert interpreter._grouped(single) == single
    twice = (Send(1, "x", 1), Send(2, "x", 1), Send(1, "x", 2))
    assert interpreter._grouped(twice) == (_Sends(twice[:2]), twice[2])


async def test_a_fold_adds_in_the_declared_order_whatever_order_sources_arrive_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The peers send in reverse order, the last one first; float32 addition is not
    associative here, and the hub's total is the declared order's, bit for bit."""
    values = {
        1: np.array([1e8, 1.0, 3.0], np.float32),
        2: np.array([1.0, 1e8, -3.0], np.float32),
        3: np.array([-1e8, -1e8, 1e-3], np.float32),
    }
    own = np.array([0.5, 0.5, 0.25], np.float32)
    hashed: list[int] = []
    real = channel_module.payload_digest
    monkeypatch.setattr(
        channel_module,
        "payload_digest",
        lambda data, name="sha256": hashed.append(1) or real(data, name),
    )
    recvs = tuple(Recv(peer, f"x#{peer}", 1) for peer in (1, 2, 3))
    fold = Fold("x", ("x", "x#1", "x#2", "x#3"))
    sends = tuple(Send(peer, "x", 1) for peer in (1, 2, 3))
    async with (
        connected(0, 1) as (h1, p1),
        connected(0, 2) as (h2, p2),
        connected(0, 3) as (h3, p3),
    ):
        interpreter = Interpreter(
            LocalSchedule(0, HUB_REGIONS, (), (*recvs, fold, *sends)),
            IDENTITY,
            4,
            {1: h1, 2: h2, 3: h3},
        )
        interpreter.buffers["x"][:] = own
        totals: dict[int, bytes] = {}

        async def peer(channel: FrameChannel, wait: float) -> None:
            await trio.sleep(wait)
            extent = values[channel.role].nbytes
            spec_up = FrameSpec(IDENTITY, FrameKind.DATA, channel.role, 0, 1, extent)
            await channel.send(SendSlot(spec_up), values[channel.role])
            spec_down = FrameSpec(IDENTITY, FrameKind.DATA, 0, channel.role, 1, extent)
            totals[channel.role] = bytes(await channel.receive(ReceiveSlot(spec_down)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(interpreter.run)
            for channel, wait in ((p1, 0.3), (p2, 0.15), (p3, 0.0)):
                nursery.start_soon(peer, channel, wait)
    declared, arrival = own.copy(), own.copy()
    for k in (1, 2, 3):
        declared += values[k]
        arrival += values[4 - k]
    assert declared.tobytes() != arrival.tobytes()  # the data tell the orders apart
    assert interpreter.buffers["x"].tobytes() == declared.tobytes()
    assert totals == {k: declared.tobytes() for k in (1, 2, 3)}
    # The peers hashed their own frames; the hub sent its total to three peers, hashed once.
    assert len(hashed) == 3 + 1
