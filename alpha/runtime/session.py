"""One participant's session: establish every edge, do its work, complete or abort the run.

The work is the role's compiled schedule. After it comes the completion
(:mod:`alpha.runtime.completion`, ``docs/failure.md``): the news of the commit comes down the
participant tree, and each role publishes its staged report only when it learns of it. A role
that fails sends an ABORT frame with the cause on every edge it can still write, discards its
staged report, and raises the cause (:mod:`alpha.runtime.cause` says which failure that is).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from alpha.errors import (
    AlphaError,
    CommitUnknown,
    RoundAborted,
    SlotFault,
)
from alpha.runtime.cause import first_alpha_error
from alpha.runtime.channel import FrameChannel
from alpha.runtime.completion import ReportFiles, complete, expect_completion
from alpha.runtime.endpoint import Establishment, establish
from alpha.runtime.interpreter import Interpreter
from alpha.runtime.parent import watch_for_launcher_loss
from alpha.runtime.shared import Sharing
from alpha.runtime.whereabouts import COMPLETING, RUNNING, Whereabouts
from alpha.schedule.learner_regions import PARAMETERS
from alpha.schedule.local import LocalSchedule
from alpha.schedule.role import RoleDescription
from alpha.wire.abort import AbortCause

if TYPE_CHECKING:  # types only: a role without a learner (a sum check) loads no learner code
    from alpha.learner.saving import Saver
    from alpha.learner.state import LearnerState
    from alpha.runtime.tracing import Tracer  # an untraced role loads no trace writer

# first_alpha_error lives in alpha.runtime.cause; named here too for the runtime's face.
__all__ = [
    "EdgeReport",
    "RoleReport",
    "first_alpha_error",
    "run_role",
]


@dataclass
class EdgeReport:
    """What happened on one edge, for the role's report file."""

    peer: int
    listened: bool
    local_port: int
    remote_port: int
    sent_bytes: int = 0
    shared_bytes: int = 0
    received_bytes: int = 0


@dataclass
class RoleReport:
    role: int
    pid: int
    machine: str = field(default_factory=lambda: os.uname().machine)
    edges: list[EdgeReport] = field(default_factory=list)
    established_s: float = 0.0
    established_at: float = 0.0  # time.monotonic() then: one clock for every process of a host
    finished_s: float = 0.0
    rounds: int = 0
    arms: list[int] = field(default_factory=lambda: [0, 0])
    history: list[list[float]] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    checkpoint: dict[str, str] | None = None  # the generation and this owner's manifest digest
    committed: bool = False  # set once the role learned of the commit; not in the file

    def to_json(self) -> str:
        return json.dumps(
            {
                "role": self.role,
                "pid": self.pid,
                "machine": self.machine,
                "established_s": self.established_s,
                "established_at": self.established_at,
                "finished_s": self.finished_s,
                "rounds": self.rounds,
                "arms": self.arms,
                "history": self.history,
                "digests": self.digests,
                "edges": [vars(edge) for edge in self.edges],
                **({} if self.checkpoint is None else {"checkpoint": self.checkpoint}),
            },
            indent=1,
        )


def _abort_cause(error: BaseException, where: Whereabouts) -> AbortCause:
    """What this role tells its peers about ``error``: an abort it received passes on as it
    came; its own failure names itself, the edge at fault and the round."""
    if isinstance(error, RoundAborted):
        return AbortCause.of(error)
    edge: tuple[int, int] | None = None
    peer = getattr(error, "peer", None)  # a lost peer or a spent budget names its edge
    if isinstance(error, SlotFault):  # a refusal or a slot misuse: it names its edge
        edge = error.edge
    elif isinstance(peer, int):  # receives from several peers run at once: not where.peer
        edge = (where.role, peer)
    elif where.peer is not None:
        edge = (where.role, where.peer)
    detail = " ".join(str(error).split()) or type(error).__name__
    return AbortCause(where.role, type(error).__name__, edge, where.round, detail)


async def _abort(channels: dict[int, FrameChannel], cause: AbortCause, skip: int | None) -> None:
    """Send ``cause`` on every edge that can still carry a frame, all at once."""
    async with trio.open_nursery() as nursery:
        for peer, channel in channels.items():
            if peer != skip:
                nursery.start_soon(channel.send_abort, cause)


