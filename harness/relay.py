"""A fault-injecting relay: a TCP hop on one edge that forwards frames and breaks one on purpose.

The relay listens on 127.0.0.1, and for the connection it accepts it opens one to the real
listener, then forwards each direction frame by frame: it reads the 132-byte header, takes the
extent from it (an attacker may parse; participants never do), reads the payload and trailer,
and forwards the whole frame. At the frame a :class:`Fault` names, counted per direction from
the hello (index 0) or given as the first frame of a kind, it does what the fault says.

One fault is an attacker's, not a line's: ``rehash`` changes the frame (bytes flipped at an
offset, or the whole frame rewritten, :func:`as_commit`) and recomputes its trailer as anyone
on the path can (:func:`rehashed`): the layout-2 SHA-256 seal over header and payload digest,
or an HMAC-SHA256 under a key of the relay's own. The frame then passes every check of the
receiver but the keyed trailer's, which only the edge's key can make.

On an edge whose roles share memory (``shared``: the scenario says so; the relay never
guesses), a DATA frame whose extent is at least ``alpha.runtime.SHARED_MIN`` has its payload in
the edge's shared-memory region, not on TCP: only its header and trailer, the doorbell, travel
back to back, and the relay frames it as those two (``alpha.runtime.shared``).
Every fault then acts on the doorbell's bytes; the region itself never passes the relay.

Directions are named from the edge's roles: ``"down"`` is from the lower role (the listener)
to the higher (the connector), ``"up"`` the other way. A relay serves one connection.
"""

from __future__ import annotations

import math
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import trio

from alpha.runtime import SHARED_MIN
from alpha.wire import (
    COMPLETION_SLOT,
    FIELDS,
    HEADER_SIZE,
    KINDS,
    TRAILER_SIZE,
    FrameKind,
    keyed_seal,
    payload_digest,
    seal,
)

__all__ = ["Fault", "FaultKind", "Relay", "as_commit", "rehashed", "wire_extent"]

FaultKind = Literal[
    "insert",  # send `data` just before the frame
    "append",  # send `data` just after the frame
    "replay",  # send the previous frame again just before the frame
    "duplicate",  # send the frame twice
    "drop",  # do not send the frame
    "corrupt",  # flip the bits of the byte at `offset` of the frame
    "truncate",  # send `offset` bytes of the frame, then end this direction (FIN)
    "stall",  # send nothing more in this direction, and keep the connection open
    "reset",  # reset both connections at this frame
    "delay",  # wait `seconds` before sending the frame
    "trickle",  # send the frame a byte at a time, `seconds` apart
    "swap",  # hold the frame back and send it after the next one
    "call",  # call `action` (e.g. stop or kill a participant), then send the frame
    "overwrite",  # write `data` over the frame's bytes from `offset` (e.g. a header field)
    # Change the frame, then recompute its trailer without the edge's key (`rehashed`): XOR
    # `data` into the bytes from `offset` (a payload bit, a digest byte), or, with `rewrite`,
    # send what it makes of the frame's header and payload (`as_commit`); the trailer is the
    # layout-2 SHA-256 seal, or an HMAC under `key`, a key of the relay's own.
    "rehash",
    # Send the frame (a hello), then nothing more in either direction, both connections kept
    # open: to the listener, a stranger that sent the connecting role's exact hello and went
    # silent; the connecting role itself never gets the listener's hello.
    "impersonate",
]


@dataclass(frozen=True)
class Fault:
    """One fault: what, in which direction, at which frame."""

    kind: FaultKind
    direction: Literal["down", "up"]
    frame: int | FrameKind  # an index from the hello, or the first frame of this kind
    data: bytes = b"\xa5" * 16
    offset: int = 0
    seconds: float = 0.0
    action: Callable[[], None] | None = field(default=None, compare=False)
    rewrite: Callable[[bytes], bytes] | None = field(default=None, compare=False)
    key: bytes | None = None  # a rehash's own key (an HMAC under it), or None (SHA-256 seal)

    def hits(self, index: int, kind: int) -> bool:
        if isinstance(self.frame, FrameKind):
            return kind == self.frame
        return index == self.frame


