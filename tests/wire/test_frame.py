"""Frames, layout 2: the codec refuses every wrong byte, with the class its field implies; a
payload's digest, computed once, seals it on any number of edges; a deferred reception, hashed
in any pieces beside the reads, checks exactly as an inline one."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.core.identity import RunIdentity
from alpha.errors import (
    Corrupted,
    DoubleRearm,
    FrameIncomplete,
    FrameSpecInvalid,
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
from alpha.wire.frame import (
    FIELDS,
    HEADER_SIZE,
    MAX_EXTENT,
    MAX_VERSION,
    TRAILER_SIZE,
    FrameKind,
    FrameSpec,
    payload_digest,
    seal,
)
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY

u32 = st.integers(0, 2**32 - 1)
versions = st.integers(0, MAX_VERSION - 1)
kinds = st.sampled_from(list(FrameKind))


def make_spec(extent: int = 16, *, sender: int = 1, receiver: int = 2, slot: int = 7) -> FrameSpec:
    return FrameSpec(IDENTITY, FrameKind.DATA, sender, receiver, slot, extent)


def frame_bytes(spec: FrameSpec, payload: bytes, version: int) -> bytes:
    return SendSlot(spec, next_version=version).prepare(payload).join()


@st.composite
def specs_and_frames(draw: st.DrawFn, max_payload: int = 64) -> tuple[FrameSpec, bytes, int, bytes]:
    payload = draw(st.binary(max_size=max_payload))
    sender = draw(u32)
    receiver = draw(u32.filter(lambda r: r != sender))
    spec = FrameSpec(
        RunIdentity(
            learner=draw(st.binary(min_size=32, max_size=32)),
            contract=draw(st.binary(min_size=32, max_size=32)),
            membership=draw(st.binary(min_size=32, max_size=32)),
        ),
        draw(kinds),
        sender,
        receiver,
        draw(u32),
        len(payload),
    )
    version = draw(versions)
    return spec, payload, version, frame_bytes(spec, payload, version)


def field_of(offset: int, extent: int) -> str:
    for entry in FIELDS:
        if entry.offset <= offset < entry.end:
            return entry.name
    return "payload" if offset < HEADER_SIZE + extent else "trailer"


def expected_class(offset: int, original: bytes, mutated: bytes, extent: int) -> type[SlotFault]:
    """The refusal a single changed byte at ``offset`` implies, by the documented layout."""
    name = field_of(offset, extent)
    if name in ("magic", "format", "kind", "reserved"):
        return WrongFrame
    if name == "identity":
        return IdentityMismatch
    if name in ("sender", "receiver", "slot"):
        return WrongEdge
    if name in ("version", "extent"):
        entry = next(f for f in FIELDS if f.name == name)
        was = int.from_bytes(original[entry.offset : entry.end], "big")
        now = int.from_bytes(mutated[entry.offset : entry.end], "big")
        if name == "version":
            return Replayed if now < was else SkippedVersion
        return Truncated if now < was else TrailingBytes
    return Corrupted


def refused_exactly(cls: type[SlotFault], slot: ReceiveSlot, data: bytes) -> SlotFault:
    with pytest.raises(SlotFault) as caught:
        slot.accept(data)
    assert type(caught.value) is cls, f"expected {cls.__name__}, got {caught.value!r}"
    return caught.value


# --- layout ---------------------------------------------------------------------------------


def test_fields_tile_the_header_without_gaps() -> None:
    position = 0
    for entry in FIELDS:
        assert entry.offset == position
        position = entry.end
    assert position == HEADER_SIZE == 132
    assert TRAILER_SIZE == 32


def test_known_frame_layout() -> None:
    spec = make_spec(3, sender=258, receiver=3, slot=9)
    data = frame_bytes(spec, b"abc", 5)
    assert data[0:4] == b"ALPF"
    assert data[4] == 2
    assert data[5] == FrameKind.DATA == 2
    assert data[6:8] == b"\0\0"
    assert data[8:104] == IDENTITY.encode()
    assert data[104:108] == (258).to_bytes(4, "big")
    assert data[108:112] == (3).to_bytes(4, "big")
    assert data[112:116] == (9).to_bytes(4, "big")
    assert data[116:124] == (5).to_bytes(8, "big")
    assert data[124:132] == (3).to_bytes(8, "big")
    assert data[132:135] == b"abc"
    # Layout 2: the trailer is SHA-256 over the header and the payload's own SHA-256.
    assert data[135:] == hashlib.sha256(data[:132] + hashlib.sha256(b"abc").digest()).digest()
    assert len(data) == spec.frame_size == 132 + 3 + 32


# --- round trip -----------------------------------------------------------------------------


@given(specs_and_frames(max_payload=4096))
def test_round_trip(case: tuple[FrameSpec, bytes, int, bytes]) -> None:
    spec, payload, version, data = case
    slot = ReceiveSlot(spec, next_version=version)
    assert bytes(slot.accept(data)) == payload
    assert slot.next_version == version + 1
    assert slot.refusal is None


@given(st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=20))
def test_a_slot_accepts_consecutive_versions(payloads: list[bytes]) -> None:
    spec = make_spec(8)
    sender, receiver = SendSlot(spec), ReceiveSlot(spec)
    for index, payload in enumerate(payloads):
        assert bytes(receiver.accept(sender.prepare(payload).join())) == payload
        assert receiver.next_version == sender.next_version == index + 1


@given(specs_and_frames(max_payload=300), st.data())
def test_stream_reads_in_any_pieces_are_capped_at_each_part(
    case: tuple[FrameSpec, bytes, int, bytes], data: st.DataObject
) -> None:
    spec, payload, version, frame = case
    following = b"NEXT FRAME"
    stream = frame + following
    slot = ReceiveSlot(spec, next_version=version)
    reception = slot.arm()
    position = 0
    while not reception.verified:
        target = reception.into()
        assert target, "an unfinished frame always offers room"
        # A read never reaches past the part the reception is in.
        if position < HEADER_SIZE:
            assert len(target) == HEADER_SIZE - position
        elif position < HEADER_SIZE + spec.extent:
            assert len(target) == HEADER_SIZE + spec.extent - position
        else:
            assert len(target) == spec.frame_size - position
        take = data.draw(st.integers(1, len(target)))
        target[:take] = stream[position : position + take]
        reception.advance(take)
        position += take
    assert len(reception.into()) == 0
    assert stream[position:] == following
    assert bytes(reception.finish()) == payload


@given(specs_and_frames(max_payload=300), st.data())
def test_scatter_reads_fill_payload_and_trailer_at_once_but_never_the_header_with_them(
    case: tuple[FrameSpec, bytes, int, bytes], data: st.DataObject
) -> None:
    spec, payload, version, frame = case
    stream = frame + b"NEXT FRAME"
    reception = ReceiveSlot(spec, next_version=version).arm()
    position = 0
    while not reception.verified:
        views = reception.into_rest()
        room = sum(len(view) for view in views)
        if position < HEADER_SIZE:  # the header alone: checked before any payload byte
            assert [len(view) for view in views] == [HEADER_SIZE - position]
        else:  # the rest of the frame, and not a byte more
            assert room == spec.frame_size - position
        take = data.draw(st.integers(1, room))
        left, at = take, position
        for view in views:  # what recvmsg_into does: fill each view in turn
            part = min(left, len(view))
            view[:part] = stream[at : at + part]
            left, at = left - part, at + part
        reception.advance(take)
        position += take
    assert reception.into_rest() == []
    assert bytes(reception.finish()) == payload


# --- every wrong byte -----------------------------------------------------------------------


@settings(max_examples=40)
@given(specs_and_frames(max_payload=48), st.integers(1, 255))
def test_every_single_byte_change_raises_the_class_its_field_implies(
    case: tuple[FrameSpec, bytes, int, bytes], flip: int
) -> None:
    spec, _payload, version, data = case
    for offset in range(len(data)):
        mutated = bytearray(data)
        mutated[offset] ^= flip
        slot = ReceiveSlot(spec, next_version=version)
        if offset == 5 and mutated[5] == FrameKind.ABORT:
            # An ABORT in place of the expected frame: checked as the ABORT frame from here on.
            cls, field = expected_as_abort(spec, bytes(mutated))
        else:
            cls = expected_class(offset, data, bytes(mutated), spec.extent)
            field = field_of(offset, spec.extent) if cls is not Corrupted else "trailer"
        refusal = refused_exactly(cls, slot, bytes(mutated))
        assert refusal.field == field
        assert slot.next_version == version, "a refusal never moves the counter"
        assert type(slot.refusal) is cls


def expected_as_abort(spec: FrameSpec, mutated: bytes) -> tuple[type[SlotFault], str]:
    """The refusal of a frame whose kind byte says ABORT: the first header field after the kind
    that differs from the ABORT frame's header, else the trailer (the payload was not one)."""
    from alpha.wire.frame import abort_spec

    want = abort_spec(spec.identity, spec.sender, spec.receiver).header(0)
    for entry in FIELDS:
        if entry.offset <= 5:
            continue
        if mutated[entry.offset : entry.end] != want[entry.offset : entry.end]:
            return expected_class(entry.offset, want, mutated, 512), entry.name
    return Corrupted, "trailer"


