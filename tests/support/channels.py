"""A real loopback connection between two frame channels."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from alpha.core.budgets import Budgets
from alpha.runtime.channel import FrameChannel

from .identity import IDENTITY

# Short budgets so a test that waits on a refusal waits half a second, not the default's seconds.
BUDGETS = Budgets(receive=0.5, accept=0.5, connect_attempts=3, connect_interval=0.05)


@asynccontextmanager
async def connected(
    low: int = 0, high: int = 1, budgets: Budgets = BUDGETS
) -> AsyncIterator[tuple[FrameChannel, FrameChannel]]:
    """Two channels, one per end of a real TCP connection on 127.0.0.1."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    await listeners[0].aclose()
    a = FrameChannel(server, role=low, peer=high, budgets=budgets, identity=IDENTITY)
    b = FrameChannel(client, role=high, peer=low, budgets=budgets, identity=IDENTITY)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()
