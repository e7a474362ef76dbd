"""The frame layout (format 2): the header's fields, every frame kind's slot and extent, and
the spec both ends of a transfer build. Pure: values and bytes in, values and bytes out.

Every message between participants is one frame: a fixed 132-byte header, the payload, and a
32-byte SHA-256 trailer over the header and the payload's digest (:func:`seal`). Layout 3
(``KEYED_FORMAT_VERSION``, issue 25) keeps header and payload and keys the trailer: an
HMAC-SHA256 under the edge and direction's key (:func:`keyed_seal`, :func:`check_keyed`);
it is what keyed runs (the default) send, layout 2 what ``[contract] integrity = "sha256"``
runs send. The layout is
documented field by field in ``docs/frames.md``; ``FIELDS`` below is its single source in code,
and ``KINDS`` the single table of every frame kind: which slot it travels in and how many
payload bytes it carries. Adding a frame kind is a line in :class:`FrameKind` and a row in
``KINDS``; :func:`control_spec` builds the spec of every kind whose slot and extent the table
fixes.

The two ends are apart: :mod:`alpha.wire.send` frames a payload (a send slot's counter, the
header, the trailer) and refuses this program's own misuse; :mod:`alpha.wire.receive` derives
the header it expects, compares the bytes a peer sent and refuses them. The ABORT frame's
payload, the cause, is :mod:`alpha.wire.abort`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Protocol, final

from alpha.checked import int_in
from alpha.core.identity import (
    DIGEST_SIZE,
    IDENTITY_SIZE,
    RunIdentity,
)
from alpha.core.membership import MAX_ROLE
from alpha.core.sealing import KEY_SIZE, PAYLOAD_DIGESTS
from alpha.errors import (
    Forged,
    FrameSpecInvalid,
)

if TYPE_CHECKING:
    # collections.abc.Buffer arrives in Python 3.12; the annotation is only for the checker.
    from hashlib import _Hash

    from typing_extensions import Buffer

__all__ = [
    "ABORT_EXTENT",
    "ABORT_SLOT",
    "COMPLETION_SLOT",
    "FIELDS",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "HELLO_SLOT",
    "KEYED_FORMAT_VERSION",
    "KEY_SIZE",
    "KINDS",
    "MAGIC",
    "MAX_EXTENT",
    "MAX_ROLE",
    "MAX_SLOT",
    "MAX_VERSION",
    "TRAILER_SIZE",
    "UNKEYED",
    "WORD_BYTES",
    "Field",
    "FrameKind",
    "FrameSpec",
    "KindRule",
    "PayloadHash",
    "Sealing",
    "abort_spec",
    "check_keyed",
    "control_spec",
    "field_at",
    "keyed_seal",
    "payload_digest",
    "payload_hash",
    "seal",
    "sealing_of",
]

MAGIC: Final = b"ALPF"
"""The first four bytes of every frame: a stranger speaking another protocol fails here."""

FORMAT_VERSION: Final = 2
"""The layout described in this module; a change of layout changes this byte. Version 2 binds
the trailer to the payload through the payload's own digest (:func:`seal`), so that a payload
sent on several edges is hashed once."""

KEYED_FORMAT_VERSION: Final = 3
"""The keyed layout (issue 25): the header and payload of layout 2, the format byte 3, and a
trailer that is an HMAC-SHA256 under the key of the frame's edge and direction
(:func:`keyed_seal`) instead of a plain SHA-256. What every frame of a keyed run (the default)
is; a run with ``[contract] integrity = "sha256"`` sends and accepts layout 2
(``FORMAT_VERSION``) only."""


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
    """What a frame carries. The receiver expects exactly one kind per slot; ``KINDS`` gives
    each kind's slot and extent."""

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


# --- every frame kind: its slot and its extent ----------------------------------------------

HELLO_SLOT: Final = 0
"""The slot of the hello frame on every edge (the kind, HELLO, keeps it apart from data)."""

ABORT_SLOT: Final = 0
"""The slot of the ABORT frame on every edge. Its version is always 0: an edge carries at most
one ABORT, since nothing follows it."""

COMPLETION_SLOT: Final = 0
"""The slot of the END, DONE and COMMIT frames of an edge (their kinds keep them apart)."""

ABORT_EXTENT: Final = 512
"""Payload bytes of every ABORT frame: room for a class name and a sentence an operator reads,
small enough that a frame fits any socket buffer, so sending it never waits on a stuck peer.
``alpha.wire.abort`` lays the cause out in exactly these bytes."""

WORD_BYTES: Final = 8
"""Payload bytes of a CHOICE frame: the agreed word, unsigned 64-bit big-endian."""


