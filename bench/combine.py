"""Combine: one ordered combine among real participant processes, against gloo's all_reduce.

Alpha: a sum-check plan written here (``[topology] shape = "star"``, ``[contract] dtype =
"float32"``, delivery to every role, ``[work] size`` the vector's elements) is compiled once
for each of two round counts R1 < R2 (untimed) and launched by ``alpha.launch.launcher``
on 127.0.0.1, R1 then R2, ``repeat`` times. In a star every role is a child of role 0: each
round every role fills its region (the sum check's ``fill``), sends it to role 0, which folds
its own region and then the others' in ascending role order and sends the total back to each,
and every role checks the total against the closed form (``check_sum``). The time per combine
is (T(R2) - T(R1)) / (R2 - R1) for each repetition, and the median over repetitions, where T
is role 0's time from its last edge established to its last round done (``finished_s -
established_s`` in its committed report): process start-up, the first round's page faults,
the final digests and the commit cancel out. The same difference of the launcher's elapsed
time (first start to last exit) is reported beside it as a cross-check that leaves nothing
out. Every launch must commit, and every role's final region must have the SHA-256 of the
declared-order fold of the last round's contributions, made by the sum check's own ``fill``
and folded here with numpy. The cost of ``fill`` and ``check_sum`` on one role, which every
round includes and an all_reduce does not, is timed in this process.

gloo, the reference: ``torch.distributed.all_reduce`` (backend "gloo", SUM, float32) among n
processes started here, joined over ``tcp://127.0.0.1:PORT`` with their traffic on the
loopback interface. Each size is timed on rank 0 in batches of calls on a tensor of zeros,
after a barrier and a warm-up; the median over ``repeat`` batches of the time per call. Before
that, one all_reduce of random float32 vectors shows whether gloo's total equals the
declared-order fold (role 0 + role 1 + ... left to right, in float32) bit for bit. torch is an
optional dependency (the ``bench`` extra); without it the gloo column is skipped and says how
to install it.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import importlib.util
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import trio

from alpha.app import compile_plan
from alpha.compiler import Plan, parse_plan
from alpha.core import Budgets, fold_order
from alpha.launch import launch, launch_specs
from alpha.records import committed_reports
from alpha.schedule import SUM_CHECK_OPS, Context
from bench._timing import median_seconds

NAME = "combine"
ROOT = Path(__file__).resolve().parent.parent

Vector = npt.NDArray[np.float32]

KIB = 1 << 10
MIB = 1 << 20
SIZES = (1 * KIB, 1 * MIB, 64 * MIB)  # bytes of float32
ELEMENT = 4  # bytes per float32 element
ROLES = (2, 4)

# Round counts R1 < R2 per size. One launch's T varies by a tenth of a second or more here (at
# 64 MiB its first round alone took 0.3 to 0.6 s on a loaded machine), so R2 - R1 rounds must
# take seconds: about 1 to 3 s at n = 4, where the 64 MiB pair takes about 30 s at 5 repetitions.
ROUNDS = {1 * KIB: (100, 2100), 1 * MIB: (10, 310), 64 * MIB: (1, 9)}
# Generous budgets, so that none shapes the figures.
BUDGETS = Budgets(deadline=600, accept=300, receive=300, start=300)

GLOO_CALLS = {1 * KIB: 100, 1 * MIB: 20, 64 * MIB: 4}  # all_reduce calls per timed batch
GLOO_WARMUP = 2  # unmeasured calls per size
GLOO_WAIT = 600.0  # seconds for every gloo rank to finish all sizes
SEED = 2026  # of the random vectors whose gloo total is compared with the declared fold
INSTALL = "`.venv/bin/pip install -e '.[bench]'`, which `make bench` tries"
_CHILD = "import sys; from bench.combine import gloo_main; sys.exit(gloo_main(sys.argv[1:]))"


def _log(text: str) -> None:
    print(f"bench: {NAME}: {text}", file=sys.stderr, flush=True)


def _declared_fold(parts: Sequence[Vector]) -> Vector:
    """Role 0's vector, then each other role's in ascending role order, added left to right in
    float32: the order a star's contract declares (every role is a child of role 0)."""
    total = parts[0].copy()
    for part in parts[1:]:
        np.add(total, part, out=total)
    return total


# --- Alpha ----------------------------------------------------------------------------------


