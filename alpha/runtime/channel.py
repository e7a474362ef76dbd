"""Frame channels: one per edge, moving frames over a trio stream through the frame codec.

A channel never interprets bytes itself: sending asks a :class:`~alpha.frame.SendSlot` for the
header, payload view and trailer; receiving arms a :class:`~alpha.frame.ReceiveSlot` and reads
with ``recv_into`` straight into the memory the reception offers, capped at the current part of
the frame, so a large payload lands in its buffer without another copy and no read crosses into
the next frame. Every wait is bounded by the role's receive budget.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, final

import trio

from alpha.budgets import Budgets
from alpha.errors import BudgetExhausted, PeerLost
from alpha.frame import ReceiveSlot, SendSlot

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["FrameChannel"]

# Bytes read at once when checking that nothing follows the last frame: any byte is too many.
_END_PROBE = 64


@final
class FrameChannel:
    """Frames to and from one peer over one connected stream.

    One task may send while another receives; two concurrent sends (or receives) on one
    channel are a schedule bug and trio refuses them.
    """

    def __init__(
        self, stream: trio.SocketStream, *, role: int, peer: int, budgets: Budgets
    ) -> None:
        # trio sets a 16 KiB TCP_NOTSENT_LOWAT on its streams, which suits interactive traffic;
        # for frames of megabytes it makes the sender wake for every 16 KiB and costs about a
        # third of the throughput (bench/endpoints.py). 0 restores the system default.
        if hasattr(socket, "TCP_NOTSENT_LOWAT"):
            stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, 0)
        self.stream = stream
        self.role = role
        self.peer = peer
        self.budgets = budgets
        self.sent_bytes = 0
        self.received_bytes = 0

    @property
    def local_port(self) -> int:
        return int(self.stream.socket.getsockname()[1])

    @property
    def remote_port(self) -> int:
        return int(self.stream.socket.getpeername()[1])

    async def send(self, slot: SendSlot, payload: Buffer, *, step: str = "sending") -> None:
        """Frame ``payload`` on ``slot`` and send it; the payload is not copied.

        Raises:
            FrameSpecInvalid: the payload does not fit the slot.
            VersionOverflow: the slot's counter is spent.
            PeerLost: the connection broke.
            BudgetExhausted: the peer did not take the bytes within the receive budget.
        """
        frame = slot.prepare(payload)
        sock = self.stream.socket
        # One sendmsg per frame where it fits: header, payload and trailer leave together
        # instead of as three writes, the small ones as segments of their own.
        pieces = [memoryview(piece) for piece in frame.pieces() if len(piece)]
        with self._bounded(step):
            while pieces:
                sent = await sock.sendmsg(pieces)
                while sent and sent >= len(pieces[0]):
                    sent -= len(pieces[0])
                    pieces.pop(0)
                if sent:
                    pieces[0] = pieces[0][sent:]
        self.sent_bytes += slot.spec.frame_size

    async def receive(
        self, slot: ReceiveSlot, *, step: str = "receiving", late_start: bool = False
    ) -> memoryview:
        """Receive the frame ``slot`` expects, straight into its buffer.

        The receive budget bounds the frame from the moment this role waits for it. With
        ``late_start`` (the first frame of an edge after the run is established: the peer may
        still be waiting for its own peers, which start one after another, so the wait grows
        with the run) only the session deadline bounds the wait for the frame's first byte;
        from that byte on, the receive budget applies.

        Returns:
            A read-only view of the payload, valid until ``slot`` is armed again.

        Raises:
            FrameRefused: the codec refused the frame (the subclass says why); ``Truncated``
                when the peer closed the connection inside the frame.
            PeerLost: the connection broke.
            BudgetExhausted: the whole frame did not arrive within the receive budget.
        """
        reception = slot.arm()
        sock = self.stream.socket
        if late_start:
            with self._bounded(step, budget=False):
                await trio.lowlevel.wait_readable(sock)
        with self._bounded(step):
            while not reception.verified:
                target = reception.into()
                count = await sock.recv_into(target)
                if count == 0:
                    reception.eof()
                reception.advance(count)
        self.received_bytes += slot.spec.frame_size
        return reception.finish()

    async def close(self, last: ReceiveSlot) -> None:
        """End the edge: tell the peer nothing more comes, and check that nothing more came.

        ``last`` is the last receive slot of this edge; bytes after its frame refuse it.

        Raises:
            TrailingBytes: the peer sent bytes after the last scheduled frame.
            PeerLost: the connection broke.
            BudgetExhausted: the peer did not close within the receive budget.
        """
        with self._bounded("closing the edge"):
            await self.stream.send_eof()
            extra = await self.stream.receive_some(_END_PROBE)
        if extra:
            last.refuse_trailing(len(extra))
        await self.stream.aclose()

    async def aclose(self) -> None:
        await self.stream.aclose()

    @contextmanager
    def _bounded(self, step: str, *, budget: bool = True) -> Iterator[None]:
        """Bound a wait by the receive budget and turn transport failures into Alpha's
        errors, naming this edge and ``step``."""
        try:
            with trio.fail_after(self.budgets.receive) if budget else nullcontext():
                yield
        except trio.TooSlowError:
            raise BudgetExhausted(
                role=self.role,
                peer=self.peer,
                step=step,
                budget="receive",
                seconds=self.budgets.receive,
            ) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            raise PeerLost(role=self.role, peer=self.peer, step=step, cause=str(error)) from None
