"""A traced participant's trace writer: one record per frame, local operation, wait and end,
each stored whole in the file as it happens (``docs/trace.md``).

The record layout is :mod:`alpha.records.trace`'s; this module owns the file. A record is 96
bytes stored where the bounds put it (``alpha.records.trace.record_offset``), in a shared
mapping of the file (``mmap``, ``MAP_SHARED``): the store is in the kernel's page cache, the
file's own pages, the moment it is made, so a participant killed at any moment leaves every
record it finished, and at most its last one cut (which a reader finds by its check and
ignores), as one ``write`` per record would, without a system call per record (a ``pwrite``
per record cost about 4.5 us a record here, the mapping about 2 us, bench/trace.py). The file
grows a chunk at a time (:data:`CHUNK_RECORDS`), each chunk's blocks reserved first
(``posix_fallocate``), so a full disk is an error the writer sees when it grows the file,
never a fault on a store; at close the file is cut to the records written. A killed role's
file may end in reserved, never written (zero) records, which a reader drops.

The runtime reaches the writer through the role's :class:`~alpha.runtime.whereabouts.Whereabouts`
(``where.trace``), which the establishment, every channel and the interpreter share; untraced,
that is None, and each hook costs one attribute lookup and a test. The round and phase of
every record are the whereabouts' at the moment it is written.

A trace that cannot be written (a full disk, a folder that cannot be made) is said once in
the role's log and given up: the run goes on untraced, since a trace only shows what it did.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import mmap
import os
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, final

from alpha.core.identity import RunIdentity
from alpha.errors import AlphaError, RoundAborted, SlotFault
from alpha.native import Loaded, Unavailable, declined, library
from alpha.records.trace import (
    CHECK_PRIME,
    FLAG_RAN_OUT,
    NONE_U32,
    RECORD_BODY,
    RECORD_CHECK,
    RECORD_MARK,
    TRACE_HEADER_SIZE,
    TRACE_RECORD_SIZE,
    Event,
    Phase,
    TraceBounds,
    TraceHeader,
    check_of,
    encode_header,
    names_detail,
)
from alpha.wire.frame import FrameKind

if TYPE_CHECKING:
    from alpha.runtime.whereabouts import Whereabouts

__all__ = [
    "CHUNK_RECORDS",
    "NO_DIGEST",
    "TRACE_STORE_ENV",
    "Frame",
    "PythonWriter",
    "Tracer",
    "Writer",
    "WriterType",
    "self_check",
    "store_status",
    "writer_type",
]

CHUNK_RECORDS: Final = 4096
"""Records the file grows by at once: 384 KiB, a whole number of pages (96 x 4096 = 96 pages),
so that growing (reserving the blocks, remapping) is a few times a second at the busiest, not
per record; a short run's file is cut to what it wrote at close."""

NO_DIGEST: Final = bytes(32)
"""The detail of a frame whose payload digest is not recorded (an ABORT names its cause)."""

TRACE_STORE_ENV: Final = "ALPHA_TRACE_STORE"
"""``python``: every record of the process is stored by the Python store. Unset, empty or
``auto``: the compiled store (``trace_store.c``), where it builds, loads and passes its check."""

STORE_SOURCE: Final = "trace_store.c"
"""The compiled store's C source, package data of ``alpha.runtime`` (a CPython extension)."""

STORE_MODULE: Final = "alpha_trace_store"

STORE_FLAGS: Final = ("-O2", "-std=c11", "-fPIC", "-shared", "-fvisibility=hidden")
"""The compiler's options after ``$CC``'s own words (the include folder of this Python's
headers follows: ``sysconfig``'s ``include``)."""

_pack_body: Final = RECORD_BODY.pack_into
_pack_check: Final = RECORD_CHECK.pack_into
_CHECKED: Final = RECORD_BODY.size  # the check covers the body

# The whereabouts' phase as a record's (plain ints: struct takes them without a conversion).
_ESTABLISHING: Final = int(Phase.ESTABLISHING)
_COMPLETING: Final = int(Phase.COMPLETING)
_PHASES: Final = {"establishing": _ESTABLISHING, "running": int(Phase.RUNNING)}
_FILE_MODE: Final = 0o644  # a trace holds digests and timings, no key: anyone may read it


# --- the two writers ------------------------------------------------------------------------