@settings(max_examples=40)
@given(specs_and_frames(max_payload=48))
def test_truncation_at_every_offset_raises_truncated(
    case: tuple[FrameSpec, bytes, int, bytes],
) -> None:
    spec, _payload, version, data = case
    for cut in range(len(data)):
        slot = ReceiveSlot(spec, next_version=version)
        refusal = refused_exactly(Truncated, slot, data[:cut])
        assert refusal.expected == spec.frame_size
        assert refusal.received == cut
        assert slot.next_version == version


@given(specs_and_frames(max_payload=48), st.binary(min_size=1, max_size=64))
def test_appended_bytes_raise_trailing_bytes_and_change_nothing(
    case: tuple[FrameSpec, bytes, int, bytes], extra: bytes
) -> None:
    spec, _payload, version, data = case
    slot = ReceiveSlot(spec, next_version=version)
    refusal = refused_exactly(TrailingBytes, slot, data + extra)
    assert refusal.received == len(extra)
    assert slot.next_version == version


@given(specs_and_frames(max_payload=32), st.integers(0, 300), st.integers(1, 255))
def test_a_refused_slot_stays_refused(
    case: tuple[FrameSpec, bytes, int, bytes], offset: int, flip: int
) -> None:
    spec, _payload, version, data = case
    offset %= len(data)
    mutated = bytearray(data)
    mutated[offset] ^= flip
    slot = ReceiveSlot(spec, next_version=version)
    first = refused_exactly(
        expected_class(offset, data, bytes(mutated), spec.extent), slot, bytes(mutated)
    )
    # The valid frame, after the refusal, is still refused with the same class.
    again = refused_exactly(type(first), slot, data)
    assert again.field == first.field
    with pytest.raises(type(first)):
        slot.arm()
    assert slot.next_version == version


