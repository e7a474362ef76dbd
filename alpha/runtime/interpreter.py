"""Running a role's local schedule over its frame channels.

The interpreter owns the role's regions (numpy arrays allocated once) and the loop counters;
each edge's end (:class:`~alpha.runtime.edge.EdgeEnd`, the channel's) owns its send and receive
slots, one per (slot, kind) and direction. Receives land straight in the region or
scratch buffer the instruction names (the receive slot is lent that buffer). Folds add in the
order the schedule lists, elementwise.

Consecutive receives from distinct peers into disjoint buffers run at once, and a fold right
after them adds each source as soon as it and every source before it have arrived: the order
of the additions, and so every bit, is the schedule's; only the waiting overlaps. Consecutive
sends to distinct peers run at once, hashing each region once (``docs/frames.md``). On one
edge, frames keep the schedule's order. An agreed choice's word is 8 bytes, big-endian, 0 or 1;
the authority refuses any other selector value (``SelectorOutOfRange``) and every receiver
refuses a word that is not canonical (``NoncanonicalWord``).

Every receive slot of the schedule is made when the interpreter is, and registered with its
edge's channel (:meth:`~alpha.runtime.channel.FrameChannel.expect`), so that the channel's
abort watch can read a frame of it past while the schedule waits on another edge, and see an ABORT
queued behind it (``docs/failure.md``).
"""

from __future__ import annotations

import hashlib
import mmap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import trio

from alpha.core.combine import fold_add, fold_into
from alpha.core.identity import RunIdentity
from alpha.errors import NoncanonicalWord, SelectorOutOfRange
from alpha.runtime.cause import as_one_error
from alpha.runtime.channel import OVERLAP_MIN, FrameChannel, SharedDigest
from alpha.runtime.edge import EdgeEnd
from alpha.runtime.whereabouts import RUNNING, Whereabouts
from alpha.schedule.local import Choose, Fold, Instruction, LocalSchedule, Loop, Op, Recv, Send
from alpha.schedule.operations import LOCAL_OPS, SELECTORS, Context
from alpha.wire.frame import WORD_BYTES, FrameKind
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from alpha.learner.state import LearnerState  # a type only: sum-check roles never load it

__all__ = [
    "GROUP_MIN",
    "Interpreter",
    "decode_word",
    "encode_word",
    "transient_array",
]


def transient_array(count: int, dtype: str) -> np.ndarray:
    """Zeros in their own anonymous mapping, so that the ``release`` operation can give the
    pages back (``schedule.operations.release``) and the mapping stays valid for the slots that
    receive into it."""
    size = max(1, count * np.dtype(dtype).itemsize)
    # Private: MADV_DONTNEED on a private anonymous mapping frees its pages and refills them
    # with zeros; a shared one (mmap's default) would keep them in its shared memory object.
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20)
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=dtype, count=count)


GROUP_MIN: Final = OVERLAP_MIN
"""Receives and sends run at once only when every region they move has at least this many
bytes: below it a nursery and its tasks cost more per round than the overlap saves (a 1 KiB
combine among 4 roles took 15% longer with them: bench/combine.py)."""

# A choice word (WORD_BYTES, from the kinds table): one unsigned 64-bit big-endian integer, 0 or 1.


def encode_word(value: int) -> bytes:
    return value.to_bytes(WORD_BYTES, "big")


def decode_word(data: bytes, *, role: int, source: int) -> int:
    """
    Raises:
        NoncanonicalWord: ``data`` is not the 8-byte big-endian encoding of 0 or 1.
    """
    if data not in (encode_word(0), encode_word(1)):
        raise NoncanonicalWord(
            f"role {role}: the choice word from role {source} is {data.hex()}, not the "
            "canonical word of 0 or 1; the round is aborted"
        )
    return data[-1]


@dataclass(frozen=True, slots=True)
class _Receives:
    """Receives run at once, with the fold that follows them when it may add each source as
    it arrives."""

    recvs: tuple[Recv, ...]
    fold: Fold | None


@dataclass(frozen=True, slots=True)
class _Sends:
    """Sends run at once, each region hashed once."""

    sends: tuple[Send, ...]


_Step = Instruction | _Receives | _Sends