async def run_role(
    description: RoleDescription,
    *,
    announce: Callable[[bytes], Awaitable[None]],
    ports_in: trio.abc.ReceiveStream,
    schedule: LocalSchedule,
    on_failure: Callable[[AlphaError], None] | None = None,
    report_path: str | None = None,
    learner: LearnerState | None = None,
    saver: Saver | None = None,
    trace: Tracer | None = None,
) -> RoleReport:
    """Run one participant's whole session; return its report once the run committed.

    The work is ``schedule``, the role's projected local schedule (``docs/protocol.md``).
    ``on_failure`` is called with the cause the moment the
    session fails, before any ABORT is sent or connection torn down: a peer that hears of
    the failure must not be able to report it first. The report goes to
    ``description.report`` when set, else to ``report_path``: staged during the completion,
    published when the role learns that the run committed (``docs/failure.md``). With
    ``saver`` the role writes its part of the learner's state into the segment's staged
    generation before it reports its completion, and role 0 publishes the generation at the
    commit point (``docs/checkpoints.md``). With ``trace`` every frame, local operation,
    wait, and the failure or the commit is recorded as it happens (``docs/trace.md``); the
    caller closes it.

    Raises:
        RoundAborted: a peer aborted the run; carries the original cause.
        CommitUnknown: this role completed but could not learn whether the run committed.
        BudgetExhausted: a budget ran out; the optional deadline names the step it struck.
        FrameRefused: a frame was refused.
        PeerLost: a connection broke.
        PortMissing: stdin ended before a lower peer's port.
        LauncherLost: the launcher that started this participant died.
        CheckpointWriteFailed: the system refused this role's part of the checkpoint (its
            shards, or role 0's publication before the commit point: the run aborts), or
            role 0's pointer after the commit point (the run committed; ``LATEST`` still names
            the generation before).
    """
    started = time.monotonic()
    report = RoleReport(role=description.role, pid=os.getpid())
    state = Establishment(description, sharing=Sharing.of(description, schedule, os.environ))
    where = state.where
    if trace is not None:
        trace.attach(where)
    budgets = description.budgets
    reports = ReportFiles(description.report or report_path, description.role)
    reports.clear()
    failure: AlphaError | None = None
    limit = math.inf if budgets.deadline is None else budgets.deadline
    try:
        with trio.move_on_after(limit) as deadline:
            async with AsyncExitStack() as stack:
                try:
                    async with trio.open_nursery() as guard:
                        # A launched participant dies with its launcher (alpha.runtime.parent).
                        guard.start_soon(watch_for_launcher_loss)
                        await _session(
                            description, stack, state, report, reports, announce, ports_in,
                            started, schedule, learner, saver,
                        )  # fmt: skip
                        guard.cancel_scope.cancel()
                except BaseException as error:
                    if deadline.cancel_called:
                        failure = where.exhausted("deadline", limit, peer=where.peer)
                    else:
                        failure = first_alpha_error(error)
                    if failure is not None and on_failure is not None:
                        on_failure(failure)
                    if failure is not None and trace is not None:
                        trace.failed(failure)
                    with trio.CancelScope(shield=True):
                        await _fail(state, where, reports, failure or error)
                    raise
    except BaseException as error:
        # Raise the cause itself, not trio's group around it; Ctrl-C stays Ctrl-C.
        interrupted = isinstance(error, KeyboardInterrupt) or (
            isinstance(error, BaseExceptionGroup) and error.subgroup(KeyboardInterrupt) is not None
        )
        if interrupted:
            raise KeyboardInterrupt from None
        if failure is not None:
            raise failure from failure.__cause__  # its own cause, not the group
        raise
    if failure is not None:  # the deadline struck and move_on_after absorbed it
        raise failure
    return report


async def _fail(
    state: Establishment,
    where: Whereabouts,
    reports: ReportFiles,
    error: BaseException,
) -> None:
    """What a failing role does before it raises: unless the run already committed, tell every
    peer it can still reach (those it is connected to first, then any higher peer connecting
    to a listener it still holds: ``Establishment.hear_out``), and discard its staged report
    (a role that cannot learn whether the run committed keeps it staged, never final, for the
    operator)."""
    if where.committed:
        return  # a fault after the commit point cannot undo it; the role reports it and exits
    skip = error.peer if isinstance(error, RoundAborted) else None
    cause = _abort_cause(error, where)
    await _abort(state.channels, cause, skip)
    late = await state.hear_out()
    await _abort({channel.peer: channel for channel in late}, cause, skip)
    for channel in late:
        await channel.aclose()
    if not isinstance(error, CommitUnknown):
        with contextlib.suppress(OSError):  # the staged report is not final either way
            reports.discard()


async def _session(
    description: RoleDescription,
    stack: AsyncExitStack,
    state: Establishment,
    report: RoleReport,
    reports: ReportFiles,
    announce: Callable[[bytes], Awaitable[None]],
    ports_in: trio.abc.ReceiveStream,
    started: float,
    schedule: LocalSchedule,
    learner: LearnerState | None,
    saver: Saver | None,
) -> None:
    channels = await establish(
        description, stack, announce=announce, ports_in=ports_in, state=state
    )
    where = state.where
    report.established_at = time.monotonic()
    report.established_s = report.established_at - started
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
    expect_completion(description, channels)
    async with trio.open_nursery() as watches:
        for channel in channels.values():
            watches.start_soon(channel.watch_for_abort)
        where.phase = RUNNING
        interpreter = Interpreter(
            schedule,
            description.identity,
            description.participants,
            channels,
            learner=learner,
            where=where,
        )
        try:
            await interpreter.run()
        finally:
            report.rounds = interpreter.rounds
        report.digests = interpreter.digests()
        report.arms = list(interpreter.arms)
        if learner is not None:
            report.history = [list(entry) for entry in learner.history]
        for edge in edges:
            channel = channels[edge.peer]
            edge.sent_bytes, edge.received_bytes = channel.sent_bytes, channel.received_bytes
            edge.shared_bytes = channel.shared_bytes
        report.finished_s = time.monotonic() - started
        where.phase = COMPLETING
        if saver is not None:
            where.at("writing its part of the checkpoint")
            owner = await trio.to_thread.run_sync(
                saver.write_owner, interpreter.buffers[PARAMETERS]
            )
            report.checkpoint = {"generation": saver.generation, "owner_manifest_sha256": owner}
        try:
            await complete(
                description, channels, where, report.to_json().encode(), report.rounds, reports,
                saver,
            )  # fmt: skip
        finally:
            report.committed = where.committed
        watches.cancel_scope.cancel()
