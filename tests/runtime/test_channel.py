"""Frame channels and the endpoint's budgets, over real TCP on 127.0.0.1 inside one process."""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
from collections.abc import Awaitable, Callable

import numpy as np
import pytest
import trio
import trio.testing

from alpha.app.compile import describe_role
from alpha.compiler import LocalSchedule, project
from alpha.compiler.work import protocol_for
from alpha.compiler.work_sum_check import exchange_plan
from alpha.core.budgets import Budgets
from alpha.errors import (
    AlphaError,
    BudgetExhausted,
    CheckFailed,
    Corrupted,
    FrameRefused,
    PeerLost,
    PortMissing,
    RoleDescriptionInvalid,
    RoundAborted,
    SkippedVersion,
    TrailingBytes,
    Truncated,
    WrongEdge,
)
from alpha.runtime.channel import LEAN_RUN, OVERLAP_MIN, FrameChannel
from alpha.runtime.edge import edge_end
from alpha.runtime.session import first_alpha_error, run_role
from alpha.schedule.local import Loop, Recv, Send
from alpha.schedule.role import RoleDescription
from alpha.wire.abort import AbortCause, encode_cause
from alpha.wire.frame import FrameKind, FrameSpec, payload_digest
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import BUDGETS, IDENTITY, SECRET, connected


def spec(sender: int, receiver: int, extent: int, slot: int = 1) -> FrameSpec:
    return FrameSpec(IDENTITY, FrameKind.DATA, sender, receiver, slot, extent)


async def test_large_payloads_cross_both_ways_at_once_into_lent_buffers() -> None:
    size = 16 << 20
    ours = np.arange(size // 4, dtype=np.float32)
    theirs = ours[::-1].copy()
    into_high = np.empty_like(ours)
    into_low = np.empty_like(ours)
    async with connected() as (low, high), trio.open_nursery() as nursery:
        nursery.start_soon(low.send, SendSlot(spec(0, 1, size)), ours)
        nursery.start_soon(high.send, SendSlot(spec(1, 0, size)), theirs)
        got_high = await high.receive(ReceiveSlot(spec(0, 1, size), buffer=into_high))
        got_low = await low.receive(ReceiveSlot(spec(1, 0, size), buffer=into_low))
    assert np.array_equal(into_high, ours)
    assert np.array_equal(into_low, theirs)
    # The payload views are the lent buffers themselves: no copy after the socket's.
    assert np.shares_memory(np.frombuffer(got_high, dtype=np.float32), into_high)
    assert np.shares_memory(np.frombuffer(got_low, dtype=np.float32), into_low)


# --- large frames: hashed in a worker thread while they move ----------------------------------

LARGE = 3 * OVERLAP_MIN + 12345  # not a whole number of hash pieces


def _large(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, LARGE, dtype=np.uint8)


async def test_a_large_frame_hashed_while_it_moves_is_the_same_frame() -> None:
    payload = _large(1)
    async with connected() as (low, high), trio.open_nursery() as nursery:
        sent: list[bytes] = []

        async def send() -> None:
            sent.append(await low.send(SendSlot(spec(0, 1, LARGE)), payload))

        nursery.start_soon(send)
        slot = ReceiveSlot(spec(0, 1, LARGE))
        got = await high.receive(slot)
    assert bytes(got) == payload.tobytes()
    assert sent == [payload_digest(payload)] == [slot.payload_digest]
    # The bytes on the wire are the frame prepare() makes in one piece.
    assert high.received_bytes == low.sent_bytes == spec(0, 1, LARGE).frame_size


async def test_a_known_digest_frames_the_payload_again_on_other_edges() -> None:
    payload = _large(2)
    digest = payload_digest(payload)
    async with connected(0, 1) as (a, b), connected(0, 2) as (c, d):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.send, SendSlot(spec(0, 1, LARGE)), payload)
            assert bytes(await b.receive(ReceiveSlot(spec(0, 1, LARGE)))) == payload.tobytes()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: c.send(SendSlot(spec(0, 2, LARGE)), payload, digest=digest))
            slot = ReceiveSlot(spec(0, 2, LARGE))
            assert bytes(await d.receive(slot)) == payload.tobytes()
        assert slot.payload_digest == digest


