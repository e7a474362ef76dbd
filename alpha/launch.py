"""The local launcher: start participants in role order and relay their announced ports.

The launcher gives a run no meaning of its own. It starts role 0, reads the ports it announces
on stdout (two bytes each, big-endian, one per edge to a higher peer), and writes each port to
the stdin of the later role that connects to it; then the next role. It passes no other byte.
Then it waits for every participant.

When a participant fails, the launcher reports which role failed first and its one-line cause
(the last line of its log), stops every other participant, and returns a failure. No
participant outlives the launcher: every path out of :func:`launch` (success, failure,
deadline, cancellation, SIGINT or SIGTERM) kills and reaps whatever is still running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import trio

from alpha._files import output_folder
from alpha.errors import RoleDescriptionInvalid
from alpha.participant import FAILURE_CLOCK
from alpha.role import RoleDescription
from alpha.runtime.endpoint import PORT_BYTES

__all__ = [
    "ANNOUNCE_WAIT",
    "LAUNCH_SLACK",
    "LaunchResult",
    "LaunchSpec",
    "RoleOutcome",
    "launch",
    "specs_from_dir",
    "write_roles",
]

LAUNCH_SLACK: Final = 5.0
"""Seconds the launcher allows past the participants' own session deadline before it stops
them itself: time to start, to report, and to exit after their own budgets ran out."""

ANNOUNCE_WAIT: Final = 60.0
"""Seconds the launcher waits for one participant to announce its ports after it was started:
an emulated AArch64 participant needs a few seconds to import its runtime; a minute means it
is stuck."""

#: Called after a role announced, with its ports in edge order (used by tests and gates to
#: act between two starts, e.g. to connect a stranger to a listener).
AnnounceHook = Callable[[int, tuple[int, ...]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How to start one role, and which peers' ports it connects to and announces."""

    role: int
    argv: tuple[str, ...]
    lower: tuple[int, ...]
    higher: tuple[int, ...]
    log: Path


@dataclass(slots=True)
class RoleOutcome:
    """How one role ended."""

    role: int
    returncode: int | None  # None: never started, or still running when the launch ended
    cause: str = ""
    killed: bool = False  # stopped by the launcher after another role failed
    started_s: float = 0.0  # seconds from the launch's start to this role's start
    ended_s: float = 0.0  # seconds from the launch's start
    failed_at: float | None = None  # the participant's own monotonic failure time

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(slots=True)
class LaunchResult:
    outcomes: dict[int, RoleOutcome] = field(default_factory=dict)
    first_failure: RoleOutcome | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.first_failure is None and all(o.ok for o in self.outcomes.values())


