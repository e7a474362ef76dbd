"""Frame channels: one per edge, moving frames over a trio stream through the frame codec.

A channel never interprets bytes itself: sending asks a :class:`~alpha.wire.frame.SendSlot` for the
header, payload view and trailer; receiving arms a :class:`~alpha.wire.frame.ReceiveSlot` and reads
with ``recv_into`` straight into the memory the reception offers, capped at the current part of
the frame, so a large payload lands in its buffer without another copy and no read crosses into
the next frame. Every wait is bounded by a named budget.

Aborts (``docs/failure.md``): a receive accepts an ABORT frame in place of the frame it expects
and raises :class:`~alpha.errors.RoundAborted` with the cause it carries. While no receive is in
progress, the abort watch (:meth:`FrameChannel.watch_for_abort`) looks at the next bytes of the
stream, so an ABORT from a peer the schedule is not reading from stops the role at once too,
wherever it waits in the stream: a frame the schedule will read (its header equal, byte for
byte, to the header one of the edge's registered receive slots expects next,
:meth:`FrameChannel.expect`) is read past, into a buffer of this channel, and the receive that
the schedule has for it takes its bytes from there as it would from the socket, checking them
exactly as it checks bytes from the socket. A channel remembers whether its sending side is at
a frame boundary, since an ABORT can only follow a whole frame.

The specs of the edge's frames come from its :class:`~alpha.runtime.edge.EdgeEnd`
(:attr:`FrameChannel.edge`): the channel makes no spec of its own.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, final

import trio

from alpha.core.budgets import Budgets
from alpha.core.identity import RunIdentity
from alpha.errors import BudgetExhausted, FrameRefused, FrameSpecInvalid, PeerLost, RoundAborted
from alpha.records.trace import FLAG_SHARED, Event
from alpha.runtime.cause import as_one_error
from alpha.runtime.edge import EdgeEnd
from alpha.runtime.shared import Area, Region
from alpha.runtime.whereabouts import Whereabouts
from alpha.wire.abort import AbortCause, decode_cause, encode_cause
from alpha.wire.frame import (
    FORMAT_VERSION,
    HEADER_SIZE,
    MAGIC,
    MAX_VERSION,
    FrameKind,
    payload_digest,
)
from alpha.wire.receive import ReceiveSlot, Reception
from alpha.wire.send import SendSlot

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "ABORT_SEND_WAIT",
    "HASH_PIECE",
    "HASH_PIECE_MAX",
    "LEAN_RUN",
    "OVERLAP_MIN",
    "READ_AHEAD_MAX",
    "SMALL_FRAME",
    "TAKEN_POLL_MAX",
    "FrameChannel",
    "SharedDigest",
]

# Bytes read at once when checking that nothing follows the last frame: any byte is too many.
_END_PROBE: Final = 64

# How many first bytes of a frame say it is an ABORT: magic, format and kind. The abort watch
# peeks at this many (``FrameChannel._abort_head`` holds them for the edge's layout).
_ABORT_HEAD_SIZE: Final = len(MAGIC) + 2

# How long an edge must be idle before the watch looks at it. Re-arming the watch after every
# frame would cost a readiness registration and a peek per frame (about a fifth of a 1 KiB
# round trip: bench/watch.py); an ABORT found 20 ms later still stops the role long before
# any budget would.
_WATCH_GRACE: Final = 0.02

# A frame's first bytes arrive together in practice; when fewer than the head are in, the
# watch looks again after this pause instead of spinning on a readable socket.
_PEEK_PAUSE: Final = 0.005

# The most bytes the watch takes from the socket at once while it reads past a frame.
_AHEAD_PIECE: Final = 1 << 20

# What one look of the watch ends with: look again (a receive came, or the head is not whole
# yet), wait until a receive takes the frame at the head, or stop (the peer's last frame is in).
_AGAIN: Final = 0
_PARK: Final = 1
_DONE: Final = 2

# How often a failing role looks whether its ABORT reached the peer's kernel: a loopback or
# LAN round trip is well below this, so the role leaves within a poll or two.
_FLUSH_POLL: Final = 0.005

# After a send found the connection broken, the peer's ABORT (sent before it closed) is already
# in this side's buffer or nowhere: a short look is enough.
_SALVAGE_WAIT: Final = 0.2

LEAN_RUN: Final = 16
"""The most socket calls a channel makes without a trio checkpoint when the kernel has the
bytes (or the room) at once: every call that waits yields anyway, and one checkpoint per this
many keeps a busy channel cancellable and its role's other tasks running."""

SMALL_FRAME: Final = 16 << 10
"""Frames of at most this many bytes are read whole, in one call, into a channel's scratch and
fed to their reception (the lean path): one system call and one checkpoint at most per frame
instead of one for the header and one for the rest. Larger frames are read straight into
their slot's buffer."""

OVERLAP_MIN: Final = 1 << 20
"""Payloads of at least this many bytes are hashed in a worker thread while they move: a
sender hashes while header and payload leave (the trailer follows), a receiver hashes what
has arrived while more arrives. hashlib releases the GIL on large buffers, so the hashing and
the socket copies run on two cores; below this size a thread costs more than it saves."""

HASH_PIECE: Final = 1 << 20
"""Bytes a receiver hashes in one go in its worker thread (at least; more when more wait, up
to :data:`HASH_PIECE_MAX`), so that a thread hand-off (tens of microseconds) is small beside
the hash (about a millisecond)."""