def _plan(
    n: int,
    size: int,
    rounds: int,
    contract: Mapping[str, str] | None = None,
    transport: str = "auto",
) -> Plan:
    """The sum check on a star of ``n`` roles over float32 regions of ``size`` bytes; the
    ``[contract]`` keys in ``contract`` (``integrity``, ``payload_digest``) are added to the
    table, the plan's defaults holding for the others (keyed, SHA-256); ``transport`` is
    ``[addresses] transport`` (``auto``: shared memory from 64 KiB, the launcher's default)."""
    limits = "\n".join(
        f"{key} = {value!r}" for key, value in BUDGETS.to_dict().items() if value is not None
    )
    sealing = "".join(f'{key} = "{value}"\n' for key, value in (contract or {}).items())
    return parse_plan(
        f"""
[run]
name = "bench-combine-{n}-{size}-{rounds}"
rounds = {rounds}
[membership]
group = "(group (stride 0 1 {n}))"
[topology]
shape = "star"
[contract]
dtype = "float32"
delivery = "all"
operation = "sum"
{sealing}[addresses]
transport = "{transport}"
[budgets]
{limits}
[work]
kind = "sum-check"
size = {size // ELEMENT}
""",
        source="bench combine",
    )


def _expected_digest(plan: Plan) -> str:
    """The SHA-256 of the total every role must hold after the last round: each role's
    contribution as the sum check's ``fill`` makes it, folded in role 0's declared order (in a
    star the other roles are leaves, so that is the whole fold)."""
    assert plan.work_size is not None, "a sum-check plan has a size"
    parts = []
    for role in fold_order(plan.tree, 0):
        region = np.empty(plan.work_size, dtype=np.float32)
        last = Context(role=role, participants=plan.participants, round=plan.rounds - 1)
        SUM_CHECK_OPS["fill"](last, region)
        parts.append(region)
    return hashlib.sha256(_declared_fold(parts).tobytes()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Compiled:
    """One plan compiled into ``directory``, with the digest its final regions must have."""

    plan: Plan
    directory: Path
    expected: str


@dataclass(frozen=True, slots=True)
class _Launched:
    """One committed launch, in seconds."""

    root: float  # role 0: its last edge established to its last round done
    wall: float  # the launcher: first start to last exit
    cpu: float  # the participants' user and system CPU, all roles together


def _launch(compiled: _Compiled, trace: bool = False) -> _Launched:
    """Launch a compiled plan (each role writing its trace with ``trace``, bench.trace); it
    must commit with the expected total at every role."""
    plan = compiled.plan
    specs, deadline = launch_specs(compiled.directory)
    before = _children_cpu()
    result = trio.run(partial(launch, specs, deadline=deadline, trace=trace))
    cpu = _children_cpu() - before
    if not result.ok:
        failure = result.first_to_fail
        cause = "unknown" if failure is None else f"role {failure.role}: {failure.cause}"
        raise RuntimeError(f"the launch of {plan.name} failed: {cause}")
    # The reports count only as the run committed them (docs/failure.md).
    reports = committed_reports(compiled.directory / "reports", plan.tree.children)[1]
    wrong = [
        role
        for role, report in sorted(reports.items())
        if report["rounds"] != plan.rounds or report["digests"]["x"] != compiled.expected
    ]
    if len(reports) != plan.participants or wrong:
        raise RuntimeError(
            f"{plan.name}: {len(reports)} role(s) reported; roles {wrong} did not end with the "
            "declared-order fold of the last round's contributions"
        )
    root = reports[0]
    return _Launched(root["finished_s"] - root["established_s"], result.elapsed_s, cpu)


def _children_cpu() -> float:
    """User and system CPU seconds of this process's waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True, slots=True)
class _AlphaFigures:
    """Medians over repetitions, seconds per combine."""

    root: float
    wall: float


@dataclass(frozen=True, slots=True)
class _Pair:
    """One plan compiled for two round counts R1 < R2: one sample of seconds per combine is
    (T(R2) - T(R1)) / (R2 - R1), the two launched one after the other."""

    short: _Compiled
    long: _Compiled

    @property
    def rounds(self) -> int:
        return self.long.plan.rounds - self.short.plan.rounds

    def sample(self, trace: bool = False) -> _Launched:
        """Seconds per combine from one launch of each round count, the shorter first; with
        ``trace`` every role writes its trace (bench.trace)."""
        short = _launch(self.short, trace)
        long = _launch(self.long, trace)
        return _Launched(
            (long.root - short.root) / self.rounds,
            (long.wall - short.wall) / self.rounds,
            (long.cpu - short.cpu) / self.rounds,
        )


def _compile_pair(
    n: int,
    size: int,
    rounds: tuple[int, int],
    folder: Path,
    contract: Mapping[str, str] | None = None,
    transport: str = "auto",
) -> _Pair:
    """Compile the sum check (``contract`` and ``transport`` as :func:`_plan`) for R1 and R2
    rounds into ``folder`` (untimed)."""
    compiled = []
    for count in rounds:
        plan = _plan(n, size, count, contract, transport)
        directory = folder / str(count)
        compile_plan(plan, directory, range(n))
        compiled.append(_Compiled(plan, directory, _expected_digest(plan)))
    return _Pair(*compiled)


def _alpha(n: int, size: int, repeat: int) -> _AlphaFigures:
    """Seconds per combine from the two round counts' launches, taking turns."""
    roots: list[float] = []
    walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="alpha-bench-combine-") as folder:
        pair = _compile_pair(n, size, ROUNDS[size], Path(folder))
        for index in range(repeat):
            sample = pair.sample()
            roots.append(sample.root)
            walls.append(sample.wall)
            _log(f"n = {n}, {_size(size)}: {_ms(roots[-1])} per combine ({index + 1}/{repeat})")
    return _AlphaFigures(statistics.median(roots), statistics.median(walls))


