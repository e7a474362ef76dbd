"""Keyed frames of every kind, as runs send them (issue 25's property tests): for every
``FrameKind``, both payload digests, random keys, payloads and versions, a frame made by a keyed
``SendSlot`` is accepted by the keyed ``ReceiveSlot`` of its edge and direction; every single-bit
change anywhere in it is refused by exactly one class (a header bit by its field's class, a
payload or trailer bit as ``Forged``) with the slot's counter unchanged and no payload exposed;
a frame keyed for one edge or direction is ``Forged`` at every other edge's slot, its header
rewritten to fit or not; and a keyed and an unkeyed end refuse each other at the format byte.

``tests/wire/test_keyed.py`` holds the codec's own laws (``keyed_seal``, ``check_keyed``) and
one-kind cases; this file drives the slots for all kinds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.core.identity import IDENTITY_PART_SIZE, IDENTITY_PARTS
from alpha.core.keys import keys_for_role
from alpha.core.sealing import KEY_SIZE, PAYLOAD_DIGESTS
from alpha.core.topology import ParticipantTree
from alpha.errors import (
    Forged,
    FrameIncomplete,
    IdentityMismatch,
    Replayed,
    SkippedVersion,
    SlotFault,
    TrailingBytes,
    Truncated,
    WrongEdge,
    WrongFrame,
)
from alpha.wire.frame import (
    FIELDS,
    FORMAT_VERSION,
    HEADER_SIZE,
    KEYED_FORMAT_VERSION,
    KINDS,
    MAX_VERSION,
    TRAILER_SIZE,
    FrameKind,
    FrameSpec,
    abort_spec,
    payload_digest,
)
from alpha.wire.receive import ReceiveSlot, Reception
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, SECRET, raises_exactly

keys = st.binary(min_size=KEY_SIZE, max_size=KEY_SIZE)
digest_names = st.sampled_from(PAYLOAD_DIGESTS)
versions = st.integers(0, MAX_VERSION - 1)  # a slot at MAX_VERSION refuses to arm at all
KEY = bytes(range(100, 100 + KEY_SIZE))


@st.composite
def specs(draw: st.DrawFn, kind: FrameKind | None = None) -> FrameSpec:
    """A spec of ``kind`` (any kind when None): the kinds table's slot and extent where it fixes
    them, drawn where the schedule would choose (a DATA extent kept small)."""
    chosen = draw(st.sampled_from(list(FrameKind))) if kind is None else kind
    rule = KINDS[chosen]
    sender, receiver = draw(st.sampled_from([(1, 2), (2, 1), (0, 5), (7, 3)]))
    slot = draw(st.integers(0, 2**32 - 1)) if rule.slot is None else rule.slot
    extent = draw(st.integers(0, 64)) if rule.extent is None else rule.extent
    return FrameSpec(IDENTITY, chosen, sender, receiver, slot, extent)


def flip(data: bytes, bit: int) -> bytes:
    changed = bytearray(data)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


def receive(slot: ReceiveSlot, frame: bytes, *, deferred: bool) -> memoryview:
    """Drive one reception of ``frame`` as the runtime does (the payload hashed in line, or
    deferred: hashed after it is in, as the worker thread does) and finish it."""
    reception = slot.arm(deferred=deferred)
    _drive(reception, frame, deferred=deferred)
    return reception.finish()


def _drive(reception: Reception, frame: bytes, *, deferred: bool) -> None:
    """Feed ``frame`` whole, hash a deferred reception's payload, and end the stream."""
    reception.feed(frame)
    if deferred and not reception.verified:
        piece = reception.unhashed(len(frame))
        reception.hash(piece)
        reception.hashed(len(piece))
    reception.eof()


def refused(slot: ReceiveSlot, frame: bytes, *, deferred: bool) -> SlotFault:
    """The refusal of ``frame`` at ``slot``; the slot's counter and digest are as before and
    nothing of the payload was exposed."""
    before = slot.next_version
    reception = slot.arm(deferred=deferred)
    with pytest.raises(SlotFault) as info:
        _drive(reception, frame, deferred=deferred)
    raises_exactly(FrameIncomplete, reception.finish)  # no payload is exposed
    assert not reception.verified
    assert slot.next_version == before
    assert slot.payload_digest is None
    assert slot.refusal is info.value
    return info.value


