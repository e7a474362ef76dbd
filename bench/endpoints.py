"""Endpoints: establishing every edge of a run, and frame throughput on one loopback edge.

Edge establishment: real participant processes started by ``alpha.launch.launcher`` on
127.0.0.1 for trees of 16, 64, 128, 256, 512 and 1,024 roles (warm only), fan-out 4, from the
artifacts ``alpha exchange N 4 --payload 64`` compiles (with larger budgets): each edge carries
a 64-byte contribution up and the checked 64-byte total down, and the run commits. The launcher
starts every role at once. The reference, timed in the same run, is the start-up of one bare
``python -c "import trio, numpy"`` process: what starting one participant costs at the least.
The participants' memory is sampled while they run (the sum of their PSS).

Frame throughput: one TCP connection on 127.0.0.1 between two processes, a sender in a child
process and the receiver in this one. Alpha's ``FrameChannel`` (sending from a ``SendSlot``,
receiving with ``recv_into`` straight into a ``ReceiveSlot``'s buffer) against plain blocking
sockets (``sendall`` and ``recv_into`` a preallocated buffer) moving the same bytes in the same
layout, and against plain blocking sockets plus ``hashlib.sha256`` on both sides, the floor for
a frame whose digest is computed before it is sent.
"""

from __future__ import annotations

import hashlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from alpha.app import compile_plan
from alpha.artifact import BLAS_THREADS
from alpha.compiler import exchange_plan
from alpha.core import Budgets
from alpha.launch import LaunchResult, launch, launch_specs, read_stat
from alpha.records import committed_reports
from alpha.runtime import FrameChannel
from alpha.wire import FrameKind, FrameSpec, ReceiveSlot, SendSlot
from bench._timing import IDENTITY, median_seconds, rate

NAME = "endpoints"
ROOT = Path(__file__).resolve().parent.parent

# Edge establishment.
ROLES = (16, 64, 128, 256, 512, 1024)
FANOUT = 4
EXCHANGE = 64  # bytes each way per edge
# Generous budgets, so that none shapes the figures.
BUDGETS = Budgets(deadline=600, accept=300, receive=300, start=300)
LONG_RUN = 128  # trees this large are launched once: one launch takes from 20 s to 2 minutes
STARTS = ("warm", "cold")  # how the launcher starts the roles (launch(..., warm=...))
# Trees this large are launched warm only: cold, 1,024 interpreters take about twice the
# 9.3 GiB of PSS that 512 take, more than a 24 GiB host has free beside anything else.
WARM_ONLY = 1024
STARTUPS = 5  # bare interpreter start-ups per median
PSS_POLL = 1.0  # seconds between two samples of the participants' memory

# Throughput.
MIB = 1 << 20
PAYLOADS = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
BATCH_BYTES = 128 * MIB  # payload bytes per timed batch (at least MIN_FRAMES frames)
MIN_FRAMES = 4
MODES = ("plain", "sha256", "alpha")
CHILD_WAIT = 60.0  # seconds to wait for the sender child to connect or to exit
_CHILD = "import sys; from bench.endpoints import sender_main; sys.exit(sender_main(sys.argv[1:]))"


def _log(text: str) -> None:
    print(f"bench: {NAME}: {text}", file=sys.stderr, flush=True)


# --- edge establishment -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Launched:
    """One launch of a tree: seconds, all measured in the same run."""

    wall: float  # the launcher's elapsed time, first start to last exit
    all_up: float  # launch start to the last edge established
    established_median: float  # the median role's established_s
    established_max: float
    cpu_per_role: float  # user + system CPU of the participants, per role
    peak_pss: int  # bytes: the largest sum of the participants' PSS in one sample


