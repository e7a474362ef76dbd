"""The cost of the abort watch: frames over one loopback connection with and without it.

A role runs :meth:`FrameChannel.watch_for_abort` on every edge beside its schedule, so that an
ABORT on an edge it is not reading stops it at once (docs/failure.md). Each receive takes the
socket from the watch and gives it back, so the watch costs something per frame; this measures
it, as the time per frame of a ping-pong (one frame each way, waiting for the reply) between two
channels in one trio run, with the watch running on both channels against none (the reference, timed
in the same run, the two taking turns). Medians of ``repeat`` batches.
"""

from __future__ import annotations

import statistics
import time

import trio

from alpha.core import Budgets
from alpha.runtime import FrameChannel
from alpha.wire import FrameKind, FrameSpec, ReceiveSlot, SendSlot
from bench._timing import IDENTITY

NAME = "watch"

_SIZES = (1024, 1 << 20)
_FRAMES = {1024: 2000, 1 << 20: 100}


async def _pair() -> tuple[FrameChannel, FrameChannel]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    await listeners[0].aclose()
    budgets = Budgets(receive=60.0)
    return (
        FrameChannel(server, role=0, peer=1, budgets=budgets, identity=IDENTITY),
        FrameChannel(client, role=1, peer=0, budgets=budgets, identity=IDENTITY),
    )


async def _ping_pong(size: int, frames: int, watched: bool) -> float:
    """Seconds per round trip of one frame each way."""
    low, high = await _pair()
    down = FrameSpec(IDENTITY, FrameKind.DATA, 0, 1, 1, size)
    up = FrameSpec(IDENTITY, FrameKind.DATA, 1, 0, 1, size)
    payload = bytes(size)

    async def echo() -> None:
        into, back = ReceiveSlot(down), SendSlot(up)
        for _ in range(frames):
            await high.receive(into)
            await high.send(back, payload)

    async with trio.open_nursery() as nursery:
        if watched:
            nursery.start_soon(low.watch_for_abort)
            nursery.start_soon(high.watch_for_abort)
        nursery.start_soon(echo)
        out, into = SendSlot(down), ReceiveSlot(up)
        start = time.perf_counter()
        for _ in range(frames):
            await low.send(out, payload)
            await low.receive(into)
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    await low.aclose()
    await high.aclose()
    return elapsed / frames


def run(repeat: int) -> str:
    rows = []
    for size in _SIZES:
        samples: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeat):
            for watched in (False, True):
                samples[watched].append(trio.run(_ping_pong, size, _FRAMES[size], watched))
        bare = statistics.median(samples[False])
        with_watch = statistics.median(samples[True])
        rows.append(
            f"| {size:,} B | {_FRAMES[size]:,} | {bare * 1e6:,.0f} µs | {with_watch * 1e6:,.0f} µs "
            f"| {with_watch / bare:.2f} |"
        )
    return (
        "Round trip of one frame each way between two frame channels over 127.0.0.1 in one\n"
        "trio run, with the abort watch (`FrameChannel.watch_for_abort`) running on both channels\n"
        "against none, timed in the same run, the two taking turns; medians of\n"
        f"{repeat} batches of the given number of round trips. Each receive takes the socket\n"
        "from the watch and gives it back, and the watch looks only at an edge idle for\n"
        "20 ms; a ratio of 1.00 means the watch costs nothing.\n\n"
        "| payload | round trips | no watch (reference) | watch | ratio |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows)
    )