HASH_PIECE_MAX: Final = 8 << 20

# Bytes a sender writes into its region at once, between two checkpoints, so that the role's
# other tasks (its other sends, the digest's) get their turn; a piece takes about 0.1 ms.
_WRITE_PIECE: Final = 1 << 20

# The longest pause of a receiver between two looks at how much of a large payload its sender
# has written. An honest sender has written all of it before it sends the header, so this is
# for a sender that did not: the receive budget bounds the wait.
_WRITTEN_POLL_MAX: Final = 0.001

# How long a sender first waits before it looks again whether the receiver took a slot's
# previous payload out of the region; each look doubles it, up to TAKEN_POLL_MAX.
_TAKEN_POLL_MIN: Final = 50e-6

TAKEN_POLL_MAX: Final = 0.005
"""The longest pause between two looks of a sender at a slot's taken counter. An honest
receiver took the previous payload a round ago, so a sender almost never waits; one that does
(the receiver is a frame behind) starts its frame within this of the copy, and the receive
budget bounds the whole wait."""

READ_AHEAD_MAX: Final = 256 << 20
"""The most bytes of frames the watch holds read past on one edge, not yet taken by their
receives. An honest peer runs at most about a round ahead of this role on an edge (its next
frame waits for this role's reply), so this is a few frames of the largest region; a peer
that sends further ahead is held back by TCP again, as it is without the watch, and a frame
larger than this is left in the socket (an ABORT behind it waits for its receive)."""

ABORT_SEND_WAIT: Final = 5.0
"""The longest a failing role waits to hand one ABORT frame to the kernel (also bounded by the
receive budget). The frame is 676 bytes and fits any socket buffer; only a peer that stopped
reading while a large frame filled the buffer holds it up, and a failing role must not linger."""


def _unacknowledged(sock: trio.socket.SocketType) -> int:
    """Bytes of this socket's sending side not yet acknowledged by the peer (Linux SIOCOUTQ)."""
    try:
        data = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0  # the socket is gone: nothing more will be sent
    return int(struct.unpack("i", data)[0])


def _drop_sent(pieces: list[memoryview], sent: int) -> None:
    """Take the first ``sent`` bytes off ``pieces``, the views a ``sendmsg`` was given."""
    while sent and sent >= len(pieces[0]):
        sent -= len(pieces[0])
        pieces.pop(0)
    if sent:
        pieces[0] = pieces[0][sent:]


@final
class SharedDigest:
    """One payload's digest ``D`` (``name``: ``"sha256"`` or ``"blake3"``) for every frame that
    carries it: known already, or computed once, on first demand (in a worker thread for a
    large payload), while the frames that wait for it send their headers and payloads."""

    __slots__ = ("_done", "_name", "_payload", "_value")

    def __init__(self, payload: Buffer, known: bytes | None = None, name: str = "sha256") -> None:
        self._payload = payload
        self._value = known
        self._name = name
        self._done: trio.Event | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def known(self) -> bytes | None:
        return self._value

    async def get(self) -> bytes:
        while self._value is None:
            if self._done is not None:
                await self._done.wait()
                continue
            self._done = trio.Event()
            try:
                if memoryview(self._payload).nbytes >= OVERLAP_MIN:
                    self._value = await trio.to_thread.run_sync(
                        payload_digest, self._payload, self._name
                    )
                else:
                    self._value = payload_digest(self._payload, self._name)
            finally:
                done, self._done = self._done, None  # a cancelled computation: the next asks
                done.set()
        return self._value