def test_identity_mismatch_names_the_part() -> None:
    spec = make_spec(4)
    for index, part in enumerate(("learner", "contract", "membership")):
        other = bytearray(IDENTITY.encode())
        other[index * 32 + 5] ^= 0x40
        stranger = FrameSpec(RunIdentity.decode(bytes(other)), spec.kind, 1, 2, 7, 4)
        refusal = refused_exactly(
            IdentityMismatch, ReceiveSlot(spec), frame_bytes(stranger, b"abcd", 0)
        )
        assert refusal.parts == (part,)
        assert part in str(refusal)


def test_wrong_kind_and_wrong_slot() -> None:
    spec = make_spec(4)
    hello = FrameSpec(IDENTITY, FrameKind.HELLO, 1, 2, 7, 4)
    refused_exactly(WrongFrame, ReceiveSlot(spec), frame_bytes(hello, b"abcd", 0))
    other_slot = make_spec(4, slot=8)
    refusal = refused_exactly(WrongEdge, ReceiveSlot(spec), frame_bytes(other_slot, b"abcd", 0))
    assert (refusal.field, refusal.expected, refusal.received) == ("slot", 7, 8)
    reversed_edge = make_spec(4, sender=2, receiver=1)
    refusal = refused_exactly(WrongEdge, ReceiveSlot(spec), frame_bytes(reversed_edge, b"abcd", 0))
    assert refusal.field == "sender"
    assert refusal.edge == (1, 2)
    assert (refusal.role, refusal.peer, refusal.slot) == (2, 1, 7)


