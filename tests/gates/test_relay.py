"""The relay's attacker fault (harness/relay.py ``rehash``): a frame changed and its trailer
recomputed without the edge's key. On layout 2 the rewrite passes the receiver's every check,
so the relay is a real attacker; on layout 3 the same rewrite is refused as ``Forged``, under
the SHA-256 seal or an HMAC under the relay's own key, and the slot's counter does not move.

And the relay's framing of an edge that shares memory (``wire_extent``): a DATA frame of
``SHARED_MIN`` bytes or more is its doorbell on TCP, header and trailer; every other frame
is whole, and nothing is a doorbell unless the scenario says the edge shares memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.errors import Forged
from alpha.runtime import SHARED_MIN
from alpha.wire import (
    HEADER_SIZE,
    KEY_SIZE,
    FrameKind,
    FrameSpec,
    ReceiveSlot,
    SendSlot,
    abort_spec,
    control_spec,
    encode_cause,
)
from alpha.wire.abort import AbortCause
from harness.relay import Fault, as_commit, rehashed, wire_extent
from tests.support import IDENTITY, raises_exactly

KEY = bytes(range(100, 100 + KEY_SIZE))  # the edge's key, 1 -> 0
OWN = bytes(KEY_SIZE)  # a key of the relay's own
EXTENT = 16
SPEC = FrameSpec(IDENTITY, FrameKind.DATA, sender=1, receiver=0, slot=3, extent=EXTENT)
PAYLOAD = bytes(range(EXTENT))


def _frame(key: bytes | None) -> bytes:
    return SendSlot(SPEC, key=key).prepare(PAYLOAD).join()


def _flip(offset: int, mask: bytes, key: bytes | None = None) -> Fault:
    return Fault("rehash", "up", 1, data=mask, offset=offset, key=key)


def test_a_rehashed_layout_2_payload_is_accepted_as_the_senders() -> None:
    # The attack of issue 25: one low bit of the payload changed, the trailer recomputed.
    frame = rehashed(_frame(None), _flip(HEADER_SIZE + EXTENT - 1, b"\x01"))
    assert frame[:HEADER_SIZE] == _frame(None)[:HEADER_SIZE]
    slot = ReceiveSlot(SPEC)
    payload = bytes(slot.accept(frame))
    assert payload == PAYLOAD[:-1] + bytes([PAYLOAD[-1] ^ 1])
    assert slot.next_version == 1


@pytest.mark.parametrize("own", [None, OWN], ids=["sha256-seal", "own-key-hmac"])
def test_the_same_rehash_of_a_keyed_frame_is_forged(own: bytes | None) -> None:
    frame = rehashed(_frame(KEY), _flip(HEADER_SIZE + EXTENT - 1, b"\x01", own))
    assert frame[4] == 3  # still layout 3: only the MAC can tell
    slot = ReceiveSlot(SPEC, key=KEY)
    refused = raises_exactly(Forged, slot.accept, frame)
    assert refused.field == "trailer" and (refused.role, refused.peer) == (0, 1)
    assert slot.next_version == 0


def test_an_unchanged_keyed_frame_rehashed_under_the_edges_key_is_accepted() -> None:
    # The rehash is a faithful reseal: under the edge's own key nothing is refused.
    frame = rehashed(_frame(KEY), _flip(HEADER_SIZE, b"\x00", KEY))
    assert frame == _frame(KEY)
    assert bytes(ReceiveSlot(SPEC, key=KEY).accept(frame)) == PAYLOAD


@given(
    at=st.integers(0, EXTENT - 1),
    mask=st.integers(1, 255),
    own=st.one_of(st.none(), st.binary(min_size=KEY_SIZE, max_size=KEY_SIZE)),
)
def test_every_rehashed_payload_byte_passes_layout_2_and_is_forged_on_layout_3(
    at: int, mask: int, own: bytes | None
) -> None:
    offset = HEADER_SIZE + at
    unkeyed = ReceiveSlot(SPEC)
    changed = bytes(unkeyed.accept(rehashed(_frame(None), _flip(offset, bytes([mask])))))
    assert changed != PAYLOAD and changed[at] == PAYLOAD[at] ^ mask
    keyed = ReceiveSlot(SPEC, key=KEY)
    if own == KEY:
        return  # the edge's own key is no attacker's
    raises_exactly(Forged, keyed.accept, rehashed(_frame(KEY), _flip(offset, bytes([mask]), own)))
    assert keyed.next_version == 0


def test_a_rehash_never_reaches_into_the_trailer() -> None:
    with pytest.raises(ValueError):
        rehashed(_frame(None), _flip(-1, b"\x01"))


def _abort(key: bytes | None) -> bytes:
    cause = AbortCause(origin=0, cause="Forged", edge=(0, 1), round=None, detail="a detail")
    return SendSlot(abort_spec(IDENTITY, 0, 1), key=key).prepare(encode_cause(cause)).join()


def test_an_abort_rewritten_into_a_commit_passes_layout_2() -> None:
    # Role 0's ABORT where the child waits for COMMIT, rewritten into a COMMIT and rehashed:
    # on layout 2 the child takes it for the commit (and would publish its report).
    digest = b"\x5a" * 32
    fault = Fault("rehash", "down", FrameKind.ABORT, rewrite=as_commit(digest))
    forged = rehashed(_abort(None), fault)
    commit = ReceiveSlot(control_spec(IDENTITY, FrameKind.COMMIT, 0, 1))
    assert bytes(commit.accept(forged)) == digest


@pytest.mark.parametrize("own", [None, OWN], ids=["sha256-seal", "own-key-hmac"])
def test_an_abort_rewritten_into_a_commit_is_forged_on_layout_3(own: bytes | None) -> None:
    rewrite = as_commit(b"\x5a" * 32)
    fault = Fault("rehash", "down", FrameKind.ABORT, rewrite=rewrite, key=own)
    forged = rehashed(_abort(KEY), fault)
    commit = ReceiveSlot(control_spec(IDENTITY, FrameKind.COMMIT, 0, 1), key=KEY)
    raises_exactly(Forged, commit.accept, forged)
    assert commit.next_version == 0


def test_as_commit_takes_a_commits_extent_only() -> None:
    with pytest.raises(ValueError):
        as_commit(b"\x00" * 31)


def _header(kind: FrameKind, extent: int) -> bytes:
    spec = FrameSpec(IDENTITY, kind, sender=1, receiver=0, slot=3, extent=extent)
    return SendSlot(spec, key=KEY).prepare(bytes(extent)).header


@pytest.mark.parametrize("extent", [SHARED_MIN, SHARED_MIN + 1, 4 * SHARED_MIN])
def test_a_large_data_frame_of_a_shared_edge_is_a_doorbell(extent: int) -> None:
    header = _header(FrameKind.DATA, extent)
    assert wire_extent(header, shared=True) == 0  # its payload is in the region
    assert wire_extent(header, shared=False) == extent


def test_a_small_data_frame_or_another_kind_stays_whole_on_a_shared_edge() -> None:
    assert wire_extent(_header(FrameKind.DATA, SHARED_MIN - 1), shared=True) == SHARED_MIN - 1
    assert wire_extent(_header(FrameKind.CHOICE, SHARED_MIN), shared=True) == SHARED_MIN