def _children_pss() -> int:
    """The sum of the proportional set sizes (``Pss`` in ``/proc/PID/smaps_rollup``) of every
    process below this one (its children and theirs: warm-started participants are the warm
    starter's children): the participants' share of the host's memory, shared pages divided
    among the processes that map them, so the sum counts each page once."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_stat(entry)
        if stat is None:
            continue  # it exited meanwhile
        parents[int(entry)] = stat.ppid
    below = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in below} - below
        below |= found
        grew = bool(found)
    below.discard(os.getpid())
    total = 0
    for pid in below:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as file:
                for line in file:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            continue  # it exited meanwhile
    return total


@contextmanager
def _peak_pss(poll: float = PSS_POLL) -> Iterator[list[int]]:
    """Sample :func:`_children_pss` every ``poll`` seconds while the block runs; the yielded
    list holds the peak once it ends."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _children_pss())
            done.wait(poll)

    thread = threading.Thread(target=sample, name="pss", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def _launch_once(n: int, warm: bool) -> _Launched:
    """Compile the edge exchange on a tree of ``n`` roles into a temporary folder (untimed)
    and launch it, warm (every role forked by the warm starter) or cold."""
    plan = exchange_plan(n, FANOUT, payload=EXCHANGE, budgets=BUDGETS)
    with tempfile.TemporaryDirectory(prefix="alpha-bench-endpoints-") as folder:
        directory = Path(folder)
        compile_plan(plan, directory, range(plan.participants))
        # Each role writes its report into reports/ beside its artifact.
        reports = directory / "reports"
        specs, deadline = launch_specs(directory)
        origin = 0.0

        async def session() -> LaunchResult:
            nonlocal origin
            origin = time.monotonic()
            return await launch(specs, deadline=deadline, warm=warm)

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with _peak_pss() as peak:
            result = trio.run(session)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not result.ok:
            failure = result.first_to_fail
            cause = "unknown" if failure is None else f"role {failure.role}: {failure.cause}"
            raise RuntimeError(f"the launch of {n} roles failed: {cause}")
        # The reports count only as the run committed them (docs/failure.md).
        found = list(committed_reports(reports, plan.tree.children)[1].values())
    if len(found) != n or sum(len(report["edges"]) for report in found) != 2 * (n - 1):
        raise RuntimeError(f"the launch of {n} roles reported {len(found)} roles")
    established = {int(report["role"]): float(report["established_s"]) for report in found}
    # Every role reports the moment its edges were all established on the host's monotonic
    # clock, which this process shares: the last of them is when every edge was up.
    all_up = max(float(report["established_at"]) for report in found) - origin
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return _Launched(
        wall=result.elapsed_s,
        all_up=all_up,
        established_median=statistics.median(established.values()),
        established_max=max(established.values()),
        cpu_per_role=cpu / n,
        peak_pss=peak[0],
    )


def _startup(code: str) -> tuple[float, float]:
    """Median wall time and CPU per start-up of ``python -c code``, with numpy's BLAS given
    one thread as a participant gives it (``alpha.artifact.entry.BLAS_THREADS``)."""
    argv = [sys.executable, "-c", code]
    name, value = BLAS_THREADS
    environment = {**os.environ, name: os.environ.get(name, value)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def start() -> None:
        subprocess.run(argv, cwd=ROOT, check=True, env=environment)

    wall = median_seconds(start, repeat=STARTUPS)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu / (STARTUPS + 1)


def _establishment(repeat: int) -> str:
    bare, bare_cpu = _startup("import trio, numpy")
    alpha, alpha_cpu = _startup("import alpha.artifact.participant")
    runs = max(1, min(repeat, 3))
    cores = os.cpu_count() or 1
    rows = []
    sizes = [(n, start) for n in ROLES for start in STARTS if n < WARM_ONLY or start == "warm"]
    for n, start in sizes:
        count = 1 if n >= LONG_RUN else runs
        launched: list[_Launched] = []
        for index in range(count):
            _log(f"launching {n} roles {start} ({index + 1} of {count})")
            launched.append(_launch_once(n, warm=start == "warm"))
            last = launched[-1]
            _log(f"{n} roles {start}: all edges up at {last.all_up:.1f} s, wall {last.wall:.1f} s")

        def median(values: list[float]) -> float:
            return statistics.median(values)

        wall = median([one.wall for one in launched])
        cpu = median([one.cpu_per_role for one in launched])
        pss = median([float(one.peak_pss) for one in launched])
        rows.append(
            f"| {n} | {start} | {count} | {wall:.2f} s | {wall / n:.3f} s | "
            f"{wall / (n * bare):.2f} | {median([one.all_up for one in launched]):.2f} s | "
            f"{median([one.established_median for one in launched]):.2f} s / "
            f"{median([one.established_max for one in launched]):.2f} s | "
            f"{cpu:.2f} s | {n * cpu / cores:.1f} s | {pss / (1 << 30):.2f} GiB |"
        )
    return "\n".join(
        [
            f"Establishing every edge of a tree of real participant processes, fan-out {FANOUT},",
            "on 127.0.0.1, as `alpha exchange N 4` does: the plan is compiled into artifacts",
            "(untimed), then `alpha.launch.launcher` starts every role at once, relays each",
            "announced port to its connector as soon as it is known, and waits for every role;",
            f"each edge then carries a {EXCHANGE}-byte contribution up and the checked total",
            "down, and the run commits (reports count only with its commit record). Trees of",
            f"{LONG_RUN} roles or more are launched once, smaller ones {runs} times (medians).",
            f"Budgets are generous (deadline {BUDGETS.deadline:g} s, accept, receive and start",
            f"{BUDGETS.accept:g} s) so that none shapes the figures. Each size is launched",
            "warm (the default: every role forked by the warm starter, an interpreter that",
            "imported trio and numpy once, docs/launch.md) and cold (`--cold`: an interpreter",
            "per role).",
            "",
            "'launch wall' is the launcher's elapsed time from the first start to the last exit;",
            "'per role' divides it by the roles; '÷ bare' divides that by the reference, the",
            'start-up of one bare `python -c "import trio, numpy"` timed in this run, with one',
            f"BLAS thread as participants have: {bare:.3f} s wall, {bare_cpu:.2f} s CPU (median of",
            f"{STARTUPS}). 1.0 would mean a launch costs one bare start-up per role, one after",
            'another. For comparison, `python -c "import alpha.artifact.participant"`, the imports',
            f"every participant pays, takes {alpha:.3f} s wall and {alpha_cpu:.2f} s CPU.",
            "'all edges up' is from the launch's start to the last edge established: the latest",
            "of the roles' `established_at`, the moment each had all its edges on the host's",
            "monotonic clock, which this process shares. `established_s` is each role's own",
            "time from its session start to all its edges established. 'CPU per role' is the",
            "participants' user and system",
            f"time per role; 'CPU floor' is roles times CPU per role over the {cores} cores here:",
            "the launch wall cannot be shorter, since start-ups share the cores. 'peak PSS' is",
            "the largest sum of the participants' proportional set sizes",
            "(`/proc/PID/smaps_rollup`), sampled at most once a second (a sample of hundreds of",
            "processes takes seconds while they start).",
            "",
            "| roles | start | runs | launch wall | per role | ÷ bare | all edges up "
            "| established_s median / max | CPU per role | CPU floor | peak PSS |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


# --- throughput -----------------------------------------------------------------------------


def _frames(size: int) -> int:
    return max(MIN_FRAMES, BATCH_BYTES // size)


def _spec(index: int, size: int) -> FrameSpec:
    # One slot per payload size on the one edge 0 -> 1; its versions run on over every batch.
    return FrameSpec(IDENTITY, FrameKind.DATA, 0, 1, index + 1, size)


def _plan(batches: int) -> list[str]:
    return [str(batches), *(str(size) for size in PAYLOADS)]


def sender_main(argv: list[str]) -> int:
    """The sender child: ``MODE PORT BATCHES SIZE...``; connects to the receiver and, for each
    size and each batch, waits for a go byte and sends that size's frames of the batch."""
    mode, port, batches = argv[0], int(argv[1]), int(argv[2])
    sizes = [int(size) for size in argv[3:]]
    if mode == "alpha":
        trio.run(_alpha_sender, port, batches, sizes)
        return 0
    with socket.create_connection(("127.0.0.1", port), timeout=CHILD_WAIT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for size in sizes:
            payload = os.urandom(size)
            for _ in range(batches):
                if not sock.recv(1):
                    return 1
                for _ in range(_frames(size)):
                    if mode == "sha256":
                        digest = hashlib.sha256(payload).digest()
                        sock.sendall(payload)
                        sock.sendall(digest)
                    else:
                        sock.sendall(payload)
    return 0


async def _alpha_sender(port: int, batches: int, sizes: list[int]) -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)  # sets TCP_NODELAY
    channel = FrameChannel(stream, role=0, peer=1, budgets=BUDGETS)
    async with stream:
        for index, size in enumerate(sizes):
            slot = SendSlot(_spec(index, size))
            payload = os.urandom(size)
            for _ in range(batches):
                if not await stream.receive_some(1):
                    raise RuntimeError("the receiver closed the connection early")
                for _ in range(_frames(size)):
                    await channel.send(slot, payload)


def _plain_batch(conn: socket.socket, size: int, checked: bool) -> Callable[[], None]:
    """One timed batch received on a blocking socket, with or without the digest."""
    buffer = memoryview(bytearray(size))
    trailer = memoryview(bytearray(32))
    frames = _frames(size)

    def batch() -> None:
        conn.sendall(b"g")
        for _ in range(frames):
            digest = hashlib.sha256() if checked else None
            position = 0
            while position < size:
                count = conn.recv_into(buffer[position:])
                if count == 0:
                    raise RuntimeError("the sender closed the connection inside a frame")
                if digest is not None:
                    digest.update(buffer[position : position + count])
                position += count
            if digest is not None:
                got = 0
                while got < 32:
                    count = conn.recv_into(trailer[got:])
                    if count == 0:
                        raise RuntimeError("the sender closed the connection in a trailer")
                    got += count
                if digest.digest() != trailer:
                    raise RuntimeError("the SHA-256 trailer does not match")

    return batch


def _alpha_batch(conn: socket.socket, index: int, size: int) -> Callable[[], None]:
    # One ReceiveSlot for the whole stream of this size; each timed batch is one trio.run
    # (under a millisecond to start here) over the same connected socket.
    slot = ReceiveSlot(_spec(index, size))
    frames = _frames(size)

    async def receive() -> None:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
        channel = FrameChannel(stream, role=1, peer=0, budgets=BUDGETS)
        await stream.send_all(b"g")
        for _ in range(frames):
            await channel.receive(slot)

    def batch() -> None:
        trio.run(receive)

    return batch


def _accept(listener: socket.socket, child: subprocess.Popen[bytes], mode: str) -> socket.socket:
    """The child's connection, or an error as soon as the child exits without connecting."""
    give_up = time.monotonic() + CHILD_WAIT
    while time.monotonic() < give_up:
        try:
            conn, _ = listener.accept()
            return conn
        except TimeoutError:
            if child.poll() is not None:
                raise RuntimeError(
                    f"the {mode} sender exited with code {child.returncode} before connecting"
                ) from None
    raise RuntimeError(f"the {mode} sender did not connect within {CHILD_WAIT:g} s")


@contextmanager
def _sender(mode: str, batches: int) -> Iterator[socket.socket]:
    """A sender child for ``mode``, connected; yields the receiving end of the connection.

    The child is killed and reaped on every way out; on a clean one it must have exited 0.
    """
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        argv = [sys.executable, "-c", _CHILD, mode, str(port), *_plan(batches)]
        child = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL)
        try:
            conn = _accept(listener, child, mode)
            with conn:
                conn.settimeout(None)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                yield conn
            code = child.wait(timeout=CHILD_WAIT)
            if code != 0:
                raise RuntimeError(f"the {mode} sender exited with code {code}")
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()


def _throughput(repeat: int) -> str:
    # One sender child per mode, all connected at once, so that the modes take turns at each
    # payload size and a slow spell of the machine falls on all three alike.
    measured: dict[str, dict[int, float]] = {mode: {} for mode in MODES}
    with ExitStack() as stack:
        conns = {mode: stack.enter_context(_sender(mode, repeat + 1)) for mode in MODES}
        for index, size in enumerate(PAYLOADS):
            _log(f"throughput of {size // MIB} MiB frames")
            for mode in MODES:
                conn = conns[mode]
                if mode == "alpha":
                    batch = _alpha_batch(conn, index, size)
                else:
                    batch = _plain_batch(conn, size, checked=mode == "sha256")
                measured[mode][size] = median_seconds(batch, repeat=repeat, warmup=1)
    rows = []
    for size in PAYLOADS:
        nbytes = size * _frames(size)
        plain, checked, alpha = (measured[mode][size] for mode in MODES)
        rows.append(
            f"| {size // MIB} MiB | {_frames(size)} | {rate(nbytes, plain)} | "
            f"{rate(nbytes, checked)} | {rate(nbytes, alpha)} | {plain / alpha:.2f} | "
            f"{checked / alpha:.2f} |"
        )
    return "\n".join(
        [
            "Frame throughput on one TCP connection over 127.0.0.1 between two processes: the",
            "sender is a child process, the receiver this one, so each side has its own",
            "interpreter. Each timed batch is a go byte from the receiver, then",
            f"{BATCH_BYTES // MIB} MiB of payload (at least {MIN_FRAMES} frames) from the",
            "sender, timed on the receiver until its last byte is in; medians of",
            f"{repeat} batches after one unmeasured one, the three kinds taking turns at each",
            "payload size. 'Alpha' is `FrameChannel.send` from one `SendSlot` (SHA-256 over",
            "header and payload, then header, payload and trailer sent without a copy) and",
            "`FrameChannel.receive` into one `ReceiveSlot` (`recv_into` straight into the slot's",
            "buffer, every header field and the trailer checked), both under trio, the version",
            "advancing frame after frame; each timed batch also starts one `trio.run` on the",
            "receiver (under a millisecond). 'plain' is blocking `sendall` of the payload and",
            "`recv_into` a preallocated buffer: the same bytes, no check. 'plain + sha256' adds",
            "what any digest-checked frame costs when, as in Alpha, the sender hashes the whole",
            "payload before sending it: `hashlib.sha256` of the payload, then the payload and",
            "its 32-byte digest sent; the receiver hashes each chunk as it arrives and compares.",
            "Once frames outgrow the socket buffers the two hashes no longer overlap, so this",
            "reference falls toward half of one core's hashing rate at 16 and 64 MiB.",
            "TCP_NODELAY on every socket. Rates count payload bytes (a frame adds 164 bytes of",
            "header and trailer); ratios are Alpha's rate over each reference's (1.00: as fast).",
            "",
            "| payload | frames per batch | plain | plain + sha256 | Alpha | Alpha / plain "
            "| Alpha / plain + sha256 |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def run(repeat: int) -> str:
    return f"{_establishment(repeat)}\n\n{_throughput(repeat)}"