def test_a_stranger_is_refused_after_four_bytes() -> None:
    slot = ReceiveSlot(make_spec(1 << 20))
    reception = slot.arm()
    target = reception.into()
    target[:4] = b"GET "
    with pytest.raises(WrongFrame) as caught:
        reception.advance(4)
    assert caught.value.field == "magic"


# --- versions -------------------------------------------------------------------------------


N = 1_000


@pytest.mark.parametrize(
    ("version", "cls"),
    [
        (N - 1, Replayed),
        (N - 17, Replayed),
        (0, Replayed),
        (N + 1, SkippedVersion),
        (N + 2**10, SkippedVersion),
        (N + 2**40, SkippedVersion),
        (MAX_VERSION - 1, SkippedVersion),
    ],
)
def test_version_cases(version: int, cls: type[SlotFault]) -> None:
    spec = make_spec(2)
    slot = ReceiveSlot(spec, next_version=N)
    refusal = refused_exactly(cls, slot, frame_bytes(spec, b"xy", version))
    assert (refusal.expected, refusal.received) == (N, version)
    assert slot.next_version == N
    # A valid frame after the refusal is still refused.
    refused_exactly(cls, slot, frame_bytes(spec, b"xy", N))


def test_a_frame_at_the_maximum_version_is_refused() -> None:
    spec = make_spec(2)
    data = bytearray(frame_bytes(spec, b"xy", 0))
    data[116:124] = MAX_VERSION.to_bytes(8, "big")
    refused_exactly(SkippedVersion, ReceiveSlot(spec, next_version=N), bytes(data))


def test_the_counter_never_wraps() -> None:
    spec = make_spec(2)
    slot = ReceiveSlot(spec, next_version=MAX_VERSION - 1)
    assert bytes(slot.accept(frame_bytes(spec, b"xy", MAX_VERSION - 1))) == b"xy"
    assert slot.next_version == MAX_VERSION
    with pytest.raises(VersionOverflow) as caught:
        slot.arm()
    assert caught.value.received == MAX_VERSION
    assert slot.next_version == MAX_VERSION
    with pytest.raises(VersionOverflow):
        slot.arm()


def test_the_sending_counter_never_wraps() -> None:
    spec = make_spec(2)
    sender = SendSlot(spec, next_version=MAX_VERSION - 1)
    sender.prepare(b"xy")
    assert sender.next_version == MAX_VERSION
    with pytest.raises(VersionOverflow) as caught:
        sender.prepare(b"xy")
    assert caught.value.edge == (1, 2)
    assert sender.next_version == MAX_VERSION


def test_counters_past_their_width_are_refused_at_construction() -> None:
    spec = make_spec(2)
    for bad in (-1, MAX_VERSION + 1, 2**70):
        with pytest.raises(FrameSpecInvalid):
            ReceiveSlot(spec, next_version=bad)
        with pytest.raises(FrameSpecInvalid):
            SendSlot(spec, next_version=bad)
    ReceiveSlot(spec, next_version=MAX_VERSION)  # the maximum itself is a valid counter


