"""Real runs for tests and gates: a compiled folder launched on 127.0.0.1, optionally with a
fault-injecting relay on one edge, adversarial artifacts in place of honest ones, roles that
start late or never, a stranger on a listener, or a role stopped or killed mid-run; and what
the run left behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import trio

from alpha.artifact import artifact_runtime
from alpha.errors import RoundAborted
from alpha.launch import LaunchResult, LaunchSpec, launch, launch_specs
from alpha.records import (
    COMMIT_NAME,
    LOGS_DIR,
    PROGRESS_DIR,
    REPORT_GLOB,
    REPORTS_DIR,
    TRACE_DIR,
    log_name,
)
from alpha.wire import failure_of
from harness.processes import running
from harness.relay import Fault, Relay

__all__ = [
    "HTTP_REQUEST",
    "STAGED_REPORTS",
    "Interrupt",
    "Outcome",
    "recorded_round",
    "relayed_run",
]

#: How ``alpha.errors.BudgetExhausted`` names its budget: ``... past its NAME budget (S s)``.
_BUDGET = re.compile(r"past its (\w+) budget \(")

#: A role's report waiting for the commit (``alpha.runtime.session``): never left by a run
#: that ended, committed (renamed final) or not (discarded).
STAGED_REPORTS = "role-*.json.staged"


def recorded_round(run: Path) -> int:
    """The latest round role 0 of the run folder ``run`` recorded in its progress records
    (``docs/progress.md``) of the attempt now running; 0 when none is yet. A line still being
    written is skipped."""
    try:
        text = (run / PROGRESS_DIR / "role-000000.jsonl").read_text()
    except OSError:
        return 0
    rounds = [0]
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(record, dict) and record.get("kind") == "round":
            rounds.append(int(record["round"]))
    return max(rounds)


#: Called with (role, announced ports) after a role announced; given the run's folder first.
Intruder = Callable[[int, tuple[int, ...]], Awaitable[None]]


@dataclass(frozen=True)
class Interrupt:
    """A signal sent to ``role`` when the relay's ``call`` fault fires: SIGSTOP for a stopped
    peer (killed once every other role has ended), SIGKILL for a killed one."""

    role: int
    signal: signal.Signals


@dataclass
class Outcome:
    """A finished run: the launcher's result, the folder, the relay (if any), and when the
    launch began (``time.monotonic()``)."""

    result: LaunchResult
    folder: Path
    relay: Relay | None
    launched_at: float = 0.0
    interrupted: dict[int, int] = field(default_factory=dict)  # role -> pid signalled
    signalled_at: float | None = None  # time.monotonic() just before the interrupt's signal

    def log(self, role: int) -> str:
        return (self.folder / LOGS_DIR / log_name(role)).read_text(errors="replace")

    def failure(self, role: int) -> str:
        """The role's last failure line after ``failed:`` (``CLASS: MESSAGE``), or "" when
        it logged none (or has no log: it never started)."""
        try:
            text = self.log(role)
        except FileNotFoundError:
            return ""
        return failure_of(text)

    def cause(self, role: int) -> str:
        """The class named on the role's failure line, or "" when it logged none."""
        return self.failure(role).split(":", 1)[0]

    def aborted_by(self, role: int) -> tuple[int, str] | None:
        """For a role that failed with ``RoundAborted``: the role its ABORT names as the
        origin, and the original cause's class; else None."""
        if self.cause(role) != "RoundAborted":
            return None
        return RoundAborted.origin_in(self.failure(role))

    def budget(self, role: int) -> str | None:
        """For a role that failed with ``BudgetExhausted``: the budget it names; else None."""
        if self.cause(role) != "BudgetExhausted":
            return None
        found = _BUDGET.search(self.failure(role))
        return None if found is None else found[1]

    def committed(self) -> bool:
        return (self.folder / REPORTS_DIR / COMMIT_NAME).exists()

    def final_reports(self) -> list[Path]:
        return sorted((self.folder / REPORTS_DIR).glob(REPORT_GLOB))

    def staged_reports(self) -> list[Path]:
        """Reports left staged in the run folder (a role that ended keeps none)."""
        return sorted(self.folder.rglob(STAGED_REPORTS))

    def left_running(self) -> list[int]:
        """Processes still running an artifact of this run."""
        return running(self.folder)


def _pid_of(artifact: str) -> int | None:
    found = running(artifact, whole=True)
    return found[0] if found else None


