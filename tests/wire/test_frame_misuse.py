"""A peer's fault is never this program's own misuse, and the other way round (docs/frames.md).

``alpha.errors`` splits ``FrameError`` as h11 splits its protocol errors: ``FrameRefused`` is
what a peer's bytes break, ``FrameMisuse`` what this participant's own program gets wrong.
Each misuse is driven here through the codec and each peer fault through mutated bytes, and
the class raised must be in its family and not in the other. The exit code stays the run's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import alpha.errors as errors
from alpha.errors import (
    AbortInvalid,
    Corrupted,
    DoubleRearm,
    Forged,
    FrameError,
    FrameIncomplete,
    FrameMisuse,
    FrameRefused,
    FrameSpecInvalid,
    IdentityMismatch,
    Replayed,
    RunFailed,
    SkippedVersion,
    SlotFault,
    TrailingBytes,
    Truncated,
    VersionOverflow,
    WrongEdge,
    WrongFrame,
)
from alpha.exitcodes import EXIT_FAILURE
from alpha.runtime.session import _abort_cause
from alpha.runtime.whereabouts import Whereabouts
from alpha.wire.frame import FIELDS, MAX_VERSION, FrameKind, FrameSpec
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, raises_exactly

LOCAL = (FrameSpecInvalid, FrameIncomplete, DoubleRearm, VersionOverflow)
"""Every misuse of the codec by this program: the issue's list (DoubleRearm, a send-side
overflow, FrameSpecInvalid) and the reception driven out of order."""

PEER = (
    WrongFrame,
    WrongEdge,
    IdentityMismatch,
    Replayed,
    SkippedVersion,
    Corrupted,
    Forged,
    Truncated,
    AbortInvalid,
    TrailingBytes,
)
"""Every refusal of a peer's bytes."""


def _spec(extent: int = 4) -> FrameSpec:
    return FrameSpec(IDENTITY, FrameKind.DATA, 1, 2, 5, extent)


def _frame(spec: FrameSpec, payload: bytes, version: int = 0) -> bytes:
    return SendSlot(spec, next_version=version).prepare(payload).join()


def _error_classes() -> list[type[FrameError]]:
    return [
        each
        for each in vars(errors).values()
        if isinstance(each, type)
        and issubclass(each, FrameError)
        and each.__module__ == errors.__name__
    ]


# --- the families ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", LOCAL, ids=lambda cls: cls.__name__)
def test_a_local_misuse_is_no_peer_fault(cls: type[FrameError]) -> None:
    assert issubclass(cls, FrameMisuse)
    assert not issubclass(cls, FrameRefused)
    assert cls.exit_code == RunFailed.exit_code == EXIT_FAILURE


@pytest.mark.parametrize("cls", PEER, ids=lambda cls: cls.__name__)
def test_a_peer_fault_is_no_local_misuse(cls: type[FrameError]) -> None:
    assert issubclass(cls, FrameRefused)
    assert not issubclass(cls, FrameMisuse)
    assert cls.exit_code == EXIT_FAILURE


def test_every_frame_error_is_in_exactly_one_of_the_two_families() -> None:
    leaves = {each for each in _error_classes() if each not in (FrameError, SlotFault, FrameMisuse)}
    leaves.discard(FrameRefused)
    assert leaves == set(LOCAL) | set(PEER)
    for each in leaves:
        assert issubclass(each, FrameMisuse) != issubclass(each, FrameRefused), each


def test_the_misuses_at_a_slot_carry_the_slot_fields() -> None:
    # DoubleRearm and VersionOverflow name their edge, slot and version as a refusal does;
    # the other two concern a spec or a reception, not a slot's counter.
    assert issubclass(DoubleRearm, SlotFault) and issubclass(VersionOverflow, SlotFault)
    assert not issubclass(FrameSpecInvalid, SlotFault)
    assert not issubclass(FrameIncomplete, SlotFault)
    assert issubclass(FrameSpecInvalid, ValueError) and issubclass(FrameIncomplete, RuntimeError)


# --- each misuse, driven through the codec --------------------------------------------------


def _arm_twice() -> None:
    slot = ReceiveSlot(_spec())
    slot.arm()
    slot.arm()


def _send_spent() -> None:
    SendSlot(_spec(), next_version=MAX_VERSION).prepare(b"abcd")


def _arm_spent() -> None:
    ReceiveSlot(_spec(), next_version=MAX_VERSION).arm()


def _send_wrong_length() -> None:
    SendSlot(_spec()).prepare(b"abc")


def _finish_early() -> None:
    ReceiveSlot(_spec()).arm().finish()