def test_double_rearm() -> None:
    spec = make_spec(2)
    slot = ReceiveSlot(spec, next_version=3)
    slot.arm()
    with pytest.raises(DoubleRearm) as caught:
        slot.arm()
    assert caught.value.version == 3
    assert slot.next_version == 3
    refused_exactly(DoubleRearm, slot, frame_bytes(spec, b"xy", 3))


# --- buffers and copies ---------------------------------------------------------------------


def test_payload_lands_in_a_lent_buffer_without_another_copy() -> None:
    values = np.arange(1024, dtype=np.float32)
    spec = make_spec(values.nbytes)
    target = np.zeros_like(values)
    slot = ReceiveSlot(spec, buffer=target)
    sent = SendSlot(spec).prepare(values)
    assert sent.payload.obj is values, "the sender references the payload, never copies it"
    payload = slot.accept(sent.join())
    assert np.shares_memory(np.frombuffer(payload, dtype=np.float32), target)
    assert np.array_equal(target, values)
    assert payload.readonly


def test_the_buffer_is_allocated_once_per_slot() -> None:
    spec = make_spec(8)
    sender, slot = SendSlot(spec), ReceiveSlot(spec)
    first = slot.accept(sender.prepare(b"A" * 8).join())
    address = np.frombuffer(first, dtype=np.uint8).ctypes.data
    second = slot.accept(sender.prepare(b"B" * 8).join())
    assert np.frombuffer(second, dtype=np.uint8).ctypes.data == address


def test_nothing_is_exposed_before_the_trailer_checks() -> None:
    spec = make_spec(4)
    data = frame_bytes(spec, b"abcd", 0)
    reception = ReceiveSlot(spec).arm()
    reception.feed(data[:-1])
    with pytest.raises(FrameIncomplete):
        reception.finish()
    reception.feed(data[-1:])
    assert bytes(reception.finish()) == b"abcd"
    with pytest.raises(FrameIncomplete):
        reception.finish()


def test_bad_specs_and_payloads() -> None:
    with pytest.raises(FrameSpecInvalid):
        make_spec(MAX_EXTENT + 1)
    with pytest.raises(FrameSpecInvalid):
        make_spec(4, sender=3, receiver=3)
    with pytest.raises(FrameSpecInvalid):
        make_spec(4, sender=2**32)
    with pytest.raises(FrameSpecInvalid):
        SendSlot(make_spec(4)).prepare(b"abc")
    with pytest.raises(FrameSpecInvalid):
        ReceiveSlot(make_spec(4), buffer=bytearray(5))
    with pytest.raises(FrameSpecInvalid):
        ReceiveSlot(make_spec(4), buffer=b"abcd")


def test_refusal_messages_say_who_what_and_what_to_do() -> None:
    spec = make_spec(4)
    data = bytearray(frame_bytes(spec, b"abcd", 0))
    data[140] ^= 1
    refusal = refused_exactly(Corrupted, ReceiveSlot(spec), bytes(data))
    text = str(refusal)
    assert "role 2" in text and "1->2" in text and "slot 7" in text and "version 0" in text
    assert "abort" in text


