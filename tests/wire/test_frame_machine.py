"""Frames (layout 2) as a state machine: a send and a receive slot driven against a small model.

The model holds only what ``docs/frames.md`` promises: the next version of the sender and of
the receiver, whether the receiver is armed, and the class it was refused with, if any. Each
rule does one thing a network or a schedule can do to the pair (deliver, lose, replay, damage,
cut or extend a frame, arm twice, send an ABORT in place) and predicts its outcome from the
documented layout alone (:func:`reference`), never from the codec's own state.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from alpha.core.identity import IDENTITY_PART_SIZE, IDENTITY_PARTS
from alpha.errors import (
    Corrupted,
    DoubleRearm,
    IdentityMismatch,
    Replayed,
    SkippedVersion,
    SlotFault,
    TrailingBytes,
    Truncated,
    VersionOverflow,
    WrongEdge,
    WrongFrame,
)
from alpha.wire.abort import AbortCause, decode_cause, encode_cause
from alpha.wire.frame import (
    ABORT_EXTENT,
    FIELDS,
    HEADER_SIZE,
    MAX_VERSION,
    TRAILER_SIZE,
    FrameKind,
    FrameSpec,
    abort_spec,
    field_at,
)
from alpha.wire.receive import ReceiveSlot, Reception
from alpha.wire.send import SendSlot
from tests.support import IDENTITY

CAUSE = AbortCause(5, "Corrupted", (4, 5), 9, "bytes were damaged")

# Counters where a slot starts: the ordinary start, anywhere, and the last few before the
# maximum, where VersionOverflow is one or two frames away.
STARTS = st.one_of(
    st.integers(0, 3),
    st.integers(0, MAX_VERSION - 1),
    st.integers(MAX_VERSION - 2, MAX_VERSION),
)
# ABORT is left out: a slot of another kind is what an ABORT takes the place of.
KINDS = st.sampled_from([kind for kind in FrameKind if kind is not FrameKind.ABORT])
# Slot 0 is the ABORT frame's slot; a damaged kind byte that reads ABORT then gets past it.
SLOTS = st.sampled_from([0, 1, 7])
# How bytes reach the receiver: ReceiveSlot.accept, Reception.feed in pieces, or the
# zero-copy into()/advance() loop with reads of random sizes.
HOW = st.sampled_from(["accept", "feed", "into"])

BY_FIELD: dict[str, type[SlotFault]] = {
    "magic": WrongFrame,
    "format": WrongFrame,
    "kind": WrongFrame,
    "reserved": WrongFrame,
    "identity": IdentityMismatch,
    "sender": WrongEdge,
    "receiver": WrongEdge,
    "slot": WrongEdge,
}


@dataclass(frozen=True)
class Verdict:
    """What a receive should do: refuse with ``refusal`` at ``field``, or accept the frame."""

    refusal: type[SlotFault] | None
    field: str = ""
    aborted: bool = False
    parts: tuple[str, ...] = ()


def _differing_parts(got: bytes, want: bytes) -> tuple[str, ...]:
    size = IDENTITY_PART_SIZE
    return tuple(
        part
        for index, part in enumerate(IDENTITY_PARTS)
        if got[index * size : (index + 1) * size] != want[index * size : (index + 1) * size]
    )


def reference(data: bytes, spec: FrameSpec, version: int) -> Verdict:
    """What ``docs/frames.md`` says a fresh reception of ``spec`` at ``version`` does when
    ``data`` is the whole stream: header fields in layout order, then the length, then the
    trailer, then anything after the frame."""
    want = spec.header(version)
    size = spec.frame_size
    aborted = False
    for entry in FIELDS:
        if len(data) < entry.end:
            break
        got, expected = data[entry.offset : entry.end], want[entry.offset : entry.end]
        if got == expected:
            continue
        if entry.name == "kind" and got[0] == FrameKind.ABORT:
            # The rest is checked as the ABORT frame of this edge.
            alternate = abort_spec(spec.identity, spec.sender, spec.receiver)
            want, size, aborted = alternate.header(0), alternate.frame_size, True
            continue
        if entry.name in ("version", "extent"):
            below = int.from_bytes(got, "big") < int.from_bytes(expected, "big")
            if entry.name == "version":
                return Verdict(Replayed if below else SkippedVersion, "version", aborted)
            return Verdict(Truncated if below else TrailingBytes, "extent", aborted)
        parts = _differing_parts(got, expected) if entry.name == "identity" else ()
        return Verdict(BY_FIELD[entry.name], entry.name, aborted, parts)
    if len(data) < size:
        return Verdict(
            Truncated, field_at(len(data)) if len(data) < HEADER_SIZE else "body", aborted
        )
    # Layout 2: SHA-256 over the header and the payload's own SHA-256.
    payload = hashlib.sha256(data[HEADER_SIZE : size - TRAILER_SIZE]).digest()
    if data[size - TRAILER_SIZE : size] != hashlib.sha256(data[:HEADER_SIZE] + payload).digest():
        return Verdict(Corrupted, "trailer", aborted)
    if len(data) > size:
        return Verdict(TrailingBytes, "end", aborted)
    return Verdict(None, aborted=aborted)


def class_by_field(offset: int, original: bytes, mutated: bytes) -> type[SlotFault]:
    """The refusal one changed byte implies by the field it lies in (as tests/wire/test_frame.py
    predicts it), for a frame the receiver would otherwise accept."""
    name = field_at(offset)
    if name == "body":
        return Corrupted
    if name not in ("version", "extent"):
        return BY_FIELD[name]
    entry = next(entry for entry in FIELDS if entry.name == name)
    below = int.from_bytes(mutated[entry.offset : entry.end], "big") < int.from_bytes(
        original[entry.offset : entry.end], "big"
    )
    if name == "version":
        return Replayed if below else SkippedVersion
    return Truncated if below else TrailingBytes


def _pieces(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` cut into pieces of ``sizes`` (cycled), so a read may stop anywhere."""
    pieces: list[bytes] = []
    position = 0
    while position < len(data):
        size = sizes[len(pieces) % len(sizes)] if sizes else len(data)
        pieces.append(data[position : position + size])
        position += size
    return pieces


