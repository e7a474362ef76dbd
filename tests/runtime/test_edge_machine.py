"""An edge as a state machine: both ends of one edge driven against a small model.

The two ends of an edge (:class:`~alpha.runtime.edge.EdgeEnd`, the parent's and the child's)
make every spec of the edge's frames and keep its scheduled and completion slots. The model
holds only what the ends promise (``alpha/runtime/edge.py``, ``docs/frames.md``): which slots
each end made, with what extent, each slot's next version and the class it was refused with.
Each rule does one thing a schedule or a peer can do to the edge (make a slot, ask again with
another extent, ask for a control frame as a transfer or for a completion frame against the
tree, send a frame and deliver or lose it, deliver one again or into another slot, arm twice,
abort in place, greet on a new connection, a stranger's hello among them) and predicts its
outcome from the header layout alone, never from the ends' own state. Every illegal step is
refused with its exact class and moves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from alpha.core.identity import RunIdentity
from alpha.core.membership import MAX_ROLE
from alpha.errors import (
    DoubleRearm,
    FrameRefused,
    FrameSpecInvalid,
    IdentityMismatch,
    Replayed,
    SkippedVersion,
    TrailingBytes,
    Truncated,
    WrongEdge,
    WrongFrame,
)
from alpha.runtime.edge import SCHEDULED, EdgeEnd
from alpha.wire.abort import AbortCause, decode_cause, encode_cause
from alpha.wire.frame import COMPLETION_SLOT, HELLO_SLOT, FrameKind
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, raises_exactly

STRANGER = RunIdentity(learner=b"L" * 32, contract=b"c" * 32, membership=b"m" * 32)
CAUSE = AbortCause(3, "Corrupted", (3, 4), 2, "bytes were damaged")

DOWN, UP = "down", "up"  # parent to child, child to parent
SEND, RECEIVE = "send", "receive"  # which end of a transfer holds the slot
COMPLETION = {FrameKind.END: 0, FrameKind.DONE: 32, FrameKind.COMMIT: 32}
"""The completion frames and their extents, as docs/failure.md gives them."""
FROM_PARENT = {FrameKind.END, FrameKind.COMMIT}
CONTROL = [kind for kind in FrameKind if kind not in SCHEDULED]

DIRECTIONS = st.sampled_from([DOWN, UP])
SIDES = st.sampled_from([SEND, RECEIVE])
SCHEDULED_KINDS = st.sampled_from(sorted(SCHEDULED))
SLOTS = st.sampled_from([1, 2, 7])
EXTENTS = st.sampled_from([0, 3, 8])

# (side, direction, kind, slot): one slot of the edge, held by the sending or receiving end.
Key = tuple[str, str, FrameKind, int]


@dataclass
class Made:
    """What the model knows of one slot: its object, extent, next version and refusal."""

    slot: SendSlot | ReceiveSlot
    extent: int
    version: int = 0
    refused: type[FrameRefused] | None = None


@dataclass(frozen=True)
class Sent:
    """A frame a send slot made: its bytes, payload and the key and version it was sent at."""

    frame: bytes
    payload: bytes
    key: Key
    version: int


class Edge(RuleBasedStateMachine):
    """The parent's end and the child's end of one edge, and the model of both."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[Key, Made] = {}
        self.sent: list[Sent] = []

    @initialize(parent=st.integers(0, 6), gap=st.integers(1, 5))
    def ends(self, parent: int, gap: int) -> None:
        self.parent = EdgeEnd(parent, parent + gap, IDENTITY)
        self.child = EdgeEnd(parent + gap, parent, IDENTITY)

    # --- the model's view ---------------------------------------------------------------------

    def end(self, side: str, direction: str) -> EdgeEnd:
        """The end that holds ``side`` of a transfer in ``direction``."""
        sender, receiver = (
            (self.parent, self.child) if direction == DOWN else (self.child, self.parent)
        )
        return sender if side == SEND else receiver

    def held_by(self, end: EdgeEnd) -> int:
        return sum(1 for side, direction, *_ in self.made if self.end(side, direction) is end)

    def make(self, key: Key, extent: int) -> SendSlot | ReceiveSlot:
        side, direction, kind, slot = key
        end = self.end(side, direction)
        if kind in SCHEDULED:
            if side == SEND:
                return end.sending(kind, slot, extent)
            return end.receiving(kind, slot, extent)
        return end.completion_out(kind) if side == SEND else end.completion_in(kind)

    def expect(self, key: Key, extent: int) -> None:
        """Ask for ``key``'s slot with ``extent``: the model says whether the end refuses."""
        end = self.end(key[0], key[1])
        before = end.slots
        known = self.made.get(key)
        if known is not None and known.extent != extent:
            raises_exactly(FrameSpecInvalid, self.make, key, extent)
            assert end.slots == before, "a refused request made no slot"
            return
        slot = self.make(key, extent)
        if known is not None:
            assert slot is known.slot, "the edge keeps one slot per transfer and direction"
            return
        _, direction, kind, number = key
        sender = self.end(SEND, direction)
        receiver = self.end(RECEIVE, direction)
        spec = slot.spec
        assert (spec.kind, spec.slot, spec.extent) == (kind, number, extent)
        assert (spec.sender, spec.receiver) == (sender.role, receiver.role)
        assert spec.identity == IDENTITY
        self.made[key] = Made(slot, extent)

    def deliver(self, sent: Sent, target: Key) -> None:
        """Feed ``sent`` to ``target``'s receive slot; predict from the header layout alone."""
        made = self.made[target]
        assert isinstance(made.slot, ReceiveSlot)
        _, source_direction, source_kind, source_slot = sent.key
        _, direction, kind, number = target
        source_extent = self.made[sent.key].extent
        refusal: type[FrameRefused] | None
        if made.refused is not None:
            refusal = made.refused  # a refused slot stays refused, with its first class
        elif source_kind != kind:
            refusal = WrongFrame
        elif source_direction != direction or source_slot != number:
            refusal = WrongEdge  # the sender, receiver or slot field
        elif sent.version != made.version:
            refusal = Replayed if sent.version < made.version else SkippedVersion
        elif source_extent != made.extent:
            refusal = Truncated if source_extent < made.extent else TrailingBytes
        else:
            refusal = None
        if refusal is None:
            assert bytes(made.slot.accept(sent.frame)) == sent.payload
            made.version += 1
            return
        raises_exactly(refusal, made.slot.accept, sent.frame)
        made.refused = refusal

    def receive_keys(self) -> list[Key]:
        return sorted(key for key in self.made if key[0] == RECEIVE)

    # --- making slots ---------------------------------------------------------------------------

    @rule(side=SIDES, direction=DIRECTIONS, kind=SCHEDULED_KINDS, slot=SLOTS, extent=EXTENTS)
    def make_a_transfer_slot(
        self, side: str, direction: str, kind: FrameKind, slot: int, extent: int
    ) -> None:
        self.expect((side, direction, kind, slot), extent)

    @rule(side=SIDES, direction=DIRECTIONS, kind=st.sampled_from(CONTROL), slot=SLOTS)
    def ask_for_a_control_frame_as_a_transfer(
        self, side: str, direction: str, kind: FrameKind, slot: int
    ) -> None:
        end = self.end(side, direction)
        before = end.slots
        ask = end.sending if side == SEND else end.receiving
        raises_exactly(FrameSpecInvalid, ask, kind, slot, 0)
        assert end.slots == before

    @rule(side=SIDES, direction=DIRECTIONS, kind=st.sampled_from(list(FrameKind)))
    def ask_for_a_completion_frame(self, side: str, direction: str, kind: FrameKind) -> None:
        """Legal only for END and COMMIT down the tree and DONE up it."""
        end = self.end(side, direction)
        legal = kind in COMPLETION and (kind in FROM_PARENT) == (direction == DOWN)
        if legal:
            self.expect((side, direction, kind, COMPLETION_SLOT), COMPLETION[kind])
            return
        before = end.slots
        ask = end.completion_out if side == SEND else end.completion_in
        raises_exactly(FrameSpecInvalid, ask, kind)
        assert end.slots == before

    # --- using them -----------------------------------------------------------------------------

    @precondition(lambda self: any(key[0] == SEND for key in self.made))
    @rule(data=st.data(), lose=st.booleans())
    def send_a_frame(self, data: st.DataObject, lose: bool) -> None:
        """A send slot frames a payload; the frame reaches its receive slot, if the edge has
        one made, unless it is lost."""
        key = data.draw(st.sampled_from(sorted(k for k in self.made if k[0] == SEND)))
        made = self.made[key]
        payload = data.draw(st.binary(min_size=made.extent, max_size=made.extent))
        assert isinstance(made.slot, SendSlot)
        frame = made.slot.prepare(payload).join()
        sent = Sent(frame, payload, key, made.version)
        made.version += 1
        self.sent.append(sent)
        target: Key = (RECEIVE, key[1], key[2], key[3])
        if not lose and target in self.made:
            self.deliver(sent, target)

    @precondition(lambda self: self.sent and any(key[0] == RECEIVE for key in self.made))
    @rule(data=st.data())
    def deliver_a_frame_again_or_elsewhere(self, data: st.DataObject) -> None:
        """A frame sent before arrives (again) at any receive slot of the edge: a replay, a
        frame of another transfer, kind or direction."""
        sent = data.draw(st.sampled_from(self.sent))
        self.deliver(sent, data.draw(st.sampled_from(self.receive_keys())))

    @precondition(lambda self: any(key[0] == RECEIVE for key in self.made))
    @rule(data=st.data())
    def arm_twice(self, data: st.DataObject) -> None:
        made = self.made[data.draw(st.sampled_from(self.receive_keys()))]
        slot = made.slot
        assert isinstance(slot, ReceiveSlot)
        if made.refused is not None:
            raises_exactly(made.refused, slot.arm)
            return
        slot.arm()
        raises_exactly(DoubleRearm, slot.arm)
        made.refused = DoubleRearm

    @precondition(lambda self: any(key[0] == RECEIVE for key in self.made))
    @rule(data=st.data())
    def abort_in_place(self, data: st.DataObject) -> None:
        """The peer's ABORT arrives where a receive slot waits for its frame: taken in its
        place, the slot's version unchanged."""
        key = data.draw(st.sampled_from(self.receive_keys()))
        made = self.made[key]
        slot = made.slot
        assert isinstance(slot, ReceiveSlot)
        abort = self.end(SEND, key[1]).abort_out()
        assert abort.next_version == 0, "every ABORT is a first frame of its own"
        frame = abort.prepare(encode_cause(CAUSE)).join()
        if made.refused is not None:
            raises_exactly(made.refused, slot.accept, frame)
            return
        reception = slot.arm()
        assert reception.feed(frame) == len(frame) and reception.aborted
        cause = decode_cause(bytes(reception.finish()), role=slot.spec.receiver, peer=0)
        assert cause == CAUSE
        assert slot.next_version == made.version and not slot.armed

    @rule(direction=DIRECTIONS, stranger=st.booleans())
    def greet_on_a_new_connection(self, direction: str, stranger: bool) -> None:
        """Each connection's hellos start at version 0, whatever came on the edge before: a
        stranger's hello is refused on its connection, and the next connection is greeted."""
        sender, receiver = self.end(SEND, direction), self.end(RECEIVE, direction)
        before = (sender.slots, receiver.slots)
        hello = sender.hello_out()
        assert (hello.spec.kind, hello.spec.slot, hello.next_version) == (
            FrameKind.HELLO,
            HELLO_SLOT,
            0,
        )
        frame = hello.prepare(b"").join()
        if stranger:
            other = EdgeEnd(sender.role, sender.peer, STRANGER).hello_out().prepare(b"").join()
            raises_exactly(IdentityMismatch, receiver.hello_in().accept, other)
        greeting = receiver.hello_in()
        assert bytes(greeting.accept(frame)) == b""
        raises_exactly(Replayed, greeting.accept, frame)  # one hello per connection
        assert (sender.slots, receiver.slots) == before, "hellos belong to connections"

    # --- what always holds ------------------------------------------------------------------------

    @invariant()
    def each_end_keeps_exactly_the_slots_it_made(self) -> None:
        if not hasattr(self, "parent"):
            return
        for end in (self.parent, self.child):
            assert end.slots == self.held_by(end)

    @invariant()
    def every_slot_is_where_the_model_says(self) -> None:
        for made in self.made.values():
            assert made.slot.next_version == made.version
            if isinstance(made.slot, ReceiveSlot):
                refusal = made.slot.refusal
                assert (None if refusal is None else type(refusal)) is made.refused
                assert not made.slot.armed

    @invariant()
    def the_two_ends_of_a_transfer_mirror_each_other(self) -> None:
        for (side, direction, kind, slot), made in self.made.items():
            mirror = self.made.get((RECEIVE, direction, kind, slot))
            if side == SEND and mirror is not None and mirror.extent == made.extent:
                assert made.slot.spec == mirror.slot.spec


Edge.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_edge = Edge.TestCase


@pytest.mark.parametrize(
    ("role", "peer", "identity"),
    [(3, 3, IDENTITY), (-1, 2, IDENTITY), (0, MAX_ROLE + 1, IDENTITY), (1, 2, b"x" * 96)],
    ids=["itself", "negative", "past-max-role", "not-an-identity"],
)
def test_an_end_of_no_edge_is_refused(role: int, peer: int, identity: object) -> None:
    raises_exactly(FrameSpecInvalid, EdgeEnd, role, peer, identity)


def test_an_end_at_the_last_role_is_an_edge() -> None:
    end = EdgeEnd(MAX_ROLE, MAX_ROLE - 1, IDENTITY)
    assert end.peer_is_parent and not end.listens
    assert EdgeEnd(MAX_ROLE - 1, MAX_ROLE, IDENTITY).listens