def _lend_read_only() -> None:
    ReceiveSlot(_spec(), buffer=bytes(4))


MISUSES: dict[str, tuple[Callable[[], None], type[FrameMisuse]]] = {
    "arm-twice": (_arm_twice, DoubleRearm),
    "send-side-overflow": (_send_spent, VersionOverflow),
    "receive-side-overflow": (_arm_spent, VersionOverflow),
    "payload-not-the-extent": (_send_wrong_length, FrameSpecInvalid),
    "finish-before-verified": (_finish_early, FrameIncomplete),
    "read-only-buffer": (_lend_read_only, FrameSpecInvalid),
}


@pytest.mark.parametrize("name", MISUSES)
def test_each_misuse_raises_its_local_class(name: str) -> None:
    call, cls = MISUSES[name]
    error = raises_exactly(cls, call)
    assert isinstance(error, FrameMisuse) and not isinstance(error, FrameRefused)


def test_a_slot_armed_twice_stays_refused_with_the_misuse() -> None:
    spec = _spec()
    slot = ReceiveSlot(spec)
    slot.arm()
    raises_exactly(DoubleRearm, slot.arm)
    assert type(slot.refusal) is DoubleRearm and slot.next_version == 0
    # The peer's frame, sound in every byte, finds the slot refused by this program's misuse.
    error = raises_exactly(DoubleRearm, slot.accept, _frame(spec, b"abcd"))
    assert not isinstance(error, FrameRefused)
    assert slot.next_version == 0


# --- each peer fault, from a peer's bytes ---------------------------------------------------


def _offset(name: str) -> int:
    return next(entry.offset for entry in FIELDS if entry.name == name)


def _flip(data: bytes, offset: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 0x01
    return bytes(damaged)


PEER_FAULTS: dict[str, tuple[Callable[[bytes], bytes], type[FrameRefused]]] = {
    "magic": (lambda d: _flip(d, _offset("magic")), WrongFrame),
    "identity": (lambda d: _flip(d, _offset("identity")), IdentityMismatch),
    "sender": (lambda d: _flip(d, _offset("sender") + 3), WrongEdge),
    "version-ahead": (lambda d: _flip(d, _offset("version") + 7), SkippedVersion),
    "payload": (lambda d: _flip(d, len(d) - 33), Corrupted),
    "cut": (lambda d: d[:-1], Truncated),
    "stray-byte": (lambda d: d + b"\0", TrailingBytes),
}


@pytest.mark.parametrize("name", PEER_FAULTS)
def test_each_peer_fault_raises_its_refusal_class(name: str) -> None:
    mutate, cls = PEER_FAULTS[name]
    spec = _spec()
    slot = ReceiveSlot(spec)
    error = raises_exactly(cls, slot.accept, mutate(_frame(spec, b"abcd")))
    assert isinstance(error, FrameRefused) and not isinstance(error, FrameMisuse)
    assert slot.next_version == 0


def test_a_replayed_frame_is_a_peer_fault() -> None:
    spec = _spec()
    slot = ReceiveSlot(spec, next_version=1)
    error = raises_exactly(Replayed, slot.accept, _frame(spec, b"abcd", version=0))
    assert not isinstance(error, FrameMisuse)


# --- what a failing role tells its peers ----------------------------------------------------


@pytest.mark.parametrize("make", [_arm_twice, _arm_spent], ids=["double-rearm", "overflow"])
def test_a_slot_misuse_names_its_edge_in_the_abort_cause(make: Callable[[], None]) -> None:
    # The receive slot's edge is (sender 1, receiver 2), as a refusal's is: the role reporting
    # it is the receiver, and the cause names the edge the slot belongs to.
    with pytest.raises(SlotFault) as caught:
        make()
    cause = _abort_cause(caught.value, Whereabouts(role=2, peer=None))
    assert cause.edge == (1, 2) and cause.cause == type(caught.value).__name__


def test_a_send_side_overflow_names_its_edge_sender_first() -> None:
    with pytest.raises(VersionOverflow) as caught:
        _send_spent()
    assert caught.value.edge == (1, 2) and caught.value.role == 1 and caught.value.peer == 2
    cause = _abort_cause(caught.value, Whereabouts(role=1, peer=None))
    assert cause.edge == (1, 2)


def test_a_lent_buffer_is_written_in_place() -> None:
    # The receive side's buffer check refuses only the misuse: a writable buffer is used.
    spec = _spec()
    memory = np.zeros(4, dtype=np.uint8)
    slot = ReceiveSlot(spec, buffer=memory)
    slot.accept(_frame(spec, b"abcd"))
    assert bytes(memory) == b"abcd"
