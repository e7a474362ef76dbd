"""Frame layout v1: a sans-IO codec that refuses every wrong byte.

Every message between participants is one frame: a fixed 132-byte header, the payload, and a
32-byte SHA-256 trailer over header and payload. The layout is documented field by field in
``docs/frames.md``; ``FIELDS`` below is its single source in code.

The receive side is derived, not parsed. A :class:`ReceiveSlot` is armed with everything its
scheduled transfer is: run identity, edge, slot, kind, extent and the next version. It builds
the header it expects and compares each header field as soon as that field's bytes are in,
before any payload byte is accepted. The payload lands in a buffer of the expected extent that
the slot allocated once (or that the caller lent it), is exposed only after the trailer checks,
and only then does the version advance. No length, address, allocation or route is ever taken
from peer bytes. Any refusal leaves the slot refused for good, with its counter unchanged.

No I/O happens here: the runtime asks a :class:`Reception` where the next bytes go
(:meth:`Reception.into`, capped at the current part of the frame so a read never runs into the
next frame), reads into that memory, and reports how many bytes arrived
(:meth:`Reception.advance`). On the sending side :meth:`SendSlot.prepare` returns the header,
a view of the caller's payload and the trailer, so the payload is never copied.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Final, NoReturn, final

from alpha.checked import int_in
from alpha.core.identity import (
    DIGEST_SIZE,
    IDENTITY_PART_SIZE,
    IDENTITY_PARTS,
    IDENTITY_SIZE,
    RunIdentity,
)
from alpha.core.membership import MAX_ROLE
from alpha.errors import (
    Corrupted,
    DoubleRearm,
    FrameIncomplete,
    FrameRefused,
    FrameSpecInvalid,
    IdentityMismatch,
    Replayed,
    SkippedVersion,
    TrailingBytes,
    Truncated,
    VersionOverflow,
    WrongEdge,
    WrongFrame,
)
from alpha.wire.abort import ABORT_EXTENT, ABORT_SLOT

if TYPE_CHECKING:
    # collections.abc.Buffer arrives in Python 3.12; the annotation is only for the checker.
    from typing_extensions import Buffer

__all__ = [
    "FIELDS",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_EXTENT",
    "MAX_ROLE",
    "MAX_SLOT",
    "MAX_VERSION",
    "TRAILER_SIZE",
    "Field",
    "FrameKind",
    "FrameSpec",
    "Outgoing",
    "ReceiveSlot",
    "Reception",
    "SendSlot",
    "Unsealed",
    "abort_spec",
    "field_at",
    "payload_digest",
    "seal",
]

MAGIC: Final = b"ALPF"
"""The first four bytes of every frame: a stranger speaking another protocol fails here."""

FORMAT_VERSION: Final = 2
"""The layout described in this module; a change of layout changes this byte. Version 2 binds
the trailer to the payload through the payload's own digest (:func:`seal`), so that a payload
sent on several edges is hashed once."""

TRAILER_SIZE: Final = DIGEST_SIZE
"""A SHA-256 digest, as is a payload digest (:func:`payload_digest`)."""

# Roles travel as unsigned 32-bit integers: the membership's MAX_ROLE (alpha.core.membership, the
# one home of the role limits).

MAX_SLOT: Final = 2**32 - 1
"""Slots (scheduled transfers of one edge) travel as unsigned 32-bit integers."""

MAX_VERSION: Final = 2**64 - 1
"""The version counter's maximum. Accepting version ``v`` moves the counter to ``v + 1``, so the
last version a slot can ever accept is ``MAX_VERSION - 1``; a slot whose counter stands at
``MAX_VERSION`` is spent and refuses with ``VersionOverflow`` rather than wrap."""

MAX_EXTENT: Final = 2**40
"""The largest payload one frame may carry (1 TiB). The field is 64 bits wide, but no region a
plan can describe comes near this, and a bound keeps a wrong plan from asking for an absurd
receive buffer."""


class FrameKind(IntEnum):
    """What a frame carries. The receiver expects exactly one kind per slot."""

    HELLO = 1
    """The first frame on a new connection: binds the connection to the run and the edge."""
    DATA = 2
    """A scheduled transfer of a region (a contribution, a combined value, parameters)."""
    CHOICE = 3
    """The canonical word of an agreed choice, relayed along its dissemination tree."""
    ABORT = 4
    """A run abort carrying its cause (``alpha.wire.abort``), sent on every edge a failed role can
    still write so that every peer stops at once. A receive of any other kind accepts an ABORT
    in its place (checked like any frame) and reports it instead of its own frame."""
    END = 5
    """Parent to child, after the parent's schedule: nothing more of the schedule follows."""
    DONE = 6
    """Child to parent: the child's whole subtree completed; the payload digests its reports."""
    COMMIT = 7
    """Parent to child: the run committed; the payload is the commit record's digest."""