@final
@dataclass(frozen=True, slots=True)
class KindRule:
    """Where frames of one kind travel and what they carry: one row of ``KINDS``.

    ``slot`` is the slot every frame of the kind has on every edge, or None where the schedule
    numbers it (each scheduled transfer of an edge its own slot). ``extent`` is the payload
    length of every frame of the kind, or None where the schedule gives it (a region's bytes).
    Frames of kinds that share a slot are told apart by the kind byte, which is checked
    before the slot.
    """

    kind: FrameKind
    slot: int | None
    extent: int | None
    sender: str
    """Who sends it, to whom, and when."""


KINDS: Final[Mapping[FrameKind, KindRule]] = MappingProxyType(
    {
        rule.kind: rule
        for rule in (
            KindRule(FrameKind.HELLO, HELLO_SLOT, 0, "the connecting (higher) role, first"),
            KindRule(FrameKind.DATA, None, None, "either end, as the schedule says"),
            KindRule(FrameKind.CHOICE, None, WORD_BYTES, "down a choice's dissemination tree"),
            KindRule(FrameKind.ABORT, ABORT_SLOT, ABORT_EXTENT, "a failing role, on every edge"),
            KindRule(FrameKind.END, COMPLETION_SLOT, 0, "parent to child, after its schedule"),
            KindRule(FrameKind.DONE, COMPLETION_SLOT, DIGEST_SIZE, "child to parent, at the end"),
            KindRule(FrameKind.COMMIT, COMPLETION_SLOT, DIGEST_SIZE, "parent to child, at last"),
        )
    }
)
"""Every frame kind's slot and extent rule, the one table of them (``docs/frames.md``)."""

assert tuple(KINDS) == tuple(FrameKind), "KINDS must hold one rule per FrameKind, in order"


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
    Field("format", 4, 1, "layout version, 2 (FORMAT_VERSION)"),
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

    def header(self, version: int, *, layout: int = FORMAT_VERSION) -> bytes:
        """The exact header of this spec's frame at ``version``, with the format byte
        ``layout`` (``FORMAT_VERSION``, or ``KEYED_FORMAT_VERSION`` for a keyed frame).

        Raises:
            FrameSpecInvalid: ``version`` is outside ``0..MAX_VERSION``, or ``layout`` is
                neither layout.
        """
        _check_width("version", version, MAX_VERSION)
        if layout not in (FORMAT_VERSION, KEYED_FORMAT_VERSION):
            raise FrameSpecInvalid(
                f"a frame's layout is {FORMAT_VERSION} or {KEYED_FORMAT_VERSION}, not {layout!r}"
            )
        return _HEADER.pack(
            MAGIC,
            layout,
            self.kind,
            0,
            self.identity.encode(),
            self.sender,
            self.receiver,
            self.slot,
            version,
            self.extent,
        )


class PayloadHash(Protocol):
    """A running payload digest: hashlib's SHA-256 or the ``blake3`` package's BLAKE3, both of
    which take any buffer and release the GIL while they hash a large one."""

    def update(self, data: Buffer, /) -> object: ...

    def digest(self) -> bytes: ...


def payload_hash(name: str = "sha256") -> PayloadHash:
    """A new running digest ``D`` of a payload: ``"sha256"`` (hashlib) or ``"blake3"`` (the
    ``blake3`` package, imported on first use: only a plan that names it needs it). Both give
    32 bytes.

    Raises:
        FrameSpecInvalid: ``name`` is not one of ``PAYLOAD_DIGESTS``, or the ``blake3`` package
            is not installed.
    """
    if name == "sha256":
        return hashlib.sha256()
    if name == "blake3":
        return _blake3()()
    raise FrameSpecInvalid(f"a payload digest is one of {', '.join(PAYLOAD_DIGESTS)}, not {name!r}")


@functools.cache
def _blake3() -> type[PayloadHash]:
    try:
        from blake3 import blake3
    except ImportError:
        raise FrameSpecInvalid(
            "the plan's payload digest is BLAKE3, but the blake3 package is not installed "
            'here: pip install blake3, or set [contract] payload_digest = "sha256"'
        ) from None
    made: type[PayloadHash] = blake3
    return made


def payload_digest(payload: Buffer, name: str = "sha256") -> bytes:
    """The digest ``D`` (``"sha256"`` or ``"blake3"``, 32 bytes) of a payload's bytes: what the
    trailer binds (:func:`seal`, :func:`keyed_seal`).

    Raises:
        FrameSpecInvalid: as :func:`payload_hash`.
    """
    if name == "sha256":
        return hashlib.sha256(_byte_view(payload)).digest()
    state = payload_hash(name)
    state.update(_byte_view(payload))
    return state.digest()


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


