"""Establishing a role's edges, in the one order every participant follows.

A role's sessions are its incident edges in ascending peer order. The lower role of an edge
listens and the higher connects, and every participant:

1. binds and listens on every edge to a higher peer;
2. announces those ports on stdout, two bytes each, big-endian, in edge order;
3. connects to each lower peer, whose ports it reads from stdin in the same encoding;
4. accepts each higher peer, exchanges hellos, then closes that listener.

A connector learns a listener's port only from the launcher, which relays it once the
listener announced it: every participant starts at once, and none ever connects to an absent
listener. The wait for a port is a wait for a peer to come up, like an accept, and the accept
budget bounds both.

An edge whose port was fixed at compile time (``Edge.port``: roles started by ``srun``,
which has no pipe to relay a port through, docs/slurm.md) is neither announced nor read from
stdin: the listener binds that port, and the connector connects to it, retrying while the
listener is not up yet (the connection is refused) for at most the accept budget, the wait
for a peer to come up that the wait for its port was. Everything after the connection (the
hellos, every frame's checks) is the same on both kinds of edge.

The first frame each way on a new connection is a hello bound to the run identity and the
edge; a wrong hello (a stranger, another run, another edge) is refused with the frame codec's
class and the run aborts. Every wait is bounded by a named budget (``alpha.core.budgets``).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Final

import trio

from alpha.core.budgets import Budgets
from alpha.errors import AlphaError, LauncherLost, PeerLost, PortMissing, PortTaken
from alpha.runtime.channel import FrameChannel
from alpha.runtime.edge import edge_end
from alpha.runtime.parent import launcher_pid
from alpha.runtime.shared import Region, Sharing
from alpha.runtime.whereabouts import Whereabouts
from alpha.schedule.role import Edge, RoleDescription
from alpha.wire.console import PORT_BYTES, decode_ports, encode_ports  # the announced ports

__all__ = ["PORT_BYTES", "Establishment", "establish"]


# A pending connection waits in the kernel until its accept; one is all an edge ever needs,
# and a stranger taking that place is refused on its hello.
_BACKLOG = 1

HEAR_OUT: Final = 1.0
"""Seconds a failing role keeps its remaining listeners open to greet a higher peer that is
connecting now, so that the ABORT reaches it instead of a reset (a stranger that took the
listener first is the case that needs it). Every participant starts at once and a live peer
connects within milliseconds of its port's announcement; one second covers a loaded host and
keeps a failing role from lingering on a peer that will never come."""

FIXED_RETRY_FIRST: Final = 0.01
"""Seconds before the second try at an edge's fixed port, doubled at each try after, up to
``connect_interval``: the listener is another role starting at the same moment, most often
up within a few tens of milliseconds, and a refused connection on a live host costs a
round trip; trying only every ``connect_interval`` (0.1 s by default) would add up to that
much to every edge whose connector starts first."""

# connect() failures worth another attempt: the listener is not up yet or is momentarily full.
_RETRY_ERRNOS = frozenset({errno.ECONNREFUSED, errno.ECONNRESET, errno.ETIMEDOUT, errno.EAGAIN})


class Establishment:
    """The live state of steps 1-4 for one role: listeners, then channels.

    ``where`` always says what the role is doing, so a deadline that strikes names it; the
    channels made here share it. ``edges`` holds the role's end of each of its edges, one
    per peer, which every connection on that edge carries.

    ``sharing`` holds, per peer, the layouts of the edge's two shared-memory regions (the one
    this role makes for the peer's payloads, the one it opens for its own:
    :class:`alpha.runtime.shared.Sharing`); a peer not in it (every peer, without it) moves
    every frame over TCP. A role makes its incoming region before it sends its hello and opens its
    outgoing one after the peer's hello, so each end finds the other's region made.
    """

    def __init__(
        self,
        description: RoleDescription,
        *,
        sharing: Sharing | None = None,
    ) -> None:
        self.description = description
        self.sharing = sharing
        self.listeners: dict[int, trio.socket.SocketType] = {}
        self.channels: dict[int, FrameChannel] = {}
        self.where = Whereabouts(description.role)
        self.edges = {edge.peer: edge_end(description, edge) for edge in description.edges}

    @property
    def step(self) -> str:
        return self.where.step

    @step.setter
    def step(self, value: str) -> None:
        self.where.step = value

    @property
    def waiting_for(self) -> int | None:
        return self.where.peer

    @waiting_for.setter
    def waiting_for(self, value: int | None) -> None:
        self.where.peer = value

    def channel(
        self, stream: trio.SocketStream, peer: int, where: Whereabouts | None = None
    ) -> FrameChannel:
        """A channel on the edge to ``peer`` over ``stream``, sharing this role's whereabouts
        (or ``where``); not registered in :attr:`channels`."""
        return FrameChannel(
            stream,
            role=self.role,
            peer=peer,
            budgets=self.budgets,
            identity=self.description.identity,
            where=self.where if where is None else where,
            edge=self.edges[peer],
        )

    def share_incoming(self, channel: FrameChannel) -> None:
        """Make the region of the peer's payloads on ``channel``'s edge, if it has one (before
        this role's hello).

        Raises:
            RegionRefused: the region cannot be made.
        """
        sharing = self.sharing
        if sharing is None or channel.incoming is not None:
            return
        layout = sharing.layouts.get(channel.peer, (None, None))[0]
        if layout is not None:
            name = sharing.path(self.description.identity, channel.peer, self.role)
            channel.incoming = Region.make(sharing.folder, name, layout, role=self.role)

    def share_outgoing(self, channel: FrameChannel) -> None:
        """Open the region the peer made for this role's payloads, if the edge has one (after
        the peer's hello).

        Raises:
            RegionRefused: there is none, or it is not the one the schedule makes.
        """
        sharing = self.sharing
        if sharing is None or channel.outgoing is not None:
            return
        layout = sharing.layouts.get(channel.peer, (None, None))[1]
        if layout is not None:
            name = sharing.path(self.description.identity, self.role, channel.peer)
            channel.outgoing = Region.open(sharing.folder, name, layout, role=self.role)

    @property
    def role(self) -> int:
        return self.description.role

    @property
    def budgets(self) -> Budgets:
        return self.description.budgets

    async def listen(self) -> list[int]:
        """Step 1: bind and listen on every edge to a higher peer; return the ports (an
        edge's fixed port, or the ephemeral one the kernel chose).

        Raises:
            PortTaken: another socket holds an edge's fixed port on its address.
        """
        ports = []
        for edge in self.description.higher:
            self.step = f"binding the listener for role {edge.peer}"
            sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
            self.listeners[edge.peer] = sock
            if edge.port is None:
                await sock.bind((edge.address, 0))
            else:
                # A connection of an earlier run may still hold the port in TIME_WAIT, which a
                # new listener may take over; a live listener or connection holding it may not.
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
                try:
                    await sock.bind((edge.address, edge.port))
                except OSError as error:
                    if error.errno != errno.EADDRINUSE:
                        raise
                    raise PortTaken(
                        role=self.role, peer=edge.peer, address=edge.address, port=edge.port
                    ) from None
            sock.listen(_BACKLOG)
            ports.append(int(sock.getsockname()[1]))
        return ports

    async def connect(self, edge: Edge, port: int) -> FrameChannel:
        """Step 3 for one lower peer: connect, then exchange hellos. To a relayed port, the
        listener is up: bounded attempts, each and all of them within the connect budget. To
        an edge's fixed port, the listener may still be starting: attempts at growing
        intervals (:data:`FIXED_RETRY_FIRST`, doubled up to ``connect_interval``), all of them
        within the accept budget (the wait for a peer to come up)."""
        budgets = self.budgets
        fixed = edge.port is not None
        if fixed:
            self.step = f"waiting for role {edge.peer} to listen at {edge.address}:{port}"
            bound, attempts, budget = budgets.accept, None, "accept"
        else:
            self.step = f"connecting to role {edge.peer} at {edge.address}:{port}"
            bound, attempts, budget = budgets.connect, budgets.connect_attempts, "connect"
        self.waiting_for = edge.peer
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        stream: trio.SocketStream | None = None
        pause = min(FIXED_RETRY_FIRST, budgets.connect_interval) if fixed else 0.0
        # A connect to an address that drops packets waits for the kernel's SYN retries (two
        # minutes); the budget bounds every attempt, and all of them together.
        with trio.move_on_after(bound):
            attempt = 0
            while attempts is None or attempt < attempts:
                attempt += 1
                sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
                try:
                    await sock.connect((edge.address, port))
                except OSError as error:
                    sock.close()
                    if error.errno not in _RETRY_ERRNOS:
                        raise PeerLost(
                            role=self.role,
                            peer=edge.peer,
                            step=self.step,
                            cause=str(error),
                            when=self.where.when(),
                        ) from None
                    if attempts is None:
                        await trio.sleep(pause)
                        pause = min(2 * pause, budgets.connect_interval)
                    elif attempt < attempts:
                        await trio.sleep(budgets.connect_interval)
                    continue
                except BaseException:
                    sock.close()
                    raise
                stream = trio.SocketStream(sock)
                break
        if trace is not None:
            trace.wait(budget, edge.peer, began, ran_out=stream is None)
        if stream is None:
            raise self.where.exhausted(budget, bound, peer=edge.peer)
        channel = self.channels[edge.peer] = self.channel(stream, edge.peer)
        end = self.edges[edge.peer]
        self.step = f"greeting role {edge.peer}"
        self.share_incoming(channel)
        await channel.send(end.hello_out(), b"", step=self.step)
        await channel.receive(end.hello_in(), step=self.step)
        self.share_outgoing(channel)
        self.waiting_for = None
        return channel

    async def accept(self, edge: Edge) -> FrameChannel:
        """Step 4 for one higher peer: accept within the budget, greet, close the listener.

        The listener closes once the hellos are through, not before: every role starts at
        once, so the real peer may already wait behind a stranger the listener took first,
        and closing the listener resets its connection. This role must fail on the
        stranger's hello (and say so) before that peer can see its connection go."""
        listener = self.listeners[edge.peer]
        self.step = f"accepting role {edge.peer}"
        self.waiting_for = edge.peer
        sock: trio.socket.SocketType | None = None
        trace = self.where.trace
        began = 0 if trace is None else time.monotonic_ns()
        with trio.move_on_after(self.budgets.accept):
            sock, _ = await listener.accept()
        if trace is not None:
            trace.wait("accept", edge.peer, began, ran_out=sock is None)
        if sock is None:
            raise self.where.exhausted("accept", self.budgets.accept, peer=edge.peer)
        channel = self.channels[edge.peer] = self.channel(trio.SocketStream(sock), edge.peer)
        end = self.edges[edge.peer]
        self.step = f"checking the hello of role {edge.peer}"
        await channel.receive(end.hello_in(), step=self.step)
        self._share_both(channel)
        await channel.send(end.hello_out(), b"", step=self.step)
        listener.close()
        del self.listeners[edge.peer]
        self.waiting_for = None
        return channel

    async def hear_out(self, seconds: float = HEAR_OUT) -> list[FrameChannel]:
        """After this role failed, greet every higher peer it has not accepted yet that is
        connecting within ``seconds``, so that it can be told why; return their channels
        (registered in :attr:`channels`, in place of a stranger's).

        A peer's hello is checked exactly as in :meth:`accept`; a connection whose hello is
        refused (another stranger) is closed and the listener keeps waiting. Never raises for
        a peer that fails: the role is failing already."""
        greeted: list[FrameChannel] = []
        if not self.listeners:
            return greeted

        async def one(peer: int, listener: trio.socket.SocketType) -> None:
            end = self.edges[peer]
            while True:
                sock, _ = await listener.accept()
                channel = self.channel(trio.SocketStream(sock), peer, Whereabouts(self.role))
                try:
                    step = f"greeting role {peer} to tell it why this role failed"
                    await channel.receive(end.hello_in(), step=step)
                    self._share_both(channel)
                    await channel.send(end.hello_out(), b"", step=step)
                except (AlphaError, OSError, trio.BrokenResourceError):
                    await channel.aclose()
                    continue
                stale = self.channels.get(peer)
                if stale is not None:
                    await stale.aclose()
                self.channels[peer] = channel
                greeted.append(channel)
                return

        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                for peer, listener in self.listeners.items():
                    nursery.start_soon(one, peer, listener)
        return greeted

    def _share_both(self, channel: FrameChannel) -> None:
        """The listening end, after the peer's hello: its incoming region (before its own
        hello), and the peer's, made before the peer's hello."""
        self.share_incoming(channel)
        self.share_outgoing(channel)

    def close(self) -> None:
        for sock in self.listeners.values():
            sock.close()
        self.listeners.clear()


async def read_ports(
    stream: trio.abc.ReceiveStream,
    count: int,
    *,
    role: int,
    peers: list[int],
    budgets: Budgets,
    where: Whereabouts | None = None,
) -> list[int]:
    """Read ``count`` announced ports (two bytes each) for ``peers`` from the launcher.

    Each port comes once its listener started and announced it; every role starts at once, so
    the listener may still be starting. That is a wait for a peer to come up, as an accept is,
    and the accept budget bounds each port. ``where`` is the role's whereabouts (by default
    its own, before the first round).

    Raises:
        BudgetExhausted: a port did not arrive within the accept budget (it names the peer).
        PortMissing: the stream ended first.
    """
    where = Whereabouts(role) if where is None else where
    data = bytearray()
    ports: list[int] = []
    for peer in peers[:count]:
        step = f"waiting for the port of role {peer} on stdin"
        trace = where.trace
        began = 0 if trace is None else time.monotonic_ns()
        with trio.move_on_after(budgets.accept) as scope:
            while len(data) < PORT_BYTES:
                chunk = await stream.receive_some(PORT_BYTES - len(data))
                if not chunk:
                    raise PortMissing(
                        f"role {role}: stdin ended before the port of role {peer}; start "
                        "participants with `alpha launch`, which relays announced ports"
                    )
                data += chunk
        if trace is not None:
            trace.wait("accept", peer, began, ran_out=scope.cancelled_caught)
        if scope.cancelled_caught:
            raise where.exhausted("accept", budgets.accept, peer=peer, step=step)
        ports.extend(decode_ports(data[:PORT_BYTES]))
        del data[:PORT_BYTES]
    return ports


async def establish(
    description: RoleDescription,
    stack: AsyncExitStack,
    *,
    announce: Callable[[bytes], Awaitable[None]],
    ports_in: trio.abc.ReceiveStream,
    state: Establishment | None = None,
) -> dict[int, FrameChannel]:
    """Run steps 1-4 for ``description``; return its channels by peer.

    Channels are registered on ``stack`` so they close when the session ends, cleanly or not.

    Raises:
        BudgetExhausted: a connect, accept (an accept, or a port on stdin) or receive budget
            ran out.
        FrameRefused: a hello was wrong (a stranger, another run, another edge).
        PeerLost: a connection broke.
        PortMissing: the launcher closed stdin before giving a lower peer's port.
        PortTaken: another socket holds one of the role's fixed ports.
    """
    state = state or Establishment(description)
    stack.callback(state.close)
    ports = await state.listen()
    state.step = "announcing ports"
    # A fixed port is no announcement: its connector knows it from its own description.
    fixed = [edge.port is not None for edge in description.higher]
    relayed_ports = [port for port, known in zip(ports, fixed, strict=True) if not known]
    await announce(encode_ports(relayed_ports))
    lower = description.lower
    relayed = [edge.peer for edge in lower if edge.port is None]
    for edge in lower:
        if edge.port is not None:
            port = edge.port
        else:
            state.step = f"waiting for the port of role {edge.peer} on stdin"
            state.waiting_for = edge.peer
            (port,) = await read_ports(
                ports_in,
                1,
                role=description.role,
                peers=relayed[relayed.index(edge.peer) :],
                budgets=description.budgets,
                where=state.where,
            )
        channel = await state.connect(edge, port)
        stack.push_async_callback(channel.aclose)
    for edge in description.higher:
        channel = await state.accept(edge)
        stack.push_async_callback(channel.aclose)
    state.step = "established"
    return state.channels


async def announce_on_stdout(data: bytes) -> None:
    """Write the announcement to file descriptor 1, all of it, and nothing else ever.

    Raises:
        LauncherLost: stdout's reader is gone (``EPIPE``): the launcher died, or closed its
            end, while this participant started; no one relays its ports any more.
    """
    view = memoryview(data)
    while view:
        try:
            written = os.write(1, view)
        except BrokenPipeError:
            launcher = launcher_pid(os.environ)
            raise LauncherLost(
                launcher=0 if launcher is None else launcher,
                parent=os.getppid(),
                how="no one reads this participant's stdout, where it announces its ports",
            ) from None
        view = view[written:]
