"""The receiving side of a frame: derived, not parsed, and every wrong byte refused.

A :class:`ReceiveSlot` is armed with everything its scheduled transfer is: run identity, edge,
slot, kind, extent and the next version. It builds the header it expects and compares each
header field as soon as that field's bytes are in, before any payload byte is accepted. The
payload lands in a buffer of the expected extent that the slot allocated once (or that the
caller lent it), is exposed only after the trailer checks, and only then does the version
advance. No length, address, allocation or route is ever taken from peer bytes. Any refusal
leaves the slot refused for good, with its counter unchanged.

No I/O happens here: the runtime asks a :class:`Reception` where the next bytes go
(:meth:`Reception.into`, capped at the current part of the frame so a read never runs into the
next frame), reads into that memory, and reports how many bytes arrived
(:meth:`Reception.advance`). What a peer's bytes break is a ``FrameRefused``; what this
program's own schedule gets wrong (arming a slot twice, a spent counter, a reception driven
out of order) is a ``FrameMisuse`` (``alpha.errors``). The layout is :mod:`alpha.wire.frame`.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Final, NoReturn, final

from alpha.core.identity import IDENTITY_PART_SIZE, IDENTITY_PARTS
from alpha.errors import (
    Corrupted,
    DoubleRearm,
    Forged,
    FrameIncomplete,
    FrameRefused,
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
    MAX_VERSION,
    TRAILER_SIZE,
    Field,
    FrameKind,
    FrameSpec,
    _byte_view,
    _check_width,
    abort_spec,
    field_at,
    seal,
    sealing_of,
)

if TYPE_CHECKING:
    # collections.abc.Buffer arrives in Python 3.12; the annotation is only for the checker.
    from typing_extensions import Buffer

__all__ = ["ReceiveSlot", "Reception"]


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
        "sealing",
        "spec",
    )

    def __init__(
        self,
        spec: FrameSpec,
        *,
        next_version: int = 0,
        buffer: Buffer | None = None,
        key: bytes | None = None,
        digest: str = "sha256",
    ) -> None:
        """
        Args:
            spec: the transfer this slot receives.
            next_version: the version of the first frame it accepts.
            buffer: writable memory of exactly ``spec.extent`` bytes to receive payloads into;
                allocated here when omitted.
            key: the key of the slot's edge and direction (``KEY_SIZE`` bytes): the slot then
                accepts keyed frames only (layout 3, ``alpha.wire.frame.keyed_seal``) and
                refuses a trailer that is not their HMAC as ``Forged``. None (a plan with
                ``[contract] integrity = "sha256"``) accepts layout 2 only.
            digest: the payload digest ``D`` the trailers bind (``PAYLOAD_DIGESTS``).

        Raises:
            FrameSpecInvalid: ``next_version`` is out of range, ``buffer`` is read-only,
                not contiguous, or not exactly ``spec.extent`` bytes, ``key`` is not
                ``KEY_SIZE`` bytes, or ``digest`` is not a payload digest.
        """
        self.sealing = sealing_of(key, digest)
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
        self._refusal: SlotFault | None = None
        self._digest: bytes | None = None

    @property
    def keyed(self) -> bool:
        """True when the slot accepts keyed frames (layout 3) only."""
        return self.sealing.key is not None

    def expected_header(self, version: int) -> bytes:
        """The exact header this slot accepts at ``version``, its layout's format byte
        included: what a reader compares bytes it holds to (the abort watch's read-ahead).

        Raises:
            FrameSpecInvalid: ``version`` is outside ``0..MAX_VERSION``.
        """
        return self.spec.header(version, layout=self.sealing.layout)

    @property
    def next_version(self) -> int:
        """The version of the next frame this slot will accept."""
        return self._next_version

    @property
    def payload_digest(self) -> bytes | None:
        """The digest ``D`` of the payload the last finished reception exposed (checked
        through its trailer), until the slot is armed again; None before."""
        return self._digest

    @property
    def refusal(self) -> SlotFault | None:
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
            SlotFault: the slot refused before (a FrameRefused or a misuse); the same class again.
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
        cls: type[SlotFault],
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
    (``Corrupted``), or, in a keyed slot, by the keyed trailer (``Forged``).
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
        self._expected = slot.expected_header(slot.next_version)
        self._phase = _HEADER_PHASE
        self._position = 0  # bytes of this frame received so far
        self._offered = 0  # length of the view last handed out by into()
        self._hash = slot.sealing.hash()  # D, over the payload only
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
        hash state, so it may run in a worker thread while bytes arrive (hashlib and blake3
        release the GIL for large pieces). Call :meth:`hashed` after it, from the driving thread."""
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
            except SlotFault as refusal:
                self._refuse_origin(refusal)
                raise

    def into(self) -> memoryview:
        """The memory the next bytes of this frame go into.

        Capped at the end of the current part (header, payload or trailer), so a read into it
        never takes bytes of whatever follows. Empty once the frame is complete.

        Raises:
            SlotFault: the slot refused (a FrameRefused or a misuse); the same class again.
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
            SlotFault: the slot refused (a FrameRefused or a misuse); the same class again.
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
        except SlotFault as refusal:
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
            # A whole header equal to the expected one, byte for byte, has no field to refuse:
            # the field-by-field checks (which name the first field that differs) are skipped.
            if after != HEADER_SIZE or self._slot._header != self._expected:
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
        sealing = slot.sealing
        if sealing.key is not None:
            # Keyed (layout 3): constant-time comparison; the expected MAC is never reported.
            if not hmac.compare_digest(sealing.trailer(slot._header, digest), received):
                slot._refuse(
                    Forged,
                    "the keyed trailer does not match the header and payload under this edge's key",
                    "trailer",
                    "an HMAC-SHA256 under this edge's key",
                    received.hex(),
                )
            slot._digest = digest
            self._phase = _VERIFIED
            return
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
        except SlotFault as refusal:
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

    def _refuse_origin(self, refusal: SlotFault) -> None:
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
        sealing = origin.sealing
        alternate = ReceiveSlot(
            abort_spec(spec.identity, spec.sender, spec.receiver),
            key=sealing.key,
            digest=sealing.digest,
        )
        alternate._header[: self._position] = origin._header[: self._position]
        alternate._armed = self  # the armed slot stays armed with this reception until it ends
        self._origin = origin
        self._slot = alternate
        self._expected = alternate.expected_header(alternate.next_version)

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