def expected_refusal(spec: FrameSpec, version: int, header: bytes) -> tuple[type, str]:
    """What docs/frames.md says a keyed slot of ``spec`` at ``version`` refuses ``header`` as:
    the first field that differs from the header it expects, by that field's class; the kind
    byte ABORT in place of another kind switches the expectation to the ABORT frame of the same
    edge (slot 0, version 0, extent 512); a header that checks leaves the trailer to refuse."""
    expected = spec.header(version, layout=KEYED_FORMAT_VERSION)
    expected_version = version
    for entry in FIELDS:
        got, want = header[entry.offset : entry.end], expected[entry.offset : entry.end]
        if got == want:
            continue
        if entry.name == "kind" and got[0] == FrameKind.ABORT and spec.kind != FrameKind.ABORT:
            aborting = abort_spec(spec.identity, spec.sender, spec.receiver)
            expected, expected_version = aborting.header(0, layout=KEYED_FORMAT_VERSION), 0
            continue
        if entry.name in ("magic", "format", "kind", "reserved"):
            return WrongFrame, entry.name
        if entry.name == "identity":
            return IdentityMismatch, entry.name
        if entry.name in ("sender", "receiver", "slot"):
            return WrongEdge, entry.name
        value = int.from_bytes(got, "big")
        if entry.name == "version":
            return (Replayed if value < expected_version else SkippedVersion), entry.name
        wanted = int.from_bytes(want, "big")
        return (Truncated if value < wanted else TrailingBytes), entry.name
    return Forged, "trailer"


# --- every kind, both digests: a frame of the send side checks, and every bit of it counts --------


@settings(max_examples=150)
@given(specs(), keys, digest_names, versions, st.data(), st.booleans())
def test_a_keyed_frame_of_every_kind_and_digest_is_accepted_at_its_own_slot(
    spec: FrameSpec, key: bytes, digest: str, version: int, data: st.DataObject, deferred: bool
) -> None:
    payload = data.draw(st.binary(min_size=spec.extent, max_size=spec.extent), label="payload")
    outgoing = SendSlot(spec, next_version=version, key=key, digest=digest).prepare(payload)
    frame = outgoing.join()
    assert frame[4] == KEYED_FORMAT_VERSION and len(frame) == spec.frame_size
    assert outgoing.digest == payload_digest(payload, digest)
    slot = ReceiveSlot(spec, next_version=version, key=key, digest=digest)
    assert bytes(receive(slot, frame, deferred=deferred)) == payload
    assert slot.next_version == version + 1
    assert slot.payload_digest == outgoing.digest


