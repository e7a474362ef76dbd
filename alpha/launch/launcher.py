"""The local launcher: start every participant at once and relay their announced ports.

The launcher gives a run no meaning of its own. It starts every role at once (a delayed role
after its delay), reads the ports each announces on stdout (two bytes each, big-endian, one per
edge to a higher peer), and writes each port to the stdin of the higher role that connects to
it, as soon as it is known and in that role's edge order. It passes no other byte. A connector
therefore only ever learns the port of a listener that is up: no participant connects to an
absent listener. Then it waits for every participant.

When a participant fails, the launcher names the role that failed first and its one-line cause
(the last line of its log, or how it ended: killed by a signal, stopped, silent), stops every
other participant, and returns a failure. "First" follows the rules written in
:func:`alpha.launch.outcome.first_to_fail`; the outcomes are kept by the launch's outcome
ledger (``alpha.launch.outcome``), a pure value this module drives. No participant outlives
the launcher: every path out of :func:`launch` (success, failure, deadline, cancellation,
SIGINT, SIGTERM or SIGHUP) kills and reaps every role it started, one being started included;
and a launcher killed with SIGKILL, which can do nothing, is watched by its participants
themselves (``alpha.runtime.parent``).

Every participant, and the warm starter with the roles it forks, runs in a session of its own
(``setsid``), outside the terminal's process group: a terminal's SIGINT (Ctrl-C), or a SIGHUP
when it closes, reaches the launcher alone, and the launcher alone decides. So no role ever
fails with "interrupted" beside the launcher's own account of the signal.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import trio

from alpha.artifact.environ import TRACE_ENV, TRACE_ON
from alpha.artifact.verified import verified_roles
from alpha.artifact.verify import artifact_runtime
from alpha.core.targets import TARGETS
from alpha.errors import (
    AlphaError,
    ArtifactInvalid,
    DescriptorLimitTooLow,
    UsageError,
    WarmStarterLost,
    WarmStarterStalled,
    error_line,
)
from alpha.files import role_file
from alpha.launch.outcome import (
    CAUSE_TAIL_BYTES,
    EXIT_NOTICE,
    LAUNCH_SLACK,
    LaunchResult,
    OutcomeLedger,
    RoleOutcome,
    first_to_fail,
    with_log,
)
from alpha.launch.proc import PF_EXITING, STOPPED_HOW, process_state, read_stat
from alpha.launch.warm import StarterUnfit, WarmProcess, WarmStarter
from alpha.records.folder import LOGS_DIR
from alpha.runtime.parent import LAUNCHER_PID_ENV
from alpha.runtime.shared import SHARED_ENV, launch_token, region_folder, sweep_regions
from alpha.wire.console import PORT_BYTES, cause_of, decode_ports, encode_port

__all__ = [
    "ANNOUNCE_WAIT",
    "CAUSE_TAIL_BYTES",
    "EXIT_NOTICE",
    "LAUNCH_SLACK",
    "START_SHARE",
    "LaunchResult",
    "LaunchSpec",
    "RoleOutcome",
    "announce_bound",
    "enough_descriptors",
    "first_to_fail",
    "launch",
    "launch_specs",
    "read_cause",
]

ANNOUNCE_WAIT: Final = 60.0
"""Seconds one participant may take to announce its ports after it was started, on a host
that starts nothing else: an emulated AArch64 participant needs a few seconds to import its
runtime; a minute means it is stuck. :func:`announce_bound` adds the start allowance."""

START_SHARE: Final = 0.5
"""Seconds of one core that one participant's start-up takes at most before it announces:
about 0.3 s of CPU here (the interpreter, trio, numpy and Alpha's own modules, ``python -m
bench endpoints``), with room for a slower host. Every role starts at once, so on a host with
fewer cores than roles the start-ups share the cores, and the last role announces only once
about ``roles x START_SHARE / cores`` seconds of start-ups have run: a busy host, not a stuck
role. The announce wait grows by that much (:func:`announce_bound`)."""

FDS_PER_ROLE: Final = 4
"""File descriptors the launcher holds per role at most while it starts them all: the write
end of its stdin until every port is written, the read end of its stdout until it announced,
the handle it waits on for the exit, and its log while it is being created."""

# Descriptors the launcher asks for beyond its roles' (the interpreter's, trio's, a few per
# hook: relays, forwards), and the least of them it can start with.
_OWN_FDS: Final = 256
_OWN_FDS_LEAST: Final = 64

#: Called after a role announced, with its ports in edge order (used by tests and gates to
#: act between two starts, e.g. to connect a stranger to a listener).
AnnounceHook = Callable[[int, tuple[int, ...]], Awaitable[None]]

#: Called with (listener, connector, announced port); returns the port the connector is given
#: (used by tests and gates to put a relay on an edge).
RouteHook = Callable[[int, int, int], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How to start one role, and which peers' ports it connects to and announces."""

    role: int
    argv: tuple[str, ...]
    lower: tuple[int, ...]
    higher: tuple[int, ...]
    log: Path