class Frame(Protocol):
    """A writer's one method: one record, from ``start`` to now, of a frame sent
    (``Event.SEND``) or received and checked (``Event.RECEIVE``) with its payload digest ``D``
    (never its trailer) as ``detail``; every other event comes here too, through the
    :class:`Tracer`'s methods. Its arguments are positional only."""

    def __call__(
        self,
        event: int,
        kind: int,
        peer: int | None,
        slot: int,
        version: int,
        extent: int,
        detail: bytes | None,
        start: int,
        flags: int = 0,
        /,
    ) -> None: ...


class Writer(Protocol):
    """What a trace's records are stored by: ``trace_store.c``'s ``Writer``, or
    :class:`PythonWriter`, its Python form, to the same bytes. Made as
    ``Writer(limit, ring, phases, establishing, completing, grow)``."""

    buffer: mmap.mmap | bytearray | None  # the mapping; None before the first chunk
    where: Whereabouts | None
    seq: int  # records written, those past a "first" trace's limit included
    size: int  # bytes of the file reserved and mapped, the header's included
    open: bool  # false once the trace is closed or given up

    @property
    def frame(self) -> Frame: ...


WriterType = Callable[[int, bool, Mapping[str, int], int, int, Callable[[], bool]], Writer]


@final
class PythonWriter:
    """The trace writer's hot path in Python: ``trace_store.c``'s ``Writer`` in Python, field
    for field, where that cannot be had (and the reference it is checked against).

    ``limit`` records are kept, the first ones or (``ring``) the last; ``phases`` maps a
    whereabouts' phase to a record's (another is ``completing``; none, ``establishing``);
    ``grow()`` reserves and maps the next chunk of the file, setting ``size`` and ``buffer``,
    and answers whether it could."""

    __slots__ = ("_completing", "_establishing", "_grow", "_limit", "_phases", "_ring",
                 "buffer", "open", "seq", "size", "where")  # fmt: skip

    def __init__(
        self,
        limit: int,
        ring: bool,
        phases: Mapping[str, int],
        establishing: int,
        completing: int,
        grow: Callable[[], bool],
    ) -> None:
        self._limit = limit
        self._ring = ring
        self._phases = phases
        self._establishing = establishing
        self._completing = completing
        self._grow = grow
        self.buffer: mmap.mmap | bytearray | None = None
        self.where: Whereabouts | None = None
        self.seq = 0
        self.size = TRACE_HEADER_SIZE
        self.open = True

    def frame(
        self,
        event: int,
        kind: int,
        peer: int | None,
        slot: int,
        version: int,
        extent: int,
        detail: bytes | None,
        start: int,
        flags: int = 0,
        /,
    ) -> None:
        """One record (:class:`Frame`)."""
        # The hot path of every hook, written out (a call costs as much as a field here):
        # record_offset's arithmetic, the layout's two structs, the check over the body.
        if not self.open:
            return
        seq = self.seq
        self.seq = seq + 1
        limit = self._limit
        if seq < limit:
            at = TRACE_HEADER_SIZE + seq * TRACE_RECORD_SIZE
        elif self._ring:
            at = TRACE_HEADER_SIZE + (seq % limit) * TRACE_RECORD_SIZE
        else:
            return  # a "first" trace past its limit keeps what it has
        if at >= self.size and not self._grow():
            return
        where = self.where
        if where is None:
            phase, round_ = self._establishing, NONE_U32
        else:
            phase = self._phases.get(where.phase, self._completing)
            round_ = NONE_U32 if where.round is None else where.round
        mapped = self.buffer
        assert mapped is not None  # grown above
        _pack_body(
            mapped, at, seq, start, time.monotonic_ns(), event, kind, phase, flags,
            NONE_U32 if peer is None else peer, slot, round_, version, extent,
            NO_DIGEST if detail is None else detail, RECORD_MARK,
        )  # fmt: skip
        body = mapped[at : at + _CHECKED]
        _pack_check(mapped, at + _CHECKED, int.from_bytes(body, "little") % CHECK_PRIME)


# --- the compiled writer ----------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class _Compiled:
    path: Path  # the library
    writer: WriterType


def writer_type() -> WriterType:
    """The writer this process's traces use: the compiled one, built and checked on the first
    call of the process, or :class:`PythonWriter` where it cannot be had
    (:func:`store_status` says why)."""
    found = _library.get()
    return PythonWriter if isinstance(found, str) else found.writer