#: What a stranger sends by default: an HTTP request, another protocol altogether.
HTTP_REQUEST: Final = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _stranger(port: int, data: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(data)
    return conn


async def relayed_run(
    compiled: Path,
    folder: Path,
    edge: tuple[int, int] | None = None,
    fault: Fault | None = None,
    *,
    fail_fast: bool = False,
    replace: Mapping[int, Path] | None = None,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    absent: frozenset[int] = frozenset(),
    delays: Mapping[int, float] | None = None,
    stranger: int | None = None,
    stranger_sends: bytes = HTTP_REQUEST,
    interrupt: Interrupt | None = None,
    shared: bool = False,
    trace: bool = False,
) -> Outcome:
    """Copy the compiled run in ``compiled`` to ``folder`` and launch it.

    Args:
        edge, fault: a relay on ``edge`` (listener, connector) applying ``fault`` (None:
            relays faithfully).
        fail_fast: without it the launcher stops no one: each role must end by itself.
        replace: artifacts started instead of the compiled ones, by role (adversaries,
            foreign participants); they are copied into ``folder/adversaries`` and run as
            they are, without the launcher's cross-check against ``run.json``.
        interpreters: the argv prefix per target (``alpha.launch.launcher.launch_specs``).
        absent, delays: roles never started, or started late (``alpha.launch.launcher.launch``).
        stranger: a role whose listener a stranger connects to, as soon as it announced,
            before the real peer: it sends ``stranger_sends`` (an HTTP request, or a hello
            ``harness.adversary.keyless_hello`` makes) and stays connected.
        interrupt: the signal the relay's ``call`` fault sends (``fault`` must be a call).
        shared: the relayed edge's roles share memory (the launcher runs both on this host and
            the plan moves payloads of ``alpha.runtime.SHARED_MIN`` bytes or more): the relay
            frames each such DATA frame as its doorbell, header and trailer (``Relay.shared``).
        trace: every role writes its trace (``alpha.launch.launch``'s ``trace``) into
            ``folder/trace``, the replaced roles' too (their ``adversaries/trace`` is a link
            to it, since a role writes its trace beside its artifact).
    """
    shutil.copytree(compiled, folder)
    specs, deadline = launch_specs(folder, interpreters)
    if replace:
        (folder / "adversaries").mkdir()
        if trace:
            (folder / TRACE_DIR).mkdir(exist_ok=True)
            (folder / "adversaries" / TRACE_DIR).symlink_to(Path("..") / TRACE_DIR)
        swapped = []
        for spec in specs:
            if spec.role in replace:
                copy = folder / "adversaries" / replace[spec.role].name
                shutil.copy2(replace[spec.role], copy)
                # With the runtime it binds, which a role finds beside itself (one name, one
                # runtime: a tampered one comes under the honest name, in its own gate).
                runtime, _ = artifact_runtime(replace[spec.role])
                if not (folder / "adversaries" / runtime).exists():
                    shutil.copy2(replace[spec.role].parent / runtime, folder / "adversaries")
                spec = dataclasses.replace(spec, argv=(*spec.argv[:-1], str(copy.resolve())))
            swapped.append(spec)
        specs = swapped
    by_role: dict[int, LaunchSpec] = {spec.role: spec for spec in specs}
    outcome = Outcome(LaunchResult(), folder, None)
    strangers: list[socket.socket] = []
    if interrupt is not None:
        assert fault is not None and fault.kind == "call", "an interrupt fires from a call fault"
        target = by_role[interrupt.role].argv[-1]

        def fire() -> None:
            pid = _pid_of(target)
            assert pid is not None, f"role {interrupt.role} is not running"
            # The fault strikes here, not when the relay reached the frame: finding the pid
            # reads /proc, which takes up to a second on a loaded host.
            outcome.signalled_at = time.monotonic()
            os.kill(pid, interrupt.signal)
            outcome.interrupted[interrupt.role] = pid

        fault = dataclasses.replace(fault, action=fire)

    async def reap_stopped() -> None:
        # A stopped role never ends by itself: kill it once every other role has ended.
        assert interrupt is not None
        others = [spec.argv[-1] for spec in specs if spec.role != interrupt.role]
        while interrupt.role not in outcome.interrupted or any(_pid_of(other) for other in others):
            await trio.sleep(0.1)
        pid = outcome.interrupted[interrupt.role]
        try:
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    async with trio.open_nursery() as nursery:

        async def route(listener: int, connector: int, port: int) -> int:
            if (listener, connector) != edge:
                return port
            relay = outcome.relay = Relay(port, fault, shared=shared)
            relayed = await relay.open()
            nursery.start_soon(relay.serve)
            return relayed

        async def intrude(role: int, ports: tuple[int, ...]) -> None:
            if role == stranger and ports:
                strangers.append(await trio.to_thread.run_sync(_stranger, ports[0], stranger_sends))

        if interrupt is not None and interrupt.signal == signal.SIGSTOP:
            nursery.start_soon(reap_stopped)
        outcome.launched_at = time.monotonic()
        try:
            outcome.result = await launch(
                specs,
                deadline=deadline,
                fail_fast=fail_fast,
                route=route,
                absent=absent,
                delays=delays,
                on_announce=intrude if stranger is not None else None,
                trace=trace,
            )
        finally:
            for conn in strangers:
                conn.close()
        nursery.cancel_scope.cancel()
    if edge is not None and outcome.relay is None and not absent:
        raise ValueError(f"the run has no edge {edge} to relay: a relay goes on a tree edge")
    return outcome