class _Child(Protocol):
    """A started participant: a ``trio.Process``, or a :class:`alpha.launch.warm.WarmProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdin(self) -> trio.abc.SendStream | None: ...

    @property
    def stdout(self) -> trio.abc.ReceiveStream | None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...


def read_cause(path: Path) -> tuple[str, float | None]:
    """A failed participant's one-line cause (the last non-empty line of its log) and the
    monotonic time it failed at, when it logged one (``failure-clock T`` just before). Only
    the last :data:`CAUSE_TAIL_BYTES` of the log are read."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - CAUSE_TAIL_BYTES))
            tail = file.read(CAUSE_TAIL_BYTES)
    except OSError:
        return "", None
    return cause_of(tail.decode(errors="replace"))


def announce_bound(announce_wait: float, roles: int, cores: int) -> float:
    """How long a role may take to announce once started, when ``roles`` roles start at once
    on ``cores`` cores: ``announce_wait`` (a role alone: :data:`ANNOUNCE_WAIT`), plus the
    cores' time that every start-up takes (``roles x START_SHARE / cores``), during which each
    role gets only its share of them. Past it, the role is stuck, not slowed by the others."""
    return announce_wait + START_SHARE * max(roles, 0) / max(cores, 1)


def _cores() -> int:
    """The cores this process (and so every participant it starts) may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def enough_descriptors(roles: int, warm: bool = False) -> None:
    """Raise this process's soft limit on open files, up to its hard limit, so that starting
    ``roles`` roles at once does not run out of descriptors (:data:`FDS_PER_ROLE` each, and
    a pidfd more for a warm start, which the warm starter, started after, also holds); a
    common default soft limit is 1024. The hard limit is never raised.

    Raises:
        DescriptorLimitTooLow: the hard limit is below even the least the launch needs (its
            roles' descriptors and :data:`_OWN_FDS_LEAST` of its own); nothing is started.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_roles = (FDS_PER_ROLE + warm) * roles
    # The launcher's own: the interpreter's, trio's, a few per hook (relays, forwards); the
    # least it can do with, and what it asks for when the hard limit allows.
    needed = per_roles + _OWN_FDS_LEAST
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise DescriptorLimitTooLow(roles, needed, hard)
    wanted = per_roles + _OWN_FDS
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))


def _dying(pid: int) -> bool:
    """Whether ``pid`` is already on its way out: inside its exit (``PF_EXITING`` in
    ``/proc/PID/stat``'s flags) or with a SIGKILL pending that it has not yet run to take."""
    stat = read_stat(pid)
    if stat is None:
        return True  # gone already
    try:
        if stat.flags & PF_EXITING:
            return True
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                pending = line.startswith((b"SigPnd:", b"ShdPnd:"))
                if pending and int(line.split()[1], 16) & (1 << (signal.SIGKILL - 1)):
                    return True
    except (OSError, IndexError, ValueError):
        return True  # gone already
    return False


def _seen_ending(process: _Child) -> float:
    """When the launcher saw ``process`` end, on the monotonic clock: a warm child's end as
    the launcher's own pidfd of it showed it (its status comes later, from the warm starter,
    and may come after a stop cancelled the wait for it), else now."""
    if isinstance(process, WarmProcess) and process.exited_at is not None:
        return process.exited_at
    return time.monotonic()


def _warmable(spec: LaunchSpec) -> bool:
    """Whether the warm starter can run ``spec``: an artifact on this very Python."""
    return len(spec.argv) == 2 and spec.argv[0] == sys.executable and spec.argv[1].endswith(".pyz")