def test_encode_and_check_make_no_copy_of_the_payload() -> None:
    import tracemalloc

    size = 8 << 20
    payload = bytes(range(256)) * (size // 256)
    spec = make_spec(size)
    sender, slot = SendSlot(spec), ReceiveSlot(spec)  # the receive buffer is allocated here
    tracemalloc.start()
    try:
        pieces = sender.prepare(payload).pieces()
        reception = slot.arm()
        for piece in pieces:
            reception.feed(piece)
        received = reception.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert bytes(received) == payload
    assert peak < 64 * 1024, f"{peak} bytes allocated while framing {size}"


# --- an ABORT in place of the frame a slot expects ------------------------------------------


def _abort_frame(sender: int = 1, receiver: int = 2, identity: RunIdentity = IDENTITY) -> bytes:
    from alpha.wire.abort import AbortCause, encode_cause
    from alpha.wire.frame import abort_spec

    cause = encode_cause(AbortCause(5, "Corrupted", (4, 5), 9, "bytes were damaged"))
    return SendSlot(abort_spec(identity, sender, receiver)).prepare(cause).join()


@pytest.mark.parametrize("extent", [0, 16, 4096])
def test_an_abort_takes_the_place_of_any_expected_frame_and_leaves_its_version(
    extent: int,
) -> None:
    from alpha.wire.abort import decode_cause

    slot = ReceiveSlot(make_spec(extent), next_version=3)
    reception = slot.arm()
    data = _abort_frame()
    assert reception.feed(data) == len(data)
    assert reception.verified and reception.aborted
    cause = decode_cause(bytes(reception.finish()), role=2, peer=1)
    assert (cause.origin, cause.cause, cause.edge, cause.round) == (5, "Corrupted", (4, 5), 9)
    assert slot.next_version == 3 and not slot.armed and slot.refusal is None


@pytest.mark.parametrize(
    ("position", "refusal"),
    [(8, IdentityMismatch), (104, WrongEdge), (112, WrongEdge), (120, SkippedVersion)],
)
def test_an_abort_is_checked_like_any_frame_and_its_refusal_refuses_the_slot(
    position: int, refusal: type[SlotFault]
) -> None:
    slot = ReceiveSlot(make_spec(16))
    data = bytearray(_abort_frame())
    data[position] ^= 0x01
    with pytest.raises(refusal):
        slot.arm().feed(bytes(data))
    assert type(slot.refusal) is refusal
    with pytest.raises(refusal):
        slot.arm()


def test_a_corrupted_abort_is_refused_and_a_cut_one_is_truncated() -> None:
    data = bytearray(_abort_frame())
    data[HEADER_SIZE + 3] ^= 0x10
    with pytest.raises(Corrupted):
        ReceiveSlot(make_spec(16)).arm().feed(bytes(data))
    slot = ReceiveSlot(make_spec(16))
    reception = slot.arm()
    reception.feed(_abort_frame()[:200])
    with pytest.raises(Truncated):
        reception.eof()
    assert type(slot.refusal) is Truncated


def test_a_slot_that_expects_an_abort_takes_it_directly() -> None:
    from alpha.wire.frame import abort_spec

    slot = ReceiveSlot(abort_spec(IDENTITY, 1, 2))
    reception = slot.arm()
    reception.feed(_abort_frame())
    assert reception.verified and not reception.aborted


# --- layout 2: a payload hashed once, frames sealed per header ------------------------------


@given(specs_and_frames(), st.integers(1, 5))
def test_a_payload_digest_seals_the_same_frame_on_any_number_of_edges(
    case: tuple[FrameSpec, bytes, int, bytes], edges: int
) -> None:
    spec, payload, version, data = case
    digest = hashlib.sha256(payload).digest()
    assert payload_digest(payload) == digest
    assert SendSlot(spec, next_version=version).prepare(payload, digest=digest).join() == data
    unsealed = SendSlot(spec, next_version=version).begin(payload)
    assert unsealed.seal(digest).join() == data
    # The same digest frames the payload for other receivers, each frame checking there.
    for receiver in range(edges):
        if receiver == spec.sender:
            continue
        other = FrameSpec(spec.identity, spec.kind, spec.sender, receiver, spec.slot, len(payload))
        framed = SendSlot(other).prepare(payload, digest=digest)
        assert framed.digest == digest
        slot = ReceiveSlot(other)
        assert bytes(slot.accept(framed.join())) == payload
        assert slot.payload_digest == digest


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=32, max_size=32))
def test_a_frame_sealed_with_another_payloads_digest_is_corrupted(
    payload: bytes, wrong: bytes
) -> None:
    if wrong == hashlib.sha256(payload).digest():
        return
    spec = make_spec(len(payload))
    data = SendSlot(spec).prepare(payload, digest=wrong).join()
    slot = ReceiveSlot(spec)
    with pytest.raises(Corrupted):
        slot.accept(data)
    assert slot.payload_digest is None and slot.next_version == 0