_EXTENT = struct.Struct(">Q")
_EXTENT_AT = HEADER_SIZE - _EXTENT.size  # the extent is the header's last field
_AT: Final = {each.name: each.offset for each in FIELDS}  # each header field's offset
_KIND_AT = _AT["kind"]


@dataclass
class Relay:
    """Forward one connection to ``target`` on 127.0.0.1, applying ``fault`` once."""

    target: int
    fault: Fault | None = None
    # The edge's two roles share memory: a DATA frame of SHARED_MIN bytes or more is a
    # doorbell on TCP (header and trailer), its payload in the region (`wire_extent`).
    shared: bool = False
    port: int = 0
    frames: dict[str, list[int]] = field(default_factory=lambda: {"down": [], "up": []})
    applied: bool = False
    applied_at: float | None = None  # time.monotonic() when the fault was applied
    silenced: bool = False  # an impersonation began: neither direction forwards any more
    _listener: trio.SocketListener | None = None

    async def open(self) -> int:
        """Listen; return the port the connecting role should be given instead of target."""
        (self._listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = int(self._listener.socket.getsockname()[1])
        return self.port

    async def serve(self) -> None:
        """Accept one connection and relay it until both directions end."""
        assert self._listener is not None, "open() first"
        async with self._listener:
            upper = await self._listener.accept()
        lower = await trio.open_tcp_stream("127.0.0.1", self.target)
        async with upper, lower, trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, lower, upper, "down", nursery.cancel_scope)
            nursery.start_soon(self._pump, upper, lower, "up", nursery.cancel_scope)

    async def _pump(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        direction: str,
        scope: trio.CancelScope,
    ) -> None:
        previous = b""
        held: bytes | None = None  # a frame a swap holds back until the next one has gone
        index = 0
        try:
            while True:
                header = await _read(source, HEADER_SIZE)
                if not header:
                    await sink.send_eof()
                    return
                if len(header) < HEADER_SIZE:
                    await sink.send_all(header)
                    await sink.send_eof()
                    return
                rest = await _read(source, wire_extent(header, shared=self.shared) + TRAILER_SIZE)
                frame = header + rest
                self.frames[direction].append(header[_KIND_AT])
                if self.silenced:
                    await trio.sleep(math.inf)
                fault = self.fault
                if (
                    fault is not None
                    and not self.applied
                    and fault.direction == direction
                    and fault.hits(index, header[_KIND_AT])
                ):
                    self.applied = True
                    self.applied_at = time.monotonic()
                    if fault.kind == "swap":
                        held = frame
                    elif await self._apply(fault, frame, previous, source, sink, scope):
                        return
                elif held is not None:
                    await sink.send_all(frame + held)
                    held = None
                else:
                    await sink.send_all(frame)
                previous = frame
                index += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            scope.cancel()  # one side broke: end both, as a real hop would

    async def _apply(
        self,
        fault: Fault,
        frame: bytes,
        previous: bytes,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        scope: trio.CancelScope,
    ) -> bool:
        """Do ``fault`` to ``frame``; return True when this direction is over."""
        kind = fault.kind
        if kind == "insert":
            await sink.send_all(fault.data + frame)
        elif kind == "append":
            await sink.send_all(frame + fault.data)
        elif kind == "replay":
            await sink.send_all(previous + frame)
        elif kind == "duplicate":
            await sink.send_all(frame + frame)
        elif kind == "drop":
            pass
        elif kind == "corrupt":
            damaged = bytearray(frame)
            damaged[fault.offset] ^= 0xFF
            await sink.send_all(bytes(damaged))
        elif kind == "truncate":
            # Only this direction ends, inside the frame; the other goes on, so the receiver's
            # refusal (and its ABORT) can still travel back.
            await sink.send_all(frame[: fault.offset])
            await sink.send_eof()
            return True
        elif kind == "stall":
            await trio.sleep(math.inf)
        elif kind == "impersonate":
            self.silenced = True
            await sink.send_all(frame)
            await trio.sleep(math.inf)
        elif kind == "reset":
            for stream in (source, sink):
                stream.socket.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                stream.socket.close()
            scope.cancel()
            return True
        elif kind == "delay":
            await trio.sleep(fault.seconds)
            await sink.send_all(frame)
        elif kind == "trickle":
            for at in range(len(frame)):
                await sink.send_all(frame[at : at + 1])
                await trio.sleep(fault.seconds)
        elif kind == "call":
            assert fault.action is not None, "a call fault needs an action"
            fault.action()
            await sink.send_all(frame)
        elif kind == "overwrite":
            rewritten = bytearray(frame)
            rewritten[fault.offset : fault.offset + len(fault.data)] = fault.data
            await sink.send_all(bytes(rewritten))
        elif kind == "rehash":
            await sink.send_all(rehashed(frame, fault))
        return False