def _local_work(n: int, size: int, repeat: int) -> float:
    """Median seconds of the sum check's ``fill`` and ``check_sum`` on one role's region."""
    context = Context(role=0, participants=n)
    filled = np.empty(size // ELEMENT, dtype=np.float32)
    total = np.full(size // ELEMENT, n * (n + 1) // 2, dtype=np.float32)  # round 0's total

    def work() -> None:
        SUM_CHECK_OPS["fill"](context, filled)
        SUM_CHECK_OPS["check_sum"](context, total)

    return median_seconds(work, repeat=repeat)


# --- gloo -----------------------------------------------------------------------------------


def _random_part(size: int, role: int) -> Vector:
    """Role ``role``'s random contribution of ``size`` bytes, the same in every process."""
    return np.random.default_rng((SEED, size, role)).standard_normal(
        size // ELEMENT, dtype=np.float32
    )


def gloo_main(argv: list[str]) -> int:
    """One gloo rank: ``RANK N PORT REPEAT``. For each size, one all_reduce of random vectors
    (rank 0 compares the total with the declared-order fold), then ``REPEAT`` timed batches
    after a warm-up; rank 0 prints ``{size: [median seconds per call, equal]}`` as JSON."""
    import torch  # type: ignore[import-not-found, unused-ignore]
    import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]

    rank, n, port, repeat = (int(value) for value in argv)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=GLOO_WAIT),
    )
    found: dict[int, tuple[float, bool]] = {}
    try:
        for size in SIZES:
            result = torch.from_numpy(_random_part(size, rank))
            dist.all_reduce(result)
            zeros = torch.zeros(size // ELEMENT, dtype=torch.float32)  # sums stay finite
            for _ in range(GLOO_WARMUP):
                dist.all_reduce(zeros)
            calls = GLOO_CALLS[size]
            samples = []
            for _ in range(repeat):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(calls):
                    dist.all_reduce(zeros)
                samples.append((time.perf_counter() - start) / calls)
            if rank == 0:  # rank 0 alone reports
                declared = _declared_fold([_random_part(size, role) for role in range(n)])
                equal = bool(np.array_equal(result.numpy(), declared))
                found[size] = (statistics.median(samples), equal)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(found))
    return 0


