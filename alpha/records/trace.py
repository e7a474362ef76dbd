"""Traces: the records a traced participant writes as it goes, one fixed-size record per event,
and the one definition of their layout (``docs/trace.md``).

A trace file (``trace/role-NNNNNN.trace`` beside the artifacts) is a header block and then
records, every one :data:`TRACE_RECORD_SIZE` bytes, little-endian. A record is written whole by one
system call, so a participant killed mid-run leaves every record but possibly its last whole;
each record ends with a mark and a check (its first 92 bytes read as one little-endian integer,
modulo the prime :data:`CHECK_PRIME`), so a record cut short or damaged is found, never read as
another. The check finds damage, not forgery: a trace is the run's own notes, not evidence
against it (frames are what the keyed trailers protect, ``docs/security.md``).

What a record holds depends on its :class:`Event` (the table in ``docs/trace.md``): a frame sent
or received has its kind, peer, slot, version, extent and payload digest ``D`` (the digest the
frame's trailer covers, never the keyed MAC, so that two runs of one plan, each with keys of its
own, record the same digests for the same bytes); a local operation its name and region; a
wait its budget; a failure its class.

Pure and standard library only: a participant imports it with its runtime. The vectorised
reader (numpy) is :mod:`alpha.records.trace_table`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, final

from alpha.checked import int_in
from alpha.errors import TraceInvalid

__all__ = [
    "CHECK_PRIME",
    "DEFAULT_TRACE_LIMIT",
    "DETAIL_SIZE",
    "FLAG_RAN_OUT",
    "FLAG_SHARED",
    "MAX_TRACE_LIMIT",
    "NONE_U32",
    "RECORD_BODY",
    "RECORD_CHECK",
    "RECORD_MARK",
    "TRACE_DIGESTS",
    "TRACE_FLAGS",
    "TRACE_FORMAT",
    "TRACE_HEADER_SIZE",
    "TRACE_MAGIC",
    "TRACE_MODES",
    "TRACE_RECORD_SIZE",
    "Event",
    "Phase",
    "TraceBounds",
    "TraceHeader",
    "TraceRecord",
    "bounds_problem",
    "check_of",
    "decode_header",
    "decode_record",
    "detail_names",
    "encode_header",
    "encode_record",
    "names_detail",
    "pack_record",
    "record_offset",
]

TRACE_FORMAT: Final = 1
"""The layout version in every header this module writes and reads."""

TRACE_RECORD_SIZE: Final = 96
"""Bytes of every record, and of the header: a frame's record holds its 32-byte payload digest
whole beside its fields (a digest cut short would name a frame less surely), and 96 bytes keep
every field at its natural alignment for a reader's structured view."""

TRACE_HEADER_SIZE: Final = TRACE_RECORD_SIZE
"""The header is one block of a record's size: record ``i`` is at ``96 + i * 96``."""

DETAIL_SIZE: Final = 32
"""The detail field: a frame's payload digest, or names (an operation and its region, a class,
a budget), NUL-separated and cut to fit."""

TRACE_MAGIC: Final = b"ALPHATRC"
RECORD_MARK: Final = b"ATR1"
"""Every record's bytes 88..92: a record slot never written (zeros) is told from a record."""

CHECK_PRIME: Final = 1073741789
"""2^30 - 35, the largest prime below 2^30: the check is a block's first 92 bytes, read as one
little-endian integer, modulo this prime. A change confined to three consecutive bytes (one
field byte, a 16- or 24-bit field) always changes it, since the prime divides no such
difference; anything else is missed with a chance of about 2^-30. Below 2^30 the divisor is
one of CPython's integer digits, so the writer's remainder takes the one-digit path (about
0.2 us a record here, against 0.3 us for a prime below 2^32); a vectorised reader runs a
Horner loop over 23 words (2^32 mod the prime is 140)."""

NONE_U32: Final = 0xFFFFFFFF
"""A 32-bit field (peer, slot, round) that names nothing: no peer, outside the rounds."""

FLAG_RAN_OUT: Final = 1
"""A wait's flag: its budget ran out (the role failed with ``BudgetExhausted`` there)."""

FLAG_SHARED: Final = 2
"""A frame's flag: its payload moved through the edge's shared-memory region."""

TRACE_FLAGS: Final = FLAG_RAN_OUT | FLAG_SHARED

DEFAULT_TRACE_LIMIT: Final = 1 << 18
"""Records a role keeps without a ``[trace] limit``: 262,144 (24 MiB a role), a few thousand
rounds of a learner's role; past it the plan's mode says which to keep."""

MAX_TRACE_LIMIT: Final = 1 << 30
"""The most records a plan may ask a role to keep: 96 GiB a role. Past that a trace is no
longer a record to leave on, and a typo (a limit in bytes, not records) is refused."""