@final
@dataclass(frozen=True, slots=True)
class Field:
    """One header field: where it lies, how wide it is, and what a wrong value means."""

    name: str
    offset: int
    width: int
    meaning: str

    @property
    def end(self) -> int:
        return self.offset + self.width


# The header, big-endian throughout. Fields are checked in this order as their bytes arrive.
_HEADER: Final = struct.Struct(">4sBBH96sIIIQQ")
FIELDS: Final[tuple[Field, ...]] = (
    Field("magic", 0, 4, "the bytes ALPF"),
    Field("format", 4, 1, "layout version, 1"),
    Field("kind", 5, 1, "FrameKind: 1 hello, 2 data, 3 choice, 4 abort, 5 end, 6 done, 7 commit"),
    Field("reserved", 6, 2, "zero"),
    Field("identity", 8, IDENTITY_SIZE, "run identity: learner, contract, membership digests"),
    Field("sender", 104, 4, "role of the sender"),
    Field("receiver", 108, 4, "role of the receiver"),
    Field("slot", 112, 4, "which scheduled transfer of this edge"),
    Field("version", 116, 8, "version counter of this slot"),
    Field("extent", 124, 8, "payload length in bytes"),
)
HEADER_SIZE: Final = _HEADER.size
"""132 bytes: the sum of ``FIELDS``' widths."""

assert FIELDS[-1].end == HEADER_SIZE, "FIELDS must tile the header exactly"


def field_at(offset: int) -> str:
    """The name of the frame part holding byte ``offset`` of a frame with any extent.

    Header offsets give the field's name; every later offset is ``"payload"`` or
    ``"trailer"``, which this function cannot tell apart without the extent, so it returns
    ``"body"`` for them.
    """
    for entry in FIELDS:
        if entry.offset <= offset < entry.end:
            return entry.name
    return "body"


def _check_width(name: str, value: int, maximum: int) -> None:
    if not int_in(value, 0, maximum):
        raise FrameSpecInvalid(f"{name} must be an int in 0..{maximum}, got {value!r}")


@final
@dataclass(frozen=True, slots=True)
class FrameSpec:
    """Everything one scheduled transfer is, on both of its ends.

    Raises:
        FrameSpecInvalid: a field is outside its width, the extent is past ``MAX_EXTENT``,
            or sender and receiver are the same role.
    """

    identity: RunIdentity
    kind: FrameKind
    sender: int
    receiver: int
    slot: int
    extent: int

    def __post_init__(self) -> None:
        if not isinstance(self.identity, RunIdentity):
            raise FrameSpecInvalid(f"identity must be a RunIdentity, got {self.identity!r}")
        if not isinstance(self.kind, FrameKind):
            raise FrameSpecInvalid(f"kind must be a FrameKind, got {self.kind!r}")
        _check_width("sender", self.sender, MAX_ROLE)
        _check_width("receiver", self.receiver, MAX_ROLE)
        _check_width("slot", self.slot, MAX_SLOT)
        _check_width("extent", self.extent, MAX_EXTENT)
        if self.sender == self.receiver:
            raise FrameSpecInvalid(
                f"a frame needs two roles; sender and receiver are both {self.sender}"
            )

    @property
    def frame_size(self) -> int:
        """Bytes on the wire for one frame of this spec: header, payload and trailer."""
        return HEADER_SIZE + self.extent + TRAILER_SIZE

    def header(self, version: int) -> bytes:
        """The exact header of this spec's frame at ``version``.

        Raises:
            FrameSpecInvalid: ``version`` is outside ``0..MAX_VERSION``.
        """
        _check_width("version", version, MAX_VERSION)
        return _HEADER.pack(
            MAGIC,
            FORMAT_VERSION,
            self.kind,
            0,
            self.identity.encode(),
            self.sender,
            self.receiver,
            self.slot,
            version,
            self.extent,
        )