def _read_into(reception: Reception, piece: bytes) -> int:
    """Copy ``piece`` the zero-copy way (into, then advance); return the bytes taken."""
    used = 0
    while used < len(piece):
        target = reception.into()
        if not target:
            break
        take = min(len(target), len(piece) - used)
        target[:take] = piece[used : used + take]
        reception.advance(take)
        used += take
    return used


class FramePair(RuleBasedStateMachine):
    """One slot of one edge: a SendSlot, its ReceiveSlot, and the model they must agree with.

    The model: ``sent_next`` and ``received_next`` (the versions the two counters must show),
    ``armed`` (the reception the ``arm`` rule holds, which the next delivery uses), ``refused``
    (the class the receiver was refused with, for good), and ``history`` (the last frames the
    sender prepared, for replays).
    """

    def __init__(self) -> None:
        super().__init__()
        self.spec = FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 7, 0)
        self.sender = SendSlot(self.spec)
        self.receiver = ReceiveSlot(self.spec)
        # The model.
        self.sent_next = 0
        self.received_next = 0
        self.armed: Reception | None = None  # the reception armed by the `arm` rule, if any
        self.refused: type[SlotFault] | None = None
        self.first_refusal: SlotFault | None = None
        self.history: list[tuple[int, bytes]] = []  # (version, frame) the sender prepared

    # --- a fresh pair -------------------------------------------------------------------------

    def _start(self, start: int, extent: int, kind: FrameKind, slot: int, roles: int) -> None:
        sender, receiver = (1, 2) if roles == 0 else (2**32 - 1, 0)
        self.spec = FrameSpec(IDENTITY, kind, sender, receiver, slot, extent)
        self.sender = SendSlot(self.spec, next_version=start)
        self.receiver = ReceiveSlot(self.spec, next_version=start)
        self.sent_next = self.received_next = start
        self.armed, self.refused, self.first_refusal = None, None, None
        self.history = []

    @initialize(
        start=STARTS, extent=st.integers(0, 48), kind=KINDS, slot=SLOTS, roles=st.integers(0, 1)
    )
    def begin(self, start: int, extent: int, kind: FrameKind, slot: int, roles: int) -> None:
        self._start(start, extent, kind, slot, roles)

    @precondition(lambda self: self.refused is not None)
    @rule(start=STARTS, extent=st.integers(0, 48), kind=KINDS, slot=SLOTS, roles=st.integers(0, 1))
    def renew(self, start: int, extent: int, kind: FrameKind, slot: int, roles: int) -> None:
        """A refused edge is over; the next run builds a new pair (possibly near the maximum)."""
        self._start(start, extent, kind, slot, roles)

    # --- the sender -----------------------------------------------------------------------------

    def _prepare(self, data: st.DataObject) -> tuple[int, bytes] | None:
        """A frame from the sender, or None where its counter is spent (VersionOverflow)."""
        extent = self.spec.extent
        payload = data.draw(st.binary(min_size=extent, max_size=extent), label="payload")
        version = self.sent_next
        if version >= MAX_VERSION:
            with pytest.raises(SlotFault) as caught:
                self.sender.prepare(payload)
            assert type(caught.value) is VersionOverflow
            assert caught.value.edge == (self.spec.sender, self.spec.receiver)
            assert caught.value.received == MAX_VERSION
            return None
        frame = self.sender.prepare(payload).join()
        self.sent_next += 1
        assert frame[HEADER_SIZE : HEADER_SIZE + extent] == payload
        self.history = [*self.history[-7:], (version, frame)]
        return version, frame

    # --- the receiver ---------------------------------------------------------------------------

    def _fresh(self, how: str) -> bool:
        """Whether the next delivery reaches the frame checks (no earlier refusal, no second
        arm, no spent counter), so its outcome follows from the frame's bytes alone."""
        return (
            self.refused is None
            and self.received_next < MAX_VERSION
            and not (how == "accept" and self.armed is not None)
        )

    def _by_version(self, version: int) -> type[SlotFault] | None:
        if version < self.received_next:
            return Replayed
        return SkippedVersion if version > self.received_next else None

    def _predict(self, data: bytes, how: str) -> Verdict:
        """The model's verdict on delivering ``data`` the way ``how`` says."""
        if self.refused is not None:
            assert self.first_refusal is not None
            return Verdict(self.refused, self.first_refusal.field, parts=self.first_refusal.parts)
        if self.armed is None and self.received_next >= MAX_VERSION:
            return Verdict(VersionOverflow, "version")
        if how == "accept" and self.armed is not None:
            return Verdict(DoubleRearm, "version")
        return reference(data, self.spec, self.received_next)

    def _receive(self, data: bytes, how: str, sizes: list[int]) -> tuple[bytes, bool | None]:
        """Deliver ``data`` as the whole stream; the payload and whether it was an ABORT (None
        where ``accept`` does not say)."""
        if how == "accept":
            return bytes(self.receiver.accept(data)), None
        reception = self.armed if self.armed is not None else self.receiver.arm()
        used = 0
        for piece in _pieces(data, sizes):
            used += reception.feed(piece) if how == "feed" else _read_into(reception, piece)
        if not reception.verified:
            reception.eof()
        if used < len(data):
            self.receiver.refuse_trailing(len(data) - used)
        aborted = reception.aborted
        return bytes(reception.finish()), aborted

    def _deliver(self, data: bytes, how: str, sizes: list[int]) -> Verdict:
        """Deliver ``data``, check the outcome against the model, and move the model."""
        verdict = self._predict(data, how)
        before = self.received_next
        outcome = "aborted" if verdict.aborted else "accepted"
        state = "refused" if self.refused else "armed" if self.armed is not None else "ready"
        event(f"{how} when {state}: {verdict.refusal.__name__ if verdict.refusal else outcome}")
        try:
            payload, aborted = self._receive(data, how, sizes)
        except SlotFault as refusal:
            assert verdict.refusal is not None, f"refused {refusal!r}, the model accepts"
            assert type(refusal) is verdict.refusal, (
                f"expected {verdict.refusal.__name__}, got {refusal!r}"
            )
            assert refusal.field == verdict.field
            assert refusal.parts == verdict.parts
            assert refusal.edge == (self.spec.sender, self.spec.receiver)
            if self.first_refusal is None:
                # A refused ABORT names the ABORT frame (slot 0, version 0), else the slot.
                assert refusal.version == (0 if verdict.aborted else before)
                self.first_refusal = refusal
            else:
                assert (refusal.expected, refusal.received) == (
                    self.first_refusal.expected,
                    self.first_refusal.received,
                )
            self.refused, self.armed = type(refusal), None
            assert self.receiver.next_version == before, "a refusal never moves the counter"
            return verdict
        assert verdict.refusal is None, (
            f"accepted, the model refuses with {verdict.refusal.__name__}"
        )
        assert aborted in (None, verdict.aborted)
        if verdict.aborted:
            assert payload == data[HEADER_SIZE : HEADER_SIZE + ABORT_EXTENT]
            assert decode_cause(payload, role=self.spec.receiver, peer=self.spec.sender) == CAUSE
        else:
            assert payload == data[HEADER_SIZE : HEADER_SIZE + self.spec.extent]
            self.received_next += 1
        self.armed = None
        return verdict

    # --- rules ----------------------------------------------------------------------------------

    def _send(self, how: str, sizes: list[int], data: st.DataObject) -> None:
        """Prepare the sender's next frame and deliver it untouched."""
        sent = self._prepare(data)
        if sent is not None:
            version, frame = sent
            fresh, expected = self._fresh(how), self._by_version(version)
            verdict = self._deliver(frame, how, sizes)
            if fresh:
                assert verdict.refusal is expected
                assert expected is not None or self.received_next == self.sent_next

    @rule(how=HOW, sizes=st.lists(st.integers(1, 64), max_size=6), data=st.data())
    def send_and_deliver(self, how: str, sizes: list[int], data: st.DataObject) -> None:
        """The ordinary case: accepted where the pair is in step, both counters move by one;
        SkippedVersion where a frame was lost before it."""
        self._send(how, sizes, data)

    @rule(count=st.integers(1, 4), how=HOW, data=st.data())
    def send_several(self, count: int, how: str, data: st.DataObject) -> None:
        """A run of frames, each read whole: accepted one after another while in step."""
        for _ in range(count):
            self._send(how, [], data)

    @rule(data=st.data())
    def lose(self, data: st.DataObject) -> None:
        """A frame lost in transit: the sender moves on, the next delivery skips a version."""
        self._prepare(data)

    @precondition(lambda self: self.history)
    @rule(how=HOW, sizes=st.lists(st.integers(1, 64), max_size=6), data=st.data())
    def redeliver(self, how: str, sizes: list[int], data: st.DataObject) -> None:
        """An earlier frame again: Replayed when already taken, accepted when it is the lost
        frame the receiver waits for, SkippedVersion when one before it is still missing."""
        version, frame = data.draw(st.sampled_from(self.history), label="earlier")
        fresh, expected = self._fresh(how), self._by_version(version)
        verdict = self._deliver(frame, how, sizes)
        if fresh:
            assert verdict.refusal is expected

    @precondition(lambda self: self.refused is None)
    @rule(how=HOW, sizes=st.lists(st.integers(1, 64), max_size=6), data=st.data())
    def corrupt(self, how: str, sizes: list[int], data: st.DataObject) -> None:
        """One changed byte: exactly one refusal, the class its field implies."""
        sent = self._prepare(data)
        if sent is None:
            return
        version, frame = sent
        offset = data.draw(st.integers(0, len(frame) - 1), label="offset")
        mutated = bytearray(frame)
        mutated[offset] ^= data.draw(st.integers(1, 255), label="flip")
        # In step, and unless the kind byte now reads ABORT, the field alone decides.
        by_field = (
            self._fresh(how) and self._by_version(version) is None and mutated[5] != FrameKind.ABORT
        )
        verdict = self._deliver(bytes(mutated), how, sizes)
        assert verdict.refusal is not None
        if by_field:
            assert verdict.refusal is class_by_field(offset, frame, bytes(mutated))

    @precondition(lambda self: self.refused is None)
    @rule(how=HOW, sizes=st.lists(st.integers(1, 64), max_size=6), data=st.data())
    def truncate(self, how: str, sizes: list[int], data: st.DataObject) -> None:
        """The stream ends inside a frame: Truncated at the end, if nothing before refuses."""
        sent = self._prepare(data)
        if sent is not None:
            version, frame = sent
            cut = data.draw(st.integers(0, len(frame) - 1), label="cut")
            in_step = self._fresh(how) and self._by_version(version) is None
            verdict = self._deliver(frame[:cut], how, sizes)
            if in_step:
                assert verdict.refusal is Truncated

    @precondition(lambda self: self.refused is None)
    @rule(extra=st.binary(min_size=1, max_size=16), data=st.data())
    def append_trailing(self, extra: bytes, data: st.DataObject) -> None:
        """Bytes after a good frame: TrailingBytes, and the frame before them is not taken."""
        sent = self._prepare(data)
        if sent is not None:
            version, frame = sent
            in_step = self._fresh("accept") and self._by_version(version) is None
            verdict = self._deliver(frame + extra, "accept", [])
            if in_step:
                assert verdict.refusal is TrailingBytes

    @rule()
    def arm(self) -> None:
        """Arm the receiver; a second arm for the same version is DoubleRearm."""
        before = self.received_next
        if self.refused is not None:
            expected: type[SlotFault] | None = self.refused
        elif self.armed is not None:
            expected = DoubleRearm
        elif before >= MAX_VERSION:
            expected = VersionOverflow
        else:
            expected = None
        event(f"arm: {expected.__name__ if expected else 'armed'}")
        if expected is None:
            self.armed = self.receiver.arm()
            return
        with pytest.raises(SlotFault) as caught:
            self.receiver.arm()
        assert type(caught.value) is expected
        assert self.receiver.next_version == before
        if self.first_refusal is None:
            self.first_refusal = caught.value
        self.refused, self.armed = expected, None

    @rule(
        how=HOW,
        sizes=st.lists(st.integers(1, 64), max_size=6),
        damage=st.none()
        | st.tuples(st.integers(0, HEADER_SIZE + ABORT_EXTENT + 31), st.integers(1, 255)),
    )
    def abort_in_place(self, how: str, sizes: list[int], damage: tuple[int, int] | None) -> None:
        """An ABORT where this slot's frame is due: taken in its place, the counter stays; a
        damaged ABORT is refused like any frame and refuses the slot."""
        frame = bytearray(
            SendSlot(abort_spec(IDENTITY, self.spec.sender, self.spec.receiver))
            .prepare(encode_cause(CAUSE))
            .join()
        )
        if damage is not None:
            frame[damage[0]] ^= damage[1]
        before, fresh = self.received_next, self._fresh(how)
        verdict = self._deliver(bytes(frame), how, sizes)
        if damage is None and fresh:
            assert verdict.refusal is None and verdict.aborted
            assert self.receiver.next_version == before and self.receiver.refusal is None

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def counters_agree_with_the_model(self) -> None:
        # The sender's counter moves only on prepare; the receiver never runs ahead of it.
        assert self.sender.next_version == self.sent_next
        assert self.receiver.next_version == self.received_next
        assert self.received_next <= self.sent_next

    @invariant()
    def refusal_and_arming_agree_with_the_model(self) -> None:
        refusal = self.receiver.refusal
        assert (None if refusal is None else type(refusal)) is self.refused
        assert self.receiver.armed == (self.armed is not None)

    @invariant()
    def a_refused_receiver_stays_refused(self) -> None:
        if self.refused is None:
            return
        before = self.received_next
        good = SendSlot(self.spec, next_version=min(before, MAX_VERSION - 1))
        next_frame = good.prepare(bytes(self.spec.extent)).join()
        for attempt in (self.receiver.arm, lambda: self.receiver.accept(next_frame)):
            with pytest.raises(SlotFault) as caught:
                attempt()
            assert type(caught.value) is self.refused
        assert self.receiver.next_version == before
        assert type(self.receiver.refusal) is self.refused


