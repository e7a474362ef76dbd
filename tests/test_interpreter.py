"""Running local schedules over real loopback channels: folds, choices, and their refusals."""

from __future__ import annotations

import numpy as np
import pytest
import trio
from conftest import connected

from alpha.errors import NoncanonicalWord, SelectorOutOfRange, WrongEdge
from alpha.frame import FrameKind, FrameSpec, ReceiveSlot, SendSlot
from alpha.identity import RunIdentity
from alpha.program import OPERATIONS
from alpha.protocol import Everyone, Local, Protocol, Region, project
from alpha.protocol.forms import Choice, Combine, Dissemination, Seq
from alpha.protocol.local import Choose, LocalSchedule, Op
from alpha.runtime.interpreter import Interpreter, encode_word
from alpha.topology import pair

IDENTITY = RunIdentity(learner=b"l" * 32, contract=b"c" * 32, membership=b"m" * 32)
REGIONS = (Region("x", "float64", 4),)


def schedule(role: int, *body: object) -> LocalSchedule:
    return LocalSchedule(role=role, regions=REGIONS, scratch=(), body=tuple(body))  # type: ignore[arg-type]


async def test_a_pair_combines_and_both_hold_the_total() -> None:
    proto = Protocol(
        participants=2,
        tree=pair(),
        regions={"x": REGIONS[0]},
        operations=OPERATIONS,
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
        participants=2, tree=pair(), regions={"x": REGIONS[0]}, operations=OPERATIONS, body=choice
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