def _free_port() -> int:
    # Rank 0 binds it again a moment later; another process taking it in between is unlikely
    # on this machine, and would fail the run loudly, not skew it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start_ranks(
    command: str, n: int, port: int, repeat: int, env: Mapping[str, str]
) -> list[subprocess.Popen[bytes]]:
    """``n`` processes running ``command`` with ``RANK N PORT REPEAT``; rank 0's output is kept."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", command, str(rank), str(n), str(port), str(repeat)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
        )
        for rank in range(n)
    ]


def _collect(children: list[subprocess.Popen[bytes]], what: str) -> Any:
    """Rank 0's JSON once every rank has exited 0; none outlives this call."""
    try:
        give_up = time.monotonic() + GLOO_WAIT
        # A rank that fails leaves the others waiting for it: stop at the first failure.
        while True:
            codes = [child.poll() for child in children]
            failed = [rank for rank, code in enumerate(codes) if code]
            if failed:
                rank = failed[0]
                raise RuntimeError(f"{what}: rank {rank} exited {codes[rank]}")
            if all(code == 0 for code in codes):
                break
            if time.monotonic() > give_up:
                raise RuntimeError(f"{what} did not finish in {GLOO_WAIT:g} s")
            time.sleep(0.1)
        assert children[0].stdout is not None
        return json.loads(children[0].stdout.read())
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()


def _gloo(n: int, repeat: int) -> dict[int, tuple[float, bool]]:
    """gloo's median seconds per all_reduce and whether it equals the declared fold, by size,
    from ``n`` rank processes; every rank must exit 0, and none outlives this call."""
    port = _free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}  # loopback, as Alpha's edges
    found = _collect(_start_ranks(_CHILD, n, port, repeat, env), f"gloo with {n} ranks")
    return {int(size): (float(seconds), bool(equal)) for size, (seconds, equal) in found.items()}


def _torch_version() -> tuple[str | None, str]:
    """torch's version, or None and why gloo cannot be measured here."""
    if importlib.util.find_spec("torch") is None:
        return None, f"torch is not installed ({INSTALL})"
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, torch.distributed as d; assert d.is_gloo_available(); "
            "print(torch.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]
        return None, f"torch does not import with gloo ({last}; {INSTALL})"
    return probe.stdout.strip(), ""


# --- the checked star in plain code, and the CPU floor ---------------------------------------
# The plain checked star: the same star, every region SHA-256'd by its sender and again by its
# receiver, the total hashed once by role 0 and checked by every other role, written with
# plain blocking sockets, hashlib and numpy (each of which releases the GIL on large buffers),
# receivers hashing each chunk as it arrives. No framing, no trio, no budgets: what a checked
# combine costs once the runtime is taken away. The CPU floor: the CPU time of that work
# (hashing, loopback copies, additions), measured piece by piece here, over the cores; no
# combine that hashes every byte it moves over TCP can take less wall time on this machine.

PLAIN_CHUNK = 1 * MIB  # bytes per recv_into, hashed as soon as it is in
TRANSFER_BATCH = 4 * MIB  # bytes per timed batch of transfers for the CPU floor
PLAIN_THREADS = 1 * MIB  # role 0 serves its children at once from regions this large
_PLAIN_CHILD = (
    "import sys; from bench.combine import plain_main; sys.exit(plain_main(sys.argv[1:]))"
)
_PLAIN_TRIO_CHILD = (
    "import sys; from bench.combine import plain_main; "
    "sys.exit(plain_main(sys.argv[1:], on_trio=True))"
)


def _receive_checked(sock: socket.socket, into: memoryview) -> None:
    """Fill ``into`` from ``sock`` hashing each chunk as it arrives, then read the sender's
    32-byte SHA-256 and compare."""
    digest = hashlib.sha256()
    done = 0
    while done < len(into):
        got = sock.recv_into(into[done : done + PLAIN_CHUNK])
        if got == 0:
            raise ConnectionError("the peer closed mid-region")
        digest.update(into[done : done + got])
        done += got
    trailer = bytearray(32)
    view = memoryview(trailer)
    done = 0
    while done < 32:
        got = sock.recv_into(view[done:])
        if got == 0:
            raise ConnectionError("the peer closed before its digest")
        done += got
    if digest.digest() != bytes(trailer):
        raise ValueError("a region's digest does not match")


def _send_hashed(sock: socket.socket, region: memoryview, digest: bytes) -> None:
    sock.sendall(region)
    sock.sendall(digest)