FramePair.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_frame_pair = FramePair.TestCase


def test_a_slot_stays_armed_while_an_abort_takes_the_place_of_its_frame() -> None:
    """docs/frames.md: a slot armed again is DoubleRearm, also while an ABORT is arriving in
    place of its frame; its counter never moves."""
    spec = FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 7, 4)
    abort = SendSlot(abort_spec(IDENTITY, 1, 2)).prepare(encode_cause(CAUSE)).join()
    slot = ReceiveSlot(spec)
    first = slot.arm()
    first.feed(abort[:6])  # the kind byte says ABORT: this reception goes on as the ABORT
    assert slot.armed and first.aborted
    with pytest.raises(DoubleRearm):
        slot.arm()
    with pytest.raises(DoubleRearm):
        first.feed(abort[6:])  # the slot is refused for good, this reception with it
    assert type(slot.refusal) is DoubleRearm and slot.next_version == 0


def test_a_refused_abort_refuses_its_slot_and_a_finished_one_leaves_it_unarmed() -> None:
    spec = FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 7, 4)
    abort = SendSlot(abort_spec(IDENTITY, 1, 2)).prepare(encode_cause(CAUSE)).join()
    damaged = bytearray(abort)
    damaged[-1] ^= 1
    slot = ReceiveSlot(spec)
    with pytest.raises(Corrupted):
        slot.arm().feed(bytes(damaged))
    assert type(slot.refusal) is Corrupted and not slot.armed
    with pytest.raises(Corrupted):
        slot.arm()
    clean = ReceiveSlot(spec)
    reception = clean.arm()
    reception.feed(abort)
    reception.finish()
    assert not clean.armed and clean.refusal is None and clean.next_version == 0


def test_a_slot_refused_while_an_abort_arrives_keeps_its_first_refusal() -> None:
    spec = FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 7, 4)
    abort = SendSlot(abort_spec(IDENTITY, 1, 2)).prepare(encode_cause(CAUSE)).join()
    damaged = bytearray(abort)
    damaged[-1] ^= 1
    slot = ReceiveSlot(spec)
    first = slot.arm()
    first.feed(abort[:6])
    with pytest.raises(TrailingBytes):
        slot.refuse_trailing(1)
    with pytest.raises(TrailingBytes):
        first.feed(bytes(damaged[6:]))
    assert type(slot.refusal) is TrailingBytes and slot.next_version == 0