def payload_digest(payload: Buffer) -> bytes:
    """SHA-256 of a payload's bytes: what the trailer binds (:func:`seal`)."""
    return hashlib.sha256(_byte_view(payload)).digest()


def seal(header: Buffer, digest: bytes) -> bytes:
    """The trailer of a frame with ``header`` whose payload has the digest ``digest``:
    SHA-256 over the header's 132 bytes followed by the payload digest's 32.

    A payload sent on several edges (each with its own header) is hashed once; each frame
    costs one more hash of 164 bytes. A forwarder that verified a payload already holds its
    digest. Any change of header or payload still changes the trailer, as long as SHA-256
    resists collisions.
    """
    if len(digest) != DIGEST_SIZE:
        raise FrameSpecInvalid(f"a payload digest has {DIGEST_SIZE} bytes, not {len(digest)}")
    state = hashlib.sha256(header)
    state.update(digest)
    return state.digest()


@final
@dataclass(frozen=True, slots=True)
class Outgoing:
    """One frame ready to send, in three pieces so the payload is never copied, and the
    payload's digest, to frame the same bytes again without hashing them."""

    header: bytes
    payload: memoryview
    trailer: bytes
    digest: bytes

    def pieces(self) -> tuple[bytes, memoryview, bytes]:
        return (self.header, self.payload, self.trailer)

    def join(self) -> bytes:
        """The whole frame as one bytes object (a copy: for tests and small frames)."""
        return b"".join(self.pieces())