def store_status() -> str:
    """Which writer this process's traces use: ``compiled: PATH`` (the library) or
    ``python: WHY`` (:data:`TRACE_STORE_ENV`, no compiler, no Python headers, ...)."""
    found = _library.get()
    return f"python: {found}" if isinstance(found, str) else f"compiled: {found.path}"


def _load(environ: Mapping[str, str]) -> _Compiled | str:
    refused = declined(environ, TRACE_STORE_ENV, "python")
    if refused is not None:
        return refused
    flags = (*STORE_FLAGS, f"-I{sysconfig.get_paths()['include']}")
    # An extension is built for one Python ABI: its own name for it, and its version.
    abi = (str(sysconfig.get_config_var("EXT_SUFFIX")), sys.version)
    try:
        path = library("alpha.runtime", STORE_SOURCE, flags, environ, stem="trace-store", key=abi)
        try:
            writer = _open(path)
        except ImportError:  # a damaged entry (a torn copy): built again, once
            path = library(
                "alpha.runtime", STORE_SOURCE, flags, environ, stem="trace-store", key=abi,
                again=True,
            )  # fmt: skip
            writer = _open(path)
        self_check(writer, path)
    except Unavailable as why:
        return str(why)
    except Exception as error:
        # Whatever else went wrong: the Python writer stores the same bytes, so a run goes on.
        return f"unexpected {type(error).__name__}: {error}"
    return _Compiled(path, writer)


_library: Final[Loaded[_Compiled]] = Loaded(_load)  # loaded on the first trace of the process