def _check_key(key: object) -> bytes:
    """``key`` as the bytes of one edge and direction's key.

    Raises:
        FrameSpecInvalid: ``key`` is not ``KEY_SIZE`` bytes.
    """
    if not isinstance(key, bytes) or len(key) != KEY_SIZE:
        size = len(key) if isinstance(key, bytes) else type(key).__name__
        raise FrameSpecInvalid(f"a frame key is {KEY_SIZE} bytes, got {size}")
    return key


def keyed_seal(key: bytes, header: Buffer, digest: bytes) -> bytes:
    """The keyed trailer (layout 3) of a frame with ``header`` whose payload has the digest
    ``digest``: HMAC-SHA256 under ``key`` (the key of the frame's edge and direction) over the
    header's 132 bytes followed by the payload digest's 32.

    As with :func:`seal`, the payload is hashed once (:func:`payload_digest`) however many
    edges it travels; each frame costs one HMAC over 164 bytes. Without the key nobody on the
    path can make a trailer that checks, so a relay that rewrites bytes and rehashes is refused.

    Raises:
        FrameSpecInvalid: ``key`` is not ``KEY_SIZE`` bytes, ``header`` not ``HEADER_SIZE``
            bytes, or ``digest`` not a payload digest's size.
    """
    _check_key(key)
    view = header if isinstance(header, bytes) else _byte_view(header)
    if len(view) != HEADER_SIZE:
        raise FrameSpecInvalid(f"a frame header has {HEADER_SIZE} bytes, not {len(view)}")
    if len(digest) != DIGEST_SIZE:
        raise FrameSpecInvalid(f"a payload digest has {DIGEST_SIZE} bytes, not {len(digest)}")
    return _mac(key, view, digest)


_BLOCK: Final = 64
"""SHA-256's block size: HMAC pads its key to it (RFC 2104)."""


@functools.lru_cache(maxsize=4096)
def _pads(key: bytes) -> tuple[_Hash, _Hash]:
    """SHA-256 states after HMAC's inner and outer key blocks, made once per key: a frame's
    HMAC then costs what the unkeyed trailer does plus one more compression (a 32-byte key is
    below the block size, so it is zero-padded, not hashed). A role holds a few edge keys."""
    block = key.ljust(_BLOCK, b"\0")
    inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in block))
    outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in block))
    return inner, outer


def _mac(key: bytes, header: Buffer, digest: bytes) -> bytes:
    """HMAC-SHA256(key, header || digest) from the key's cached pads; equal to
    ``hmac.new(key, header + digest, "sha256").digest()`` (the tests hold it to that)."""
    return _padded_mac(_pads(key), header, digest)


def _padded_mac(pads: tuple[_Hash, _Hash], header: Buffer, digest: bytes) -> bytes:
    """HMAC-SHA256 over ``header || digest`` from a key's pads (:func:`_pads`)."""
    inner, outer = pads
    state = inner.copy()
    state.update(header)
    state.update(digest)
    result = outer.copy()
    result.update(state.digest())
    return result.digest()


def _keyed_matches(key: bytes, header: Buffer, digest: bytes, trailer: Buffer) -> bool:
    """Whether ``trailer`` is the keyed trailer of ``header`` and ``digest`` under ``key``,
    compared in constant time (``hmac.compare_digest``)."""
    return hmac.compare_digest(keyed_seal(key, header, digest), _byte_view(trailer))


def check_keyed(key: bytes, header: Buffer, digest: bytes, trailer: Buffer) -> None:
    """Check a keyed frame's trailer against its header and payload digest under ``key``.

    The refusal names the edge, slot and version the header carries (the receiver as
    ``role``, the sender as ``peer``): a receive slot that knows its own refuses through
    ``alpha.wire.receive`` with the values it expected.

    Raises:
        Forged: the trailer does not match (constant-time comparison).
        FrameSpecInvalid: as :func:`keyed_seal`.
    """
    if _keyed_matches(key, header, digest, trailer):
        return
    fields = _HEADER.unpack(bytes(_byte_view(header)))
    sender, receiver, slot, version = fields[5], fields[6], fields[7], fields[8]
    raise Forged(
        "the keyed trailer does not match the header and payload under this edge's key",
        role=receiver,
        peer=sender,
        slot=slot,
        version=version,
        field="trailer",
        expected="an HMAC-SHA256 under this edge's key",
        received=bytes(_byte_view(trailer)).hex(),
    )


