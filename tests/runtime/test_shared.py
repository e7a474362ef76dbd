"""Shared-memory regions: their layout, the checks on making and opening one, and frames whose
payloads move through one between two channels over real TCP on 127.0.0.1."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.budgets import Budgets
from alpha.core.identity import RunIdentity
from alpha.errors import BudgetExhausted, Corrupted, RegionRefused, RoundAborted, Truncated
from alpha.runtime.channel import OVERLAP_MIN, FrameChannel
from alpha.runtime.shared import (
    SHARED_ENV,
    SHARED_MIN,
    Region,
    RegionLayout,
    Sharing,
    launch_token,
    sweep_regions,
)
from alpha.schedule.local import LocalSchedule, Loop, Recv, Send
from alpha.schedule.regions import Region as Buffer
from alpha.schedule.role import Edge, RoleDescription
from alpha.wire.abort import AbortCause, encode_cause
from alpha.wire.frame import FrameKind, FrameSpec, payload_digest
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import BUDGETS, IDENTITY, connected

OTHER = RunIdentity(b"\x01" * 32, IDENTITY.contract, IDENTITY.membership)

# --- the layout -------------------------------------------------------------------------------

extents = st.dictionaries(
    st.integers(0, 1000), st.integers(0, 4 * SHARED_MIN), min_size=0, max_size=12
)


@given(extents)
def test_a_layout_gives_each_large_slot_its_own_page_aligned_area(chosen: dict[int, int]) -> None:
    layout = RegionLayout.of(IDENTITY, 0, 1, chosen)
    large = sorted(slot for slot, extent in chosen.items() if extent >= SHARED_MIN)
    if not large:
        assert layout is None
        return
    assert layout is not None
    assert [area.slot for area in layout.areas] == large
    end = layout.counter_at(layout.areas[-1]) + 8
    for area in layout.areas:
        assert area.extent == chosen[area.slot]
        assert area.offset % 4096 == 0 and area.offset >= end
        end = area.offset + area.extent
        assert layout.area(area.slot) == area
    assert layout.size >= end
    assert all(layout.area(slot) is None for slot in chosen if slot not in large)


@given(extents.filter(lambda d: any(e >= SHARED_MIN for e in d.values())), st.data())
def test_a_layout_marker_names_run_direction_and_slots(
    chosen: dict[int, int], data: st.DataObject
) -> None:
    layout = RegionLayout.of(IDENTITY, 0, 1, chosen)
    assert layout is not None
    assert RegionLayout.of(IDENTITY, 0, 1, dict(chosen)) == layout  # both ends compute alike
    others = [
        RegionLayout.of(OTHER, 0, 1, chosen),
        RegionLayout.of(IDENTITY, 1, 0, chosen),
        RegionLayout.of(IDENTITY, 0, 2, chosen),
    ]
    slot = data.draw(st.sampled_from([a.slot for a in layout.areas]))
    others.append(RegionLayout.of(IDENTITY, 0, 1, {**chosen, slot: chosen[slot] + 1}))
    others.append(RegionLayout.of(IDENTITY, 0, 1, {**chosen, 1001: SHARED_MIN}))
    for other in others:
        assert other is not None and other.marker != layout.marker


def test_a_slot_below_the_threshold_stays_on_tcp() -> None:
    assert RegionLayout.of(IDENTITY, 0, 1, {1: SHARED_MIN - 1}) is None
    layout = RegionLayout.of(IDENTITY, 0, 1, {1: SHARED_MIN})
    assert layout is not None and layout.area(1) is not None


# --- making and opening -----------------------------------------------------------------------

LAYOUT = RegionLayout.of(IDENTITY, 0, 1, {1: SHARED_MIN, 2: 3 * SHARED_MIN + 5})
assert LAYOUT is not None


def test_a_made_region_is_private_whole_and_marked_and_its_opener_takes_the_name(
    tmp_path: Path,
) -> None:
    made = Region.make(tmp_path, "r", LAYOUT, role=1)
    found = os.stat(tmp_path / "r")
    assert stat.S_IMODE(found.st_mode) == 0o600
    assert found.st_size == LAYOUT.size
    assert found.st_blocks * 512 >= LAYOUT.size  # reserved now, not on the first write
    opened = Region.open(tmp_path, "r", LAYOUT, role=0)
    assert not (tmp_path / "r").exists()  # both ends hold the file: the name is gone
    area = LAYOUT.areas[1]
    opened.write(area, bytes(range(256)) * (area.extent // 256) + b"x" * (area.extent % 256))
    view = memoryview(bytearray(area.extent))
    assert made.read_into(view, area.offset) == area.extent
    assert bytes(view[:256]) == bytes(range(256))
    assert opened.taken(area) == 0
    made.take(area, 7)
    assert opened.taken(area) == 7 and opened.taken(LAYOUT.areas[0]) == 0
    made.close()
    opened.close()
    made.close()  # twice: nothing


def test_a_region_that_exists_already_is_never_taken_over(tmp_path: Path) -> None:
    (tmp_path / "r").write_bytes(b"someone's")
    with pytest.raises(RegionRefused) as caught:
        Region.make(tmp_path, "r", LAYOUT, role=1)
    assert type(caught.value) is RegionRefused
    assert (caught.value.sender, caught.value.receiver, caught.value.peer) == (0, 1, 0)
    assert (tmp_path / "r").read_bytes() == b"someone's"


def _refused_open(tmp_path: Path, name: str = "r") -> RegionRefused:
    with pytest.raises(RegionRefused) as caught:
        Region.open(tmp_path, name, LAYOUT, role=0)
    assert type(caught.value) is RegionRefused
    assert caught.value.peer == 1
    return caught.value


def test_no_region_is_refused_with_what_to_do(tmp_path: Path) -> None:
    refusal = _refused_open(tmp_path)
    assert "one launcher" in str(refusal) and 'transport = "tcp"' in str(refusal)


def test_a_region_others_may_open_is_refused(tmp_path: Path) -> None:
    made = Region.make(tmp_path, "r", LAYOUT, role=1)
    os.chmod(tmp_path / "r", 0o640)
    assert "others may open it" in _refused_open(tmp_path).why
    assert (tmp_path / "r").exists()  # refused: the name stays for the sweep
    made.close()


def test_a_region_of_another_size_is_refused(tmp_path: Path) -> None:
    made = Region.make(tmp_path, "r", LAYOUT, role=1)
    os.truncate(tmp_path / "r", LAYOUT.size - 4096)
    assert "holds" in _refused_open(tmp_path).why
    made.close()


def test_a_region_of_another_run_or_slot_set_is_refused(tmp_path: Path) -> None:
    other = RegionLayout.of(OTHER, 0, 1, {1: SHARED_MIN, 2: 3 * SHARED_MIN + 5})
    assert other is not None and other.size == LAYOUT.size
    made = Region.make(tmp_path, "r", other, role=1)
    assert "marker" in _refused_open(tmp_path).why
    made.close()


def test_a_link_in_place_of_a_region_is_refused(tmp_path: Path) -> None:
    made = Region.make(tmp_path, "real", LAYOUT, role=1)
    (tmp_path / "r").symlink_to(tmp_path / "real")
    _refused_open(tmp_path)
    made.close()


def test_a_region_the_folder_cannot_hold_is_refused_when_made(tmp_path: Path) -> None:
    # A file-size limit below the region: the reservation fails at once, as a full tmpfs does.
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from alpha.errors import RegionRefused\n"
        "from alpha.runtime.shared import Region\n"
        "from tests.runtime.test_shared import LAYOUT\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (LAYOUT.size // 2, LAYOUT.size // 2))\n"
        "try:\n"
        "    Region.make(Path(sys.argv[1]), 'r', LAYOUT, role=1)\n"
        "except RegionRefused as error:\n"
        "    print(type(error).__name__, error.why)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.startswith("RegionRefused ") and "cannot be reserved" in done.stdout
    assert not (tmp_path / "r").exists()  # nothing left behind


def test_the_sweep_takes_only_its_own_launchs_regions(tmp_path: Path) -> None:
    ours, theirs = launch_token(), launch_token()
    assert ours != theirs
    schedule = LocalSchedule(0, (), (), ())
    description = RoleDescription(0, 2, IDENTITY, (Edge(1),))
    mine = Sharing.of(description, schedule, {SHARED_ENV: ours})
    other = Sharing.of(description, schedule, {SHARED_ENV: theirs})
    assert mine is not None and other is not None
    for sharing in (mine, other):
        (tmp_path / sharing.path(IDENTITY, 0, 1)).write_bytes(b"")
    (tmp_path / "unrelated").write_bytes(b"")
    removed = sweep_regions(ours, tmp_path)
    assert removed == [tmp_path / mine.path(IDENTITY, 0, 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["unrelated", other.path(IDENTITY, 0, 1)]
    )


def _schedule(extent: int) -> LocalSchedule:
    count = extent // 4
    regions = (Buffer("up", "float32", count), Buffer("small", "float32", 4))
    body = (Loop(3, (Send(1, "up", 1), Send(1, "small", 2), Recv(1, "up", 3))),)
    return LocalSchedule(0, regions, (), body)


def test_sharing_follows_the_plan_and_the_launcher() -> None:
    description = RoleDescription(0, 2, IDENTITY, (Edge(1),))
    schedule = _schedule(SHARED_MIN)
    token = launch_token()
    sharing = Sharing.of(description, schedule, {SHARED_ENV: token})
    assert sharing is not None
    incoming, outgoing = sharing.layouts[1]
    assert incoming is not None and [a.slot for a in incoming.areas] == [3]
    assert outgoing is not None and [a.slot for a in outgoing.areas] == [1]  # not the small one
    assert Sharing.of(description, schedule, {}) is None  # no launcher said so
    assert Sharing.of(description, schedule, {SHARED_ENV: "1"}) is None  # not a token
    tcp = RoleDescription(0, 2, IDENTITY, (Edge(1),), transport="tcp")
    assert Sharing.of(tcp, schedule, {SHARED_ENV: token}) is None
    assert Sharing.of(description, _schedule(SHARED_MIN - 4), {SHARED_ENV: token}) is not None
    assert Sharing.of(description, _schedule(SHARED_MIN - 4), {SHARED_ENV: token}).layouts == {}


# --- frames through a region ------------------------------------------------------------------


def _spec(extent: int, slot: int = 1) -> FrameSpec:
    return FrameSpec(IDENTITY, FrameKind.DATA, 0, 1, slot, extent)


@asynccontextmanager
async def shared_pair(
    tmp_path: Path, extent: int, budgets: Budgets = BUDGETS
) -> AsyncIterator[tuple[FrameChannel, FrameChannel]]:
    """Role 0 sends to role 1 on slot 1 through a region of ``extent`` bytes."""
    layout = RegionLayout.of(IDENTITY, 0, 1, {1: extent})
    assert layout is not None
    async with connected(budgets=budgets) as (low, high):
        high.incoming = Region.make(tmp_path, "r", layout, role=1)
        low.outgoing = Region.open(tmp_path, "r", layout, role=0)
        yield low, high


def _payload(extent: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, extent, dtype=np.uint8)


@pytest.mark.parametrize("extent", [SHARED_MIN, 3 * OVERLAP_MIN + 12345])
async def test_frames_through_a_region_arrive_whole_in_order_with_only_doorbells_on_tcp(
    tmp_path: Path, extent: int
) -> None:
    async with shared_pair(tmp_path, extent) as (low, high):
        sender, receiver = SendSlot(_spec(extent)), ReceiveSlot(_spec(extent))
        for seed in range(3):
            payload = _payload(extent, seed)
            await low.send(sender, payload)
            got = await high.receive(receiver)
            assert bytes(got) == payload.tobytes()
        assert (low.shared_bytes, high.shared_bytes) == (3 * extent, 3 * extent)
        assert receiver.next_version == 3
        assert high.incoming is not None and high.incoming.taken(high.incoming.layout.areas[0]) == 3
        # TCP carried header and trailer alone: nothing else is in the socket.
        assert high.wire_size(receiver) == _spec(extent).frame_size - extent


async def test_a_sender_waits_until_the_slots_last_payload_was_taken(tmp_path: Path) -> None:
    extent = SHARED_MIN
    async with shared_pair(tmp_path, extent) as (low, high):
        sender, receiver = SendSlot(_spec(extent)), ReceiveSlot(_spec(extent))
        first, second = _payload(extent, 1), _payload(extent, 2)
        await low.send(sender, first)
        sent = trio.Event()

        async def send_second() -> None:
            await low.send(sender, second)
            sent.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_second)
            for _ in range(20):  # the sender looks again and again; it never writes
                await trio.sleep(0.001)
            assert not sent.is_set()
            assert bytes(await high.receive(receiver)) == first.tobytes()  # not overwritten
            await sent.wait()
        assert bytes(await high.receive(receiver)) == second.tobytes()


async def test_a_sender_whose_payload_is_never_taken_runs_out_of_its_budget(
    tmp_path: Path,
) -> None:
    extent = SHARED_MIN
    budgets = Budgets(receive=0.2)
    async with shared_pair(tmp_path, extent, budgets) as (low, _high):
        sender = SendSlot(_spec(extent))
        await low.send(sender, _payload(extent, 1))
        with pytest.raises(BudgetExhausted) as caught:
            await low.send(sender, _payload(extent, 2))
        assert type(caught.value) is BudgetExhausted


@pytest.mark.parametrize("extent", [SHARED_MIN, 3 * OVERLAP_MIN + 12345])
async def test_a_payload_changed_in_the_region_after_its_trailer_is_refused(
    tmp_path: Path, extent: int
) -> None:
    async with shared_pair(tmp_path, extent) as (low, high):
        sender, receiver = SendSlot(_spec(extent)), ReceiveSlot(_spec(extent))
        await low.send(sender, _payload(extent, 1))
        assert low.outgoing is not None
        area = low.outgoing.layout.areas[0]
        os.pwrite(low.outgoing.fd, b"\xff\x00", area.offset + extent // 2)  # after the doorbell
        with pytest.raises(Corrupted) as caught:
            await high.receive(receiver)
        assert type(caught.value) is Corrupted
        assert receiver.next_version == 0  # refused before the counter moved


@pytest.mark.parametrize("extent", [SHARED_MIN, 3 * OVERLAP_MIN + 12345])
async def test_a_region_cut_short_is_a_truncated_frame(tmp_path: Path, extent: int) -> None:
    async with shared_pair(tmp_path, extent) as (low, high):
        sender, receiver = SendSlot(_spec(extent)), ReceiveSlot(_spec(extent))
        await low.send(sender, _payload(extent, 1))
        assert high.incoming is not None
        area = high.incoming.layout.areas[0]
        os.ftruncate(low.outgoing.fd if low.outgoing else -1, area.offset + extent - 100)
        with pytest.raises(Truncated) as caught:
            await high.receive(receiver)
        assert type(caught.value) is Truncated
        assert receiver.next_version == 0
        assert high.incoming.taken(area) == 0  # nothing was taken


@pytest.mark.parametrize("extent", [SHARED_MIN, 3 * OVERLAP_MIN])
async def test_an_abort_in_place_of_a_shared_frame_comes_whole_over_tcp(
    tmp_path: Path, extent: int
) -> None:
    async with shared_pair(tmp_path, extent) as (low, high):
        receiver = ReceiveSlot(_spec(extent))
        assert low.edge is not None
        cause = AbortCause(origin=0, cause="CheckFailed", edge=None, round=2, detail="the sum")
        abort = low.edge.abort_out().prepare(encode_cause(cause))
        await low.stream.send_all(abort.join())
        with pytest.raises(RoundAborted) as caught:
            await high.receive(receiver)
        assert type(caught.value) is RoundAborted
        assert high.shared_bytes == 0 and receiver.next_version == 0


async def test_the_watch_reads_a_doorbell_past_and_its_receive_takes_the_region(
    tmp_path: Path,
) -> None:
    extent = SHARED_MIN
    async with shared_pair(tmp_path, extent) as (low, high):
        sender, receiver = SendSlot(_spec(extent)), ReceiveSlot(_spec(extent))
        high.expect(receiver)
        payload = _payload(extent, 3)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(high.watch_for_abort)
            await low.send(sender, payload)
            while high.ahead < high.wire_size(receiver):  # the doorbell alone was read past
                await trio.sleep(0.01)
            assert high.ahead == high.wire_size(receiver)
            got = await high.receive(receiver)
            assert bytes(got) == payload.tobytes()
            nursery.cancel_scope.cancel()


async def test_a_large_payload_is_copied_as_it_is_written_and_never_past_it(
    tmp_path: Path,
) -> None:
    extent = 3 * OVERLAP_MIN
    async with shared_pair(tmp_path, extent) as (low, high):
        assert low.outgoing is not None and high.incoming is not None
        area = low.outgoing.layout.areas[0]
        low.outgoing.write(area, b"\xee" * extent)  # stale bytes, as a frame before left them
        into = np.zeros(extent, dtype=np.uint8)
        receiver = ReceiveSlot(_spec(extent), buffer=into.data)
        payload = _payload(extent, 4)
        piece = OVERLAP_MIN + 7
        payload[piece - 1] = 1  # seen once copied
        unsealed = SendSlot(_spec(extent)).begin(payload)
        low.outgoing.wrote(area, 0)
        await low.stream.send_all(unsealed.header)  # the header first, as a large send does
        got: list[memoryview] = []
        async with trio.open_nursery() as nursery:

            async def receive() -> None:
                got.append(await high.receive(receiver))

            nursery.start_soon(receive)
            low.outgoing.write_piece(area, memoryview(payload)[:piece], 0)
            while not into[piece - 1]:  # the receiver copies what is written ...
                await trio.sleep(0.001)
            await trio.sleep(0.05)
            assert np.array_equal(into[:piece], payload[:piece])
            assert not into[piece:].any()  # ... and nothing past it: no stale byte
            low.outgoing.write_piece(area, memoryview(payload)[piece:], piece)
            await low.stream.send_all(unsealed.seal(payload_digest(payload, "sha256")).trailer)
        assert bytes(got[0]) == payload.tobytes()