def _open(path: Path) -> WriterType:
    loader = importlib.machinery.ExtensionFileLoader(STORE_MODULE, str(path))
    spec = importlib.util.spec_from_file_location(STORE_MODULE, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    writer: WriterType = module.Writer
    return writer


@final
@dataclass(slots=True)
class _Where:
    """Whereabouts as far as a writer reads them, for the self-check."""

    phase: str
    round: int | None


# The self-check's records, in order, into a ring of four records with room for three: every
# field at 0 and at its widest, a detail of names, of every byte value and none, the phases and
# rounds of whereabouts and none, a record dropped for want of room, and the ring's wrap.
_CHECK_WHERE: Final = (
    None, _Where("establishing", None), _Where("running", 0), _Where("running", NONE_U32 - 1),
    _Where("completing", None), _Where("completing", 7), None, _Where("running", 3),
)  # fmt: skip
_CHECK_FRAMES: Final = (
    (0, 0, 0, 0, 0, 0, bytes(32), 0),
    (255, 255, NONE_U32, NONE_U32, (1 << 64) - 1, (1 << 64) - 1, bytes(range(224, 256)),
     (1 << 63) - 1, 255),
    (1, 4, 2, 1, 1 << 40, 1024, names_detail("fold", "grad"), 987654321012, 2),
    (2, 3, None, NONE_U32, 9, 1 << 20, None, -(1 << 63)),
    (5, 0, 1, NONE_U32, 0, 0, names_detail("BudgetExhausted"), 5, 1),
    (3, 5, 0, 2, 17, 96, bytes(range(32)), 1 << 40),
    (4, 0, None, 3, 0, 0, names_detail("fold"), 11),
    (1, 4, 3, 1, 1 << 41, 1024, bytes(range(1, 33)), 12, 0),
)  # fmt: skip
_CHECK_LIMIT: Final = 4
_CHECK_ROOM: Final = 3  # records of room: the fourth is dropped, then the ring wraps


def self_check(writer: WriterType, path: Path) -> None:
    """``writer`` stores what :class:`PythonWriter` stores for a fixed series of records, byte
    for byte but for each record's end and so its check (its own clock), which must be a time
    of this process's monotonic clock while it wrote, and a check that fits the record.

    Raises:
        Unavailable: it does not (``path`` names the library).
    """
    found = []
    for kind in (writer, PythonWriter):
        room = bytearray(TRACE_HEADER_SIZE + _CHECK_ROOM * TRACE_RECORD_SIZE)
        made = kind(_CHECK_LIMIT, True, _PHASES, _ESTABLISHING, _COMPLETING, lambda: False)
        made.buffer = room
        made.size = len(room)
        ends = []
        frame: Callable[..., None] = made.frame  # the fields are of every type in turn
        for where, fields in zip(_CHECK_WHERE, _CHECK_FRAMES, strict=True):
            made.where = where  # type: ignore[assignment]
            before = time.monotonic_ns()
            frame(*fields)
            ends.append((before, time.monotonic_ns()))
        found.append((room, made.seq, ends))
    (got, got_seq, ends), (expected, expected_seq, _) = found
    same = got_seq == expected_seq == len(_CHECK_FRAMES) and got[:TRACE_HEADER_SIZE] == bytes(
        TRACE_HEADER_SIZE
    )
    for index in range(_CHECK_ROOM):
        at = TRACE_HEADER_SIZE + index * TRACE_RECORD_SIZE
        mine, theirs = got[at : at + TRACE_RECORD_SIZE], expected[at : at + TRACE_RECORD_SIZE]
        seq = int.from_bytes(mine[:8], "little")
        end = int.from_bytes(mine[16:24], "little")
        before, after = ends[seq] if seq < len(ends) else (1, 0)
        same = (
            same
            and mine[:16] == theirs[:16]
            and mine[24:_CHECKED] == theirs[24:_CHECKED]
            and before <= end <= after
            and check_of(mine) == int.from_bytes(mine[_CHECKED:], "little")
        )
    if not same:
        raise Unavailable(f"{path} differs from the Python writer on its self-check")


# --- the trace --------------------------------------------------------------------------------


@final
class Tracer:
    """One role's trace file, open for writing; ``frame`` and every method write one record
    now.

    ``where`` gives each record its round and phase; it is the role's, set when the session
    starts (:meth:`attach`). Times are the host's monotonic clock in nanoseconds
    (``time.monotonic_ns``), one clock for every process of a host. The records are stored by
    the compiled writer where it can be had (:func:`writer_type`), else by
    :class:`PythonWriter`, to the same bytes.
    """

    __slots__ = ("_cap", "_fd", "_map", "_names", "_role", "_writer", "bounds", "frame", "path",
                 "where")  # fmt: skip

    def __init__(
        self, fd: int, path: Path, bounds: TraceBounds, role: int, writer: WriterType | None = None
    ) -> None:
        self._fd: int | None = fd
        self._map: mmap.mmap | None = None
        self._cap = TRACE_HEADER_SIZE + bounds.limit * TRACE_RECORD_SIZE
        self._names: dict[tuple[str, str], bytes] = {}
        self._role = role
        kind = writer_type() if writer is None else writer
        ring = bounds.mode == "ring"
        self._writer = kind(bounds.limit, ring, _PHASES, _ESTABLISHING, _COMPLETING, self._grow)
        self.frame: Frame = self._writer.frame
        """One record (:class:`Frame`): the writer's own method, called straight from each
        hook of the runtime."""
        self.path = path
        self.bounds = bounds
        self.where: Whereabouts | None = None

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        role: int,
        participants: int,
        identity: RunIdentity,
        digest: str,
        bounds: TraceBounds,
        writer: WriterType | None = None,
    ) -> Tracer:
        """Make a new trace file at ``path`` (one an earlier launch left is replaced) and write
        its header; its records are stored by ``writer`` (default: :func:`writer_type`'s).

        Raises:
            OSError: the folder or the file cannot be made or written.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        # A new file, never the old one truncated: a reader holding the old one keeps it whole.
        path.unlink(missing_ok=True)
        # Read and write: a shared mapping that stores needs both.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
        header = TraceHeader(
            role=role,
            participants=participants,
            identity=hashlib.sha256(identity.encode()).digest(),
            digest=digest,
            bounds=bounds,
            monotonic_ns=time.monotonic_ns(),
            wall_ns=time.time_ns(),
        )
        try:
            os.write(fd, encode_header(header))
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path, bounds, role, writer)

    def attach(self, where: Whereabouts) -> None:
        """Take the round and phase of each record from ``where``, and be its ``trace``."""
        self.where = where
        self._writer.where = where
        where.trace = self

    @property
    def records(self) -> int:
        """Records written so far (those a ``first`` trace dropped past its limit included)."""
        return self._writer.seq

    def _grow(self) -> bool:
        """Reserve and map the next chunk of the file (never past the bounds' last record);
        False when it cannot be (the trace is then given up). The writer calls it when a
        record lies past the room it has."""
        fd = self._fd
        if fd is None:
            return False
        writer = self._writer
        reserved = writer.size
        size = min(reserved + CHUNK_RECORDS * TRACE_RECORD_SIZE, self._cap)
        try:
            # Blocks reserved before any store: a full disk is an error here, not a SIGBUS.
            os.posix_fallocate(fd, reserved, size - reserved)
            if self._map is None:
                self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                writer.buffer = self._map
            else:
                self._map.resize(size)
        except OSError as error:
            self._give_up(str(error))
            return False
        writer.size = size
        return True

    def _give_up(self, why: str) -> None:
        print(
            f"role {self._role}: trace: cannot write {self.path}: {why}; the run goes on untraced",
            file=sys.stderr,
            flush=True,
        )
        self.close()

    # --- the events -------------------------------------------------------------------------

    def abort(self, event: Event, peer: int, cause: str, start: int) -> None:
        """An ABORT frame sent or received on the edge to ``peer``, carrying ``cause`` (the
        original cause's class)."""
        self.frame(event, FrameKind.ABORT, peer, 0, 0, 0, names_detail(cause), start)

    def refused(
        self, error: SlotFault, kind: FrameKind, slot: int, extent: int, start: int
    ) -> None:
        """A frame refused at a receive slot of ``kind`` and ``slot``: the refusal's class, its
        peer and the version the slot expected (its counter, unchanged)."""
        version = error.version if isinstance(error.version, int) else 0
        peer = error.peer if isinstance(error.peer, int) else None
        detail = names_detail(type(error).__name__)
        self.frame(Event.REFUSED, kind, peer, slot, version, extent, detail, start)

    def operation(self, name: str, region: str, start: int) -> None:
        """A local operation ``name`` on ``region`` (a fold is ``fold``), from ``start``."""
        detail = self._names.get((name, region))
        if detail is None:  # a schedule names a few operations and regions: each made once
            detail = self._names[(name, region)] = names_detail(name, region)
        self.frame(Event.OPERATION, 0, None, NONE_U32, 0, 0, detail, start)

    def wait(self, budget: str, peer: int | None, start: int, *, ran_out: bool = False) -> None:
        """A wait bounded by ``budget`` on ``peer`` (None: no one peer), from ``start``."""
        flags = FLAG_RAN_OUT if ran_out else 0
        self.frame(Event.WAIT, 0, peer, NONE_U32, 0, 0, names_detail(budget), start, flags)

    def failed(self, error: AlphaError) -> None:
        """The role failed with ``error``: its class; for an abort, the original cause's
        class too, and the role that failed first (in the slot field) and the peer that told
        this role."""
        now = time.monotonic_ns()
        if isinstance(error, RoundAborted):
            detail = names_detail(type(error).__name__, error.cause)
            self.frame(Event.FAILED, 0, error.peer, error.origin, 0, 0, detail, now)
            return
        peer = getattr(error, "peer", None)
        peer = peer if isinstance(peer, int) else None
        detail = names_detail(type(error).__name__)
        self.frame(Event.FAILED, 0, peer, self._role, 0, 0, detail, now)

    def committed(self) -> None:
        """The role learned that the run committed."""
        self.frame(Event.COMMITTED, 0, None, NONE_U32, 0, 0, NO_DIGEST, time.monotonic_ns())

    def close(self) -> None:
        """Stop writing: unmap, cut the file to the records written (the reserved rest
        dropped), close. Never raises: a trace only shows the run."""
        fd, self._fd = self._fd, None
        writer = self._writer
        writer.open = False
        writer.buffer = None
        writer.where = None
        if self._map is not None:
            self._map.close()
            self._map = None
        if fd is not None:
            # Records stored: every one written, but none past the limit or the room reserved.
            room = (writer.size - TRACE_HEADER_SIZE) // TRACE_RECORD_SIZE
            stored = min(writer.seq, room)
            with contextlib.suppress(OSError):  # the reader drops a reserved tail of zeros too
                os.ftruncate(fd, TRACE_HEADER_SIZE + stored * TRACE_RECORD_SIZE)
            os.close(fd)
        if self.where is not None and self.where.trace is self:
            self.where.trace = None