@pytest.mark.parametrize("size", [100, LARGE], ids=["small", "large"])
async def test_a_frame_sealed_with_a_stale_digest_is_corrupted(size: int) -> None:
    """A sender whose remembered digest no longer matches the bytes (a bug in its cache)
    cannot slip them through: the receiver hashes what arrives."""
    payload = np.zeros(size, dtype=np.uint8)
    stale = payload_digest(payload)
    payload[size // 2] = 1
    async with connected() as (low, high), trio.open_nursery() as nursery:
        nursery.start_soon(lambda: low.send(SendSlot(spec(0, 1, size)), payload, digest=stale))
        slot = ReceiveSlot(spec(0, 1, size))
        with pytest.raises(Corrupted):
            await high.receive(slot)
    assert slot.next_version == 0 and slot.payload_digest is None


@pytest.mark.parametrize("offset", [200, LARGE // 2, LARGE + 100], ids=["first", "mid", "last"])
async def test_a_damaged_byte_in_a_large_frame_is_corrupted(offset: int) -> None:
    frame = bytearray(SendSlot(spec(0, 1, LARGE)).prepare(_large(3)).join())
    frame[offset] ^= 0x01
    async with connected() as (low, high), trio.open_nursery() as nursery:
        nursery.start_soon(low.stream.send_all, bytes(frame))
        with pytest.raises(Corrupted):
            await high.receive(ReceiveSlot(spec(0, 1, LARGE)))


async def test_a_large_frame_cut_short_is_truncated() -> None:
    frame = SendSlot(spec(0, 1, LARGE)).prepare(_large(4)).join()

    async def half_then_end(low: FrameChannel) -> None:
        await low.stream.send_all(frame[: LARGE // 2])
        await low.stream.send_eof()

    slot = ReceiveSlot(spec(0, 1, LARGE))
    async with connected() as (low, high), trio.open_nursery() as nursery:
        nursery.start_soon(half_then_end, low)
        with pytest.raises(Truncated) as caught:
            await high.receive(slot)
    assert caught.value.received == LARGE // 2
    assert slot.next_version == 0


async def test_a_large_frame_that_stalls_spends_the_receive_budget() -> None:
    frame = SendSlot(spec(0, 1, LARGE)).prepare(_large(5)).join()
    async with connected() as (low, high):
        await low.stream.send_all(frame[: OVERLAP_MIN * 2])  # then nothing
        with pytest.raises(BudgetExhausted) as caught:
            await high.receive(ReceiveSlot(spec(0, 1, LARGE)))
    assert caught.value.budget == "receive"


async def test_a_peer_gone_while_a_large_frame_is_sent_is_lost() -> None:
    async with connected() as (low, high):
        await high.aclose()
        with pytest.raises(PeerLost):
            await low.send(SendSlot(spec(0, 1, LARGE)), _large(6))


async def test_channels_on_different_edges_work_concurrently() -> None:
    # Three edges of role 0; each peer sends only after it has received, so the three
    # exchanges can only all finish if role 0 serves them at the same time.
    size = 1 << 20
    results: dict[int, bytes] = {}
    async with (
        connected(0, 1) as (e1, p1),
        connected(0, 2) as (e2, p2),
        connected(0, 3) as (e3, p3),
    ):

        async def peer(channel: FrameChannel) -> None:
            got = await channel.receive(ReceiveSlot(spec(0, channel.role, size)))
            await channel.send(SendSlot(spec(channel.role, 0, size)), bytes(got)[::-1])

        async def hub(channel: FrameChannel) -> None:
            payload = bytes([channel.peer]) * size
            await channel.send(SendSlot(spec(0, channel.peer, size)), payload)
            results[channel.peer] = bytes(
                await channel.receive(ReceiveSlot(spec(channel.peer, 0, size)))
            )

        async with trio.open_nursery() as nursery:
            for channel in (p1, p2, p3):
                nursery.start_soon(peer, channel)
            for channel in (e1, e2, e3):
                nursery.start_soon(hub, channel)
    assert results == {k: bytes([k]) * size for k in (1, 2, 3)}


async def test_a_peer_closing_inside_a_frame_is_truncated() -> None:
    async with connected() as (low, high):
        frame = SendSlot(spec(0, 1, 100)).prepare(bytes(100)).join()
        await low.stream.send_all(frame[:150])
        await low.stream.send_eof()
        slot = ReceiveSlot(spec(0, 1, 100))
        with pytest.raises(Truncated) as caught:
            await high.receive(slot)
    assert caught.value.received == 150
    assert slot.next_version == 0


async def test_bytes_after_the_last_frame_are_trailing() -> None:
    async with connected() as (low, high):
        await low.send(SendSlot(spec(0, 1, 8)), b"12345678")
        await low.stream.send_all(b"extra")
        await low.stream.send_eof()
        last = ReceiveSlot(spec(0, 1, 8))
        assert bytes(await high.receive(last)) == b"12345678"
        with pytest.raises(TrailingBytes) as caught:
            await high.expect_eof(last)
    assert caught.value.edge == (0, 1)


async def test_a_clean_close_checks_the_end_both_ways() -> None:
    async with connected() as (low, high):
        a_last = ReceiveSlot(spec(1, 0, 4))
        b_last = ReceiveSlot(spec(0, 1, 4))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(low.send, SendSlot(spec(0, 1, 4)), b"ping")
            nursery.start_soon(high.send, SendSlot(spec(1, 0, 4)), b"pong")
        assert bytes(await low.receive(a_last)) == b"pong"
        assert bytes(await high.receive(b_last)) == b"ping"
        await low.send_eof()
        await high.send_eof()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(low.expect_eof, a_last)
            nursery.start_soon(high.expect_eof, b_last)


async def test_a_silent_peer_exhausts_the_receive_budget() -> None:
    async with connected() as (_low, high):
        slot = ReceiveSlot(spec(0, 1, 8))
        with pytest.raises(BudgetExhausted) as caught:
            await high.receive(slot, step="waiting for a contribution")
    error = caught.value
    assert (error.role, error.peer, error.budget, error.seconds) == (1, 0, "receive", 0.5)
    assert error.step == "waiting for a contribution"
    assert slot.next_version == 0


async def test_a_reset_connection_is_peer_lost() -> None:
    async with connected() as (low, high):
        # SO_LINGER 0 makes close() send a reset instead of an orderly end.
        low.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        low.stream.socket.close()
        await trio.sleep(0.05)
        with pytest.raises(PeerLost) as caught:
            await high.receive(ReceiveSlot(spec(0, 1, 8)), step="receiving a contribution")
    assert (caught.value.role, caught.value.peer) == (1, 0)
    assert "reset" in str(caught.value).lower()


def _role(
    role: int, n: int, fanout: int, budgets: Budgets, peers: list[int]
) -> tuple[RoleDescription, LocalSchedule]:
    """Role ``role`` of the edge exchange on the tree of ``n`` roles and ``fanout``, with
    ``budgets``: its description as its artifact carries it, and its projected schedule.
    ``peers`` are the edges the test relies on."""
    plan = exchange_plan(n, fanout, payload=8, budgets=budgets)
    description = describe_role(plan, role, secret=SECRET)
    assert [edge.peer for edge in description.edges] == peers
    assert description.budgets == budgets
    return description, project(protocol_for(plan), role)


async def test_the_deadline_names_the_step_it_struck() -> None:
    budgets = Budgets(accept=30.0, deadline=0.5)
    announced: list[bytes] = []

    async def announce(data: bytes) -> None:
        announced.append(data)

    _ports_send, ports_in = trio.testing.memory_stream_pair()
    description, schedule = _role(0, 2, 1, budgets, [1])
    with pytest.raises(BudgetExhausted) as caught:
        await run_role(description, announce=announce, ports_in=ports_in, schedule=schedule)
    error = caught.value
    assert (error.budget, error.peer, error.step) == ("deadline", 1, "accepting role 1")
    assert len(announced) == 1 and len(announced[0]) == 2


async def test_a_lower_port_that_never_comes_names_the_peer() -> None:
    # The port comes once its listener is up: waiting for it is waiting for a peer to come
    # up, which the accept budget bounds.
    budgets = Budgets(connect_attempts=5, connect_interval=0.05, accept=0.25)
    ports_send, ports_in = trio.testing.memory_stream_pair()

    async def announce(data: bytes) -> None:
        assert data == b""

    description, schedule = _role(3, 6, 2, budgets, [1])
    with pytest.raises(BudgetExhausted) as caught:
        await run_role(description, announce=announce, ports_in=ports_in, schedule=schedule)
    assert (caught.value.budget, caught.value.peer) == ("accept", 1)
    assert caught.value.seconds == budgets.accept
    await ports_send.aclose()


async def test_stdin_ending_before_a_port_is_port_missing() -> None:
    ports_send, ports_in = trio.testing.memory_stream_pair()
    await ports_send.aclose()

    async def announce(data: bytes) -> None:
        pass

    description, schedule = _role(2, 3, 2, BUDGETS, [0])
    with pytest.raises(PortMissing):
        await run_role(description, announce=announce, ports_in=ports_in, schedule=schedule)


async def test_a_listener_that_is_gone_exhausts_the_connect_attempts() -> None:
    # Bind a port, then close it: connecting there is refused every time.
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    ports_send, ports_in = trio.testing.memory_stream_pair()
    await ports_send.send_all(port.to_bytes(2, "big"))

    async def announce(data: bytes) -> None:
        pass

    description, schedule = _role(1, 2, 1, BUDGETS, [0])
    with pytest.raises(BudgetExhausted) as caught:
        await run_role(description, announce=announce, ports_in=ports_in, schedule=schedule)
    assert (caught.value.budget, caught.value.peer) == ("connect", 0)
    assert caught.value.seconds == pytest.approx(BUDGETS.connect)


async def test_a_verified_contribution_with_wrong_content_fails_the_sum_check() -> None:
    # Role 1 is played by hand from the same plan: correct hello, correct framing, a wrong
    # contribution. Role 0 folds it, sends the total down as its schedule says, and its check
    # of the total refuses it. The session raises the cause itself, not the exception group
    # of the nursery it arose in.
    description, schedule = _role(0, 2, 1, BUDGETS, [1])
    mine, theirs = _role(1, 2, 1, BUDGETS, [0])
    (loop,) = theirs.body
    assert isinstance(loop, Loop)
    up = next(ins for ins in loop.body if isinstance(ins, Send))
    down = next(ins for ins in loop.body if isinstance(ins, Recv))
    (region,) = theirs.regions
    values = np.dtype(region.dtype)
    extent = region.count * values.itemsize
    # Role 1's honest contribution in round 0 is 2.0 everywhere; the total over both is 3.0.
    wrong = np.full(region.count, 5.0, dtype=values)
    totals: list[np.ndarray] = []

    announced: trio.MemorySendChannel[bytes]
    announced, announcements = trio.open_memory_channel[bytes](1)
    failures: list[Exception] = []

    async def announce(data: bytes) -> None:
        await announced.send(data)

    async def impostor() -> None:
        port = int.from_bytes(await announcements.receive(), "big")
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            # Role 1's own end of the edge, its keys included: every frame is sealed as role
            # 1's artifact would seal it.
            (edge,) = mine.edges
            end = edge_end(mine, edge)
            channel = FrameChannel(stream, role=1, peer=0, budgets=BUDGETS)
            await channel.send(end.hello_out(), b"")
            await channel.receive(end.hello_in())
            await channel.send(end.sending(FrameKind.DATA, up.slot, extent), wrong)
            total = await channel.receive(end.receiving(FrameKind.DATA, down.slot, extent))
            totals.append(np.frombuffer(bytes(total), dtype=values))
            # Role 0 refuses the total and goes away; whatever happens to this end then is
            # not what the test is about.

    _, ports_in = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(impostor)
        with pytest.raises(CheckFailed) as caught:
            await run_role(
                description,
                announce=announce,
                ports_in=ports_in,
                schedule=schedule,
                on_failure=failures.append,
            )
    assert len(failures) == 1 and type(failures[0]) is CheckFailed
    assert type(caught.value) is CheckFailed
    message = str(caught.value)
    assert message.startswith("role 0, round 0: element 0 of the combined sum is ")
    assert "6.0" in message and message.endswith(", but the sum over 2 roles is 3")
    # The wrong contribution passed every frame check: role 0 folded it into the total.
    assert len(totals) == 1 and np.array_equal(totals[0], np.full(region.count, 6.0))


# --- aborts and the watch -------------------------------------------------------------------

CAUSE = AbortCause(origin=4, cause="TrailingBytes", edge=(1, 4), round=29, detail="3 bytes")


async def test_an_abort_in_place_of_a_frame_raises_the_original_cause() -> None:
    async with connected() as (low, high):
        assert await low.send_abort(CAUSE)
        slot = ReceiveSlot(spec(0, 1, 64))
        with pytest.raises(RoundAborted) as caught:
            await high.receive(slot)
    error = caught.value
    assert (error.role, error.peer, error.origin, error.cause) == (1, 0, 4, "TrailingBytes")
    assert (error.edge, error.round) == ((1, 4), 29)
    assert slot.next_version == 0
    assert not low.can_abort  # one ABORT per edge; the sending side is ended


async def test_the_watch_raises_an_abort_from_a_peer_the_schedule_is_not_reading() -> None:
    async with connected(0, 1) as (a, _peer_a), connected(0, 2) as (b, peer_b):
        # Role 0 waits on role 1, which is slow; role 2 aborts meanwhile.
        async def role0() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(b.watch_for_abort)
                await a.receive(ReceiveSlot(spec(1, 0, 8)), step="waiting for role 1")

        async def role2() -> None:
            await trio.sleep(0.05)
            assert await peer_b.send_abort(CAUSE)

        with pytest.raises(ExceptionGroup) as caught:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(role2)
                await role0()
    assert caught.value.subgroup(RoundAborted) is not None
    error = first_alpha_error(caught.value)
    assert isinstance(error, RoundAborted) and error.peer == 2 and error.origin == 4


async def test_the_watch_leaves_a_data_frame_for_the_receive_that_takes_it() -> None:
    async with connected() as (low, high), trio.open_nursery() as nursery:
        nursery.start_soon(high.watch_for_abort)
        for version in range(3):
            await low.send(SendSlot(spec(0, 1, 8), next_version=version), b"%08d" % version)
        await trio.sleep(0.05)  # the frames wait in the socket while the watch looks at them
        slot = ReceiveSlot(spec(0, 1, 8))
        for version in range(3):
            assert bytes(await high.receive(slot, last=version == 2)) == b"%08d" % version
        await low.send_eof()
        # The nursery ends only when the watch returns by itself at the expected end.


async def test_the_watch_refuses_an_end_of_stream_while_frames_are_still_due() -> None:
    async with connected() as (low, high):
        await low.send_eof()
        with pytest.raises(PeerLost) as caught:
            await high.watch_for_abort()
    assert "still due" in str(caught.value)


async def test_an_abort_cannot_follow_a_frame_cut_off_mid_send() -> None:
    async with connected(budgets=Budgets(receive=0.2)) as (low, _high):
        size = 64 << 20  # far more than the socket buffers hold; the peer never reads
        with pytest.raises(BudgetExhausted):
            await low.send(SendSlot(spec(0, 1, size)), bytes(size))
        assert not low.can_abort
        assert not await low.send_abort(CAUSE)


async def test_a_connect_attempt_that_hangs_is_bounded_by_the_connect_budget() -> None:
    # A listener whose backlog is full drops new SYNs: a connect to it would wait for the
    # kernel's retries (minutes). The connect budget bounds every attempt, and all of them.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = socket.create_connection(("127.0.0.1", port))
    ports_send, ports_in = trio.testing.memory_stream_pair()
    await ports_send.send_all(port.to_bytes(2, "big"))

    async def announce(data: bytes) -> None:
        pass

    description, schedule = _role(1, 2, 1, BUDGETS, [0])
    try:
        with pytest.raises(BudgetExhausted) as caught:
            await run_role(description, announce=announce, ports_in=ports_in, schedule=schedule)
    finally:
        queued.close()
        listener.close()
    assert (caught.value.budget, caught.value.peer) == ("connect", 0)
    assert caught.value.when == "before the first round"


def test_the_session_deadline_is_off_by_default() -> None:
    assert Budgets().deadline is None
    assert Budgets(deadline=7200.0).deadline == 7200.0
    with pytest.raises(RoleDescriptionInvalid):
        Budgets(deadline=0.0)


# --- an ABORT behind frames the schedule has not read yet (docs/failure.md) -------------------

# Generous, since a refusal spends it: the receive budget of role 0's wait on a silent role 1,
# which the watch must beat on the edge to role 2.
PATIENT = Budgets(receive=5.0, accept=0.5, connect_attempts=3, connect_interval=0.05)


async def _first_error(*tasks: Callable[[], Awaitable[object]]) -> AlphaError:
    """Run ``tasks`` together, as a role's schedule and its watches; the cause they end with."""
    try:
        async with trio.open_nursery() as nursery:
            for task in tasks:
                nursery.start_soon(task)
    except BaseExceptionGroup as group:
        error = first_alpha_error(group)
        assert error is not None, group
        return error
    raise AssertionError("every task ended well")


async def _settled() -> None:
    """Until every task has been blocked for a while: longer than the watch's grace (20 ms),
    so a watch that looks at the edge has looked and read what it can."""
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)


def _frame(slot_spec: FrameSpec, payload: bytes, version: int = 0) -> bytes:
    return SendSlot(slot_spec, next_version=version).prepare(payload).join()


async def test_an_abort_behind_unread_frames_stops_the_role_at_once() -> None:
    data, word = spec(2, 0, 16), FrameSpec(IDENTITY, FrameKind.CHOICE, 2, 0, 2, 8)
    into = np.zeros(4, dtype=np.float32)
    async with connected(0, 1, PATIENT) as (a, _silent), connected(0, 2, PATIENT) as (b, peer):
        slots = b.expect(ReceiveSlot(data, buffer=into.data)), b.expect(ReceiveSlot(word))
        sent = [(data, b"a" * 16, 0), (word, b"w" * 8, 0), (data, b"b" * 16, 1)]
        for frame_spec, payload, version in sent:
            await peer.send(SendSlot(frame_spec, next_version=version), payload)
        assert await peer.send_abort(CAUSE)
        # Role 0's schedule waits on role 1, which says nothing; role 2's ABORT lies behind
        # three frames the schedule has not read.
        error = await _first_error(
            lambda: a.receive(ReceiveSlot(spec(1, 0, 8)), step="waiting for role 1"),
            b.watch_for_abort,
        )
        assert isinstance(error, RoundAborted), error
        assert (error.peer, error.origin, error.cause) == (2, 4, "TrailingBytes")
        # Read past, not received: no counter moved, no byte reached the lent buffer.
        assert [slot.next_version for slot in slots] == [0, 0]
        assert not into.any()
        assert b.ahead == 2 * data.frame_size + word.frame_size
        # The receives find the frames there, checked as ever, in the order they came.
        assert bytes(await b.receive(slots[0])) == b"a" * 16
        assert bytes(await b.receive(slots[1])) == b"w" * 8
        assert bytes(await b.receive(slots[0])) == b"b" * 16
        assert [slot.next_version for slot in slots] == [2, 1]
        assert into.tobytes() == b"b" * 16 and b.ahead == 0


async def test_a_damaged_frame_read_past_is_refused_by_its_receive_with_its_counter_unchanged() -> (
    None
):
    async with connected(0, 1, PATIENT) as (a, _silent), connected(0, 2, PATIENT) as (b, peer):
        slot = b.expect(ReceiveSlot(spec(2, 0, 16)))
        damaged = bytearray(_frame(spec(2, 0, 16), b"c" * 16))
        damaged[140] ^= 0x01  # a payload byte: the header is the one expected
        await peer.stream.send_all(bytes(damaged))
        assert await peer.send_abort(CAUSE)
        error = await _first_error(lambda: a.receive(ReceiveSlot(spec(1, 0, 8))), b.watch_for_abort)
        assert isinstance(error, RoundAborted)
        assert b.ahead == len(damaged)
        with pytest.raises(Corrupted):
            await b.receive(slot)
        assert slot.next_version == 0 and isinstance(slot.refusal, Corrupted)


@pytest.mark.parametrize(
    ("version", "refusal"), [(1, SkippedVersion), (0, WrongEdge)], ids=["version", "slot"]
)
async def test_a_frame_no_registered_slot_expects_next_is_left_for_its_receive(
    version: int, refusal: type[FrameRefused]
) -> None:
    async with connected(0, 1) as (a, _silent), connected(0, 2) as (b, peer):
        slot = b.expect(ReceiveSlot(spec(2, 0, 16)))
        # The header differs from the expected one in one field: the version, or the slot.
        other = spec(2, 0, 16, slot=1 if version else 7)
        await peer.stream.send_all(_frame(other, b"d" * 16, version))
        assert await peer.send_abort(CAUSE)
        # The watch cannot delimit the frame, so it leaves it (and the ABORT behind it) in the
        # socket: role 0 waits on role 1 until its receive budget runs out.
        error = await _first_error(lambda: a.receive(ReceiveSlot(spec(1, 0, 8))), b.watch_for_abort)
        assert isinstance(error, BudgetExhausted) and error.peer == 1, error
        assert b.ahead == 0
        with pytest.raises(refusal):  # as without the watch
            await b.receive(slot)
        assert slot.next_version == 0


@pytest.mark.parametrize(("spare", "seen"), [(0, True), (-1, False)], ids=["max", "max+1"])
async def test_the_watch_reads_past_at_most_its_bound(spare: int, seen: bool) -> None:
    data = spec(2, 0, 1000)
    # Role 0's wait on role 1: long where the watch must cut it short, short where it cannot.
    waiting = PATIENT if seen else BUDGETS
    async with connected(0, 1, waiting) as (a, _silent), connected(0, 2) as (low, peer):
        b = FrameChannel(  # the same connection, bound to exactly one frame, or a byte less
            low.stream,
            role=0,
            peer=2,
            budgets=PATIENT,
            identity=IDENTITY,
            read_ahead=data.frame_size + spare,
        )
        slot = b.expect(ReceiveSlot(data))
        await peer.send(SendSlot(data), b"e" * 1000)
        assert await peer.send_abort(CAUSE)
        error = await _first_error(lambda: a.receive(ReceiveSlot(spec(1, 0, 8))), b.watch_for_abort)
        assert isinstance(error, RoundAborted if seen else BudgetExhausted), error
        assert b.ahead == (data.frame_size if seen else 0)
        assert bytes(await b.receive(slot)) == b"e" * 1000


@pytest.mark.parametrize("last", [True, False], ids=["last", "not-last"])
async def test_an_end_of_stream_after_a_frame_read_past_ends_the_watch_only_after_the_last(
    last: bool,
) -> None:
    async with connected(0, 1) as (a, _silent), connected(0, 2) as (b, peer):
        slot = b.expect(ReceiveSlot(spec(2, 0, 16)), last=last)
        await peer.send(SendSlot(spec(2, 0, 16)), b"f" * 16)
        await peer.send_eof()
        returned = []

        async def watch() -> None:
            await b.watch_for_abort()
            returned.append(True)

        # Beside a wait on a silent role 1, which its receive budget ends.
        error = await _first_error(watch, lambda: a.receive(ReceiveSlot(spec(1, 0, 8))))
        if last:  # the watch returned by itself: nothing more was due
            assert returned and isinstance(error, BudgetExhausted) and error.peer == 1, error
        else:
            assert isinstance(error, PeerLost) and error.peer == 2, error
            assert "still due" in str(error)
        assert b.ahead == spec(2, 0, 16).frame_size
        assert bytes(await b.receive(slot, last=last)) == b"f" * 16
        if last:
            await b.expect_eof(slot)


async def test_a_frame_after_the_last_read_past_is_trailing_at_the_end_check() -> None:
    async with connected(0, 1, PATIENT) as (a, _silent), connected(0, 2, PATIENT) as (b, peer):
        slot = b.expect(ReceiveSlot(spec(2, 0, 16)), last=True)
        for version in range(2):  # a well-formed frame after the last one
            await peer.send(SendSlot(spec(2, 0, 16), next_version=version), b"g" * 16)
        assert await peer.send_abort(CAUSE)
        error = await _first_error(lambda: a.receive(ReceiveSlot(spec(1, 0, 8))), b.watch_for_abort)
        assert isinstance(error, RoundAborted)
        await b.receive(slot, last=True)
        with pytest.raises(TrailingBytes):
            await b.expect_eof(slot)


async def test_a_frame_partly_read_past_is_completed_by_its_receive() -> None:
    size = 3 * (1 << 20) + 7  # more than the watch takes at once, and deferred hashing
    payload = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    frame = _frame(spec(2, 0, size), payload)
    # A short start budget: a first receive of a frame read past must not wait for the socket.
    budgets = Budgets(receive=5.0, start=0.5)
    async with connected(0, 2, budgets) as (b, peer), trio.open_nursery() as nursery:
        slot = b.expect(ReceiveSlot(spec(2, 0, size)))
        nursery.start_soon(b.watch_for_abort)
        half = len(frame) // 2
        await peer.stream.send_all(frame[:half])
        await _settled()
        assert b.ahead == half and slot.next_version == 0  # the watch read past what came
        async with trio.open_nursery() as inner:
            inner.start_soon(peer.stream.send_all, frame[half:])
            got = await b.receive(slot)
        assert bytes(got) == payload and slot.next_version == 1 and b.ahead == 0
        # The watch looks at the edge again, at the frame boundary the receive left.
        await peer.send(SendSlot(spec(2, 0, size), next_version=1), payload)
        await _settled()
        assert b.ahead == len(frame)
        assert bytes(await b.receive(slot, first=True)) == payload
        nursery.cancel_scope.cancel()


# --- the lean path: the kernel asked first, a checkpoint every LEAN_RUN calls -----------------


async def _all_in(channel: FrameChannel, count: int) -> None:
    """Wait until ``count`` bytes wait in ``channel``'s receiving kernel buffer (FIONREAD)."""
    while True:
        data = fcntl.ioctl(channel.stream.socket.fileno(), termios.FIONREAD, b"\0\0\0\0")
        if struct.unpack("i", data)[0] >= count:
            return
        await trio.sleep(0.001)


async def test_a_real_socket_takes_the_lean_path() -> None:
    async with connected() as (low, high):
        assert low._plain is not None and high._plain is not None
        assert low._plain.fileno() == low.stream.socket.fileno()


async def test_frames_whose_bytes_are_all_in_still_let_other_tasks_run() -> None:
    """Every byte of 64 small frames is in the socket before the receives: none of them has to
    wait, and yet the role's other tasks run between them, once per LEAN_RUN calls at least."""
    frames = 64
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    async with connected() as (low, high):
        sending = SendSlot(spec(0, 1, 64))
        for version in range(frames):
            await low.send(sending, bytes([version]) * 64)
        await _all_in(high, frames * sending.spec.frame_size)
        receiving = ReceiveSlot(spec(0, 1, 64))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(count_turns)
            await trio.lowlevel.checkpoint()  # the counter starts
            turns = 0
            for version in range(frames):
                payload = await high.receive(receiving)
                assert bytes(payload) == bytes([version]) * 64
            counted = turns
            nursery.cancel_scope.cancel()
    # Each checkpoint of the receives gives the counter one turn. trio runs a batch's tasks in
    # random order, so the turn the last receive gave may come after it: one may be missing.
    assert counted >= frames // LEAN_RUN - 1


async def test_an_abort_read_whole_in_place_of_a_small_frame_keeps_what_followed_it() -> None:
    """A small frame is read whole: when an ABORT, shorter, came in its place, the bytes read
    after it are kept in the read-past buffer (here: stray bytes a dishonest peer sent after
    its ABORT), not dropped, and the ABORT's cause is raised."""
    async with connected() as (low, high):
        frame = low.edge.abort_out().prepare(encode_cause(CAUSE)).join()  # type: ignore[union-attr]
        extra = b"after the abort"
        await low.stream.send_all(frame + extra)
        await _all_in(high, len(frame + extra))
        slot = ReceiveSlot(spec(0, 1, 4096))  # a whole frame longer than the ABORT and extra
        with pytest.raises(RoundAborted):
            await high.receive(slot)
        assert bytes(high._ahead[high._ahead_at :]) == extra
