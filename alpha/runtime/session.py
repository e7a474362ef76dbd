"""One participant's session: establish every edge, do its work, close every edge.

The work, until compiled schedules replace it, is the edge exchange: on every edge at once the
role sends the payload ``exchange_payload(role, peer)`` and receives the one its peer computes
for it, checks the content, and closes the edge, refusing any byte after the last frame. The
whole session runs under the role's deadline budget.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import trio

from alpha._files import write_bytes_atomically
from alpha.errors import AlphaError, BudgetExhausted, PayloadMismatch
from alpha.frame import FrameKind, FrameSpec, ReceiveSlot, SendSlot
from alpha.learner.program import LearnerState
from alpha.protocol.local import LocalSchedule
from alpha.role import RoleDescription, exchange_payload
from alpha.runtime.channel import FrameChannel
from alpha.runtime.endpoint import Establishment, establish
from alpha.runtime.interpreter import Interpreter

__all__ = ["EXCHANGE_SLOT", "EdgeReport", "RoleReport", "first_alpha_error", "run_role"]

EXCHANGE_SLOT: Final = 1
"""The slot of the edge exchange's one data frame each way (slot 0 is the hello)."""


@dataclass
class EdgeReport:
    """What happened on one edge, for the role's report file."""

    peer: int
    listened: bool
    local_port: int
    remote_port: int
    sent_bytes: int = 0
    received_bytes: int = 0
    received_sha256: str = ""


@dataclass
class RoleReport:
    role: int
    pid: int
    edges: list[EdgeReport] = field(default_factory=list)
    established_s: float = 0.0
    finished_s: float = 0.0
    rounds: int = 0
    arms: list[int] = field(default_factory=lambda: [0, 0])
    history: list[list[float]] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "role": self.role,
                "pid": self.pid,
                "established_s": self.established_s,
                "finished_s": self.finished_s,
                "rounds": self.rounds,
                "arms": self.arms,
                "history": self.history,
                "digests": self.digests,
                "edges": [vars(edge) for edge in self.edges],
            },
            indent=1,
        )


async def _exchange_on(
    description: RoleDescription, channel: FrameChannel, edge: EdgeReport
) -> None:
    role, peer, size = description.role, channel.peer, description.exchange
    identity = description.identity
    outgoing = SendSlot(FrameSpec(identity, FrameKind.DATA, role, peer, EXCHANGE_SLOT, size))
    incoming = ReceiveSlot(FrameSpec(identity, FrameKind.DATA, peer, role, EXCHANGE_SLOT, size))
    step = f"exchanging {size} bytes with role {peer}"

    async def send() -> None:
        await channel.send(outgoing, exchange_payload(role, peer, size), step=step)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        payload = await channel.receive(incoming, step=step, late_start=True)
        if bytes(payload) != exchange_payload(peer, role, size):
            raise PayloadMismatch(
                f"role {role}: the payload from role {peer} passed every frame check but is "
                "not the one its schedule computes; the peer runs another program"
            )
        edge.received_sha256 = hashlib.sha256(payload).hexdigest()
    await channel.close(incoming)
    edge.sent_bytes = channel.sent_bytes
    edge.received_bytes = channel.received_bytes


def first_alpha_error(error: BaseException) -> AlphaError | None:
    """The first :class:`AlphaError` in ``error``, looking inside exception groups (trio's
    nurseries wrap what their tasks raise), or None."""
    if isinstance(error, AlphaError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_alpha_error(inner)
            if found is not None:
                return found
    return None


async def run_role(
    description: RoleDescription,
    *,
    announce: Callable[[bytes], Awaitable[None]],
    ports_in: trio.abc.ReceiveStream,
    on_failure: Callable[[AlphaError], None] | None = None,
    schedule: LocalSchedule | None = None,
    report_path: str | None = None,
    learner: LearnerState | None = None,
) -> RoleReport:
    """Run one participant's whole session; return its report (also written to
    ``description.report`` when set).

    The work is ``schedule``, the role's projected local schedule, or without one the edge
    exchange (``docs/roles.md``). ``on_failure`` is called with the cause the moment the
    session fails, before any connection is torn down: a peer that sees this role's
    connections close must not be able to report its own failure first. The report goes to
    ``description.report`` when set, else to ``report_path``.

    Raises:
        BudgetExhausted: a budget ran out; the deadline names the step it struck.
        FrameRefused: a frame was refused.
        PeerLost: a connection broke.
        PayloadMismatch: a verified payload differs from the one the schedule computes.
        PortMissing: stdin ended before a lower peer's port.
    """
    started = time.monotonic()
    report = RoleReport(role=description.role, pid=os.getpid())
    state = Establishment(description)
    budgets = description.budgets
    failure: AlphaError | None = None
    try:
        with trio.move_on_after(budgets.deadline) as deadline:
            async with AsyncExitStack() as stack:
                try:
                    await _session(
                        description,
                        stack,
                        state,
                        report,
                        announce,
                        ports_in,
                        started,
                        schedule,
                        learner,
                    )
                except BaseException as error:
                    if deadline.cancel_called:
                        failure = BudgetExhausted(
                            role=description.role,
                            peer=state.waiting_for,
                            step=state.step,
                            budget="deadline",
                            seconds=budgets.deadline,
                        )
                    else:
                        failure = first_alpha_error(error)
                    if failure is not None and on_failure is not None:
                        on_failure(failure)
                    raise
    except BaseException as error:
        # Raise the cause itself, not trio's group around it.
        if failure is not None and not isinstance(error, KeyboardInterrupt):
            raise failure from None
        raise
    if failure is not None:  # the deadline struck and move_on_after absorbed it
        raise failure
    report.finished_s = time.monotonic() - started
    path = description.report or report_path
    if path is not None:
        _write_report(path, report.to_json())
    return report


async def _session(
    description: RoleDescription,
    stack: AsyncExitStack,
    state: Establishment,
    report: RoleReport,
    announce: Callable[[bytes], Awaitable[None]],
    ports_in: trio.abc.ReceiveStream,
    started: float,
    schedule: LocalSchedule | None,
    learner: LearnerState | None,
) -> None:
    channels = await establish(
        description, stack, announce=announce, ports_in=ports_in, state=state
    )
    report.established_s = time.monotonic() - started
    edges = [
        EdgeReport(
            peer=peer,
            listened=peer > description.role,
            local_port=channel.local_port,
            remote_port=channel.remote_port,
        )
        for peer, channel in sorted(channels.items())
    ]
    report.edges = edges
    if schedule is not None:
        state.step = "running its schedule"
        interpreter = Interpreter(
            schedule, description.identity, description.participants, channels, learner=learner
        )
        try:
            await interpreter.run()
            state.step = "closing its edges"
            await interpreter.close()
        finally:
            report.rounds = interpreter.rounds
        report.digests = interpreter.digests()
        report.arms = list(interpreter.arms)
        if learner is not None:
            report.history = [list(entry) for entry in learner.history]
        for edge in edges:
            channel = channels[edge.peer]
            edge.sent_bytes, edge.received_bytes = channel.sent_bytes, channel.received_bytes
        return
    state.step = "exchanging payloads"
    async with trio.open_nursery() as nursery:
        for edge in edges:
            nursery.start_soon(_exchange_on, description, channels[edge.peer], edge)


def _write_report(path: str, text: str) -> None:
    write_bytes_atomically(Path(path), text.encode())