@final
class FrameChannel:
    """Frames to and from one peer over one connected stream.

    One task may send while another receives; two concurrent sends (or receives) on one
    channel are a schedule bug and trio refuses them. :meth:`watch_for_abort` may run beside
    both.

    ``edge`` is this role's end of the edge, which makes every spec of its frames; by default
    a new one for ``role``, ``peer`` and ``identity``. A channel without an identity (a bare
    transport, as benchmarks use) has no edge: it can neither send nor watch for an ABORT.

    Raises:
        FrameSpecInvalid: ``edge`` is the end of another edge than ``role`` to ``peer``.
    """

    def __init__(
        self,
        stream: trio.SocketStream,
        *,
        role: int,
        peer: int,
        budgets: Budgets,
        identity: RunIdentity | None = None,
        where: Whereabouts | None = None,
        read_ahead: int = READ_AHEAD_MAX,
        edge: EdgeEnd | None = None,
    ) -> None:
        if edge is None and identity is not None:
            edge = EdgeEnd(role, peer, identity)
        if edge is not None and (edge.role, edge.peer, edge.identity) != (role, peer, identity):
            raise FrameSpecInvalid(
                f"a channel from role {role} to role {peer} cannot carry the frames of {edge!r}"
            )
        # trio sets a 16 KiB TCP_NOTSENT_LOWAT on its streams, which suits interactive traffic;
        # for frames of megabytes it makes the sender wake for every 16 KiB and costs about a
        # third of the throughput (bench/endpoints.py). 0 restores the system default.
        if hasattr(socket, "TCP_NOTSENT_LOWAT"):
            stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, 0)
        self.stream = stream
        # The standard socket under trio's (the same descriptor, closed with it), for the lean
        # path's calls that need no checkpoint; None where trio's socket hides it.
        plain = getattr(stream.socket, "_sock", None)
        self._plain: socket.socket | None = plain if isinstance(plain, socket.socket) else None
        self._unyielded = 0  # socket calls since this channel's last checkpoint
        self._scratch = memoryview(bytearray(SMALL_FRAME))  # the lean path's whole small frames
        self.role = role
        self.peer = peer
        self.budgets = budgets
        self.identity = identity
        self.edge = edge
        # The first bytes of an ABORT frame on this edge: magic, the edge's layout, the kind.
        layout = FORMAT_VERSION if edge is None else edge.layout
        self._abort_head = MAGIC + bytes([layout, FrameKind.ABORT])
        self.where = where or Whereabouts(role)
        self.sent_bytes = 0
        self.received_bytes = 0
        self.shared_bytes = 0  # payload bytes that moved through a region, either way
        self._send_whole = True  # the sending side is at a frame boundary
        self._write_closed = False
        self._read_whole = True  # the receiving side is at a frame boundary
        self._reading = False  # a receive is in progress
        self._receipts = 0  # receives finished, so the watch can tell a busy edge
        self._taking_abort = False  # the watch is receiving an ABORT frame
        self._eof_expected = False  # the last frame from the peer has arrived
        self._watch_scope: trio.CancelScope | None = None
        self._lot = trio.lowlevel.ParkingLot()
        # Reading ahead (docs/failure.md): the slots whose frames the watch may read past,
        # each with whether it is the peer's last frame on this edge; the bytes it read past
        # and how many of them receives took; the frames those bytes are, in stream order,
        # none received yet (the last one may still be coming in: ``_ahead_left`` bytes).
        self._expected: list[tuple[ReceiveSlot, bool]] = []
        self._ahead = bytearray()
        self._ahead_at = 0
        self._ahead_frames: deque[tuple[ReceiveSlot, bool]] = deque()
        self._ahead_left = 0
        self._read_ahead = read_ahead
        # Shared-memory regions (docs/frames.md): the one this role made for the peer's
        # payloads, and the one the peer made for this role's.
        self.incoming: Region | None = None
        self.outgoing: Region | None = None

    @property
    def local_port(self) -> int:
        return int(self.stream.socket.getsockname()[1])

    @property
    def remote_port(self) -> int:
        return int(self.stream.socket.getpeername()[1])

    @property
    def ahead(self) -> int:
        """Bytes the watch read past (frames the schedule has not read yet) that no receive
        has taken yet."""
        return len(self._ahead) - self._ahead_at

    @property
    def can_abort(self) -> bool:
        """Whether an ABORT frame can still be sent: the sending side is open and at a frame
        boundary (a frame cut off in the middle leaves the peer nothing to parse)."""
        return self._send_whole and not self._write_closed

    # --- sending ----------------------------------------------------------------------------

    async def send(
        self,
        slot: SendSlot,
        payload: Buffer,
        *,
        step: str = "sending",
        digest: bytes | SharedDigest | None = None,
    ) -> bytes:
        """Frame ``payload`` on ``slot`` and send it; the payload is not copied. ``digest`` is
        the payload's SHA-256 when the caller knows it (it framed or received the same bytes
        before), or a :class:`SharedDigest` several sends of the payload share: the payload is
        then hashed once. A large payload is hashed in a worker thread while header and
        payload are sent; its trailer follows.

        Returns:
            The payload's digest, to frame the same bytes again.

        Raises:
            FrameSpecInvalid: the payload does not fit the slot.
            VersionOverflow: the slot's counter is spent.
            PeerLost: the connection broke.
            BudgetExhausted: the peer did not take the bytes within the receive budget.
        """
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        name = slot.sealing.digest
        shared = digest if isinstance(digest, SharedDigest) else SharedDigest(payload, digest, name)
        if shared.name != name:
            raise FrameSpecInvalid(
                f"a payload digest of {shared.name} cannot seal a frame whose digest is {name}"
            )
        area = self._area(self.outgoing, slot.spec.kind, slot.spec.slot)
        try:
            if area is not None:
                found = await self._send_shared(slot, payload, step, shared, area)
                self.shared_bytes += area.extent
            elif shared.known is None and slot.spec.extent >= OVERLAP_MIN:
                found = await self._send_hashing(slot, payload, step, shared)
            else:
                frame = slot.prepare(payload, digest=await shared.get())
                # What the kernel takes at once needs no budget: a scope only for the rest.
                rest = self._write_now(frame.pieces(), step)
                if rest:
                    with self._bounded(step):
                        await self._write(rest, ends_frame=True)
                else:
                    self._send_whole = True
                    await self._pace()
                found = frame.digest
        except PeerLost:
            await self._raise_pending_abort()
            raise
        self.sent_bytes += slot.spec.frame_size
        if trace is not None:
            spec = slot.spec
            trace.frame(
                Event.SEND, spec.kind, self.peer, spec.slot, slot.next_version - 1, spec.extent,
                found, began, 0 if area is None else FLAG_SHARED,
            )  # fmt: skip
        return found

    async def _send_hashing(
        self, slot: SendSlot, payload: Buffer, step: str, shared: SharedDigest
    ) -> bytes:
        """Send header and payload while the payload's digest is computed (in a worker thread,
        or by another send of the same payload), then the trailer; the receive budget bounds
        the whole frame."""
        unsealed = slot.begin(payload)
        found: list[bytes] = []

        async def digest_behind() -> None:
            found.append(await shared.get())

        with self._bounded(step):
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(digest_behind)
                    await self._write((unsealed.header, unsealed.payload), ends_frame=False)
            except BaseExceptionGroup as group:
                raise as_one_error(group) from None
            frame = unsealed.seal(found[0])
            await self._write((frame.trailer,), ends_frame=True)
        return frame.digest

    async def _send_shared(
        self, slot: SendSlot, payload: Buffer, step: str, shared: SharedDigest, area: Area
    ) -> bytes:
        """Send a payload through the edge's region: once the receiver took the slot's previous
        payload out, write this one into the slot's area (in a worker thread for a large one,
        while its digest is computed), then send header and trailer over TCP, the doorbell;
        the receive budget bounds the whole frame."""
        region = self.outgoing
        assert region is not None
        unsealed = slot.begin(payload)  # checks the payload against the spec first
        version = slot.next_version - 1
        found: list[bytes] = []

        async def digest_behind() -> None:
            found.append(await shared.get())

        with self._bounded(step):
            await self._wait_taken(region, area, version)
            if area.extent >= OVERLAP_MIN:
                # The payload a piece at a time (checkpoints between: the role's other sends
                # take turns) while a worker thread computes its digest; then the header, so
                # the receiver copies and hashes while this side's digest is still being
                # computed; the trailer once it is. Each piece is counted as written once it
                # is in, and a receiver copies no further than that.
                region.wrote(area, 0)
                view = unsealed.payload
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(digest_behind)
                        for at in range(0, area.extent, _WRITE_PIECE):
                            region.write_piece(area, view[at : at + _WRITE_PIECE], at)
                            await trio.lowlevel.checkpoint()
                        await self._write((unsealed.header,), ends_frame=False)
                except BaseExceptionGroup as group:
                    raise as_one_error(group) from None
                frame = unsealed.seal(found[0])
                await self._write((frame.trailer,), ends_frame=True)
                return frame.digest
            else:
                region.write(area, unsealed.payload)
                await digest_behind()
            frame = unsealed.seal(found[0])
            rest = self._write_now((frame.header, frame.trailer), step)
            if rest:
                await self._write(rest, ends_frame=True)
            else:
                self._send_whole = True
                await self._pace()
        return frame.digest

    async def _wait_taken(self, region: Region, area: Area, version: int) -> None:
        """Wait until the receiver took ``version`` frames of ``area``'s slot out of the
        region: this one's payload may then take the place of the last."""
        pause = _TAKEN_POLL_MIN
        while region.taken(area) < version:
            await trio.sleep(pause)
            pause = min(2 * pause, TAKEN_POLL_MAX)

    @staticmethod
    def _area(region: Region | None, kind: FrameKind, slot: int) -> Area | None:
        """The area of a DATA slot in ``region``; None for a frame that travels whole on TCP."""
        if region is None or kind != FrameKind.DATA:
            return None
        return region.layout.area(slot)

    def wire_size(self, slot: ReceiveSlot) -> int:
        """Bytes of ``slot``'s frames that come over TCP: the whole frame, or header and
        trailer when its payload comes through the region."""
        spec = slot.spec
        if self._area(self.incoming, spec.kind, spec.slot) is None:
            return spec.frame_size
        return spec.frame_size - spec.extent

    async def _send_pieces(self, frame: tuple[Buffer, ...], step: str, budget: float) -> None:
        with self._bounded(step, seconds=budget):
            await self._write(frame, ends_frame=True)

    async def _write(self, frame: tuple[Buffer, ...], *, ends_frame: bool) -> None:
        sock = self.stream.socket
        plain = self._plain
        # One sendmsg per frame where it fits: header, payload and trailer leave together
        # instead of as three writes, the small ones as segments of their own. The kernel is
        # asked first, without a checkpoint; the task waits only when it says the buffer is
        # full (the lean path: docs/frames.md).
        pieces = [memoryview(piece) for piece in frame if len(memoryview(piece))]
        self._send_whole = False
        await self._pace()
        while pieces:
            if plain is None:
                sent = await sock.sendmsg(pieces)
            else:
                try:
                    sent = plain.sendmsg(pieces, (), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    continue
            _drop_sent(pieces, sent)
        self._send_whole = ends_frame

    def _write_now(self, frame: tuple[Buffer, ...], step: str) -> tuple[Buffer, ...]:
        """Hand the kernel as much of ``frame`` as it takes without waiting (the lean path);
        return what is left, the whole frame without a standard socket.

        Raises:
            PeerLost: the connection broke.
        """
        plain = self._plain
        if plain is None:
            return frame
        pieces = [memoryview(piece) for piece in frame if len(memoryview(piece))]
        self._send_whole = False
        while pieces:
            try:
                sent = plain.sendmsg(pieces, (), socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as error:
                raise self._lost(step, str(error)) from None
            _drop_sent(pieces, sent)
        return tuple(pieces)

    async def _pace(self) -> None:
        """A checkpoint every :data:`LEAN_RUN` socket calls that did not wait: the lean path
        asks the kernel without yielding, and this keeps a role whose bytes are always there
        cancellable and fair to its other tasks (the abort watch, the launcher watch)."""
        self._unyielded += 1
        if self._unyielded >= LEAN_RUN:
            self._unyielded = 0
            await trio.lowlevel.checkpoint()

    async def send_eof(self, *, step: str = "ending the edge") -> None:
        """Tell the peer that nothing more comes from this side.

        Raises:
            PeerLost: the connection broke.
        """
        try:
            with self._bounded(step):
                await self.stream.send_eof()
        except PeerLost:
            await self._raise_pending_abort()
            raise
        self._write_closed = True

    async def _raise_pending_abort(self) -> None:
        """After a send found the connection broken: if the peer's ABORT arrived before the
        break, raise it, so the role names the original cause rather than the broken pipe."""
        if self._reading or not self._read_whole or self.edge is None or self._ahead:
            # Mid-frame (no ABORT can follow), a receive will find it, or frames read ahead
            # come first (the watch takes an ABORT behind them).
            return
        sock = self.stream.socket
        with trio.move_on_after(_SALVAGE_WAIT):
            # Waits while the watch takes an ABORT: it raises it, and that ends this task.
            await self._claim()
            try:
                head = await sock.recv(_ABORT_HEAD_SIZE, socket.MSG_PEEK)
            except OSError:
                return
            finally:
                self._release()
            if head != self._abort_head:
                return
            try:
                payload = await self.receive(self.edge.abort_in(), step="receiving an abort")
            except (PeerLost, BudgetExhausted, FrameRefused):
                return
            raise self._aborted(payload)

    async def send_abort(self, cause: AbortCause) -> bool:
        """Send one ABORT frame carrying ``cause`` and end this side of the edge, if the
        sending side can still carry a frame; return whether it was sent.

        Then it waits until the peer's kernel acknowledged every byte: the role closes its
        sockets next, and closing one with unread bytes resets it, which throws away whatever
        of the ABORT the kernel had not sent yet.

        Never raises for a broken or slow peer (the role is failing already); waits at most
        ``ABORT_SEND_WAIT`` seconds or the receive budget, whichever is smaller, for each of
        sending and the acknowledgement.
        """
        if not self.can_abort or self.edge is None:
            return False
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        frame = self.edge.abort_out().prepare(encode_cause(cause))
        wait = min(ABORT_SEND_WAIT, self.budgets.receive)
        try:
            await self._send_pieces(frame.pieces(), "sending an abort", wait)
            if trace is not None:
                trace.abort(Event.SEND, self.peer, cause.cause, began)
            await self.stream.send_eof()
        except (BudgetExhausted, PeerLost, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        except OSError:
            return False
        self._write_closed = True
        # Closing a socket with unread bytes resets it, and a reset drops whatever the kernel
        # had not sent: wait until the peer's kernel has every byte of the ABORT.
        with trio.move_on_after(wait):
            while _unacknowledged(self.stream.socket) > 0:
                await trio.sleep(_FLUSH_POLL)
        return True

    # --- receiving --------------------------------------------------------------------------

    async def receive(
        self, slot: ReceiveSlot, *, step: str = "receiving", first: bool = False, last: bool = False
    ) -> memoryview:
        """Receive the frame ``slot`` expects, straight into its buffer.

        The receive budget bounds the frame from the moment this role waits for it. With
        ``first`` (the first frame of an edge after the hellos: the peer may still be waiting
        for roles that start after it) the ``start`` budget bounds the wait for its first
        byte, and the receive budget the rest. With ``last`` the frame is the peer's last on
        this edge: its end-of-stream is expected from then on.

        Returns:
            A read-only view of the payload, valid until ``slot`` is armed again.

        Raises:
            RoundAborted: the peer sent an ABORT frame in this frame's place.
            FrameRefused: the codec refused the frame (the subclass says why); ``Truncated``
                when the peer closed the connection inside the frame.
            PeerLost: the connection broke, or the peer ended it before the frame's first byte.
            BudgetExhausted: the frame did not arrive within its budget.
        """
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        await self._claim()
        self._read_whole = False
        try:
            deferred = slot.spec.extent >= OVERLAP_MIN
            reception = slot.arm(deferred=deferred)
            sock = self.stream.socket
            if first:
                with self._bounded(step, budget="start", seconds=self.budgets.start):
                    if not self._ahead:  # else its first bytes are here already
                        await trio.lowlevel.wait_readable(sock)
            area = self._area(self.incoming, slot.spec.kind, slot.spec.slot)
            small = not deferred and slot.spec.frame_size <= SMALL_FRAME and self._plain is not None
            if area is not None:
                with self._bounded(step):
                    await self._read_shared(reception, area, slot.next_version, step)
                if not reception.aborted:
                    self.shared_bytes += area.extent
            elif (got := small and self._read_now(reception, step)) and not reception.remaining:
                await self._pace()  # the whole frame was in: no budget to bound
            else:
                with self._bounded(step):
                    if deferred:
                        await self._read_hashing(reception, step)
                    else:
                        if small:  # nothing was in when asked: wait before asking again
                            await self._read_small(reception, step, wait_first=not got)
                        while reception.remaining:
                            await self._read(reception, step)
            payload = reception.finish()
            self._read_whole = True
            if self._ahead_frames:
                self._received_ahead()
            if reception.aborted:
                aborted = self._aborted(payload)
                if trace is not None:
                    trace.abort(Event.RECEIVE, self.peer, aborted.cause, began)
                raise aborted
            if last:
                self._eof_expected = True
        except FrameRefused as refusal:
            if trace is not None:
                spec = slot.spec
                trace.refused(refusal, spec.kind, spec.slot, spec.extent, began)
            raise
        finally:
            self._release()
        self.received_bytes += slot.spec.frame_size
        if trace is not None:
            spec = slot.spec
            trace.frame(
                Event.RECEIVE, spec.kind, self.peer, spec.slot, slot.next_version - 1,
                spec.extent, slot.payload_digest, began, 0 if area is None else FLAG_SHARED,
            )  # fmt: skip
        return payload

    async def _read(self, reception: Reception, step: str) -> None:
        """One read into the frame, capped at the end of the frame: the header's rest while
        the header is incomplete, else what is left of payload and trailer in one scatter
        read."""
        views = reception.into_rest()
        if self._ahead:  # bytes the watch read past come first, checked as any others
            reception.advance(self._take_ahead(views))
            return
        sock = self.stream.socket
        plain = self._plain
        if plain is None:
            if len(views) == 1:
                count = await sock.recv_into(views[0])
            else:
                count = (await sock.recvmsg_into(views))[0]
        else:
            # The lean path: the kernel is asked first, without a checkpoint; the task waits
            # (and lets others run) only when nothing is in yet.
            while True:
                try:
                    if len(views) == 1:
                        count = plain.recv_into(views[0], 0, socket.MSG_DONTWAIT)
                    else:
                        count = plain.recvmsg_into(views, 0, socket.MSG_DONTWAIT)[0]
                    break
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(sock)
            await self._pace()
        if count == 0:
            if reception.received == 0:
                # Not a damaged frame: the peer went away where one was due.
                raise self._lost(step, "it ended the connection where a frame was due")
            reception.eof()
        reception.advance(count)

    async def _read_shared(self, reception: Reception, area: Area, version: int, step: str) -> None:
        """A frame whose payload comes through the region: the header over TCP, checked field
        by field; the payload copied out of the region into the slot's buffer (hashed as it
        comes, the large ones in a worker thread) and the slot's taken counter moved; then the
        trailer over TCP. An ABORT in the frame's place comes whole over TCP. A region cut
        short reads short: the frame is refused as ``Truncated``."""
        while reception.received < HEADER_SIZE:
            await self._read(reception, step)
        region = self.incoming
        assert region is not None
        if not reception.aborted:
            if area.extent >= OVERLAP_MIN:
                pause = [_TAKEN_POLL_MIN]

                async def fill() -> None:
                    assert region is not None
                    await self._copy_piece(reception, region, area, version, pause)

                await self._read_hashing(reception, step, fill, HEADER_SIZE + area.extent)
                return
            else:
                while reception.received < HEADER_SIZE + area.extent:
                    view = reception.into()
                    at = area.offset + reception.received - HEADER_SIZE
                    count = region.read_into(view, at)
                    if count == 0:
                        reception.eof()
                    reception.advance(count)
            region.take(area, version + 1)
        elif area.extent >= OVERLAP_MIN:
            # The slot's reception is deferred (its payload hashed by the caller): so is the
            # ABORT's that took its place, whose bytes must be hashed for its trailer to check.
            await self._read_hashing(reception, step)
            return
        while reception.remaining:
            await self._read(reception, step)

    async def _copy_piece(
        self, reception: Reception, region: Region, area: Area, version: int, pause: list[float]
    ) -> None:
        """Copy the next piece of a large payload out of the region, no further than its
        sender has written (wait a moment when nothing new is), in this thread: a copy is fast
        beside the hash, which a worker thread does behind it (:meth:`_read_hashing`). Once
        the payload is in, record it taken."""
        done = reception.received - HEADER_SIZE
        ready = min(region.written(area), area.extent)
        if ready <= done:
            await trio.sleep(pause[0])
            pause[0] = min(2 * pause[0], _WRITTEN_POLL_MAX)
            return
        pause[0] = _TAKEN_POLL_MIN
        view = reception.into()[: min(HASH_PIECE, ready - done)]
        count = region.read_into(view, area.offset + done)
        if count == 0:
            reception.eof()
        reception.advance(count)
        if reception.received == HEADER_SIZE + area.extent:
            region.take(area, version + 1)
        await self._pace()

    def _read_now(self, reception: Reception, step: str) -> bool:
        """Take a small frame's bytes the kernel has already, in one read capped at the
        frame's end, without waiting; return whether any were in (False too when bytes read
        past come first: the general path takes them).

        Raises:
            FrameRefused: as :meth:`Reception.feed`.
            PeerLost: the connection broke, or the peer ended it where a frame was due.
        """
        plain = self._plain
        if self._ahead or plain is None:
            return False
        scratch = self._scratch
        try:
            count = plain.recv_into(scratch, reception.remaining, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError as error:
            raise self._lost(step, str(error)) from None
        if count == 0:
            if reception.received == 0:
                raise self._lost(step, "it ended the connection where a frame was due")
            reception.eof()
        used = reception.feed(scratch[:count])
        if used < count:
            self._ahead += scratch[used:count]
        return True

    async def _read_small(
        self, reception: Reception, step: str, *, wait_first: bool = False
    ) -> None:
        """The lean path for a small frame: one read of the whole frame into this channel's
        scratch, then fed to the reception, which checks the header field by field before it
        takes any payload byte, as a read straight into the slot would. Bytes the frame did
        not use (it turned out to be an ABORT, which is shorter and the peer's last frame)
        are kept in the read-past buffer, never dropped. ``wait_first``: the kernel said a
        moment ago that nothing is in; wait for bytes before asking again."""
        if wait_first and not self._ahead:
            await trio.lowlevel.wait_readable(self.stream.socket)
        while not self._ahead:  # bytes read past come first: the general path takes them
            if self._read_now(reception, step):
                await self._pace()
                return
            await trio.lowlevel.wait_readable(self.stream.socket)

    async def _read_hashing(
        self,
        reception: Reception,
        step: str,
        fill: Callable[[], Awaitable[None]] | None = None,
        filled: int = 0,
    ) -> None:
        """Read a deferred reception while a worker thread hashes what has arrived, a piece at
        a time, in order; the trailer is checked once both are done. ``fill`` brings the bytes
        of the frame up to ``filled`` (a payload from a shared region), the socket the rest."""
        arrived = [trio.Event()]

        async def hash_behind() -> None:
            while True:
                piece = reception.unhashed(HASH_PIECE_MAX)
                if reception.remaining and len(piece) < HASH_PIECE:
                    await arrived[0].wait()
                    arrived[0] = trio.Event()
                    continue
                if not piece:
                    return
                await trio.to_thread.run_sync(reception.hash, piece)
                reception.hashed(len(piece))

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hash_behind)
                while reception.remaining:
                    if fill is not None and reception.received < filled:
                        await fill()
                    else:
                        await self._read(reception, step)
                    arrived[0].set()
        except BaseExceptionGroup as group:
            raise as_one_error(group) from None

    async def expect_eof(self, last: ReceiveSlot, *, step: str = "ending the edge") -> None:
        """Check that the peer ended its side after its last frame (``last``'s slot).

        Raises:
            TrailingBytes: bytes arrived after the last frame.
            PeerLost: the connection broke.
            BudgetExhausted: the peer did not end its side within the receive budget.
        """
        await self._claim()
        try:
            if self._ahead:  # the watch read past a frame after the last one
                extra = bytes(self._ahead[self._ahead_at : self._ahead_at + _END_PROBE])
            else:
                with self._bounded(step):
                    extra = await self.stream.receive_some(_END_PROBE)
        finally:
            self._release()
        if extra:
            try:
                last.refuse_trailing(len(extra))
            except FrameRefused as refusal:
                if self.where.trace is not None:
                    spec = last.spec
                    now = time.monotonic_ns()
                    self.where.trace.refused(refusal, spec.kind, spec.slot, spec.extent, now)
                raise
        self._eof_expected = True

    async def aclose(self) -> None:
        for region in (self.incoming, self.outgoing):
            if region is not None:
                region.close()
        await self.stream.aclose()

    # --- the abort watch --------------------------------------------------------------------

    def expect(self, slot: ReceiveSlot, *, last: bool = False) -> ReceiveSlot:
        """Register ``slot``, a receive slot of this edge (the peer sends, this role
        receives), so that the abort watch may read a frame of it past while the schedule waits
        elsewhere; ``last``: it is the peer's last frame on this edge, and its end-of-stream
        may follow. Registering the same slot again changes nothing. Returns ``slot``.

        The watch reads a frame past only when its header is, byte for byte, the header
        ``slot`` expects at its next version (counting frames of it read past already); it
        checks nothing else, and moves no counter: the receive does all of that.
        """
        if all(slot is not known for known, _ in self._expected):
            self._expected.append((slot, last))
        return slot

    async def watch_for_abort(self) -> None:
        """Run beside the role's work: while no receive is in progress, wait for bytes and
        look at them. An ABORT frame is received (bounded by the receive budget) and raised as
        :class:`RoundAborted`. A frame whose header one of the registered slots
        (:meth:`expect`) expects next is read past, into this channel's buffer (at most
        :data:`READ_AHEAD_MAX` bytes waiting), and the watch looks at what follows it; any
        other frame is left in the socket for the receive the schedule has for it. Returns
        once the peer has ended its side after its last frame.

        Raises:
            RoundAborted: the peer aborted the run.
            PeerLost: the peer closed or reset the connection while frames were still due.
            FrameRefused: the ABORT frame itself was refused.
            BudgetExhausted: an ABORT frame began but did not complete in time.
        """
        assert self.edge is not None, "a watched channel knows its run identity"
        sock = self.stream.socket
        raw = socket.socket(fileno=sock.dup().detach())  # to read without a checkpoint
        try:
            while True:
                if self._reading or not self._read_whole:
                    await self._lot.park()  # a receive is on the edge (or failed inside it)
                    continue
                # While receives follow each other on this edge, they find any ABORT
                # themselves: look only once the edge has been idle for a moment.
                seen = self._receipts
                await trio.sleep(_WATCH_GRACE)
                if self._reading or self._receipts != seen:
                    continue
                with trio.CancelScope() as scope:
                    self._watch_scope = scope
                    try:
                        verdict = await self._look(raw, seen)
                    finally:
                        self._watch_scope = None
                if scope.cancelled_caught or verdict == _AGAIN:
                    continue
                if verdict == _DONE:
                    return
                await self._lot.park()  # until the schedule's receive takes that frame
        finally:
            raw.close()

    def _moved(self, seen: int) -> bool:
        """Whether a receive took the edge (or took and gave it back) since the look began."""
        return self._reading or self._receipts != seen

    async def _look(self, raw: socket.socket, seen: int) -> int:
        """Look at the stream after what was read past: finish reading past a frame begun,
        take an ABORT, read past a frame a registered slot expects, until something else
        comes. Reads only between two of its own checkpoints (``raw`` never yields), so a
        receive that takes the edge finds every byte read so far in the buffer."""
        sock = self.stream.socket
        where = "waiting for its next frame"
        while True:
            await trio.lowlevel.wait_readable(sock)
            if self._moved(seen):
                return _AGAIN
            if self._ahead_left:  # the rest of a frame being read past
                try:
                    piece = raw.recv(min(self._ahead_left, _AHEAD_PIECE), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError as error:
                    raise self._lost(where, str(error)) from None
                if not piece:
                    return _PARK  # it ended inside the frame: its receive refuses it
                self._ahead += piece
                self._ahead_left -= len(piece)
                continue
            try:
                head = raw.recv(HEADER_SIZE, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError as error:
                raise self._lost(where, str(error)) from None
            if not head:
                if self._eof_expected or (self._ahead_frames and self._ahead_frames[-1][1]):
                    return _DONE
                raise self._lost(
                    where, "the peer closed its connection while frames were still due"
                )
            if head[:_ABORT_HEAD_SIZE] == self._abort_head:
                await self._take_abort()
            found = self._expecting(head)
            if found is None:
                return _PARK
            if isinstance(found, bool):  # the header is not all in yet, and may match
                await trio.sleep(_PEEK_PAUSE)
                if self._moved(seen):
                    return _AGAIN
                continue
            size = self.wire_size(found[0])
            if len(self._ahead) - self._ahead_at + size > self._read_ahead:
                return _PARK
            self._ahead_frames.append(found)
            self._ahead_left = size

    def _expecting(self, head: bytes) -> tuple[ReceiveSlot, bool] | bool | None:
        """The registered slot whose next frame has exactly the header ``head``; True when
        ``head`` is shorter than a header and may still become an ABORT's or such a one;
        None when no registered slot expects it (it stays for the receive to judge)."""
        whole = len(head) == HEADER_SIZE
        maybe = not whole and len(head) < _ABORT_HEAD_SIZE
        for entry in self._expected:
            slot = entry[0]
            if slot.refusal is not None:
                continue
            version = slot.next_version + sum(1 for each, _ in self._ahead_frames if each is slot)
            if version >= MAX_VERSION:
                continue  # the slot is spent: its receive refuses whatever comes
            want = slot.expected_header(version)
            if whole and want == head:
                return entry
            maybe = maybe or (not whole and want.startswith(head))
        return True if maybe else None

    def _take_ahead(self, views: list[memoryview]) -> int:
        """Copy bytes read past into ``views``, in order; return how many."""
        taken = 0
        with memoryview(self._ahead) as ahead:
            for view in views:
                count = min(len(view), len(ahead) - self._ahead_at)
                view[:count] = ahead[self._ahead_at : self._ahead_at + count]
                self._ahead_at += count
                taken += count
                if self._ahead_at == len(ahead):
                    break
        if self._ahead_at == len(self._ahead):
            self._ahead.clear()
            self._ahead_at = 0
        return taken

    def _received_ahead(self) -> None:
        """A receive finished a frame: the first frame read past (when none remain, every
        frame read past, the one still coming in included, since the receive read its rest)."""
        if self._ahead:
            self._ahead_frames.popleft()
        else:
            self._ahead_frames.clear()
            self._ahead_left = 0

    async def _take_abort(self) -> None:
        assert self.edge is not None
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        self._taking_abort = True
        slot = self.edge.abort_in()
        try:
            reception = slot.arm()
            sock = self.stream.socket
            with self._bounded(self.where.at("receiving an abort", self.peer)):
                while not reception.verified:
                    count = await sock.recv_into(reception.into())
                    if count == 0:
                        reception.eof()
                    reception.advance(count)
            payload = reception.finish()
            aborted = self._aborted(payload)
        except FrameRefused as refusal:
            if trace is not None:
                spec = slot.spec
                trace.refused(refusal, spec.kind, spec.slot, spec.extent, began)
            raise
        finally:
            self._taking_abort = False
            self._lot.unpark_all()
        if trace is not None:
            trace.abort(Event.RECEIVE, self.peer, aborted.cause, began)
        raise aborted

    async def _claim(self) -> None:
        """Take the reading side from the watch before a receive."""
        while self._taking_abort:  # the ABORT it takes ends the session; wait for that
            await self._lot.park()
        self._reading = True
        if self._watch_scope is not None:
            # Delivered at once: the watch no longer waits on the socket when this returns.
            self._watch_scope.cancel()

    def _release(self) -> None:
        self._reading = False
        self._receipts += 1
        self._lot.unpark_all()

    # --- errors -----------------------------------------------------------------------------

    def _aborted(self, payload: memoryview) -> RoundAborted:
        cause = decode_cause(bytes(payload), role=self.role, peer=self.peer)
        return cause.refusal(role=self.role, peer=self.peer)

    def _lost(self, step: str, cause: str) -> PeerLost:
        return PeerLost(
            role=self.role, peer=self.peer, step=step, cause=cause, when=self.where.when()
        )

    @contextmanager
    def _bounded(
        self, step: str, *, budget: str = "receive", seconds: float | None = None
    ) -> Iterator[None]:
        """Bound a wait by a budget (the receive budget unless named) and turn transport
        failures into Alpha's errors, naming this edge, ``step`` and the round."""
        limit = self.budgets.receive if seconds is None else seconds
        # A wait within a frame is in that frame's record; one that runs out, whose frame
        # never comes, has a record of its own.
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        # A bare cancel scope rather than trio.fail_after: one context manager less per frame.
        try:
            with trio.CancelScope(deadline=trio.current_time() + limit) as scope:
                yield
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            raise self._lost(step, str(error)) from None
        if scope.cancelled_caught:
            if trace is not None:
                trace.wait(budget, self.peer, began, ran_out=True)
            raise self.where.exhausted(budget, limit, peer=self.peer, step=step)
