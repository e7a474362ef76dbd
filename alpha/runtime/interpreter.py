"""Running a role's local schedule over its frame channels.

The interpreter owns the role's regions (numpy arrays allocated once), a send and a receive
slot per (peer, slot, kind), and the loop counters. Receives land straight in the region or
scratch buffer the instruction names (the receive slot is lent that buffer). Folds add in the
order the schedule lists, elementwise. An agreed choice's word is 8 bytes, big-endian, 0 or 1;
the authority refuses any other selector value (``SelectorOutOfRange``) and every receiver
refuses a word that is not canonical (``NoncanonicalWord``).
"""

from __future__ import annotations

import hashlib
import mmap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from alpha.errors import NoncanonicalWord, SelectorOutOfRange
from alpha.frame import FrameKind, FrameSpec, ReceiveSlot, SendSlot
from alpha.identity import RunIdentity
from alpha.learner.program import LearnerState
from alpha.protocol.local import Choose, Fold, Instruction, LocalSchedule, Loop, Op, Recv, Send
from alpha.runtime.channel import FrameChannel
from alpha.runtime.ops import LOCAL_OPS, SELECTORS, Context
from alpha.runtime.whereabouts import RUNNING, Whereabouts

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["WORD_BYTES", "Interpreter", "decode_word", "encode_word", "transient_array"]


def transient_array(count: int, dtype: str) -> np.ndarray:
    """Zeros in their own anonymous mapping, so that the ``release`` operation can give the
    pages back (``alpha.operations.release``) and the mapping stays valid for the slots that
    receive into it."""
    size = max(1, count * np.dtype(dtype).itemsize)
    # Private: MADV_DONTNEED on a private anonymous mapping frees its pages and refills them
    # with zeros; a shared one (mmap's default) would keep them in its shared memory object.
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20)
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=dtype, count=count)


WORD_BYTES: Final = 8
"""A choice word: one unsigned 64-bit big-endian integer, 0 or 1."""


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
        self.sending: dict[tuple[int, int, FrameKind], SendSlot] = {}
        self.receiving: dict[tuple[int, int, FrameKind], ReceiveSlot] = {}
        self.heard: set[int] = set()  # peers whose first frame after the hello has arrived
        self.rounds = 0
        self.arms = [0, 0]  # how often each arm of a choice ran here
        self.on_round = on_round
        self.where = where or Whereabouts(self.role, phase=RUNNING)

    # --- slots ------------------------------------------------------------------------------

    def _send_slot(self, peer: int, slot: int, kind: FrameKind, extent: int) -> SendSlot:
        key = (peer, slot, kind)
        if key not in self.sending:
            spec = FrameSpec(self.identity, kind, self.role, peer, slot, extent)
            self.sending[key] = SendSlot(spec)
        return self.sending[key]

    def _receive_slot(
        self, peer: int, slot: int, kind: FrameKind, extent: int, buffer: np.ndarray | None
    ) -> ReceiveSlot:
        key = (peer, slot, kind)
        if key not in self.receiving:
            spec = FrameSpec(self.identity, kind, peer, self.role, slot, extent)
            lent = None if buffer is None else buffer.data
            self.receiving[key] = ReceiveSlot(spec, buffer=lent)
        return self.receiving[key]

    async def _receive(self, peer: int, slot: ReceiveSlot, step: str) -> memoryview:
        # The first frame after the hello may wait for the whole run to start (docs/budgets.md).
        first = peer not in self.heard
        self.where.at(step, peer)
        payload = await self.channels[peer].receive(slot, step=step, first=first)
        self.heard.add(peer)
        return payload

    async def _send(self, peer: int, slot: SendSlot, payload: Buffer, step: str) -> None:
        self.where.at(step, peer)
        await self.channels[peer].send(slot, payload, step=step)

    # --- execution --------------------------------------------------------------------------

    async def run(self) -> None:
        await self._body(self.schedule.body, depth=0)

    async def _body(self, body: Sequence[Instruction], depth: int) -> None:
        for ins in body:
            await self._one(ins, depth)

    async def _one(self, ins: Instruction, depth: int) -> None:
        ctx = self.context
        if isinstance(ins, Send):
            buffer = self.buffers[ins.region]
            sender = self._send_slot(ins.peer, ins.slot, FrameKind.DATA, buffer.nbytes)
            step = f"sending {ins.region!r} to role {ins.peer} (slot {ins.slot}, round {ctx.round})"
            await self._send(ins.peer, sender, buffer.data, step)
        elif isinstance(ins, Recv):
            buffer = self.buffers[ins.region]
            receiver = self._receive_slot(ins.peer, ins.slot, FrameKind.DATA, buffer.nbytes, buffer)
            step = (
                f"receiving {ins.region!r} from role {ins.peer} (slot {ins.slot}, "
                f"round {ctx.round})"
            )
            await self._receive(ins.peer, receiver, step)
        elif isinstance(ins, Op):
            LOCAL_OPS[ins.name](ctx, self.buffers[ins.region])
        elif isinstance(ins, Fold):
            out = self.buffers[ins.region]
            first, *rest = (self.buffers[name] for name in ins.sources)
            if first is not out:
                np.copyto(out, first)
            for source in rest:
                np.add(out, source, out=out)
        elif isinstance(ins, Loop):
            for index in range(ins.count):
                if depth == 0:
                    ctx.round = self.where.round = index
                await self._body(ins.body, depth + 1)
                if depth == 0:
                    self.rounds = index + 1
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