def _plain_root(
    pool: concurrent.futures.ThreadPoolExecutor,
    peers: dict[int, socket.socket],
    own: Vector,
    parts: dict[int, Vector],
    total: Vector,
) -> None:
    """Role 0's combine: every child's region checked, the fold in the declared order as each
    arrives, the total hashed once and sent to every child; from ``PLAIN_THREADS`` bytes up
    every child is served at once, one thread each (below it, threads cost more than they
    overlap)."""
    view = total.data.cast("B")
    if len(view) < PLAIN_THREADS:
        np.copyto(total, own)
        for role in sorted(parts):
            _receive_checked(peers[role], parts[role].data.cast("B"))
            np.add(total, parts[role], out=total)
        digest = hashlib.sha256(view).digest()
        for role in sorted(parts):
            _send_hashed(peers[role], view, digest)
        return
    receiving = {
        role: pool.submit(_receive_checked, peers[role], part.data.cast("B"))
        for role, part in parts.items()
    }
    np.copyto(total, own)
    for role in sorted(parts):
        receiving[role].result()
        np.add(total, parts[role], out=total)
    digest = hashlib.sha256(view).digest()
    for future in [pool.submit(_send_hashed, peers[role], view, digest) for role in parts]:
        future.result()


def _plain_leaf(sock: socket.socket, own: Vector, total: Vector) -> None:
    view = own.data.cast("B")
    _send_hashed(sock, view, hashlib.sha256(view).digest())
    _receive_checked(sock, total.data.cast("B"))


# The same checked star on trio: trio's sockets and run loop, the same hashing, checks and
# declared-order fold, no framing and no budgets. It is what any runtime built on trio pays
# before doing anything of its own (at 1 KiB, mostly trio's wait for each socket: epoll_wait
# and a pass of its run loop per frame, where a blocking recv sleeps in the kernel).


async def _trio_receive_checked(sock: trio.socket.SocketType, into: memoryview) -> None:
    """:func:`_receive_checked` on a trio socket, region and digest read together (a small
    region and its digest in one ``recvmsg_into``, as a small frame is read in one)."""
    digest = hashlib.sha256()
    trailer = bytearray(32)
    view = memoryview(trailer)
    done = 0
    end = len(into) + len(view)
    while done < end:
        if done < len(into):
            stop = min(done + PLAIN_CHUNK, len(into))  # the digest only behind the region's end
            pieces = [into[done:stop], *([view] if stop == len(into) else [])]
        else:
            pieces = [view[done - len(into) :]]
        got = (await sock.recvmsg_into(pieces))[0]
        if got == 0:
            raise ConnectionError("the peer closed mid-region")
        if done < len(into):
            digest.update(into[done : min(done + got, len(into))])
        done += got
    if digest.digest() != bytes(trailer):
        raise ValueError("a region's digest does not match")


async def _trio_send_hashed(
    sock: trio.socket.SocketType, region: memoryview, digest: bytes
) -> None:
    """Region and digest in one ``sendmsg`` (as a frame leaves in one), the rest as it goes."""
    pieces = [region, memoryview(digest)]
    while pieces:
        sent = await sock.sendmsg(pieces)
        while pieces and sent >= len(pieces[0]):
            sent -= len(pieces.pop(0))
        if pieces:
            pieces[0] = pieces[0][sent:]


async def _trio_root(
    peers: dict[int, trio.socket.SocketType], own: Vector, parts: dict[int, Vector], total: Vector
) -> None:
    """:func:`_plain_root` on trio: below ``PLAIN_THREADS`` bytes the children one by one, from
    it all at once (tasks, not threads), folded in the declared order once each is in."""
    view = total.data.cast("B")
    if len(view) < PLAIN_THREADS:
        np.copyto(total, own)
        for role in sorted(parts):
            await _trio_receive_checked(peers[role], parts[role].data.cast("B"))
            np.add(total, parts[role], out=total)
    else:
        async with trio.open_nursery() as nursery:
            for role, part in parts.items():
                nursery.start_soon(_trio_receive_checked, peers[role], part.data.cast("B"))
        np.copyto(total, own)
        for role in sorted(parts):
            np.add(total, parts[role], out=total)
    digest = hashlib.sha256(view).digest()
    if len(view) < PLAIN_THREADS:
        for role in sorted(parts):
            await _trio_send_hashed(peers[role], view, digest)
        return
    async with trio.open_nursery() as nursery:
        for role in sorted(parts):
            nursery.start_soon(_trio_send_hashed, peers[role], view, digest)