@final
@dataclass(frozen=True, slots=True)
class Sealing:
    """How the frames of one direction of one edge are sealed: the payload digest ``D``
    (``digest``, one of ``PAYLOAD_DIGESTS``) and, in a keyed run, the key of that edge and
    direction (layout 3, :func:`keyed_seal`); without a key, layout 2 (:func:`seal`).

    Raises:
        FrameSpecInvalid: ``key`` is not None or ``KEY_SIZE`` bytes, ``digest`` is not one of
            ``PAYLOAD_DIGESTS``, or it is ``"blake3"`` and the ``blake3`` package is not
            installed.
    """

    key: bytes | None = None
    digest: str = "sha256"
    # HMAC's inner and outer SHA-256 states after the key's blocks (:func:`_pads`), made once
    # here: a frame's MAC then starts from copies of them. Not compared, shown or hashed.
    _pads: tuple[_Hash, _Hash] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.key is not None:
            _check_key(self.key)
            object.__setattr__(self, "_pads", _pads(self.key))
        if self.digest not in PAYLOAD_DIGESTS:
            raise FrameSpecInvalid(
                f"a payload digest is one of {', '.join(PAYLOAD_DIGESTS)}, not {self.digest!r}"
            )
        if self.digest == "blake3":
            _blake3()  # a role without the package stops here, before any edge is up

    def __repr__(self) -> str:
        # Never the key's bytes: a sealing may end up in a log or a traceback.
        return f"Sealing(keyed={self.key is not None}, digest={self.digest!r})"

    @property
    def layout(self) -> int:
        """The frame layout: ``KEYED_FORMAT_VERSION`` with a key, ``FORMAT_VERSION`` without."""
        return FORMAT_VERSION if self.key is None else KEYED_FORMAT_VERSION

    def hash(self) -> PayloadHash:
        """A new running digest ``D`` of a payload."""
        return payload_hash(self.digest)

    def payload_digest(self, payload: Buffer) -> bytes:
        """``D`` of ``payload``'s bytes."""
        return payload_digest(payload, self.digest)

    def trailer(self, header: Buffer, digest: bytes) -> bytes:
        """The trailer of a frame with ``header`` whose payload's ``D`` is ``digest``."""
        pads = self._pads
        if pads is None:
            return seal(header, digest)
        # The key was checked when this sealing was made, and a slot's header is its spec's
        # (132 bytes): only the digest, which a caller may hand in, is checked per frame.
        if len(digest) != DIGEST_SIZE:
            raise FrameSpecInvalid(f"a payload digest has {DIGEST_SIZE} bytes, not {len(digest)}")
        return _padded_mac(pads, header, digest)


UNKEYED: Final = Sealing()
"""Layout 2 with SHA-256: what a slot made without a key or digest seals and checks."""


def sealing_of(key: bytes | None, digest: str) -> Sealing:
    """The sealing of ``key`` (None: unkeyed) and ``digest``: :data:`UNKEYED` for the default,
    a new :class:`Sealing` else (what a send or receive slot's ``key`` and ``digest`` make).

    Raises:
        FrameSpecInvalid: as :class:`Sealing`.
    """
    return UNKEYED if key is None and digest == "sha256" else Sealing(key, digest)


def _byte_view(data: Buffer) -> memoryview:
    view = memoryview(data)
    if not view.contiguous:
        raise FrameSpecInvalid("a payload must be one contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def control_spec(identity: RunIdentity, kind: FrameKind, sender: int, receiver: int) -> FrameSpec:
    """The spec of a ``kind`` frame from ``sender`` to ``receiver`` whose slot and extent
    ``KINDS`` fixes (HELLO, ABORT, END, DONE, COMMIT): the one builder of those specs.

    Raises:
        FrameSpecInvalid: ``kind``'s slot or extent is the schedule's (DATA, CHOICE), or a
            field is outside its width (as :class:`FrameSpec`).
    """
    rule = KINDS.get(kind) if isinstance(kind, FrameKind) else None
    if rule is None or rule.slot is None or rule.extent is None:
        raise FrameSpecInvalid(
            f"a {kind!r} frame's slot or extent comes from the schedule, not the kinds table"
        )
    return FrameSpec(identity, kind, sender, receiver, rule.slot, rule.extent)


def abort_spec(identity: RunIdentity, sender: int, receiver: int) -> FrameSpec:
    """The ABORT frame from ``sender`` to ``receiver``: fixed slot, version 0, fixed extent."""
    return control_spec(identity, FrameKind.ABORT, sender, receiver)