TRACE_MODES: Final = ("first", "ring")
"""What a role keeps at its limit: ``first``, the first records (a trace stops growing; what
``alpha observe diff`` compares), or ``ring``, the last ones (each new record overwrites the
oldest: the end of a long run, for a post-mortem)."""

TRACE_DIGESTS: Final = ("sha256", "blake3")
"""The payload digests a header names (``[contract] payload_digest``), by their code 1, 2."""


class Event(IntEnum):
    """What a record records (``docs/trace.md`` gives each one's fields)."""

    SEND = 1
    """A frame this role sent, whole, to ``peer``."""
    RECEIVE = 2
    """A frame this role received from ``peer`` and checked (its trailer verified)."""
    REFUSED = 3
    """A frame this role refused (``FrameRefused``): detail names the class."""
    OPERATION = 4
    """A local operation (a registered operation, or a fold): detail names it and its region."""
    WAIT = 5
    """A wait bounded by a budget outside any frame's record (establishing an edge), or one
    whose budget ran out (``FLAG_RAN_OUT``)."""
    FAILED = 6
    """The role failed: detail names its class (and the original cause's, for an abort)."""
    COMMITTED = 7
    """The role learned that the run committed (role 0: it wrote the commit record)."""


class Phase(IntEnum):
    """Where the role was (``alpha.runtime.whereabouts``): before, in, or after its rounds."""

    ESTABLISHING = 0
    RUNNING = 1
    COMPLETING = 2


# Frame kinds a record may name (alpha.wire.frame.FrameKind: 1 hello .. 7 commit); 0 for none.
_MAX_KIND: Final = 7

_MODE_CODES: Final = {mode: code for code, mode in enumerate(TRACE_MODES, 1)}
_DIGEST_CODES: Final = {name: code for code, name in enumerate(TRACE_DIGESTS, 1)}

RECORD_BODY: Final = struct.Struct("<QqqBBBBIIIQQ32s4s")
"""A record's first 92 bytes: seq, start, end (ns), event, kind, phase, flags, peer, slot,
round, version, extent, detail, mark; the check (:data:`RECORD_CHECK`) follows. A writer's hot
path packs with these two directly (``alpha.runtime.tracing``)."""
RECORD_CHECK: Final = struct.Struct("<I")
_BODY: Final = RECORD_BODY
_CHECK: Final = RECORD_CHECK
# The header: magic, format, mode, digest, role, participants, reserved, limit, monotonic and
# wall clock at the start (ns), the run identity's SHA-256, reserved; then the check.
_HEAD: Final = struct.Struct("<8sHBBIIIQqq32s12s")
assert _BODY.size + _CHECK.size == TRACE_RECORD_SIZE == _HEAD.size + _CHECK.size
_CHECKED: Final = _BODY.size  # the check covers bytes 0..92


def check_of(block: bytes | bytearray | memoryview) -> int:
    """The check of a record or header block: its first 92 bytes as one little-endian
    integer, modulo :data:`CHECK_PRIME`."""
    return int.from_bytes(block[:_CHECKED], "little") % CHECK_PRIME


def bounds_problem(limit: object, mode: object) -> str | None:
    """What is wrong with ``limit`` and ``mode`` as a trace's bounds, in words; None when
    nothing is. The one rule behind a plan's ``[trace]`` and an artifact's copy of it."""
    if not int_in(limit, 1, MAX_TRACE_LIMIT):
        return f"limit must be an int in 1..{MAX_TRACE_LIMIT} (records), got {limit!r}"
    if mode not in TRACE_MODES:
        return f"mode must be one of {', '.join(TRACE_MODES)}, got {mode!r}"
    return None


@final
@dataclass(frozen=True, slots=True)
class TraceBounds:
    """How much of a run a role's trace keeps (``[trace]``, ``docs/plans.md``): at most
    ``limit`` records, the first ones (``mode = "first"``) or the last (``"ring"``). Build it
    from checked values (:func:`bounds_problem`)."""

    limit: int = DEFAULT_TRACE_LIMIT
    mode: str = "first"

    def to_dict(self) -> dict[str, object]:
        return {"limit": self.limit, "mode": self.mode}


@final
@dataclass(frozen=True, slots=True)
class TraceHeader:
    """A trace file's first block.

    Attributes:
        role: the role that wrote it; ``participants``: the run's role count.
        identity: the SHA-256 of the run identity's 96 bytes: two traces compare only when
            it is equal (another plan's frames are not the same frames).
        digest: the payload digest its frames record (``TRACE_DIGESTS``).
        bounds: the limit and mode it was written under.
        monotonic_ns, wall_ns: the host's monotonic clock and the wall clock when it was
            opened: the records' times are monotonic; the pair aligns roles of several hosts.
    """

    role: int
    participants: int
    identity: bytes
    digest: str
    bounds: TraceBounds
    monotonic_ns: int
    wall_ns: int


