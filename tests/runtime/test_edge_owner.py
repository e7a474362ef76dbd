"""Each edge has one end per role, and everything that moves frames on it uses that end's
slots and specs: the establishment's channels, the interpreter's transfers, the completion's
frames and the aborts (``alpha.runtime.edge``)."""

from __future__ import annotations

from alpha.core.identity import RunIdentity
from alpha.errors import FrameSpecInvalid
from alpha.runtime.channel import FrameChannel
from alpha.runtime.completion import expect_completion
from alpha.runtime.edge import EdgeEnd
from alpha.runtime.endpoint import Establishment
from alpha.runtime.interpreter import Interpreter
from alpha.schedule.local import LocalSchedule, Loop, Recv, Send
from alpha.schedule.regions import Region
from alpha.schedule.role import Edge, RoleDescription
from alpha.wire.abort import AbortCause
from alpha.wire.frame import FrameKind
from tests.support import BUDGETS, IDENTITY, connected, raises_exactly

OTHER = RunIdentity(learner=b"L" * 32, contract=b"c" * 32, membership=b"m" * 32)


async def test_a_channel_carries_the_end_of_its_own_edge_only() -> None:
    async with connected(0, 1) as (low, high):
        assert low.edge is not None and high.edge is not None
        assert (low.edge.role, low.edge.peer, low.edge.listens) == (0, 1, True)
        assert (high.edge.role, high.edge.peer, high.edge.listens) == (1, 0, False)
        mine = EdgeEnd(0, 1, IDENTITY)
        shared = FrameChannel(
            low.stream, role=0, peer=1, budgets=BUDGETS, identity=IDENTITY, edge=mine
        )
        assert shared.edge is mine
        for wrong in (EdgeEnd(0, 2, IDENTITY), EdgeEnd(1, 0, IDENTITY), EdgeEnd(0, 1, OTHER)):
            raises_exactly(
                FrameSpecInvalid,
                FrameChannel,
                low.stream,
                role=0,
                peer=1,
                budgets=BUDGETS,
                identity=IDENTITY,
                edge=wrong,
            )


async def test_a_bare_transport_has_no_edge_and_sends_no_abort() -> None:
    async with connected(0, 1) as (low, _):
        bare = FrameChannel(low.stream, role=0, peer=1, budgets=BUDGETS)
        assert bare.edge is None
        assert not await bare.send_abort(AbortCause(0, "PeerLost", (0, 1), 0, "gone"))


async def test_the_interpreter_keeps_its_slots_in_the_channels_edge_ends() -> None:
    regions = (Region("x", "float32", 4),)
    body = (Loop(3, (Send(1, "x", 1), Recv(1, "x", 1))),)
    async with connected(0, 1) as (low, _):
        end = low.edge
        assert end is not None and end.slots == 0
        interpreter = Interpreter(LocalSchedule(0, regions, (), body), IDENTITY, 2, {1: low})
        assert interpreter.edges[1] is end
        receiving = end.receiving(FrameKind.DATA, 1, 16)
        assert end.slots == 1, "every receive is made with the interpreter (for the watch)"
        assert low.expect(receiving) is receiving
        assert interpreter._receive_slot(1, 1, FrameKind.DATA, 16, None) is receiving
        assert interpreter._send_slot(1, 1, FrameKind.DATA, 16) is end.sending(
            FrameKind.DATA, 1, 16
        )
        assert end.slots == 2


def _description(role: int, peers: tuple[int, ...]) -> RoleDescription:
    return RoleDescription(
        role=role,
        participants=4,
        identity=IDENTITY,
        edges=tuple(Edge(peer) for peer in peers),
        budgets=BUDGETS,
    )


async def test_every_connection_of_an_edge_carries_the_one_end_of_the_establishment() -> None:
    state = Establishment(_description(1, (0, 2, 3)))
    assert sorted(state.edges) == [0, 2, 3]
    async with connected(1, 2) as (one, _), connected(1, 2) as (again, _):
        first = state.channel(one.stream, 2)
        second = state.channel(again.stream, 2)  # a connection heard out after a stranger's
        assert first.edge is second.edge is state.edges[2]
        assert first.where is state.where and state.channels == {}


async def test_the_completion_registers_the_slots_its_edge_ends_keep() -> None:
    description = _description(1, (0, 2))
    state = Establishment(description)
    async with connected(0, 1) as (_, up), connected(1, 2) as (down, _):
        channels = {0: state.channel(up.stream, 0), 2: state.channel(down.stream, 2)}
        expect_completion(description, channels)
        parent, child = state.edges[0], state.edges[2]
        assert (parent.slots, child.slots) == (2, 1)  # END and COMMIT from 0, DONE from 2
        registered = [slot for slot, _ in channels[0]._expected]
        assert registered == [
            parent.completion_in(FrameKind.END),
            parent.completion_in(FrameKind.COMMIT),
        ]
        assert [slot for slot, _ in channels[2]._expected] == [child.completion_in(FrameKind.DONE)]