async def _trio_leaf(sock: trio.socket.SocketType, own: Vector, total: Vector) -> None:
    view = own.data.cast("B")
    await _trio_send_hashed(sock, view, hashlib.sha256(view).digest())
    await _trio_receive_checked(sock, total.data.cast("B"))


def _plain_connect(rank: int, n: int, port: int) -> dict[int, socket.socket]:
    """The star's connections: rank 0 listens and gets each child's, by rank; a child connects
    to rank 0 (which may not listen yet) and gets ``{0: connection}``."""
    if rank == 0:
        with socket.create_server(("127.0.0.1", port), backlog=n) as server:
            peers: dict[int, socket.socket] = {}
            while len(peers) < n - 1:
                sock, _ = server.accept()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peers[sock.recv(1)[0]] = sock
        return peers
    give_up = time.monotonic() + GLOO_WAIT
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(bytes([rank]))
    return {0: sock}


def plain_main(argv: list[str], *, on_trio: bool = False) -> int:
    """One process of the plain checked star (on trio with ``on_trio``): ``RANK N PORT
    REPEAT``. Rank 0 listens and prints ``{size: median seconds per combine}`` as JSON; the
    others connect to it."""
    rank, n, port, repeat = (int(value) for value in argv)
    connections = _plain_connect(rank, n, port)
    if on_trio:
        found = trio.run(_plain_trio_sizes, rank, n, connections, repeat)
    else:
        found = _plain_sizes(rank, n, connections, repeat)
    if rank == 0:
        print(json.dumps(found))
    return 0


def _plain_sizes(
    rank: int, n: int, connections: dict[int, socket.socket], repeat: int
) -> dict[int, float]:
    found: dict[int, float] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max(1, n - 1))
    try:
        for size in SIZES:
            own = _random_part(size, rank)
            total = np.empty_like(own)
            if rank == 0:
                parts = {role: np.empty_like(own) for role in range(1, n)}
                combine = partial(_plain_root, pool, connections, own, parts, total)
            else:
                combine = partial(_plain_leaf, connections[0], own, total)
            for _ in range(GLOO_WARMUP):
                combine()
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                for _ in range(GLOO_CALLS[size]):
                    combine()
                samples.append((time.perf_counter() - start) / GLOO_CALLS[size])
            found[size] = statistics.median(samples)
            _check_plain_total(rank, n, size, total)
    finally:
        pool.shutdown()
    return found


async def _plain_trio_sizes(
    rank: int, n: int, connections: dict[int, socket.socket], repeat: int
) -> dict[int, float]:
    peers = {role: trio.socket.from_stdlib_socket(sock) for role, sock in connections.items()}
    found: dict[int, float] = {}
    for size in SIZES:
        own = _random_part(size, rank)
        total = np.empty_like(own)
        if rank == 0:
            parts = {role: np.empty_like(own) for role in range(1, n)}
            combine = partial(_trio_root, peers, own, parts, total)
        else:
            combine = partial(_trio_leaf, peers[0], own, total)
        for _ in range(GLOO_WARMUP):
            await combine()
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(GLOO_CALLS[size]):
                await combine()
            samples.append((time.perf_counter() - start) / GLOO_CALLS[size])
        found[size] = statistics.median(samples)
        _check_plain_total(rank, n, size, total)
    return found