def test_a_digest_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(FrameSpecInvalid, match="32 bytes"):
        seal(b"h" * HEADER_SIZE, b"short")
    with pytest.raises(FrameSpecInvalid):
        SendSlot(make_spec(3)).prepare(b"abc", digest=b"\0" * 31)


def test_begin_advances_the_counter_like_prepare() -> None:
    slot = SendSlot(make_spec(3), next_version=4)
    unsealed = slot.begin(b"abc")
    assert slot.next_version == 5
    assert unsealed.header == make_spec(3).header(4)


def _deferred_run(
    data: bytes, spec: FrameSpec, version: int, reads: list[int], hashes: list[int]
) -> tuple[ReceiveSlot, bytes | None, type[SlotFault] | None]:
    """Feed ``data`` in pieces of ``reads`` sizes (cycled) and, after each read, hash up to
    the next of ``hashes`` waiting bytes; then hash the rest."""
    slot = ReceiveSlot(spec, next_version=version)
    reception = slot.arm(deferred=True)
    position = 0
    step = 0
    try:
        while reception.remaining:
            target = reception.into()
            take = min(len(target), reads[step % len(reads)], len(data) - position)
            target[:take] = data[position : position + take]
            reception.advance(take)
            position += take
            piece = reception.unhashed(hashes[step % len(hashes)])
            reception.hash(piece)
            reception.hashed(len(piece))
            step += 1
        while piece := reception.unhashed(1 << 20):
            reception.hash(piece)
            reception.hashed(len(piece))
        assert reception.verified
        return slot, bytes(reception.finish()), None
    except SlotFault as refusal:
        return slot, None, type(refusal)


@settings(max_examples=200)
@given(
    specs_and_frames(max_payload=256),
    st.lists(st.integers(1, 300), min_size=1, max_size=8),
    st.lists(st.integers(0, 300), min_size=1, max_size=8),
    st.integers(0, 10_000),
)
def test_a_deferred_reception_checks_exactly_as_an_inline_one(
    case: tuple[FrameSpec, bytes, int, bytes], reads: list[int], hashes: list[int], at: int
) -> None:
    spec, payload, version, data = case
    slot, got, refused = _deferred_run(data, spec, version, reads, hashes)
    assert refused is None and got == payload
    assert slot.payload_digest == hashlib.sha256(payload).digest()
    # One damaged byte anywhere after the header: both ways refuse it as Corrupted.
    if len(data) > HEADER_SIZE:
        offset = HEADER_SIZE + at % (len(data) - HEADER_SIZE)
        damaged = bytearray(data)
        damaged[offset] ^= 0x40
        with pytest.raises(Corrupted):
            ReceiveSlot(spec, next_version=version).accept(bytes(damaged))
        _, got, refused = _deferred_run(bytes(damaged), spec, version, reads, hashes)
        assert got is None and refused is Corrupted


def test_a_deferred_reception_is_not_verified_until_hashed() -> None:
    spec = make_spec(8)
    data = frame_bytes(spec, b"12345678", 0)
    reception = ReceiveSlot(spec).arm(deferred=True)
    assert reception.feed(data) == len(data)
    assert reception.remaining == 0 and not reception.verified
    with pytest.raises(FrameIncomplete):
        reception.finish()
    reception.eof()  # every byte is in: the end of the stream is no truncation
    piece = reception.unhashed(3)
    reception.hash(piece)
    with pytest.raises(FrameIncomplete):
        reception.hashed(9)  # more than are waiting
    reception.hashed(3)
    rest = reception.unhashed(100)
    assert len(rest) == 5
    reception.hash(rest)
    reception.hashed(5)
    assert reception.verified and bytes(reception.finish()) == b"12345678"
