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
import mmap
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from alpha.core.identity import RunIdentity
from alpha.errors import AlphaError, RoundAborted, SlotFault
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
    encode_header,
    names_detail,
)
from alpha.wire.frame import FrameKind

if TYPE_CHECKING:
    from alpha.runtime.whereabouts import Whereabouts

__all__ = ["CHUNK_RECORDS", "NO_DIGEST", "Tracer"]

CHUNK_RECORDS: Final = 4096
"""Records the file grows by at once: 384 KiB, a whole number of pages (96 x 4096 = 96 pages),
so that growing (reserving the blocks, remapping) is a few times a second at the busiest, not
per record; a short run's file is cut to what it wrote at close."""

NO_DIGEST: Final = bytes(32)
"""The detail of a frame whose payload digest is not recorded (an ABORT names its cause)."""

_pack_body: Final = RECORD_BODY.pack_into
_pack_check: Final = RECORD_CHECK.pack_into
_CHECKED: Final = RECORD_BODY.size  # the check covers the body

# The whereabouts' phase as a record's (plain ints: struct takes them without a conversion).
_ESTABLISHING: Final = int(Phase.ESTABLISHING)
_COMPLETING: Final = int(Phase.COMPLETING)
_PHASES: Final = {"establishing": _ESTABLISHING, "running": int(Phase.RUNNING)}
_FILE_MODE: Final = 0o644  # a trace holds digests and timings, no key: anyone may read it


@final
class Tracer:
    """One role's trace file, open for writing; every method writes one record now.

    ``where`` gives each record its round and phase; it is the role's, set when the session
    starts (:meth:`attach`). Times are the host's monotonic clock in nanoseconds
    (``time.monotonic_ns``), one clock for every process of a host.
    """

    __slots__ = (
        "_cap", "_fd", "_limit", "_map", "_names", "_ring", "_role", "_seq", "_size", "bounds",
        "path", "where",
    )  # fmt: skip

    def __init__(self, fd: int, path: Path, bounds: TraceBounds, role: int) -> None:
        self._fd: int | None = fd
        self._map: mmap.mmap | None = None
        self._size = TRACE_HEADER_SIZE  # bytes of the file reserved (and mapped past the header)
        self._cap = TRACE_HEADER_SIZE + bounds.limit * TRACE_RECORD_SIZE
        self._limit = bounds.limit
        self._ring = bounds.mode == "ring"
        self._names: dict[tuple[str, str], bytes] = {}
        self._seq = 0
        self._role = role
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
    ) -> Tracer:
        """Make a new trace file at ``path`` (one an earlier launch left is replaced) and write
        its header.

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
        return cls(fd, path, bounds, role)

    def attach(self, where: Whereabouts) -> None:
        """Take the round and phase of each record from ``where``, and be its ``trace``."""
        self.where = where
        where.trace = self

    @property
    def records(self) -> int:
        """Records written so far (those a ``first`` trace dropped past its limit included)."""
        return self._seq

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
    ) -> None:
        """One record, from ``start`` to now: a frame sent (``Event.SEND``) or received and
        checked (``Event.RECEIVE``) with its payload digest ``D`` (never its trailer) as
        ``detail``; every other event comes here too, through the methods below."""
        # The hot path of every hook, written out (a call costs as much as a field here):
        # record_offset's arithmetic, the layout's two structs, the check over the body.
        if self._fd is None:
            return
        seq = self._seq
        self._seq = seq + 1
        limit = self._limit
        if seq < limit:
            at = TRACE_HEADER_SIZE + seq * TRACE_RECORD_SIZE
        elif self._ring:
            at = TRACE_HEADER_SIZE + (seq % limit) * TRACE_RECORD_SIZE
        else:
            return  # a "first" trace past its limit keeps what it has
        if at >= self._size and not self._grow():
            return
        where = self.where
        if where is None:
            phase, round_ = _ESTABLISHING, NONE_U32
        else:
            phase = _PHASES.get(where.phase, _COMPLETING)
            round_ = NONE_U32 if where.round is None else where.round
        mapped = self._map
        assert mapped is not None  # grown above
        _pack_body(
            mapped, at, seq, start, time.monotonic_ns(), event, kind, phase, flags,
            NONE_U32 if peer is None else peer, slot, round_, version, extent,
            NO_DIGEST if detail is None else detail, RECORD_MARK,
        )  # fmt: skip
        body = mapped[at : at + _CHECKED]
        _pack_check(mapped, at + _CHECKED, int.from_bytes(body, "little") % CHECK_PRIME)

    def _grow(self) -> bool:
        """Reserve and map the next chunk of the file (never past the bounds' last record);
        False when it cannot be (the trace is then given up)."""
        fd = self._fd
        assert fd is not None
        size = min(self._size + CHUNK_RECORDS * TRACE_RECORD_SIZE, self._cap)
        try:
            # Blocks reserved before any store: a full disk is an error here, not a SIGBUS.
            os.posix_fallocate(fd, self._size, size - self._size)
            if self._map is None:
                self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            else:
                self._map.resize(size)
        except OSError as error:
            self._give_up(str(error))
            return False
        self._size = size
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
        if self._map is not None:
            self._map.close()
            self._map = None
        if fd is not None:
            # Records stored: every one written, but none past the limit or the room reserved.
            stored = min(self._seq, (self._size - TRACE_HEADER_SIZE) // TRACE_RECORD_SIZE)
            with contextlib.suppress(OSError):  # the reader drops a reserved tail of zeros too
                os.ftruncate(fd, TRACE_HEADER_SIZE + stored * TRACE_RECORD_SIZE)
            os.close(fd)
        if self.where is not None and self.where.trace is self:
            self.where.trace = None