class Interpreter:
    """One role's schedule, its buffers and its counters."""

    def __init__(
        self,
        schedule: LocalSchedule,
        identity: RunIdentity,
        participants: int,
        channels: dict[int, FrameChannel],
        *,
        on_round: Callable[[int], None] | None = None,
        learner: LearnerState | None = None,
        where: Whereabouts | None = None,
    ) -> None:
        self.schedule = schedule
        self.role = schedule.role
        self.identity = identity
        self.channels = channels
        self.buffers: dict[str, np.ndarray] = {}
        self.context = Context(
            role=self.role, participants=participants, buffers=self.buffers, learner=learner
        )
        for region in schedule.regions:
            if region.of is None and region.transient:
                self.buffers[region.name] = transient_array(region.count, region.dtype)
            elif region.of is None:
                self.buffers[region.name] = np.zeros(region.count, dtype=region.dtype)
        for region in schedule.regions:
            if region.of is not None:  # a range of another region: its bytes, not a copy
                self.buffers[region.name] = self.buffers[region.of][
                    region.offset : region.offset + region.count
                ]
        for name, like in schedule.scratch:
            self.buffers[name] = np.zeros_like(self.buffers[like])
        # Each edge's end, the one its channel carries; a peer without a channel (a schedule
        # looked at, not run) gets an end of its own.
        self.edges: dict[int, EdgeEnd] = {
            peer: channel.edge for peer, channel in channels.items() if channel.edge is not None
        }
        self.heard: set[int] = set()  # peers whose first frame after the hello has arrived
        # SHA-256 of a region's bytes, for as long as nothing wrote to any region since it was
        # sent or received: a region sent to several peers, or forwarded after it arrived, is
        # hashed once (docs/frames.md). Any write (a receive, an operation, a fold) clears it
        # all, since regions may be ranges of one another.
        self.digests_known: dict[str, bytes] = {}
        self._steps: dict[int, tuple[_Step, ...]] = {}  # by id() of a body of the schedule
        self.rounds = 0
        self.arms = [0, 0]  # how often each arm of a choice ran here
        self.on_round = on_round
        self.where = where or Whereabouts(self.role, phase=RUNNING)
        self._expect(schedule.body)

    # --- slots ------------------------------------------------------------------------------

    def _edge(self, peer: int) -> EdgeEnd:
        edge = self.edges.get(peer)
        if edge is None:
            edge = self.edges[peer] = EdgeEnd(self.role, peer, self.identity)
        return edge

    def _send_slot(self, peer: int, slot: int, kind: FrameKind, extent: int) -> SendSlot:
        return self._edge(peer).sending(kind, slot, extent)

    def _receive_slot(
        self, peer: int, slot: int, kind: FrameKind, extent: int, buffer: np.ndarray | None
    ) -> ReceiveSlot:
        edge = self._edge(peer)
        return edge.receiving(kind, slot, extent, None if buffer is None else buffer.data)

    def _expect(self, body: Sequence[Instruction]) -> None:
        """Make the receive slot of every receive in ``body`` (both arms of a choice) and
        register it with its peer's channel, for the watch to read its frames past."""
        for ins in body:
            if isinstance(ins, Recv):
                buffer = self.buffers[ins.region]
                slot = self._receive_slot(ins.peer, ins.slot, FrameKind.DATA, buffer.nbytes, buffer)
                peer = ins.peer
            elif isinstance(ins, Loop):
                self._expect(ins.body)
                continue
            elif isinstance(ins, Choose):
                self._expect(ins.arm0)
                self._expect(ins.arm1)
                if ins.source is None:
                    continue
                slot = self._receive_slot(ins.source, ins.slot, FrameKind.CHOICE, WORD_BYTES, None)
                peer = ins.source
            else:
                continue
            channel = self.channels.get(peer)
            if channel is not None:
                channel.expect(slot)

    async def _receive(self, peer: int, slot: ReceiveSlot, step: str) -> memoryview:
        # The first frame after the hello may wait for the whole run to start (docs/budgets.md).
        first = peer not in self.heard
        self.where.at(step, peer)
        payload = await self.channels[peer].receive(slot, step=step, first=first)
        self.heard.add(peer)
        return payload

    async def _send(
        self,
        peer: int,
        slot: SendSlot,
        payload: Buffer,
        step: str,
        *,
        digest: bytes | SharedDigest | None = None,
    ) -> bytes:
        self.where.at(step, peer)
        return await self.channels[peer].send(slot, payload, step=step, digest=digest)

    # --- execution --------------------------------------------------------------------------

    async def run(self) -> None:
        await self._body(self.schedule.body, depth=0)

    async def _body(self, body: Sequence[Instruction], depth: int) -> None:
        steps = self._steps.get(id(body))
        if steps is None:
            steps = self._steps[id(body)] = self._grouped(body)
        for step in steps:
            if isinstance(step, (_Receives, _Sends)):
                await self._together(step)
            else:
                await self._one(step, depth)

    def _grouped(self, body: Sequence[Instruction]) -> tuple[_Step, ...]:
        """``body`` with each run of consecutive receives from distinct peers into disjoint
        buffers (and the fold right after them, when it writes none of them), and each run of
        consecutive sends to distinct peers, made one step; regions below
        :data:`GROUP_MIN` bytes move one at a time."""
        steps: list[_Step] = []
        index = 0
        while index < len(body):
            ins = body[index]
            if isinstance(ins, (Recv, Send)) and self.buffers[ins.region].nbytes < GROUP_MIN:
                steps.append(ins)
                index += 1
            elif isinstance(ins, Recv):
                recvs = [ins]
                for nxt in body[index + 1 :]:
                    if (
                        not isinstance(nxt, Recv)
                        or self.buffers[nxt.region].nbytes < GROUP_MIN
                        or not self._apart(recvs, nxt)
                    ):
                        break
                    recvs.append(nxt)
                index += len(recvs)
                fold = body[index] if index < len(body) else None
                if len(recvs) > 1 and isinstance(fold, Fold) and self._fold_apart(fold, recvs):
                    steps.append(_Receives(tuple(recvs), fold))
                    index += 1
                elif len(recvs) > 1:
                    steps.append(_Receives(tuple(recvs), None))
                else:
                    steps.append(ins)
            elif isinstance(ins, Send):
                sends = [ins]
                for nxt in body[index + 1 :]:
                    if (
                        not isinstance(nxt, Send)
                        or self.buffers[nxt.region].nbytes < GROUP_MIN
                        or nxt.peer in {s.peer for s in sends}
                    ):
                        break
                    sends.append(nxt)
                steps.append(_Sends(tuple(sends)) if len(sends) > 1 else ins)
                index += len(sends)
            else:
                steps.append(ins)
                index += 1
        return tuple(steps)

    def _apart(self, recvs: list[Recv], nxt: Recv) -> bool:
        """Whether ``nxt`` may run beside ``recvs``: another peer, memory of its own."""
        return all(
            ins.peer != nxt.peer
            and not np.may_share_memory(self.buffers[ins.region], self.buffers[nxt.region])
            for ins in recvs
        )

    def _fold_apart(self, fold: Fold, recvs: list[Recv]) -> bool:
        """Whether ``fold`` may add sources while ``recvs`` still arrive: it writes none of
        their buffers."""
        out = self.buffers[fold.region]
        return not any(np.may_share_memory(out, self.buffers[ins.region]) for ins in recvs)

    async def _together(self, step: _Receives | _Sends) -> None:
        try:
            async with trio.open_nursery() as nursery:
                if isinstance(step, _Sends):
                    self._send_all(nursery, step.sends)
                else:
                    self._receive_all(nursery, step.recvs, step.fold)
        except BaseExceptionGroup as group:
            raise as_one_error(group) from None

    def _receive_all(self, nursery: trio.Nursery, recvs: Sequence[Recv], fold: Fold | None) -> None:
        self.digests_known.clear()
        arrived = {ins.region: trio.Event() for ins in recvs}

        async def receive(ins: Recv) -> None:
            await self._one(ins, depth=1)  # clears digests, then keeps this region's
            arrived[ins.region].set()

        async def fold_as_they_arrive(fold: Fold) -> None:
            out = self.buffers[fold.region]
            first, *rest = fold.sources
            if first in arrived:
                await arrived[first].wait()
            trace = self.where.trace
            began = 0 if trace is None else time.monotonic_ns()
            fold_into(out, (self.buffers[first],))
            for name in rest:
                if name in arrived:
                    await arrived[name].wait()
                source = self.buffers[name]
                if out.nbytes >= OVERLAP_MIN:  # beside the receives, on another core
                    await trio.to_thread.run_sync(fold_add, out, source)
                else:
                    fold_add(out, source)
            self.digests_known.clear()
            if trace is not None:  # from its first addition: it waited on the receives
                trace.operation("fold", fold.region, began)

        for ins in recvs:
            nursery.start_soon(receive, ins)
        if fold is not None:
            nursery.start_soon(fold_as_they_arrive, fold)

    def _send_all(self, nursery: trio.Nursery, sends: Sequence[Send]) -> None:
        shared: dict[str, SharedDigest] = {}
        for ins in sends:
            if ins.region not in shared:
                known = self.digests_known.get(ins.region)
                name = self._edge(ins.peer).digest
                shared[ins.region] = SharedDigest(self.buffers[ins.region].data, known, name)

        for ins in sends:
            nursery.start_soon(self._send_region, ins, shared[ins.region])

    async def _send_region(self, ins: Send, digest: bytes | SharedDigest | None) -> None:
        """Send ``ins``'s region as a data frame, and remember its digest for the next send."""
        buffer = self.buffers[ins.region]
        sender = self._send_slot(ins.peer, ins.slot, FrameKind.DATA, buffer.nbytes)
        where = f"(slot {ins.slot}, round {self.context.round})"
        step = f"sending {ins.region!r} to role {ins.peer} {where}"
        found = await self._send(ins.peer, sender, buffer.data, step, digest=digest)
        self.digests_known[ins.region] = found

    async def _one(self, ins: Instruction, depth: int) -> None:
        ctx = self.context
        if isinstance(ins, Send):
            await self._send_region(ins, self.digests_known.get(ins.region))
        elif isinstance(ins, Recv):
            buffer = self.buffers[ins.region]
            receiver = self._receive_slot(ins.peer, ins.slot, FrameKind.DATA, buffer.nbytes, buffer)
            step = (
                f"receiving {ins.region!r} from role {ins.peer} (slot {ins.slot}, "
                f"round {ctx.round})"
            )
            self.digests_known.clear()
            await self._receive(ins.peer, receiver, step)
            if receiver.payload_digest is not None:  # the region's bytes, checked on arrival
                self.digests_known[ins.region] = receiver.payload_digest
        elif isinstance(ins, Op):
            self.digests_known.clear()
            trace = self.where.trace
            began = 0 if trace is None else time.monotonic_ns()
            LOCAL_OPS[ins.name](ctx, self.buffers[ins.region])
            if trace is not None:
                trace.operation(ins.name, ins.region, began)
        elif isinstance(ins, Fold):
            self.digests_known.clear()
            trace = self.where.trace
            began = 0 if trace is None else time.monotonic_ns()
            fold_into(self.buffers[ins.region], (self.buffers[name] for name in ins.sources))
            if trace is not None:
                trace.operation("fold", ins.region, began)
        elif isinstance(ins, Loop) and depth == 0 and any(isinstance(i, Loop) for i in ins.body):
            # A loop of loops groups rounds (a checkpointed run's generations): its inner
            # loops count the rounds, on from the rounds run before.
            for _ in range(ins.count):
                await self._body(ins.body, depth)
        elif isinstance(ins, Loop):
            for _ in range(ins.count):
                if depth == 0:  # a round loop: its iterations are rounds, counted on
                    ctx.round = self.where.round = self.rounds
                await self._body(ins.body, depth + 1)
                if depth == 0:
                    self.rounds += 1
                    if self.on_round is not None:
                        self.on_round(self.rounds)
        else:
            await self._choose(ins, depth)

    async def _choose(self, ins: Choose, depth: int) -> None:
        ctx = self.context
        if ins.selector is not None:
            value = SELECTORS[ins.selector](ctx)
            if value not in (0, 1):
                raise SelectorOutOfRange(
                    f"role {self.role}, round {ctx.round}: selector {ins.selector!r} gave "
                    f"{value}, not 0 or 1; the round is aborted"
                )
            word = value
        else:
            assert ins.source is not None, "projection gives every informed receiver a source"
            slot = self._receive_slot(ins.source, ins.slot, FrameKind.CHOICE, WORD_BYTES, None)
            step = f"receiving the choice word from role {ins.source} (round {ctx.round})"
            payload = await self._receive(ins.source, slot, step)
            word = decode_word(bytes(payload), role=self.role, source=ins.source)
        data = encode_word(word)
        for peer in ins.forward:
            slot_out = self._send_slot(peer, ins.slot, FrameKind.CHOICE, WORD_BYTES)
            step = f"relaying the choice word to role {peer} (round {ctx.round})"
            await self._send(peer, slot_out, data, step)
        self.arms[word] += 1
        await self._body(ins.arm1 if word else ins.arm0, depth)

    def digests(self) -> dict[str, str]:
        return {
            region.name: hashlib.sha256(self.buffers[region.name].tobytes()).hexdigest()
            for region in self.schedule.regions
            if region.of is None
        }