@final
@dataclass(frozen=True, slots=True)
class Unsealed:
    """A frame whose header and payload may leave before its trailer is known: the payload's
    digest can be computed while they are sent (:meth:`SendSlot.begin`)."""

    header: bytes
    payload: memoryview

    def seal(self, digest: bytes) -> Outgoing:
        """The frame, with the trailer for a payload whose digest is ``digest``."""
        return Outgoing(self.header, self.payload, seal(self.header, digest), digest)


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    if not view.contiguous:
        raise FrameSpecInvalid("a payload must be one contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


@final
class SendSlot:
    """The sending end of one scheduled transfer: a spec and a version counter."""

    __slots__ = ("_next_version", "spec")

    def __init__(self, spec: FrameSpec, *, next_version: int = 0) -> None:
        """
        Raises:
            FrameSpecInvalid: ``next_version`` is outside ``0..MAX_VERSION``.
        """
        _check_width("next_version", next_version, MAX_VERSION)
        self.spec = spec
        self._next_version = next_version

    @property
    def next_version(self) -> int:
        return self._next_version

    def prepare(self, payload: Buffer, *, digest: bytes | None = None) -> Outgoing:
        """Frame ``payload`` at the next version, then advance the counter.

        Hashes the payload once, unless ``digest`` (its SHA-256, from an earlier frame of the
        same bytes) is given; the payload is referenced, not copied, so it must not change
        until the frame is sent.

        Raises:
            FrameSpecInvalid: the payload's length differs from the spec's extent.
            VersionOverflow: the counter stands at ``MAX_VERSION``; it never wraps.
        """
        unsealed = self.begin(payload)
        return unsealed.seal(payload_digest(unsealed.payload) if digest is None else digest)

    def begin(self, payload: Buffer) -> Unsealed:
        """The header of the next frame and a view of ``payload``, then advance the counter;
        the trailer follows from the payload's digest (:meth:`Unsealed.seal`).

        Raises:
            FrameSpecInvalid: the payload's length differs from the spec's extent.
            VersionOverflow: the counter stands at ``MAX_VERSION``; it never wraps.
        """
        spec = self.spec
        view = _byte_view(payload)
        if view.nbytes != spec.extent:
            raise FrameSpecInvalid(
                f"slot {spec.slot} on edge {spec.sender}->{spec.receiver} carries "
                f"{spec.extent} bytes, but the payload has {view.nbytes}"
            )
        version = self._next_version
        if version >= MAX_VERSION:
            raise VersionOverflow(
                f"the sending counter stands at its maximum {MAX_VERSION}",
                role=spec.sender,
                peer=spec.receiver,
                slot=spec.slot,
                version=version,
                field="version",
                expected=f"< {MAX_VERSION}",
                received=version,
                edge=(spec.sender, spec.receiver),
            )
        self._next_version = version + 1
        return Unsealed(spec.header(version), view)


# Reception phases: where the next byte of the frame goes.
_HEADER_PHASE: Final = 0
_BODY_PHASE: Final = 1
_TRAILER_PHASE: Final = 2
_HASHING: Final = 3  # every byte is in; payload bytes still being hashed (deferred)
_VERIFIED: Final = 4
_FINISHED: Final = 5
_REFUSED: Final = 6


@final
class ReceiveSlot:
    """The receiving end of one scheduled transfer.

    Holds the spec, the next version it will accept, a payload buffer of exactly the spec's
    extent (allocated once here, or lent by the caller, e.g. a numpy array's memory), and the
    slot's refusal once it has refused. A refused slot refuses everything after, with the same
    class, and its counter never moves again.
    """

    __slots__ = (
        "_armed",
        "_buffer",
        "_digest",
        "_header",
        "_next_version",
        "_refusal",
        "_trailer",
        "spec",
    )

    def __init__(
        self, spec: FrameSpec, *, next_version: int = 0, buffer: Buffer | None = None
    ) -> None:
        """
        Args:
            spec: the transfer this slot receives.
            next_version: the version of the first frame it accepts.
            buffer: writable memory of exactly ``spec.extent`` bytes to receive payloads into;
                allocated here when omitted.

        Raises:
            FrameSpecInvalid: ``next_version`` is out of range, or ``buffer`` is read-only,
                not contiguous, or not exactly ``spec.extent`` bytes.
        """
        _check_width("next_version", next_version, MAX_VERSION)
        if buffer is None:
            payload = memoryview(bytearray(spec.extent))
        else:
            payload = _byte_view(buffer)
            if payload.readonly:
                raise FrameSpecInvalid("a receive buffer must be writable")
            if payload.nbytes != spec.extent:
                raise FrameSpecInvalid(
                    f"slot {spec.slot} receives {spec.extent} bytes, "
                    f"but the lent buffer has {payload.nbytes}"
                )
        self.spec = spec
        self._next_version = next_version
        self._buffer = payload
        self._header = memoryview(bytearray(HEADER_SIZE))
        self._trailer = memoryview(bytearray(TRAILER_SIZE))
        self._armed: Reception | None = None
        self._refusal: FrameRefused | None = None
        self._digest: bytes | None = None

    @property
    def next_version(self) -> int:
        """The version of the next frame this slot will accept."""
        return self._next_version

    @property
    def payload_digest(self) -> bytes | None:
        """SHA-256 of the payload the last finished reception exposed (checked through its
        trailer), until the slot is armed again; None before."""
        return self._digest

    @property
    def refusal(self) -> FrameRefused | None:
        """The refusal that ended this slot, or None while it is usable."""
        return self._refusal

    @property
    def armed(self) -> bool:
        return self._armed is not None

    def arm(self, *, deferred: bool = False) -> Reception:
        """Expect the frame at :attr:`next_version`.

        The previous payload view (from :meth:`Reception.finish`) is overwritten by this
        reception: consume it before arming again. With ``deferred`` the reception does not
        hash payload bytes as they arrive: the caller hashes them (:meth:`Reception.unhashed`),
        for example in another thread while more arrive.

        Raises:
            DoubleRearm: the slot is already armed for that version.
            VersionOverflow: the counter stands at ``MAX_VERSION``.
            FrameRefused: the slot refused before; the same class is raised again.
        """
        self._raise_if_refused()
        if self._armed is not None:
            self._refuse(
                DoubleRearm,
                f"armed again for version {self._next_version}, which it already expects",
                "version",
                self._next_version,
                self._next_version,
            )
        if self._next_version >= MAX_VERSION:
            self._refuse(
                VersionOverflow,
                f"the counter stands at its maximum {MAX_VERSION}; it never wraps",
                "version",
                f"< {MAX_VERSION}",
                self._next_version,
            )
        self._digest = None
        self._armed = Reception(self, deferred=deferred)
        return self._armed

    def accept(self, data: Buffer) -> memoryview:
        """Receive one whole frame from ``data`` (arm, feed, check the end, finish).

        Verifies everything, then checks that nothing follows the frame, and only then
        advances the version: a frame followed by stray bytes leaves the counter unchanged.

        Returns:
            A read-only view of the payload in the slot's buffer.

        Raises:
            FrameRefused: the subclass for the first fault found (see :class:`Reception`);
                ``Truncated`` when ``data`` ends inside the frame; ``TrailingBytes`` when
                bytes follow it.
        """
        reception = self.arm()
        view = _byte_view(data)
        used = reception.feed(view)
        if not reception.verified:
            reception.eof()
        if used < view.nbytes:
            self.refuse_trailing(view.nbytes - used)
        return reception.finish()

    def refuse_trailing(self, count: int) -> NoReturn:
        """Refuse ``count`` bytes that arrived where the schedule has no frame.

        Raises:
            TrailingBytes: always; the slot is refused.
        """
        self._raise_if_refused()
        self._refuse(
            TrailingBytes,
            f"{count} byte(s) arrived after the frame, where the schedule has none",
            "end",
            0,
            count,
        )

    # --- refusal bookkeeping ----------------------------------------------------------------

    def _raise_if_refused(self) -> None:
        if self._refusal is not None:
            first = self._refusal
            raise first.recast(type(first), f"the slot is refused for good since: {first.detail}")

    def _refuse(
        self,
        cls: type[FrameRefused],
        detail: str,
        field: str,
        expected: object,
        received: object,
        parts: tuple[str, ...] = (),
    ) -> NoReturn:
        spec = self.spec
        refusal = cls(
            detail,
            role=spec.receiver,
            peer=spec.sender,
            slot=spec.slot,
            version=self._next_version,
            field=field,
            expected=expected,
            received=received,
        )
        if parts:
            refusal.parts = parts
        self._refusal = refusal
        if self._armed is not None:
            self._armed._phase = _REFUSED
            self._armed = None
        raise refusal


def abort_spec(identity: RunIdentity, sender: int, receiver: int) -> FrameSpec:
    """The ABORT frame from ``sender`` to ``receiver``: fixed slot, version 0, fixed extent."""
    return FrameSpec(identity, FrameKind.ABORT, sender, receiver, ABORT_SLOT, ABORT_EXTENT)


def _fields_completed(before: int, after: int) -> tuple[Field, ...]:
    return tuple(entry for entry in FIELDS if before < entry.end <= after)


@final
class Reception:
    """One frame arriving into its :class:`ReceiveSlot`.

    Drive it with :meth:`into` and :meth:`advance` (zero-copy reads), or :meth:`feed`
    (copies from bytes already in memory); call :meth:`eof` when the stream ends and
    :meth:`finish` once :attr:`verified`. A deferred reception (``ReceiveSlot.arm(deferred=
    True)``) leaves the payload's hashing to the caller: :meth:`unhashed` gives the next
    received bytes not yet hashed, :meth:`hash` hashes them (it touches nothing else, so it
    may run in another thread while more bytes arrive), and :meth:`hashed` records them; the
    trailer is checked once every byte is in and hashed.

    Header fields are checked in layout order, each as soon as its last byte is in:
    magic, format, kind and reserved bytes (``WrongFrame``), identity (``IdentityMismatch``),
    sender, receiver and slot (``WrongEdge``), version (``Replayed`` below the expected one,
    ``SkippedVersion`` above it), extent (``Truncated`` below the spec's extent,
    ``TrailingBytes`` above it). Payload and trailer are checked by the SHA-256 trailer
    (``Corrupted``).
    """

    __slots__ = (
        "_deferred",
        "_expected",
        "_hash",
        "_hashed",
        "_offered",
        "_origin",
        "_phase",
        "_position",
        "_slot",
    )

    def __init__(self, slot: ReceiveSlot, *, deferred: bool = False) -> None:
        self._slot = slot
        self._origin: ReceiveSlot | None = None  # the slot armed, once an ABORT took its place
        self._expected = slot.spec.header(slot.next_version)
        self._phase = _HEADER_PHASE
        self._position = 0  # bytes of this frame received so far
        self._offered = 0  # length of the view last handed out by into()
        self._hash = hashlib.sha256()  # over the payload only (layout 2)
        self._hashed = 0  # payload bytes hashed so far
        self._deferred = deferred

    @property
    def verified(self) -> bool:
        """True once the whole frame is in and its trailer checked."""
        return self._phase == _VERIFIED

    @property
    def aborted(self) -> bool:
        """True once the frame's kind said ABORT where another kind was expected: from then on
        the reception checks an ABORT frame (``abort_spec``), and :meth:`finish` returns its
        payload, the cause, while the armed slot's version stays where it was."""
        return self._origin is not None

    @property
    def received(self) -> int:
        """Bytes of this frame received so far."""
        return self._position

    @property
    def remaining(self) -> int:
        """Bytes of this frame still to come."""
        return self._slot.spec.frame_size - self._position

    def unhashed(self, limit: int) -> memoryview:
        """Up to ``limit`` payload bytes received but not hashed yet, in order (deferred
        receptions; empty when none are waiting)."""
        start = self._hashed
        end = start + min(self._waiting(), max(0, limit))
        return self._slot._buffer[start:end]

    def _waiting(self) -> int:
        """Payload bytes received and not hashed yet."""
        received = min(max(0, self._position - HEADER_SIZE), self._slot.spec.extent)
        return received - self._hashed

    def hash(self, piece: memoryview) -> None:
        """Hash ``piece``, the view :meth:`unhashed` returned last; touches nothing but the
        hash state, so it may run in a worker thread while bytes arrive (hashlib releases the
        GIL for large pieces). Call :meth:`hashed` after it, from the driving thread."""
        self._hash.update(piece)

    def hashed(self, count: int) -> None:
        """Record that the ``count`` bytes :meth:`unhashed` gave were hashed; once the whole
        frame is in and hashed, check the trailer.

        Raises:
            FrameIncomplete: more bytes than were waiting.
            Corrupted: the trailer does not match; the slot is refused.
        """
        self._live()
        if not 0 <= count <= self._waiting():
            raise FrameIncomplete(f"hashed({count}) with {self._waiting()} byte(s) waiting")
        self._hashed += count
        if self._phase == _HASHING and self._hashed == self._slot.spec.extent:
            try:
                self._check_trailer()
            except FrameRefused as refusal:
                self._refuse_origin(refusal)
                raise

    def into(self) -> memoryview:
        """The memory the next bytes of this frame go into.

        Capped at the end of the current part (header, payload or trailer), so a read into it
        never takes bytes of whatever follows. Empty once the frame is complete.

        Raises:
            FrameRefused: the slot refused; the same class again.
        """
        self._live()
        slot = self._slot
        position = self._position
        if self._phase == _HEADER_PHASE:
            view = slot._header[position:]
        elif self._phase == _BODY_PHASE:
            view = slot._buffer[position - HEADER_SIZE :]
        elif self._phase == _TRAILER_PHASE:
            view = slot._trailer[position - HEADER_SIZE - slot.spec.extent :]
        else:
            view = slot._trailer[:0]
        self._offered = len(view)
        return view

    def into_rest(self) -> list[memoryview]:
        """The memory for the rest of the current part and every part after it, in order: one
        scatter read (``recvmsg_into``) can fill payload and trailer at once. While the header
        is incomplete, only the header's rest: its fields are checked before any payload byte
        is read. Capped at the end of the frame; empty once it is complete.

        Raises:
            FrameRefused: the slot refused; the same class again.
        """
        first = self.into()
        views = [first] if len(first) else []
        if self._phase == _BODY_PHASE:
            views.append(self._slot._trailer)
            self._offered += TRAILER_SIZE
        return views

    def advance(self, count: int) -> None:
        """Record that ``count`` bytes were written into the memory :meth:`into` or
        :meth:`into_rest` returned, in order.

        Checks every header field those bytes completed, hashes payload bytes, and checks the
        trailer once it is whole.

        Raises:
            FrameIncomplete: ``count`` is negative or more than the memory offered.
            FrameRefused: the subclass named in the class docstring; the slot is refused.
        """
        self._live()
        if not 0 <= count <= self._offered:
            raise FrameIncomplete(f"advance({count}) after into() offered {self._offered} bytes")
        self._offered = 0
        try:
            while count:
                step = min(count, self._part_end() - self._position)
                self._advance(step)
                count -= step
        except FrameRefused as refusal:
            self._refuse_origin(refusal)
            raise

    def _part_end(self) -> int:
        """Where the current part (header, payload or trailer) of the frame ends."""
        if self._phase == _HEADER_PHASE:
            return HEADER_SIZE
        spec = self._slot.spec
        return HEADER_SIZE + spec.extent if self._phase == _BODY_PHASE else spec.frame_size

    def _advance(self, count: int) -> None:
        before = self._position
        after = before + count
        self._position = after
        if self._phase == _HEADER_PHASE:
            for entry in _fields_completed(before, after):
                self._check_field(entry)
            # Read after the checks: an ABORT in place of the frame changes the slot.
            slot = self._slot
            spec = slot.spec
            if after == HEADER_SIZE:
                self._phase = _BODY_PHASE if spec.extent else _TRAILER_PHASE
            return
        slot = self._slot
        spec = slot.spec
        if self._phase == _BODY_PHASE:
            if not self._deferred:
                self._hash.update(slot._buffer[before - HEADER_SIZE : after - HEADER_SIZE])
                self._hashed = after - HEADER_SIZE
            if after == HEADER_SIZE + spec.extent:
                self._phase = _TRAILER_PHASE
        elif after == spec.frame_size:
            if self._hashed < spec.extent:
                self._phase = _HASHING
            else:
                self._check_trailer()

    def _check_trailer(self) -> None:
        slot = self._slot
        digest = self._hash.digest()
        received = bytes(slot._trailer)
        expected = seal(slot._header, digest)
        if received != expected:
            slot._refuse(
                Corrupted,
                "the SHA-256 trailer does not match the header and payload received",
                "trailer",
                expected.hex(),
                received.hex(),
            )
        slot._digest = digest
        self._phase = _VERIFIED

    def feed(self, data: Buffer) -> int:
        """Copy bytes from ``data`` into the frame; return how many were used.

        Stops at the end of the frame: the rest of ``data`` belongs to whatever follows.

        Raises:
            FrameRefused: as :meth:`advance`.
        """
        source = _byte_view(data)
        used = 0
        while used < source.nbytes:
            target = self.into()
            if not target:
                break
            take = min(len(target), source.nbytes - used)
            target[:take] = source[used : used + take]
            self.advance(take)
            used += take
        return used

    def eof(self) -> None:
        """The stream ended. Nothing happens after a verified frame.

        Raises:
            Truncated: the frame is not complete.
        """
        self._live()
        try:
            self._eof()
        except FrameRefused as refusal:
            self._refuse_origin(refusal)
            raise

    def _eof(self) -> None:
        if self._phase not in (_VERIFIED, _HASHING):
            spec = self._slot.spec
            self._slot._refuse(
                Truncated,
                f"the stream ended after {self._position} of the frame's {spec.frame_size} bytes",
                field_at(self._position) if self._position < HEADER_SIZE else "body",
                spec.frame_size,
                self._position,
            )

    def finish(self) -> memoryview:
        """Advance the slot's version and expose the payload.

        Returns:
            A read-only view of the payload, valid until the slot is armed again.

        Raises:
            FrameIncomplete: the frame is not verified yet, or was finished already.
        """
        if self._phase != _VERIFIED:
            raise FrameIncomplete("a frame's payload is exposed only after its trailer checks")
        slot = self._slot
        self._phase = _FINISHED
        slot._armed = None
        slot._next_version += 1
        if self._origin is not None:
            self._origin._armed = None  # its version stays: its own frame never came
        return slot._buffer.toreadonly()

    # --- checks -----------------------------------------------------------------------------

    def _live(self) -> None:
        if self._phase == _REFUSED:
            if self._origin is not None:
                self._origin._raise_if_refused()
            self._slot._raise_if_refused()
        if self._phase == _FINISHED:
            raise FrameIncomplete("this reception already finished; arm the slot again")

    def _refuse_origin(self, refusal: FrameRefused) -> None:
        """A refused ABORT frame refuses the slot it took the place of too: the edge is
        broken for good. A slot refused already keeps its first refusal."""
        origin = self._origin
        if origin is not None and origin._refusal is None:
            origin._refusal = refusal
            origin._armed = None

    def _take_abort(self) -> None:
        """The kind byte says ABORT where another kind is due: check an ABORT frame instead."""
        origin = self._slot
        spec = origin.spec
        alternate = ReceiveSlot(abort_spec(spec.identity, spec.sender, spec.receiver))
        alternate._header[: self._position] = origin._header[: self._position]
        alternate._armed = self  # the armed slot stays armed with this reception until it ends
        self._origin = origin
        self._slot = alternate
        self._expected = alternate.spec.header(alternate.next_version)

    def _check_field(self, entry: Field) -> None:
        slot = self._slot
        got = bytes(slot._header[entry.offset : entry.end])
        want = self._expected[entry.offset : entry.end]
        if got == want:
            return
        name = entry.name
        if name == "kind" and got == bytes([FrameKind.ABORT]) and self._origin is None:
            self._take_abort()
            return
        if name in ("magic", "format", "kind", "reserved"):
            slot._refuse(WrongFrame, f"the {name} field differs", name, want.hex(), got.hex())
        if name == "identity":
            parts = tuple(
                part
                for index, part in enumerate(IDENTITY_PARTS)
                if got[index * IDENTITY_PART_SIZE : (index + 1) * IDENTITY_PART_SIZE]
                != want[index * IDENTITY_PART_SIZE : (index + 1) * IDENTITY_PART_SIZE]
            )
            slot._refuse(
                IdentityMismatch,
                f"the run identity differs in {', '.join(parts)}",
                name,
                want.hex(),
                got.hex(),
                parts,
            )
        expected_value = int.from_bytes(want, "big")
        received_value = int.from_bytes(got, "big")
        if name in ("sender", "receiver", "slot"):
            slot._refuse(
                WrongEdge,
                f"the frame names {name} {received_value}, this receive expects {expected_value}",
                name,
                expected_value,
                received_value,
            )
        if name == "version":
            cls: type[FrameRefused] = (
                Replayed if received_value < expected_value else SkippedVersion
            )
            slot._refuse(
                cls,
                f"the frame has version {received_value}, this slot expects {expected_value}",
                name,
                expected_value,
                received_value,
            )
        # The extent: never used to size anything, only compared.
        cls = Truncated if received_value < expected_value else TrailingBytes
        slot._refuse(
            cls,
            f"the frame declares {received_value} payload bytes, this slot takes {expected_value}",
            name,
            expected_value,
            received_value,
        )