def _runtime_of(specs: Sequence[LaunchSpec]) -> tuple[Path | None, Path | None]:
    """The runtime beside the first artifact the warm starter would run, which it binds, and
    that artifact: the runtime the starter imports once for all its children, and the loader
    it compiles once (every role of one compile binds the same runtime and carries the same
    loader). None when there is none or it cannot be read: each role's own loader then says
    why."""
    for spec in specs:
        if _warmable(spec):
            artifact = Path(spec.argv[1])
            try:
                return artifact.parent / artifact_runtime(artifact)[0], artifact
            except ArtifactInvalid:
                return None, None
    return None, None


_state = process_state
_STOPPED_HOW: Final = STOPPED_HOW


class _Launch:
    def __init__(
        self,
        specs: Sequence[LaunchSpec],
        fail_fast: bool,
        committed: Callable[[], bool] | None = None,
    ) -> None:
        self.specs = sorted(specs, key=lambda spec: spec.role)
        self.by_role = {spec.role: spec for spec in self.specs}
        self.fail_fast = fail_fast
        self.committed = committed
        self.ledger = OutcomeLedger(fail_fast)
        self.result = self.ledger.result
        self.processes: dict[int, _Child] = {}
        self.ports: dict[tuple[int, int], int] = {}  # (listener, connector) -> port
        # Set once the port of an edge (listener, connector) may go to its connector.
        self.relayed: dict[tuple[int, int], trio.Event] = {}
        # Each role's stdin feed, cancelled when the role exits.
        self.feeds: dict[int, trio.CancelScope] = {}
        self.route: RouteHook | None = None
        self.killed = self.ledger.killed  # the launcher sent them SIGKILL
        self.stopped = self.ledger.stopped  # role -> (state, when found)
        self.diagnosed: dict[int, RoleOutcome] = {}  # failures the launcher found in a role
        self.stopping = False
        # Starting the roles, delays and announcements included: stop_all() cuts it short.
        self.starting = trio.CancelScope()
        self.started = trio.current_time()
        self.started_at: dict[int, float] = {}
        # Every participant learns who launched it, and stops when its parent is another.
        self.environment = {**os.environ, LAUNCHER_PID_ENV: str(os.getpid())}
        self.starter: WarmStarter | None = None  # with warm starts

    @property
    def failures(self) -> list[RoleOutcome]:
        """The failures found, in the order found (the ledger's)."""
        return self.ledger.failures

    def relay_of(self, listener: int, connector: int) -> trio.Event:
        return self.relayed.setdefault((listener, connector), trio.Event())

    def now(self) -> float:
        return trio.current_time() - self.started

    def fail(self, outcome: RoleOutcome) -> None:
        # After the commit point the run's outcome is decided: stopping the other roles could
        # only lose the final reports they are publishing (they end by themselves, bounded).
        stop = self.ledger.fail(outcome, time.monotonic(), self.committed)
        # Before anything is killed: a stopped role is the one its peers waited for.
        self.note_stopped()
        if stop:
            self.stop_all()

    def note_stopped(self) -> None:
        for role, process in self.processes.items():
            if role in self.stopped or role in self.killed or process.returncode is not None:
                continue
            state = _state(process.pid)
            if state in _STOPPED_HOW:
                self.stopped[role] = (state, time.monotonic())

    def stop_all(self) -> None:
        self.note_stopped()
        self.stopping = True
        self.starting.cancel()
        for role, process in self.processes.items():
            # A role that already died, or is dying of a signal the launcher did not send, is
            # not one the launcher killed: returncode reaps it, a warm child's own pidfd shows
            # it ended before the starter reports it, and /proc shows one still on its way out.
            if process.returncode is None and not (
                (isinstance(process, WarmProcess) and process.has_ended()) or _dying(process.pid)
            ):
                self.killed.add(role)
                process.kill()

    def record(self, spec: LaunchSpec, code: int | None, seen: float) -> RoleOutcome:
        """The outcome of ``spec``'s role, which ended with ``code`` (None: still running) and
        was seen to at ``seen`` on the monotonic clock; the role's failure, if it is one."""
        role = spec.role
        outcome = self.diagnosed.get(role)
        if outcome is not None:  # the launcher found it failing, and killed it
            outcome.returncode = code
            outcome.started_s = self.started_at.get(role, 0.0)
            outcome.ended_s = self.now()
            return outcome
        process = self.processes.get(role)
        outcome = self.ledger.ended(
            role,
            code,
            seen,
            log=spec.log,
            cause=lambda: read_cause(spec.log),
            status_lost=isinstance(process, WarmProcess) and process.status_lost,
        )
        outcome.started_s = self.started_at.get(role, 0.0)
        outcome.ended_s = self.now()
        return outcome

    async def watch(self, spec: LaunchSpec, process: _Child) -> None:
        code = await process.wait()
        outcome = self.record(spec, code, _seen_ending(process))
        self.ledger.settle(outcome)
        feed = self.feeds.pop(spec.role, None)
        if feed is not None:
            feed.cancel()  # no port it still waits for can reach it now
        if outcome.failed:
            self.fail(outcome)

    async def open(self, spec: LaunchSpec, log: int) -> _Child:
        """Start one participant (a seam for tests that act while it starts): forked by the
        warm starter when there is one and the role runs on this Python, else its own
        interpreter."""
        if self.starter is not None and _warmable(spec):
            return await self.starter.spawn(spec.argv, log, spec.role)
        return await trio.lowlevel.open_process(
            list(spec.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=self.environment,
            # Away from the terminal's process group: Ctrl-C reaches the launcher alone, which
            # stops every role itself (docs/launch.md, "Signals").
            start_new_session=True,
        )

    async def feed(
        self, spec: LaunchSpec, stdin: trio.abc.SendStream, scope: trio.CancelScope
    ) -> None:
        """Write the ports of ``spec``'s lower peers to its stdin, in its edge order, each as
        soon as it is known and every earlier one written; then close stdin. A port never
        relayed (an absent peer, one that died or is silent) stops the feed there: the role
        waits on stdin until its own budget names that peer, or until it ends."""
        with scope:
            try:
                cursor = 0
                lower = spec.lower
                while cursor < len(lower):
                    await self.relay_of(lower[cursor], spec.role).wait()
                    # The longest known prefix, in one write.
                    known = bytearray()
                    while cursor < len(lower) and self.relay_of(lower[cursor], spec.role).is_set():
                        known += encode_port(self.ports[(lower[cursor], spec.role)])
                        cursor += 1
                    await stdin.send_all(bytes(known))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # it already exited; watch() reports why
            finally:
                with trio.CancelScope(shield=True):
                    await stdin.aclose()

    async def start(
        self,
        spec: LaunchSpec,
        nursery: trio.Nursery,
        announce_wait: float,
        on_announce: AnnounceHook | None,
    ) -> None:
        """Start ``spec``'s role, feed its stdin, read and relay its announcement: its ports
        go to their connectors once ``on_announce`` (if any) returned. The role has
        ``announce_wait`` seconds from its start to announce."""
        if self.stopping:
            return
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("wb") as log:
            try:
                process = await self.open(spec, log.fileno())
            except (WarmStarterLost, WarmStarterStalled) as error:
                # The starter's loss already failed the run (WarmStarter.on_lost), unless this
                # start is where it was found first.
                self.ledger.settle(
                    RoleOutcome(
                        spec.role, None, f"never started: {type(error).__name__}", log=spec.log
                    )
                )
                if not self.stopping:
                    self.fail(self.launcher_failure(error))
                return
            except OSError as error:  # no process (no memory, no descriptors, a refused fork)
                outcome = RoleOutcome(
                    spec.role,
                    None,
                    with_log(f"role {spec.role} could not be started: {error}", spec.log),
                    ended_s=self.now(),
                    log=spec.log,
                )
                self.ledger.settle(outcome)
                self.fail(outcome)
                return
        self.processes[spec.role] = process
        self.started_at[spec.role] = self.now()
        give_up = trio.current_time() + announce_wait
        feed = self.feeds[spec.role] = trio.CancelScope()  # watch() cancels it at the exit
        nursery.start_soon(self.watch, spec, process)
        if self.stopping:
            # The launcher began to stop while this role started: it must not run on.
            self.killed.add(spec.role)
            process.kill()
            return
        assert process.stdin is not None and process.stdout is not None
        nursery.start_soon(self.feed, spec, process.stdin, feed)
        wanted = PORT_BYTES * len(spec.higher)
        announced = bytearray()
        with trio.move_on_at(give_up):
            while len(announced) < wanted:
                chunk = await process.stdout.receive_some(wanted - len(announced))
                if not chunk:
                    # Its stdout is closed: it is exiting, and watch() says how; unless it
                    # runs on without announcing, silent.
                    await process.wait()
                    break
                announced += chunk
        await process.stdout.aclose()
        if len(announced) < wanted:
            if process.returncode is None and spec.role not in self.killed:
                # Alive but silent past its bound: it is stuck before its listeners are up.
                outcome = RoleOutcome(
                    spec.role,
                    None,
                    with_log(
                        f"role {spec.role} announced {len(announced)} of {wanted} port bytes "
                        f"within {announce_wait:g} s",
                        spec.log,
                    ),
                    ended_s=self.now(),
                    log=spec.log,
                )
                self.diagnosed[spec.role] = outcome
                self.killed.add(spec.role)
                process.kill()
                self.fail(outcome)
            return
        ports = decode_ports(announced)
        for peer, port in zip(spec.higher, ports, strict=True):
            if self.route is not None:
                port = await self.route(spec.role, peer, port)
            self.ports[(spec.role, peer)] = port
        if on_announce is not None:
            await on_announce(spec.role, ports)
        for peer in spec.higher:
            self.relay_of(spec.role, peer).set()

    def running(self) -> list[int]:
        return sorted(r for r, p in self.processes.items() if p.returncode is None)

    def launcher_failure(self, found: str | AlphaError) -> RoleOutcome:
        """A failure the launcher found in the run as a whole, named after the lowest role
        still running (-1: none); an error of Alpha's is named by its class."""
        running = self.running()
        role = running[0] if running else -1
        spec = self.by_role.get(role)
        log = None if spec is None else spec.log
        error = found if isinstance(found, AlphaError) else None
        text = found if isinstance(found, str) else error_line(found)
        return RoleOutcome(
            role, None, with_log(text, log), ended_s=self.now(), log=log, error=error
        )

    def starter_lost(self, error: AlphaError, harmful: bool) -> None:
        """The warm starter ended or stalled after it was ready (``WarmStarter.on_lost``): a
        failure of the run while it still owed a start or an outcome, else a note."""
        if harmful:
            found = self.launcher_failure(error)
            stalled = None if self.starter is None else self.starter.stalled_at
            ended = None if self.starter is None else self.starter.ended_at
            if stalled is not None:
                # Found stalled, then killed: the roles it had started fail (LauncherLost) only
                # once it is dead, so after this moment, however long the relay takes to see it.
                found.failed_at = stalled
            elif ended is not None:
                # An exit the launcher saw, as a role's (EXIT_NOTICE): the roles it had started
                # find their parent gone and fail too (LauncherLost), by their clocks, within a
                # poll of its death, while the launcher is still reaping it.
                found.failed_at, found.exit_seen = ended, True
            self.fail(found)
        else:
            self.result.notes.append(error_line(error))

    async def reap(self) -> None:
        with trio.CancelScope(shield=True):
            self.stop_all()
            for process in self.processes.values():
                # A start cut short leaves its pipes open.
                for stream in (process.stdin, process.stdout):
                    if stream is not None:
                        await stream.aclose()
                await process.wait()


async def launch(
    specs: Sequence[LaunchSpec],
    *,
    deadline: float | None,
    fail_fast: bool = True,
    absent: frozenset[int] = frozenset(),
    delays: Mapping[int, float] | None = None,
    on_announce: AnnounceHook | None = None,
    announce_wait: float = ANNOUNCE_WAIT,
    route: RouteHook | None = None,
    warm: bool = True,
    committed: Callable[[], bool] | None = None,
    shared: bool = True,
    trace: bool = False,
) -> LaunchResult:
    """Start every role of ``specs`` at once, relay announced ports, wait for every role.

    Every role not ``absent`` is started at once (a delayed role after its delay); no start
    waits for another role's announcement. Each announced port reaches its connector as soon
    as its listener announced it, in the connector's edge order.

    Args:
        specs: one per role.
        deadline: the participants' session deadline; the launcher stops everything
            ``LAUNCH_SLACK`` seconds after it and the start allowance (see
            :func:`announce_bound`). None: no bound from the launcher (the participants' own
            budgets bound every wait).
        fail_fast: stop every other role as soon as one fails (``alpha launch``). With False
            each role runs until it ends by itself, so each reports its own cause (tests).
        absent: roles never started (a host that never comes up), for tests and gates.
        delays: seconds to wait before starting a role (a late host), for tests and gates;
            only that role's start waits.
        on_announce: called after each role announced, with its ports, before they are
            relayed to its connectors. Calls for different roles may overlap.
        announce_wait: how long one role may take to announce, when it starts alone; the
            launcher allows :func:`announce_bound` for the roles it starts at once.
        route: called with (listener, connector, port) for each announced port; the port it
            returns is the one the connector gets (tests and gates put a relay on an edge).
        warm: fork every role whose artifact runs on this Python from one warm starter, an
            interpreter that imported trio and numpy once for all (``alpha.launch.warm``,
            ``docs/launch.md``), instead of starting an interpreter per role; roles with
            another interpreter (QEMU, ssh) start as ever. A warm starter that cannot start
            (a thread in it: a BLAS thread count set above one) is not an error: every role
            then starts an interpreter of its own. False: every role starts its own.
        committed: says whether the run has passed its commit point (role 0's commit record
            exists, in a reports folder cleared before the launch); a failure after it stops
            no other role, even with ``fail_fast``: each is publishing its final report.
        shared: every role runs on this host: each is given this launch's token
            (``ALPHA_SHARED_MEMORY``), so edges may move payloads through shared-memory
            regions (``docs/frames.md``); once every role has ended, any region file of the
            token still in the folder (a role killed before its peer took the name) is
            removed. False (roles on other hosts): every frame over TCP.
        trace: every role writes its trace (``ALPHA_TRACE=1`` in its environment,
            ``docs/trace.md``); False: none does, whatever the launcher's environment says.

    Returns:
        Every role's outcome and the role that failed first (see
        :func:`alpha.launch.outcome.first_to_fail`), if any.
    """
    state = _Launch(specs, fail_fast, committed)
    state.route = route
    # The command line's --trace is the one switch: never one inherited from the caller's shell.
    state.environment.pop(TRACE_ENV, None)
    if trace:
        state.environment[TRACE_ENV] = TRACE_ON
        # The compiled trace writer built (or found) once, here: the roles, started at once,
        # then load it from the cache instead of each compiling it (docs/trace.md).
        from alpha.runtime.tracing import writer_type  # an untraced launch loads no writer

        await trio.to_thread.run_sync(writer_type)
    token = launch_token() if shared else None
    if token is None:
        state.environment.pop(SHARED_ENV, None)  # never one inherited from another launch
    else:
        state.environment[SHARED_ENV] = token
    try:
        return await _launch_all(
            state, specs, deadline, absent, delays, on_announce, announce_wait, warm
        )
    finally:
        if token is not None:
            sweep_regions(token, region_folder(state.environment))


async def _launch_all(
    state: _Launch,
    specs: Sequence[LaunchSpec],
    deadline: float | None,
    absent: frozenset[int],
    delays: Mapping[int, float] | None,
    on_announce: AnnounceHook | None,
    announce_wait: float,
    warm: bool,
) -> LaunchResult:
    starting = [spec for spec in state.specs if spec.role not in absent]
    warm = warm and any(_warmable(spec) for spec in starting)
    enough_descriptors(len(starting), warm)
    if not warm:
        return await _launch(state, starting, deadline, absent, delays, on_announce, announce_wait)
    async with trio.open_nursery() as nursery:
        runtime, artifact = _runtime_of(starting)
        starter = WarmStarter(
            state.environment, on_lost=state.starter_lost, runtime=runtime, artifact=artifact
        )
        try:
            await nursery.start(starter.serve)
        except StarterUnfit:
            pass  # every role starts an interpreter of its own, as documented
        except (WarmStarterLost, WarmStarterStalled) as error:
            # Never ready: every role starts an interpreter of its own, and the launch says so.
            state.result.notes.append(error_line(error))
        else:
            state.starter = starter
        try:
            return await _launch(
                state, starting, deadline, absent, delays, on_announce, announce_wait
            )
        finally:
            starter.close()  # every child was waited for: serve() returns once it has ended


async def _launch(
    state: _Launch,
    starting: list[LaunchSpec],
    deadline: float | None,
    absent: frozenset[int],
    delays: Mapping[int, float] | None,
    on_announce: AnnounceHook | None,
    announce_wait: float,
) -> LaunchResult:
    delays = delays or {}
    wait = announce_bound(announce_wait, len(starting), _cores())
    bound = math.inf if deadline is None else deadline + (wait - announce_wait) + LAUNCH_SLACK
    try:
        with trio.move_on_after(bound) as scope:
            async with trio.open_nursery() as outer:
                outer.start_soon(_stop_on_signals, outer.cancel_scope, state)
                # The inner nursery ends when every started role's watch() has recorded it.
                async with trio.open_nursery() as nursery:
                    with state.starting:
                        async with trio.open_nursery() as starts:
                            for spec in state.specs:
                                if spec.role in absent:
                                    state.ledger.settle(
                                        RoleOutcome(spec.role, None, "never started (absent)")
                                    )
                                    continue
                                starts.start_soon(
                                    _start_after,
                                    state,
                                    spec,
                                    delays.get(spec.role, 0.0),
                                    nursery,
                                    wait,
                                    on_announce,
                                )
                outer.cancel_scope.cancel()
        if deadline is not None and scope.cancelled_caught and state.running():
            state.fail(
                state.launcher_failure(
                    f"still running {LAUNCH_SLACK:g} s past the session deadline "
                    f"({deadline:g} s), with {len(state.running())} role(s)"
                )
            )
    finally:
        await state.reap()
    for role, process in state.processes.items():
        if role not in state.result.outcomes:  # its watch was cancelled
            outcome = state.record(state.by_role[role], process.returncode, _seen_ending(process))
            state.ledger.settle(outcome)
    # The order in which exits reach the launcher follows teardown, not cause.
    state.ledger.close()
    state.result.elapsed_s = state.now()
    return state.result


async def _start_after(
    state: _Launch,
    spec: LaunchSpec,
    delay: float,
    nursery: trio.Nursery,
    announce_wait: float,
    on_announce: AnnounceHook | None,
) -> None:
    if delay:
        await trio.sleep(delay)  # a late host: stop_all() cuts it short
    await state.start(spec, nursery, announce_wait, on_announce)


async def _stop_on_signals(scope: trio.CancelScope, state: _Launch) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for number in signals:
            state.result.signal = number
            state.fail(
                state.launcher_failure(
                    f"the launcher received {signal.Signals(number).name} and stopped the run"
                )
            )
            scope.cancel()
            return


def launch_specs(
    directory: Path, interpreters: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[LaunchSpec], float | None]:
    """What to start for the compiled run in ``directory``: one spec per artifact ``run.json``
    lists, each checked (:func:`alpha.artifact.verified_roles`), and the largest session
    deadline among them (None when a role has none). Each role logs to
    ``directory/logs/role-NNNNNN.log``.

    A role starts as ``INTERPRETER... ARTIFACT``, where the interpreter is the argv prefix
    ``interpreters`` gives for the target the artifact was built for (``x86_64``, ``aarch64``),
    and ``sys.executable`` for a target it does not name. An AArch64 role on an x86-64 host
    needs one that emulates it, e.g. ``harness.emulation.aarch64_interpreter()`` (qemu-aarch64
    and an AArch64 CPython with numpy and trio; ``docs/emulation.md``); without one its
    artifact refuses to start (``TargetMismatch``) and the run fails naming that role.

    Raises:
        ArtifactInvalid: as :func:`alpha.artifact.verified_roles`.
        UsageError: ``interpreters`` names a target that is not one of
            :data:`alpha.core.targets.TARGETS`, or gives one an empty prefix.
    """
    chosen = dict(interpreters or {})
    for target, prefix in chosen.items():
        if target not in TARGETS:
            raise UsageError(f"no such target {target!r}; the targets are {', '.join(TARGETS)}")
        if not prefix:
            raise UsageError(f"the interpreter for {target} is empty")
    roles, deadline = verified_roles(directory)
    specs = [
        LaunchSpec(
            role=entry.role,
            argv=(*chosen.get(entry.target, (sys.executable,)), str(entry.path.resolve())),
            lower=entry.lower,
            higher=entry.higher,
            log=directory / LOGS_DIR / role_file(entry.role, ".log"),
        )
        for entry in roles
    ]
    return specs, deadline