def wire_extent(header: bytes, *, shared: bool) -> int:
    """The payload bytes that follow ``header`` on TCP: its extent, or none for a DATA frame
    whose payload travels through the edge's shared-memory region (``shared``: the edge's
    roles share memory; the extent at least :data:`alpha.runtime.SHARED_MIN`)."""
    (extent,) = _EXTENT.unpack_from(header, _EXTENT_AT)
    if shared and header[_KIND_AT] == FrameKind.DATA and extent >= SHARED_MIN:
        return 0
    return int(extent)


def _flip(frame: bytes, offset: int, mask: bytes) -> bytes:
    """``frame``'s header and payload with ``mask`` XORed into the bytes from ``offset``
    (from the frame's end when negative, as for ``corrupt``)."""
    body = bytearray(frame[:-TRAILER_SIZE])
    at = offset % len(frame)
    if at + len(mask) > len(body):
        raise ValueError(f"a rehash changes header or payload bytes, not offset {offset}")
    for index, bit in enumerate(mask):
        body[at + index] ^= bit
    return bytes(body)


def rehashed(frame: bytes, fault: Fault) -> bytes:
    """``frame`` changed as ``fault`` (a ``rehash``) says, with a trailer recomputed as an
    attacker without the edge's key can: ``seal`` (layout 2's SHA-256 over the header and the
    payload's SHA-256), or ``keyed_seal`` under ``fault.key``, a key of its own. The header's
    format byte is left as it is: a keyed frame stays layout 3, so only its MAC can tell.

    Raises:
        ValueError: the change reaches into the trailer, or makes no whole frame.
    """
    body = (
        _flip(frame, fault.offset, fault.data)
        if fault.rewrite is None
        else fault.rewrite(frame[:-TRAILER_SIZE])
    )
    header, payload = body[:HEADER_SIZE], body[HEADER_SIZE:]
    (extent,) = _EXTENT.unpack_from(header, _EXTENT_AT)
    if len(header) < HEADER_SIZE or extent != len(payload):
        raise ValueError("a rehashed frame must be a whole header and its extent of payload")
    digest = payload_digest(payload)
    trailer = seal(header, digest) if fault.key is None else keyed_seal(fault.key, header, digest)
    return body + trailer


def as_commit(digest: bytes) -> Callable[[bytes], bytes]:
    """A ``rewrite`` that makes a COMMIT of the frame it is given (an ABORT in place of the
    COMMIT that is due): the same magic, format, identity and edge, the kind COMMIT at its
    slot, version 0, extent and payload the 32-byte ``digest``."""
    extent = KINDS[FrameKind.COMMIT].extent
    assert extent is not None, "a COMMIT's extent is fixed"
    if len(digest) != extent:
        raise ValueError(f"a COMMIT carries {extent} bytes, not {len(digest)}")

    def rewrite(body: bytes) -> bytes:
        header = bytearray(body[:HEADER_SIZE])
        header[_KIND_AT] = FrameKind.COMMIT
        struct.pack_into(">I", header, _AT["slot"], COMPLETION_SLOT)
        struct.pack_into(">Q", header, _AT["version"], 0)
        _EXTENT.pack_into(header, _EXTENT_AT, extent)
        return bytes(header) + digest

    return rewrite


async def _read(stream: trio.SocketStream, count: int) -> bytes:
    """Up to ``count`` bytes; fewer only when the stream ended."""
    data = bytearray()
    while len(data) < count:
        chunk = await stream.receive_some(min(count - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    return bytes(data)
