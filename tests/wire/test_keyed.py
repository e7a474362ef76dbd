"""The keyed trailer, frame layout 3 (issue 25; what keyed runs send): an HMAC-SHA256
under the key of the frame's edge and direction over the header and the payload's digest. Every
single-bit change of header, digest or trailer is refused as ``Forged``; a trailer made under
one key is refused under every other; the unkeyed seal never agrees with the keyed one. A keyed
receive slot checks the MAC before it exposes any payload byte or moves its counter, and a
keyed and an unkeyed slot refuse each other's frames at the format byte."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.errors import Forged, FrameIncomplete, FrameRefused, FrameSpecInvalid, WrongFrame
from alpha.wire.abort import AbortCause, encode_cause
from alpha.wire.frame import (
    FORMAT_VERSION,
    HEADER_SIZE,
    KEY_SIZE,
    KEYED_FORMAT_VERSION,
    TRAILER_SIZE,
    FrameKind,
    FrameSpec,
    abort_spec,
    check_keyed,
    keyed_seal,
    payload_digest,
    seal,
)
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, ROOT, raises_exactly

keys = st.binary(min_size=KEY_SIZE, max_size=KEY_SIZE)
headers = st.binary(min_size=HEADER_SIZE, max_size=HEADER_SIZE)
digests = st.binary(min_size=32, max_size=32)
KEY = bytes(range(KEY_SIZE))
OTHER = bytes(range(1, KEY_SIZE + 1))


def make_spec(extent: int = 16) -> FrameSpec:
    return FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 7, extent)


def keyed_frame(key: bytes, spec: FrameSpec, payload: bytes, version: int = 0) -> bytes:
    """A layout 3 frame made from the codec's parts alone (``SendSlot(spec, key=...)`` makes the
    same bytes: tests/wire/test_keyed_kinds.py)."""
    header = spec.header(version, layout=KEYED_FORMAT_VERSION)
    return header + payload + keyed_seal(key, header, payload_digest(payload))


def flip(data: bytes, bit: int) -> bytes:
    changed = bytearray(data)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


# --- the codec: keyed_seal and check_keyed --------------------------------------------------


@given(keys, headers, digests)
def test_the_keyed_trailer_is_hmac_sha256_of_header_and_digest(
    key: bytes, header: bytes, digest: bytes
) -> None:
    trailer = keyed_seal(key, header, digest)
    assert trailer == hmac.new(key, header + digest, hashlib.sha256).digest()
    assert len(trailer) == TRAILER_SIZE
    check_keyed(key, header, digest, trailer)  # its own trailer checks


@settings(max_examples=300)
@given(keys, headers, digests, st.sampled_from(["header", "digest", "trailer"]), st.data())
def test_every_single_bit_change_is_forged(
    key: bytes, header: bytes, digest: bytes, part: str, data: st.DataObject
) -> None:
    trailer = keyed_seal(key, header, digest)
    pieces = {"header": header, "digest": digest, "trailer": trailer}
    bit = data.draw(st.integers(0, 8 * len(pieces[part]) - 1), label="bit")
    pieces[part] = flip(pieces[part], bit)
    error = raises_exactly(
        Forged, check_keyed, key, pieces["header"], pieces["digest"], pieces["trailer"]
    )
    assert error.field == "trailer"
    assert trailer.hex() not in str(error.expected)  # the right MAC is never reported


@given(keys, keys, headers, digests)
def test_a_trailer_made_under_one_key_is_forged_under_every_other(
    key: bytes, other: bytes, header: bytes, digest: bytes
) -> None:
    if key == other:
        return
    trailer = keyed_seal(key, header, digest)
    raises_exactly(Forged, check_keyed, other, header, digest, trailer)


def test_the_two_directions_of_an_edge_refuse_each_others_frames() -> None:
    # One key per edge and direction: 1 -> 2 and 2 -> 1 hold different keys (issue 25).
    forward = FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 0, 4)
    backward = FrameSpec(IDENTITY, FrameKind.DATA, 2, 1, 0, 4)
    digest = payload_digest(b"abcd")
    for spec, mine, theirs in ((forward, KEY, OTHER), (backward, OTHER, KEY)):
        header = spec.header(0, layout=KEYED_FORMAT_VERSION)
        trailer = keyed_seal(mine, header, digest)
        check_keyed(mine, header, digest, trailer)
        error = raises_exactly(Forged, check_keyed, theirs, header, digest, trailer)
        assert (error.role, error.peer, error.slot, error.version) == (
            spec.receiver,
            spec.sender,
            0,
            0,
        )


@given(keys, headers, digests)
def test_the_unkeyed_and_the_keyed_seal_never_agree(
    key: bytes, header: bytes, digest: bytes
) -> None:
    assert seal(header, digest) != keyed_seal(key, header, digest)


def test_the_unkeyed_seal_of_a_keyed_header_is_forged() -> None:
    # A relay that rewrites a payload and rehashes it the layout 2 way.
    spec = make_spec(4)
    header = spec.header(0, layout=KEYED_FORMAT_VERSION)
    digest = payload_digest(b"evil")
    raises_exactly(Forged, check_keyed, KEY, header, digest, seal(header, digest))


@pytest.mark.parametrize(
    "key", [b"", bytes(KEY_SIZE - 1), bytes(KEY_SIZE + 1), "k" * 32, bytearray(32)]
)
def test_a_key_that_is_not_32_bytes_is_a_misuse(key: object) -> None:
    header = make_spec().header(0, layout=KEYED_FORMAT_VERSION)
    raises_exactly(FrameSpecInvalid, keyed_seal, key, header, bytes(32))
    raises_exactly(FrameSpecInvalid, ReceiveSlot, make_spec(), key=key)


def test_a_header_or_digest_of_the_wrong_size_is_a_misuse() -> None:
    header = make_spec().header(0, layout=KEYED_FORMAT_VERSION)
    raises_exactly(FrameSpecInvalid, keyed_seal, KEY, header[:-1], bytes(32))
    raises_exactly(FrameSpecInvalid, keyed_seal, KEY, header, bytes(31))
    raises_exactly(FrameSpecInvalid, check_keyed, KEY, header + b"x", bytes(32), bytes(32))


def test_a_header_has_layout_2_unless_asked_for_3() -> None:
    spec = make_spec()
    assert spec.header(5)[4] == FORMAT_VERSION == 2
    assert spec.header(5, layout=KEYED_FORMAT_VERSION)[4] == KEYED_FORMAT_VERSION == 3
    assert spec.header(5)[5:] == spec.header(5, layout=3)[5:]
    for layout in (0, 1, 4, 255):
        raises_exactly(FrameSpecInvalid, spec.header, 5, layout=layout)


def test_the_send_side_makes_layout_2_without_a_key_and_3_with_one() -> None:
    frame = SendSlot(make_spec(4)).prepare(b"abcd").join()
    assert frame[4] == FORMAT_VERSION
    keyed = SendSlot(make_spec(4), key=KEY).prepare(b"abcd").join()
    assert keyed == keyed_frame(KEY, make_spec(4), b"abcd")


# --- the keyed receive slot -----------------------------------------------------------------


def test_a_keyed_slot_accepts_a_keyed_frame() -> None:
    spec = make_spec(5)
    slot = ReceiveSlot(spec, key=KEY)
    assert slot.keyed and not ReceiveSlot(spec).keyed
    for version, payload in enumerate((b"hello", b"world")):
        view = slot.accept(keyed_frame(KEY, spec, payload, version))
        assert bytes(view) == payload
        assert slot.payload_digest == hashlib.sha256(payload).digest()
    assert slot.next_version == 2


def _refused_before_anything_moved(slot: ReceiveSlot, frame: bytes, cls: type) -> None:
    reception = slot.arm()
    with pytest.raises(cls) as info:
        reception.feed(frame)
        reception.eof()
    assert type(info.value) is cls
    raises_exactly(FrameIncomplete, reception.finish)  # no payload is exposed
    raises_exactly(cls, reception.into)  # the reception is refused for good
    assert not reception.verified
    assert slot.next_version == 0 and type(slot.refusal) is cls and slot.payload_digest is None


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=48), st.data())
def test_every_bit_of_payload_or_trailer_changed_is_forged_at_a_keyed_slot(
    payload: bytes, data: st.DataObject
) -> None:
    spec = make_spec(len(payload))
    frame = keyed_frame(KEY, spec, payload)
    bit = data.draw(st.integers(8 * HEADER_SIZE, 8 * len(frame) - 1), label="bit")
    _refused_before_anything_moved(ReceiveSlot(spec, key=KEY), flip(frame, bit), Forged)


@settings(max_examples=100)
@given(st.binary(max_size=48), st.data())
def test_every_bit_of_the_header_changed_is_refused_at_a_keyed_slot(
    payload: bytes, data: st.DataObject
) -> None:
    # Header bits are refused by the field they break, before the MAC: never accepted.
    spec = make_spec(len(payload))
    frame = flip(keyed_frame(KEY, spec, payload), data.draw(st.integers(0, 8 * HEADER_SIZE - 1)))
    slot = ReceiveSlot(spec, key=KEY)
    with pytest.raises(FrameRefused) as info:
        slot.accept(frame)
    assert slot.next_version == 0 and slot.refusal is info.value


def test_a_rewritten_and_rehashed_payload_is_forged() -> None:
    # The attack of issue 25: a relay rewrites the payload and recomputes what it can.
    spec = make_spec(4)
    header = spec.header(0, layout=KEYED_FORMAT_VERSION)
    digest = payload_digest(b"evil")
    for trailer in (seal(header, digest), keyed_seal(OTHER, header, digest)):
        slot = ReceiveSlot(spec, key=KEY)
        _refused_before_anything_moved(slot, header + b"evil" + trailer, Forged)
        assert slot.refusal is not None and slot.refusal.edge == (1, 2)


def test_a_keyed_slot_checks_a_deferred_reception_too() -> None:
    spec = make_spec(8)
    for key, cls in ((KEY, None), (OTHER, Forged)):
        slot = ReceiveSlot(spec, key=KEY)
        reception = slot.arm(deferred=True)
        reception.feed(keyed_frame(key, spec, b"12345678"))
        piece = reception.unhashed(8)
        reception.hash(piece)
        if cls is None:
            reception.hashed(len(piece))
            assert bytes(reception.finish()) == b"12345678" and slot.next_version == 1
        else:
            raises_exactly(cls, reception.hashed, len(piece))
            assert slot.next_version == 0 and type(slot.refusal) is cls


def test_keyed_and_unkeyed_slots_refuse_each_others_frames_at_the_format() -> None:
    spec = make_spec(4)
    unkeyed = SendSlot(spec).prepare(b"abcd").join()
    error = raises_exactly(WrongFrame, ReceiveSlot(spec, key=KEY).accept, unkeyed)
    assert error.field == "format"
    error = raises_exactly(WrongFrame, ReceiveSlot(spec).accept, keyed_frame(KEY, spec, b"abcd"))
    assert error.field == "format"


def test_a_keyed_abort_in_place_of_a_frame_is_checked_under_the_key() -> None:
    spec = make_spec(4)
    cause = encode_cause(AbortCause(1, "Corrupted", (0, 1), 3, "a damaged frame"))
    aborting = abort_spec(IDENTITY, spec.sender, spec.receiver)
    slot = ReceiveSlot(spec, key=KEY)
    reception = slot.arm()
    reception.feed(keyed_frame(KEY, aborting, cause))
    assert reception.aborted and bytes(reception.finish()) == cause
    assert slot.next_version == 0  # its own frame never came
    # A forged ABORT refuses the slot it took the place of.
    slot = ReceiveSlot(spec, key=KEY)
    raises_exactly(Forged, slot.accept, keyed_frame(OTHER, aborting, cause))
    assert type(slot.refusal) is Forged and slot.next_version == 0
    # An unkeyed ABORT at a keyed slot is refused at its format byte.
    slot = ReceiveSlot(spec, key=KEY)
    plain = SendSlot(aborting).prepare(cause).join()
    raises_exactly(WrongFrame, slot.accept, plain)


def test_a_refused_keyed_slot_stays_forged() -> None:
    spec = make_spec(4)
    slot = ReceiveSlot(spec, key=KEY)
    raises_exactly(Forged, slot.accept, keyed_frame(OTHER, spec, b"abcd"))
    raises_exactly(Forged, slot.arm)
    assert slot.next_version == 0


@settings(max_examples=100)
@given(keys, keys, st.sampled_from(list(FrameKind)), st.binary(max_size=16))
def test_a_frame_keyed_for_one_edge_is_forged_at_a_slot_keyed_for_another(
    key: bytes, other: bytes, kind: FrameKind, payload: bytes
) -> None:
    if key == other or kind is FrameKind.ABORT:
        return  # an ABORT frame's payload is a cause; test_a_keyed_abort_... covers it
    spec = FrameSpec(IDENTITY, kind, 3, 4, 9, len(payload))
    frame = keyed_frame(key, spec, payload)
    assert bytes(ReceiveSlot(spec, key=key).accept(frame)) == payload
    slot = ReceiveSlot(spec, key=other)
    error = raises_exactly(Forged, slot.accept, frame)
    assert (error.role, error.peer, error.field) == (4, 3, "trailer")
    assert frame[-TRAILER_SIZE:].hex() == error.received
    assert keyed_seal(other, frame[:HEADER_SIZE], payload_digest(payload)).hex() not in str(
        error.expected
    )  # the MAC the slot wanted is never reported
    assert slot.next_version == 0 and slot.payload_digest is None


def test_the_docs_name_layout_3_and_forged() -> None:
    frames = (ROOT / "docs" / "frames.md").read_text()
    assert "## Layout 3: the keyed trailer\n" in frames and "not yet used" not in frames
    assert "| `Forged` |" in frames
    assert "`Forged`" in (ROOT / "docs" / "exit-codes.md").read_text()
