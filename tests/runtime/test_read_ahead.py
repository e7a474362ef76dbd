"""Reading past is invisible: whatever the watch read past while the schedule was elsewhere,
the receives see the same frames, the same refusals and the same counters as they would
reading the socket themselves. Checked against a reference that feeds the same bytes to fresh
receive slots (the codec alone), over real TCP on 127.0.0.1, with the bytes cut at random
places and random pauses (longer than the watch's grace or not) on both sides."""

from __future__ import annotations

from dataclasses import dataclass

import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from alpha.core.budgets import Budgets
from alpha.errors import AlphaError, FrameRefused, RoundAborted
from alpha.runtime.session import first_alpha_error
from alpha.wire.abort import AbortCause, encode_cause
from alpha.wire.frame import FrameKind, FrameSpec, abort_spec
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import IDENTITY, connected

CAUSE = AbortCause(origin=2, cause="Corrupted", edge=(0, 2), round=1, detail="a damaged byte")
SPECS = (
    FrameSpec(IDENTITY, FrameKind.DATA, 2, 0, 1, 24),
    FrameSpec(IDENTITY, FrameKind.CHOICE, 2, 0, 2, 8),
)
# Long enough that nothing here runs out of them: the outcome must not depend on timing.
BUDGETS = Budgets(receive=5.0, start=5.0)
PAUSE = st.sampled_from([0.0, 0.0, 0.03])  # 0.03 s: longer than the watch's 20 ms grace


@dataclass(frozen=True)
class Sent:
    """One frame of the schedule (SPECS[which]) as it is sent: honest, a byte flipped, its
    version moved, or an ABORT in its place."""

    which: int
    flip: int | None = None
    version: int = 0  # added to the version the schedule expects
    abort: bool = False


# Mostly honest frames, so that most runs get past the first few: a flipped byte (header,
# payload or trailer), a version moved, and an ABORT in a frame's place, each now and then.
SENT = st.one_of(
    st.builds(Sent, which=st.integers(0, 1)),
    st.builds(Sent, which=st.integers(0, 1)),
    st.builds(Sent, which=st.integers(0, 1)),
    st.builds(Sent, which=st.integers(0, 1), flip=st.integers(0, 200)),
    st.builds(Sent, which=st.integers(0, 1), version=st.sampled_from([1, -1])),
    st.builds(Sent, which=st.integers(0, 1), abort=st.just(True)),
)


def _wire(frames: list[Sent]) -> bytes:
    counters = [0, 0]
    data = bytearray()
    for index, each in enumerate(frames):
        if each.abort:
            data += SendSlot(abort_spec(IDENTITY, 2, 0)).prepare(encode_cause(CAUSE)).join()
            break
        version = max(0, counters[each.which] + each.version)
        payload = bytes([index + 1]) * SPECS[each.which].extent
        frame = bytearray(SendSlot(SPECS[each.which], next_version=version).prepare(payload).join())
        if each.flip is not None:
            frame[each.flip % len(frame)] ^= 0x40
        data += frame
        counters[each.which] += 1
    return bytes(data)


def _reference(frames: list[Sent], data: bytes) -> tuple[list[bytes], str | None, list[int]]:
    """The codec alone: each scheduled frame fed to its slot in turn, until a refusal."""
    slots = [ReceiveSlot(each) for each in SPECS]
    got: list[bytes] = []
    at = 0
    for each in frames:
        reception = slots[each.which].arm()
        try:
            at += reception.feed(memoryview(data)[at:])
        except FrameRefused as refusal:
            return got, type(refusal).__name__, [slot.next_version for slot in slots]
        payload = reception.finish()
        if reception.aborted:
            return got, "RoundAborted", [slot.next_version for slot in slots]
        got.append(bytes(payload))
    return got, None, [slot.next_version for slot in slots]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    frames=st.lists(SENT, min_size=2, max_size=5),
    cuts=st.lists(st.tuples(st.integers(1, 400), PAUSE), max_size=4),
    waits=st.lists(PAUSE, min_size=5, max_size=5),
)
async def test_what_the_watch_reads_past_reaches_the_receives_unchanged(
    frames: list[Sent], cuts: list[tuple[int, float]], waits: list[float]
) -> None:
    data = _wire(frames)
    want, refused, counters = _reference(frames, data)
    got: list[bytes] = []
    read_past: list[bool] = []  # before each receive: whether the watch had read past
    done = trio.Event()
    async with connected(0, 2, BUDGETS) as (channel, peer):
        slots = [channel.expect(ReceiveSlot(each)) for each in SPECS]

        async def send() -> None:
            at = 0
            for length, pause in cuts:
                await peer.stream.send_all(data[at : at + length])
                at += length
                await trio.sleep(pause)
            await peer.stream.send_all(data[at:])
            await done.wait()  # the end of the stream stays away: nothing is judged by it

        async def schedule() -> None:
            try:
                for each, wait in zip(frames, waits, strict=False):
                    await trio.sleep(wait)
                    read_past.append(channel.ahead > 0)
                    got.append(bytes(await channel.receive(slots[each.which])))
            finally:
                done.set()

        error: AlphaError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                nursery.start_soon(channel.watch_for_abort)
                await schedule()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            error = first_alpha_error(group)
            assert error is not None, group
        except AlphaError as alone:
            error = alone
    event(f"a receive found frames read past: {any(read_past)}")
    observed = None if error is None else type(error).__name__
    if isinstance(error, RoundAborted) and any(each.abort for each in frames):
        # The watch may take the ABORT before the schedule reached the frames before it (a
        # damaged one among them): it stops the role at once. The schedule received a prefix
        # of them, and only its receives moved counters.
        assert got == want[: len(got)]
        assert sum(slot.next_version for slot in slots) == len(got)
    else:
        assert observed == refused, (observed, refused)
        assert got == want
        assert [slot.next_version for slot in slots] == counters