def read_cause(path: Path) -> tuple[str, float | None]:
    """A failed participant's one-line cause (the last non-empty line of its log) and the
    monotonic time it failed at, when it logged one (``failure-clock T`` just before)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return "", None
    lines = [line for line in lines if line]
    if not lines:
        return "", None
    clock = None
    if len(lines) >= 2 and f" {FAILURE_CLOCK} " in lines[-2]:
        try:
            clock = float(lines[-2].rsplit(" ", 1)[1])
        except ValueError:
            clock = None
    return lines[-1], clock


class _Launch:
    def __init__(self, specs: Sequence[LaunchSpec], fail_fast: bool) -> None:
        self.specs = sorted(specs, key=lambda spec: spec.role)
        self.fail_fast = fail_fast
        self.result = LaunchResult()
        self.processes: dict[int, trio.Process] = {}
        self.stdins: dict[int, trio.abc.SendStream] = {}
        self.ports: dict[tuple[int, int], int] = {}  # (listener, connector) -> port
        self.killed: set[int] = set()
        self.started = trio.current_time()
        self.started_at: dict[int, float] = {}

    def now(self) -> float:
        return trio.current_time() - self.started

    def fail(self, outcome: RoleOutcome) -> None:
        if self.result.first_failure is None:
            self.result.first_failure = outcome
        if self.fail_fast:
            self.stop_all()

    def stop_all(self) -> None:
        for role, process in self.processes.items():
            if process.returncode is None:
                self.killed.add(role)
                process.kill()

    async def watch(self, spec: LaunchSpec, process: trio.Process) -> None:
        code = await process.wait()
        outcome = RoleOutcome(
            spec.role, code, started_s=self.started_at[spec.role], ended_s=self.now()
        )
        if code != 0:
            cause, outcome.failed_at = read_cause(spec.log)
            # A role that logged its own failure failed, whether or not it was then killed.
            outcome.killed = spec.role in self.killed and outcome.failed_at is None
            outcome.cause = (
                "stopped by the launcher after another role failed"
                if outcome.killed
                else cause or f"exited with code {code}"
            )
        self.result.outcomes[spec.role] = outcome
        stdin = self.stdins.pop(spec.role, None)
        if stdin is not None:
            await stdin.aclose()
        if code != 0 and not outcome.killed:
            self.fail(outcome)

    async def start(
        self,
        spec: LaunchSpec,
        nursery: trio.Nursery,
        announce_wait: float,
        on_announce: AnnounceHook | None,
    ) -> None:
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("wb") as log:
            process = await trio.lowlevel.open_process(
                list(spec.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self.processes[spec.role] = process
        self.started_at[spec.role] = self.now()
        nursery.start_soon(self.watch, spec, process)
        assert process.stdin is not None and process.stdout is not None
        # Ports of the lower peers, in edge order, as far as they are known: an absent peer
        # stops the feed, and the role waits on stdin until its own budget names that peer.
        feed = bytearray()
        complete = True
        for peer in spec.lower:
            port = self.ports.get((peer, spec.role))
            if port is None:
                complete = False
                break
            feed += port.to_bytes(PORT_BYTES, "big")
        try:
            await process.stdin.send_all(bytes(feed))
            if complete:
                await process.stdin.aclose()
            else:
                self.stdins[spec.role] = process.stdin
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it already exited; watch() reports why
        wanted = PORT_BYTES * len(spec.higher)
        announced = bytearray()
        with trio.move_on_after(announce_wait):
            while len(announced) < wanted:
                chunk = await process.stdout.receive_some(wanted - len(announced))
                if not chunk:
                    break
                announced += chunk
        await process.stdout.aclose()
        if len(announced) < wanted:
            if process.returncode is None and spec.role not in self.killed:
                # Alive but silent: it is stuck before its listeners are up.
                self.fail(
                    RoleOutcome(
                        spec.role,
                        None,
                        f"announced {len(announced)} of {wanted} port bytes within "
                        f"{announce_wait:g} s",
                        ended_s=self.now(),
                    )
                )
                process.kill()
            return
        ports = tuple(
            int.from_bytes(announced[i : i + PORT_BYTES], "big")
            for i in range(0, wanted, PORT_BYTES)
        )
        for peer, port in zip(spec.higher, ports, strict=True):
            self.ports[(spec.role, peer)] = port
        if on_announce is not None:
            await on_announce(spec.role, ports)

    async def reap(self) -> None:
        with trio.CancelScope(shield=True):
            self.stop_all()
            for process in self.processes.values():
                await process.wait()
            for stdin in self.stdins.values():
                await stdin.aclose()


async def launch(
    specs: Sequence[LaunchSpec],
    *,
    deadline: float,
    fail_fast: bool = True,
    absent: frozenset[int] = frozenset(),
    delays: Mapping[int, float] | None = None,
    on_announce: AnnounceHook | None = None,
    announce_wait: float = ANNOUNCE_WAIT,
) -> LaunchResult:
    """Start ``specs`` in role order, relay announced ports, wait for every role.

    Args:
        specs: one per role.
        deadline: the participants' session deadline; the launcher stops everything
            ``LAUNCH_SLACK`` seconds after it.
        fail_fast: stop every other role as soon as one fails (``alpha launch``). With False
            each role runs until it ends by itself, so each reports its own cause (tests).
        absent: roles never started (a host that never comes up), for tests and gates.
        delays: seconds to wait before starting a role (a late host), for tests and gates.
        on_announce: called after each role announced, with its ports.
        announce_wait: how long one role may take to announce.

    Returns:
        Every role's outcome and the first failure, if any.
    """
    state = _Launch(specs, fail_fast)
    delays = delays or {}
    try:
        with trio.move_on_after(deadline + LAUNCH_SLACK) as scope:
            async with trio.open_nursery() as outer:
                outer.start_soon(_stop_on_signals, outer.cancel_scope, state)
                # The inner nursery ends when every started role's watch() has recorded it.
                async with trio.open_nursery() as nursery:
                    for spec in state.specs:
                        if state.result.first_failure is not None and fail_fast:
                            break
                        if spec.role in absent:
                            state.result.outcomes[spec.role] = RoleOutcome(
                                spec.role, None, "never started (absent)"
                            )
                            continue
                        if delays.get(spec.role):
                            await trio.sleep(delays[spec.role])
                        await state.start(spec, nursery, announce_wait, on_announce)
                outer.cancel_scope.cancel()
        if scope.cancelled_caught:
            running = sorted(r for r, p in state.processes.items() if p.returncode is None)
            if running:
                state.fail(
                    RoleOutcome(
                        running[0],
                        None,
                        f"still running {LAUNCH_SLACK:g} s past the session deadline "
                        f"({deadline:g} s), with {len(running)} role(s)",
                        ended_s=state.now(),
                    )
                )
    finally:
        await state.reap()
    for role, process in state.processes.items():
        if role not in state.result.outcomes:
            state.result.outcomes[role] = RoleOutcome(
                role, process.returncode, "stopped by the launcher", killed=True
            )
    # Which role failed first: by the participants' own clocks where they logged one, since
    # the order in which exits reach the launcher follows teardown, not cause.
    clocked = [o for o in state.result.outcomes.values() if o.failed_at is not None]
    if clocked:
        state.result.first_failure = min(clocked, key=lambda o: o.failed_at or 0.0)
    state.result.elapsed_s = state.now()
    return state.result


async def _stop_on_signals(scope: trio.CancelScope, state: _Launch) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for number in signals:
            running = sorted(r for r, p in state.processes.items() if p.returncode is None)
            state.fail(
                RoleOutcome(
                    running[0] if running else -1,
                    None,
                    f"the launcher received {signal.Signals(number).name} and stopped the run",
                    ended_s=state.now(),
                )
            )
            scope.cancel()
            return


def specs_from_dir(directory: Path) -> tuple[list[LaunchSpec], float]:
    """Launch specs for the role descriptions ``role-NNNNNN.json`` in ``directory``, and the
    largest session deadline among them. Each role logs to ``logs/role-NNNNNN.log`` there.

    Raises:
        RoleDescriptionInvalid: a description is unreadable or wrong, or roles are missing.
    """
    paths = sorted(directory.glob("role-*.json"))
    if not paths:
        raise RoleDescriptionInvalid(
            f"{directory} holds no role-NNNNNN.json role descriptions; write them with "
            "`alpha exchange` or `alpha compile`"
        )
    specs = []
    deadline = 0.0
    for path in paths:
        try:
            description = RoleDescription.from_json(path.read_text())
        except OSError as error:
            raise RoleDescriptionInvalid(f"{path.name}: {error}") from None
        except RoleDescriptionInvalid as error:
            raise RoleDescriptionInvalid(f"{path.name}: {error}") from None
        deadline = max(deadline, description.budgets.deadline)
        specs.append(
            LaunchSpec(
                role=description.role,
                argv=(sys.executable, "-m", "alpha.participant", str(path.resolve())),
                lower=tuple(e.peer for e in description.lower),
                higher=tuple(e.peer for e in description.higher),
                log=directory / "logs" / f"role-{description.role:06d}.log",
            )
        )
    roles = sorted(spec.role for spec in specs)
    if roles != list(range(len(roles))):
        missing = sorted(set(range(max(roles) + 1)) - set(roles))
        raise RoleDescriptionInvalid(
            f"{directory} lacks the description of role {missing[0] if missing else '?'}; "
            "roles must be 0..n-1, one file each"
        )
    return specs, deadline


def write_roles(directory: Path, descriptions: Iterable[RoleDescription]) -> int:
    """Write ``role-NNNNNN.json`` for each description into ``directory`` (replacing any
    earlier ones there, so a smaller run never inherits stale roles); return how many."""
    output_folder(directory)
    for stale in directory.glob("role-*.json"):
        stale.unlink()
    count = 0
    for description in descriptions:
        (directory / f"role-{description.role:06d}.json").write_text(description.to_json())
        count += 1
    return count