@settings(max_examples=400)
@given(specs(), keys, digest_names, versions, st.data(), st.booleans())
def test_every_single_bit_change_of_a_keyed_frame_of_every_kind_is_refused(
    spec: FrameSpec, key: bytes, digest: str, version: int, data: st.DataObject, deferred: bool
) -> None:
    payload = data.draw(st.binary(min_size=spec.extent, max_size=spec.extent), label="payload")
    frame = SendSlot(spec, next_version=version, key=key, digest=digest).prepare(payload).join()
    bit = data.draw(st.integers(0, 8 * len(frame) - 1), label="bit")
    changed = flip(frame, bit)
    slot = ReceiveSlot(spec, next_version=version, key=key, digest=digest)
    error = refused(slot, changed, deferred=deferred)
    cls, field = expected_refusal(spec, version, changed[:HEADER_SIZE])
    assert type(error) is cls, (bit, type(error).__name__, cls.__name__)
    assert error.field == field
    assert error.edge == (spec.sender, spec.receiver)
    if bit >= 8 * HEADER_SIZE:
        assert cls is Forged  # a payload or trailer bit is the MAC's to refuse
        assert error.received == changed[-TRAILER_SIZE:].hex()
    if cls is IdentityMismatch:
        part = (bit // 8 - 8) // IDENTITY_PART_SIZE
        assert error.parts == (IDENTITY_PARTS[part],)
    raises_exactly(cls, slot.arm)  # refused for good, with the same class


@pytest.mark.parametrize(
    ("kind", "bit", "cls", "field"),
    [
        # END (5) and DONE (6) are one bit from ABORT (4): the rest of the header is then an
        # ABORT frame's to match, whose extent is 512.
        (FrameKind.END, 0, Truncated, "extent"),
        (FrameKind.DONE, 1, Truncated, "extent"),
        (FrameKind.DATA, 1, WrongFrame, "kind"),  # 2 -> 0, no kind
        (FrameKind.ABORT, 2, WrongFrame, "kind"),  # 4 -> 0: an ABORT's own slot takes no other
    ],
)
def test_a_kind_bit_flipped_is_refused_by_what_the_kind_becomes(
    kind: FrameKind, bit: int, cls: type, field: str
) -> None:
    # The model above, pinned on the cases where the kind byte turns into ABORT.
    rule = KINDS[kind]
    spec = FrameSpec(IDENTITY, kind, 1, 2, rule.slot or 0, rule.extent or 0)
    frame = SendSlot(spec, key=KEY).prepare(bytes(spec.extent)).join()
    slot = ReceiveSlot(spec, key=KEY)
    error = refused(slot, flip(frame, 8 * 5 + bit), deferred=False)
    assert (type(error), error.field) == (cls, field)


@settings(max_examples=100)
@given(specs(), keys, st.data())
def test_a_frame_whose_digest_is_the_other_one_is_forged(
    spec: FrameSpec, key: bytes, data: st.DataObject
) -> None:
    # The payload digest is bound: a trailer over SHA-256 is no trailer over BLAKE3.
    payload = data.draw(st.binary(min_size=spec.extent, max_size=spec.extent), label="payload")
    made, taken = data.draw(st.permutations(PAYLOAD_DIGESTS), label="digests")
    frame = SendSlot(spec, key=key, digest=made).prepare(payload).join()
    slot = ReceiveSlot(spec, key=key, digest=taken)
    assert type(refused(slot, frame, deferred=data.draw(st.booleans()))) is Forged


# --- keyed for one edge and direction, refused on every other -------------------------------------


def _edge_keys(participants: int, fanout: int) -> dict[tuple[int, int], bytes]:
    """Every edge direction's key of a tree, from the real key schedule (each role's own keys)."""
    tree = ParticipantTree(participants, fanout)
    every: dict[tuple[int, int], bytes] = {}
    for role in range(participants):
        parent = tree.parent(role)
        lower = () if parent is None else (parent,)
        every |= keys_for_role(SECRET, IDENTITY.encode(), role, lower, tree.children(role))
    return every


EDGE_KEYS = _edge_keys(7, 2)


@settings(max_examples=150)
@given(
    st.sampled_from(sorted(EDGE_KEYS)),
    st.sampled_from(sorted(EDGE_KEYS)),
    st.sampled_from(list(FrameKind)),
    digest_names,
    st.integers(0, 3),
    st.booleans(),
    st.data(),
)
def test_a_frame_keyed_for_one_edge_or_direction_is_forged_on_every_other(
    made_for: tuple[int, int],
    taken_on: tuple[int, int],
    kind: FrameKind,
    digest: str,
    version: int,
    rewritten: bool,
    data: st.DataObject,
) -> None:
    if made_for == taken_on:
        return
    rule = KINDS[kind]
    slot_number = data.draw(st.integers(0, 9), label="slot") if rule.slot is None else rule.slot
    extent = data.draw(st.integers(0, 16), label="extent") if rule.extent is None else rule.extent
    payload = data.draw(st.binary(min_size=extent, max_size=extent), label="payload")
    source = FrameSpec(IDENTITY, kind, *made_for, slot_number, extent)
    target = replace(source, sender=taken_on[0], receiver=taken_on[1])
    if rewritten:
        # A relay reflects or redirects a frame: every header field rewritten to fit the other
        # edge's slot, the trailer kept (it was made over the original header).
        frame = SendSlot(source, next_version=version, key=EDGE_KEYS[made_for], digest=digest)
        outgoing = frame.prepare(payload)
        header = target.header(version, layout=KEYED_FORMAT_VERSION)
        wire = header + payload + outgoing.trailer
    else:
        # A role that holds the keys of its own edges makes a frame for another edge: the header
        # is that edge's, the MAC its own edge's.
        maker = SendSlot(target, next_version=version, key=EDGE_KEYS[made_for], digest=digest)
        wire = maker.prepare(payload).join()
    # The frame as made is accepted on its own edge (the test would prove nothing otherwise).
    own = SendSlot(source, next_version=version, key=EDGE_KEYS[made_for], digest=digest)
    home = ReceiveSlot(source, next_version=version, key=EDGE_KEYS[made_for], digest=digest)
    assert bytes(receive(home, own.prepare(payload).join(), deferred=False)) == payload
    slot = ReceiveSlot(target, next_version=version, key=EDGE_KEYS[taken_on], digest=digest)
    error = refused(slot, wire, deferred=data.draw(st.booleans(), label="deferred"))
    assert type(error) is Forged
    assert (error.role, error.peer, error.field) == (taken_on[1], taken_on[0], "trailer")


def test_every_edge_direction_of_a_tree_has_its_own_key() -> None:
    # What the property above stands on: 6 edges, 12 directions, 12 keys.
    assert len(EDGE_KEYS) == 12 and len(set(EDGE_KEYS.values())) == 12
    assert all(len(key) == KEY_SIZE for key in EDGE_KEYS.values())


# --- keyed against unkeyed: the format byte ----------------------------------------------------


@settings(max_examples=100)
@given(specs(), keys, digest_names, versions, st.data())
def test_a_keyed_and_an_unkeyed_end_refuse_each_other_at_the_format_byte(
    spec: FrameSpec, key: bytes, digest: str, version: int, data: st.DataObject
) -> None:
    payload = data.draw(st.binary(min_size=spec.extent, max_size=spec.extent), label="payload")
    keyed = SendSlot(spec, next_version=version, key=key, digest=digest).prepare(payload).join()
    plain = SendSlot(spec, next_version=version, digest=digest).prepare(payload).join()
    assert (keyed[4], plain[4]) == (KEYED_FORMAT_VERSION, FORMAT_VERSION)
    assert keyed[5:HEADER_SIZE] == plain[5:HEADER_SIZE]  # the format byte is all that differs
    for slot, frame in (
        (ReceiveSlot(spec, next_version=version, digest=digest), keyed),
        (ReceiveSlot(spec, next_version=version, key=key, digest=digest), plain),
    ):
        error = refused(slot, frame, deferred=False)
        assert (type(error), error.field) == (WrongFrame, "format")
        assert error.expected == bytes([slot.sealing.layout]).hex()