def _check_plain_total(rank: int, n: int, size: int, total: Vector) -> None:
    expected = _declared_fold([_random_part(size, role) for role in range(n)])
    if not np.array_equal(total, expected):
        raise ValueError(f"rank {rank}: the plain star's total is not the declared fold")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def _transfer_cpu(size: int, repeat: int) -> float:
    """Median CPU seconds, sender's and receiver's together, to move ``size`` bytes over one
    TCP connection on 127.0.0.1: a sending thread ``sendall``s a batch of payloads (enough for
    ``TRANSFER_BATCH`` bytes, so that starting the thread does not count) which this thread
    ``recv_into``s; both calls release the GIL. The receiver reads up to ``PLAIN_CHUNK`` at a
    time, small payloads together: a floor, not a frame-by-frame cost."""
    count = max(1, TRANSFER_BATCH // size)
    payload = bytes(size)
    into = bytearray(min(size * count, PLAIN_CHUNK))
    view = memoryview(into)

    def send(sock: socket.socket) -> None:
        for _ in range(count):
            sock.sendall(payload)

    samples = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as sender:
            sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            receiver, _ = server.accept()
            with receiver:
                for _ in range(repeat + 1):  # the first warms the buffers, unmeasured
                    start = _cpu_seconds()
                    thread = threading.Thread(target=send, args=(sender,))
                    thread.start()
                    left = size * count
                    while left:
                        left -= receiver.recv_into(view[: min(left, len(view))])
                    thread.join()
                    samples.append((_cpu_seconds() - start) / count)
    return statistics.median(samples[1:])


def _cpu_floor(n: int, size: int, repeat: int) -> float:
    """The least wall seconds a star combine of ``n`` regions of ``size`` bytes that hashes
    every byte can take on this machine's cores: the CPU of 3n - 2 SHA-256 of a region, 2(n -
    1) loopback transfers and n - 1 float32 additions, measured here, over the cores."""
    region = _random_part(size, 0)
    other = _random_part(size, 1)
    hashing = median_seconds(lambda: hashlib.sha256(region.data).digest(), repeat=repeat)
    adding = median_seconds(lambda: np.add(region, other, out=other), repeat=repeat)
    moving = _transfer_cpu(size, repeat)
    cpu = (3 * n - 2) * hashing + 2 * (n - 1) * moving + (n - 1) * adding
    return cpu / (os.cpu_count() or 1)


def _plain(n: int, repeat: int, *, on_trio: bool = False) -> dict[int, float]:
    """The plain checked star's median seconds per combine by size, from ``n`` processes (on
    blocking sockets, or with ``on_trio`` on trio's)."""
    port = _free_port()
    command = _PLAIN_TRIO_CHILD if on_trio else _PLAIN_CHILD
    children = _start_ranks(command, n, port, repeat, os.environ)
    where = "on trio" if on_trio else "on blocking sockets"
    found = _collect(children, f"the plain checked star {where} with {n} processes")
    return {int(size): float(seconds) for size, seconds in found.items()}


# --- the section ----------------------------------------------------------------------------


def _size(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds < 0.01 else f"{seconds * 1e3:,.1f} ms"


def _table(
    n: int,
    alpha: dict[int, _AlphaFigures],
    local: dict[int, float],
    gloo: dict[int, tuple[float, bool]] | None,
    skipped: str,
    plain: dict[int, float],
    floor: dict[int, float],
) -> list[str]:
    rows = [
        f"n = {n}:",
        "",
        "| size | R1 / R2 | Alpha per combine | gloo per call (reference) | Alpha / gloo "
        "| plain checked star | CPU floor | CPU floor / gloo "
        "| Alpha from launch walls | fill + check | gloo = declared fold |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in SIZES:
        low, high = ROUNDS[size]
        figures = alpha[size]
        least = floor[size]
        if gloo is None:
            reference, ratio, least_ratio, equal = f"skipped: {skipped}", "", "", ""
        else:
            seconds, same = gloo[size]
            reference, ratio = _ms(seconds), f"{figures.root / seconds:.2f}"
            least_ratio = f"{least / seconds:.2f}"
            equal = "yes" if same else "no"
        rows.append(
            f"| {_size(size)} | {low} / {high} | {_ms(figures.root)} | {reference} | {ratio} "
            f"| {_ms(plain[size])} | {_ms(least)} | {least_ratio} "
            f"| {_ms(figures.wall)} | {_ms(local[size])} | {equal} |"
        )
    return rows


def run(repeat: int) -> str:
    started = time.monotonic()
    version, skipped = _torch_version()
    if version is None:
        _log(f"gloo is skipped: {skipped}")
    tables: list[str] = []
    for n in ROLES:
        alpha = {size: _alpha(n, size, repeat) for size in SIZES}
        local = {size: _local_work(n, size, repeat) for size in SIZES}
        _log(f"the plain checked star among {n} processes, and the CPU floor")
        plain = _plain(n, repeat)
        floor = {size: _cpu_floor(n, size, repeat) for size in SIZES}
        gloo = None
        if version is not None:
            _log(f"gloo all_reduce among {n} ranks")
            gloo = _gloo(n, repeat)
        tables += [*_table(n, alpha, local, gloo, skipped, plain, floor), ""]
    _log(f"done in {time.monotonic() - started:.0f} s")
    reference = f"torch {version}" if version is not None else f"not measured here: {skipped}"
    return "\n".join(
        [
            "Combining a float32 vector among n real participant processes on 127.0.0.1, the",
            "total delivered to every role, against `torch.distributed.all_reduce` over gloo",
            f"(the reference, {reference}), measured in the same run, on the",
            f"{os.cpu_count()} cores here.",
            "",
            'Alpha runs a sum-check plan on a star (`[topology] shape = "star"`, float32,',
            "delivery `all`): each round every role fills its region, sends it to role 0, which",
            "folds its own and then the others' in ascending role order and sends the total back",
            "to each, and every role checks it. Each plan is compiled for R1 and R2 rounds",
            "(untimed) and launched R1 then R2 by `alpha.launch.launcher`, "
            f"{repeat} times; 'Alpha per combine' is",
            "the median over those repetitions of (T(R2) - T(R1)) / (R2 - R1), where T is role",
            "0's time from its last edge established to its last round done (its committed",
            "report's `finished_s - established_s`), so start-up, the first round's page faults,",
            "the digests and the commit cancel out. 'Alpha from launch walls' is the same",
            "difference of the launcher's elapsed time (first start to last exit), a cross-check",
            "that leaves nothing out. A round also runs the sum check's own local work on every",
            "role, which an all_reduce does not: 'fill + check' is `fill` and `check_sum` on one",
            f"role's region, timed in this process (median of {repeat}). Budgets are generous",
            "(deadline 600 s, accept, receive and start 300 s) so that none shapes the figures.",
            "Every launch committed, and every role's final region had the SHA-256 of the",
            "declared-order fold (role 0 + role 1 + ... in float32, computed here with numpy)",
            "of the last round's contributions as the sum check's `fill` makes them. Those",
            "contributions are whole numbers, whose sums are exact in any order, so this shows",
            "the total and its delivery to every role, not the order; the run checks the same",
            "itself (`check_sum` against the closed form on every role).",
            "",
            "gloo: n processes join one process group over `tcp://127.0.0.1:PORT`",
            "(`GLOO_SOCKET_IFNAME=lo`); rank 0 times batches of all_reduce (SUM, in place) on a",
            f"tensor of zeros after a barrier and {GLOO_WARMUP} unmeasured calls",
            f"({', '.join(f'{GLOO_CALLS[size]} calls at {_size(size)}' for size in SIZES)});",
            f"'gloo per call' is the median of {repeat} batches' time per call. 'Alpha / gloo'",
            "is Alpha per combine over gloo per call (1.00: as fast, above 1: Alpha slower).",
            "",
            "'plain checked star': the same star with every byte SHA-256'd as Alpha's frames",
            "do, and nothing else: plain blocking sockets, hashlib and numpy in n processes,",
            "receivers hashing each 1 MiB as it arrives, role 0 serving its children at once",
            "from 1 MiB up (one thread each; hashlib and the socket calls release the GIL), the",
            "total hashed once: 3n - 2 regions hashed per combine, as in Alpha. Timed like gloo,",
            "on role 0, its total checked against the declared fold. 'CPU floor': the CPU time",
            "of that work, measured piece by piece in this process (3n - 2 SHA-256 of a region,",
            "2(n - 1) loopback transfers counting sender and receiver, n - 1 float32 additions;",
            f"medians of {repeat}), over the {os.cpu_count()} cores: the least wall time any",
            "combine that hashes every byte it moves over TCP can take here, and 'CPU floor /",
            "gloo' the least ratio to gloo such a combine can reach.",
            "'gloo = declared fold' says whether one all_reduce of random float32 vectors gave,",
            "bit for bit, the declared-order fold of the same vectors (with two roles every order",
            "gives the same bits: IEEE addition commutes; gloo's reduction order is its own).",
            "The plan is keyed, the default: every Alpha frame's trailer is HMAC-SHA256 under",
            "its edge and direction's key over its header and its payload's SHA-256 (layout 3,",
            "docs/frames.md; `combine-keyed` sets it against the unkeyed SHA-256 trailer and",
            "BLAKE3 payload digests): a role hashes a region it sends once, whatever the number of",
            "edges, and each region it receives, from 1 MiB up in a worker thread while the",
            "bytes move. Per combine role 0 hashes n regions and each other role two, all on the",
            f"{os.cpu_count()} cores; gloo moves the bytes unchecked.",
            "",
            *tables,
        ]
    ).rstrip()