@final
@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One record, as :func:`decode_record` reads it (``docs/trace.md`` gives each event's
    fields; a field an event does not use is 0, or :data:`NONE_U32` for peer, slot and round)."""

    seq: int
    start_ns: int
    end_ns: int
    event: Event
    kind: int
    phase: Phase
    flags: int
    peer: int
    slot: int
    round: int
    version: int
    extent: int
    detail: bytes


def names_detail(*names: str) -> bytes:
    """Names as a detail field: UTF-8, NUL-separated, cut (at a character boundary) and padded
    with NULs to :data:`DETAIL_SIZE` bytes."""
    data = "\0".join(names).encode()[:DETAIL_SIZE]
    return data.decode(errors="ignore").encode().ljust(DETAIL_SIZE, b"\0")


def detail_names(detail: bytes) -> tuple[str, ...]:
    """The names a detail field holds (:func:`names_detail`'s inverse, up to the cut)."""
    text = bytes(detail).rstrip(b"\0").decode(errors="replace")
    return tuple(text.split("\0")) if text else ()


def pack_record(
    seq: int,
    start_ns: int,
    end_ns: int,
    event: int,
    kind: int,
    phase: int,
    flags: int,
    peer: int,
    slot: int,
    round: int,
    version: int,
    extent: int,
    detail: bytes,
) -> bytes:
    """A record's :data:`TRACE_RECORD_SIZE` bytes, its check computed: the writer's path, one
    struct pack and one remainder, unchecked (:func:`encode_record` checks a value first).

    Raises:
        struct.error: a field does not fit its width.
    """
    body = _BODY.pack(
        seq, start_ns, end_ns, event, kind, phase, flags, peer, slot, round, version, extent,
        detail, RECORD_MARK,
    )  # fmt: skip
    return body + _CHECK.pack(int.from_bytes(body, "little") % CHECK_PRIME)


def _record_problem(record: TraceRecord) -> str | None:
    if not int_in(record.seq, 0, 2**64 - 1):
        return f"seq {record.seq!r} is not a u64"
    for name in ("start_ns", "end_ns"):
        if not int_in(getattr(record, name), -(2**63), 2**63 - 1):
            return f"{name} is not an i64"
    if record.end_ns < record.start_ns:
        return f"it ends ({record.end_ns}) before it starts ({record.start_ns})"
    if record.event not in Event.__members__.values():
        return f"event {record.event!r} is not one of {[int(e) for e in Event]}"
    if not int_in(record.kind, 0, _MAX_KIND):
        return f"kind {record.kind!r} is not a frame kind (0..{_MAX_KIND})"
    if record.phase not in Phase.__members__.values():
        return f"phase {record.phase!r} is not one of {[int(p) for p in Phase]}"
    if not int_in(record.flags, 0, TRACE_FLAGS) or record.flags & ~TRACE_FLAGS:
        return f"flags {record.flags!r} are not of {TRACE_FLAGS:#x}"
    for name in ("peer", "slot", "round"):
        if not int_in(getattr(record, name), 0, NONE_U32):
            return f"{name} is not a u32"
    for name in ("version", "extent"):
        if not int_in(getattr(record, name), 0, 2**64 - 1):
            return f"{name} is not a u64"
    if not isinstance(record.detail, bytes) or len(record.detail) != DETAIL_SIZE:
        return f"detail is not {DETAIL_SIZE} bytes"
    return None


def encode_record(record: TraceRecord) -> bytes:
    """The record's bytes.

    Raises:
        TraceInvalid: a field is out of its range (the message names it).
    """
    problem = _record_problem(record)
    if problem is not None:
        raise TraceInvalid(f"a trace record cannot be written: {problem}")
    return pack_record(
        record.seq, record.start_ns, record.end_ns, record.event, record.kind, record.phase,
        record.flags, record.peer, record.slot, record.round, record.version, record.extent,
        record.detail,
    )  # fmt: skip


def decode_record(block: bytes | bytearray | memoryview, where: str = "a record") -> TraceRecord:
    """The record in ``block`` (exactly :data:`TRACE_RECORD_SIZE` bytes).

    Raises:
        TraceInvalid: ``block`` is not a record :func:`encode_record` writes: another size,
            no mark, a check that fails, or a field out of its range (event, kind, phase,
            flags, or a record that ends before it starts). ``where`` begins the message.
    """
    data = bytes(block)
    if len(data) != TRACE_RECORD_SIZE:
        raise TraceInvalid(f"{where} is {TRACE_RECORD_SIZE} bytes, not {len(data)}")
    fields = _BODY.unpack_from(data)
    if fields[-1] != RECORD_MARK:
        raise TraceInvalid(f"{where} has no record mark ({RECORD_MARK!r}): not a record")
    (check,) = _CHECK.unpack_from(data, _CHECKED)
    if check != check_of(data):
        raise TraceInvalid(f"{where} fails its check: it was cut short or damaged")
    seq, start, end, event, kind, phase, flags, peer, slot, round_, version, extent, detail, _ = (
        fields
    )
    if event not in Event.__members__.values() or phase not in Phase.__members__.values():
        raise TraceInvalid(f"{where}: event {event} or phase {phase} is not one this format has")
    record = TraceRecord(
        seq, start, end, Event(event), kind, Phase(phase), flags, peer, slot, round_, version,
        extent, detail,
    )  # fmt: skip
    problem = _record_problem(record)
    if problem is not None:
        raise TraceInvalid(f"{where}: {problem}")
    return record


def encode_header(header: TraceHeader) -> bytes:
    """The header block's bytes.

    Raises:
        TraceInvalid: a field is out of its range (the message names it).
    """
    problem = bounds_problem(header.bounds.limit, header.bounds.mode)
    if problem is None and header.digest not in _DIGEST_CODES:
        problem = f"digest must be one of {', '.join(TRACE_DIGESTS)}, got {header.digest!r}"
    if problem is None and not (
        int_in(header.participants, 1, NONE_U32) and int_in(header.role, 0, header.participants - 1)
    ):
        problem = f"role {header.role!r} is not one of {header.participants!r} roles"
    if problem is None and (not isinstance(header.identity, bytes) or len(header.identity) != 32):
        problem = "identity is not a 32-byte digest"
    if problem is not None:
        raise TraceInvalid(f"a trace header cannot be written: {problem}")
    body = _HEAD.pack(
        TRACE_MAGIC, TRACE_FORMAT, _MODE_CODES[header.bounds.mode],
        _DIGEST_CODES[header.digest], header.role, header.participants, 0,
        header.bounds.limit, header.monotonic_ns, header.wall_ns, header.identity, bytes(12),
    )  # fmt: skip
    return body + _CHECK.pack(check_of(body))


def decode_header(block: bytes | bytearray | memoryview, where: str = "a trace") -> TraceHeader:
    """The header in ``block`` (at least :data:`TRACE_HEADER_SIZE` bytes; the first are read).

    Raises:
        TraceInvalid: not a trace header this module writes: too short, another magic or
            format, a check that fails, an unknown mode or digest, a role outside the run,
            a limit out of range, reserved bytes that are not zero. ``where`` begins the
            message.
    """
    data = bytes(block[:TRACE_HEADER_SIZE])
    if len(data) < TRACE_HEADER_SIZE:
        raise TraceInvalid(f"{where} is shorter than a trace header ({TRACE_HEADER_SIZE} bytes)")
    (magic, fmt, mode, digest, role, participants, reserved, limit, mono, wall, identity, pad) = (
        _HEAD.unpack_from(data)
    )
    if magic != TRACE_MAGIC:
        raise TraceInvalid(f"{where} is not a trace: it does not begin with {TRACE_MAGIC!r}")
    if fmt != TRACE_FORMAT:
        raise TraceInvalid(
            f"{where} is a trace of format {fmt}; this alpha reads format {TRACE_FORMAT}"
        )
    if _CHECK.unpack_from(data, _CHECKED)[0] != check_of(data):
        raise TraceInvalid(f"{where}: its header fails its check (damaged)")
    modes = {code: name for name, code in _MODE_CODES.items()}
    digests = {code: name for name, code in _DIGEST_CODES.items()}
    if mode not in modes or digest not in digests or reserved or any(pad):
        raise TraceInvalid(f"{where}: its header's mode, digest or reserved bytes are wrong")
    problem = bounds_problem(limit, modes[mode])
    if problem is None and not (participants >= 1 and role < participants):
        problem = f"role {role} is not one of {participants} roles"
    if problem is not None:
        raise TraceInvalid(f"{where}: its header's {problem}")
    return TraceHeader(
        role, participants, identity, digests[digest], TraceBounds(limit, modes[mode]), mono, wall
    )


def record_offset(seq: int, bounds: TraceBounds) -> int | None:
    """Where record ``seq`` goes in the file, or None when the bounds keep it nowhere (past the
    limit of a ``first`` trace). A ``ring`` trace puts it over the record ``limit`` before it."""
    if seq >= bounds.limit and bounds.mode == "first":
        return None
    return TRACE_HEADER_SIZE + (seq % bounds.limit) * TRACE_RECORD_SIZE
