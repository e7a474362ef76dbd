"""One participant's session: establish every edge, do its work, complete or abort the run.

The work is the role's compiled schedule. After it comes the completion (``docs/failure.md``):
completion digests travel up the participant tree in DONE frames, role 0 publishes the commit
record (the run's one commit point), and COMMIT frames carry the news down; each role publishes
its staged report only when it learns of the commit. A role that fails sends an ABORT frame
with the cause on every edge it can still write, discards its staged report, and raises it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from alpha.errors import (
    AlphaError,
    BudgetExhausted,
    CheckpointWriteFailed,
    CommitUnknown,
    RoundAborted,
    SlotFault,
    TrailingBytes,
    WrongFrame,
)
from alpha.files import fsync_folder, write_bytes_atomically
from alpha.records.commit import COMMIT_NAME, CommitRecord, subtree_digest
from alpha.runtime.channel import FrameChannel
from alpha.runtime.endpoint import Establishment, establish
from alpha.runtime.interpreter import Interpreter
from alpha.runtime.parent import watch_launcher
from alpha.runtime.whereabouts import COMPLETING, RUNNING, Whereabouts
from alpha.schedule.local import LocalSchedule
from alpha.schedule.role import RoleDescription
from alpha.wire.abort import AbortCause
from alpha.wire.frame import FrameKind, FrameSpec, control_spec
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot

if TYPE_CHECKING:  # types only: a role without a learner (a sum check) loads no learner code
    from alpha.learner.program import LearnerState
    from alpha.learner.saving import Saver

__all__ = [
    "EdgeReport",
    "RoleReport",
    "first_alpha_error",
    "run_role",
]

STAGED_SUFFIX: Final = ".staged"
"""A report waiting for the commit is ``role-NNNNNN.json.staged``; the commit renames it."""


@dataclass
class EdgeReport:
    """What happened on one edge, for the role's report file."""

    peer: int
    listened: bool
    local_port: int
    remote_port: int
    sent_bytes: int = 0
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


class _Reports:
    """Where this role's report goes: staged first, published only through the commit."""

    def __init__(self, path: str | None, role: int) -> None:
        self.final = None if path is None else Path(path)
        self.role = role
        self.staged = None if self.final is None else Path(f"{self.final}{STAGED_SUFFIX}")
        self.commit = None if self.final is None else self.final.parent / COMMIT_NAME

    def clear(self) -> None:
        """Remove what an earlier run left: this role's report, and role 0's commit record.
        Nothing of this run exists yet, and a stale report must never pass for a new one."""
        stale = [self.final, self.staged] + ([self.commit] if self.role == 0 else [])
        for path in stale:
            if path is not None:
                path.unlink(missing_ok=True)

    def stage(self, data: bytes) -> None:
        if self.staged is not None:
            write_bytes_atomically(self.staged, data)

    def write_commit(self, record: CommitRecord) -> None:
        """The commit point: one atomic, durable rename of the commit record into place."""
        if self.commit is not None:
            write_bytes_atomically(self.commit, record.encode())

    def publish(self) -> None:
        if self.staged is not None and self.final is not None:
            os.replace(self.staged, self.final)
            fsync_folder(self.final.parent)

    def discard(self) -> None:
        if self.staged is not None:
            self.staged.unlink(missing_ok=True)


def first_alpha_error(error: BaseException) -> AlphaError | None:
    """The cause among what ``error`` holds, looking inside exception groups (trio's
    nurseries wrap what their tasks raise), or None. An abort from a peer wins over the broken
    connections it leaves behind; otherwise the first :class:`AlphaError` found."""
    found: list[AlphaError] = []

    def collect(inner: BaseException) -> None:
        if isinstance(inner, AlphaError):
            found.append(inner)
        elif isinstance(inner, BaseExceptionGroup):
            for each in inner.exceptions:
                collect(each)

    collect(error)
    aborts = [each for each in found if isinstance(each, RoundAborted)]
    return (aborts or found or [None])[0]


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
    commit point (``docs/checkpoints.md``).

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
    state = Establishment(description)
    where = state.where
    budgets = description.budgets
    reports = _Reports(description.report or report_path, description.role)
    reports.clear()
    failure: AlphaError | None = None
    limit = math.inf if budgets.deadline is None else budgets.deadline
    try:
        with trio.move_on_after(limit) as deadline:
            async with AsyncExitStack() as stack:
                try:
                    async with trio.open_nursery() as guard:
                        # A launched participant dies with its launcher (alpha.runtime.parent).
                        guard.start_soon(watch_launcher)
                        await _session(
                            description, stack, state, report, reports, announce, ports_in,
                            started, schedule, learner, saver,
                        )  # fmt: skip
                        guard.cancel_scope.cancel()
                except BaseException as error:
                    if deadline.cancel_called:
                        failure = BudgetExhausted(
                            role=description.role,
                            peer=where.peer,
                            step=where.step,
                            budget="deadline",
                            seconds=limit,
                            when=where.when(),
                        )
                    else:
                        failure = first_alpha_error(error)
                    if failure is not None and on_failure is not None:
                        on_failure(failure)
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
    reports: _Reports,
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
    reports: _Reports,
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
    _expect_completion(description, channels)
    async with trio.open_nursery() as watches:
        for channel in channels.values():
            watches.start_soon(channel.watch)
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
        report.finished_s = time.monotonic() - started
        where.phase = COMPLETING
        if saver is not None:
            where.at("writing its part of the checkpoint")
            owner = await trio.to_thread.run_sync(saver.write_owner, interpreter.buffers["w"])
            report.checkpoint = {"generation": saver.generation, "owner_manifest_sha256": owner}
        await _complete(description, channels, where, report, reports, saver)
        watches.cancel_scope.cancel()


def _expect_completion(description: RoleDescription, channels: dict[int, FrameChannel]) -> None:
    """Register the completion's receive slots with their channels (END and COMMIT from the
    parent, DONE from each child; COMMIT and DONE end their edge), so that each watch can read
    them past too, and see an ABORT behind them (``docs/failure.md``)."""
    role = description.role

    def expect(kind: FrameKind, peer: int, *, last: bool) -> None:
        spec = control_spec(description.identity, kind, peer, role)
        channels[peer].expect(ReceiveSlot(spec), last=last)

    if description.lower:
        parent = description.lower[0].peer
        expect(FrameKind.END, parent, last=False)
        expect(FrameKind.COMMIT, parent, last=True)
    for edge in description.higher:
        expect(FrameKind.DONE, edge.peer, last=True)


async def _receive_completion(
    channel: FrameChannel, slot: ReceiveSlot, step: str, *, last: bool
) -> bytes:
    """Receive an END, DONE or COMMIT frame. Bytes of another kind of frame there (a frame
    sent twice, or anything after the schedule's last frame) are bytes where the schedule has
    none: ``TrailingBytes``."""
    try:
        return bytes(await channel.receive(slot, step=step, last=last))
    except WrongFrame as error:
        raise error.recast(
            TrailingBytes,
            f"bytes arrived after the last frame of the schedule, where the {slot.spec.kind.name} "
            f"frame was due ({error.detail})",
        ) from None


async def _complete(
    description: RoleDescription,
    channels: dict[int, FrameChannel],
    where: Whereabouts,
    report: RoleReport,
    reports: _Reports,
    saver: Saver | None = None,
) -> None:
    """The completion of ``docs/failure.md``, at one role: END down, END from the parent, DONE
    (and end-of-stream) from each child, the report staged, DONE up; then the commit (role 0)
    or COMMIT from the parent; the report published; COMMIT down; the parent's end-of-stream."""
    role = description.role
    parent = description.lower[0].peer if description.lower else None
    children = [edge.peer for edge in description.higher]
    unpointed: CheckpointWriteFailed | None = None

    def spec(kind: FrameKind, sender: int, receiver: int) -> FrameSpec:
        return control_spec(description.identity, kind, sender, receiver)

    for child in children:
        step = where.at(f"ending its schedule toward role {child}", child)
        await channels[child].send(SendSlot(spec(FrameKind.END, role, child)), b"", step=step)
    if parent is not None:
        step = where.at(f"waiting for the end of role {parent}'s schedule", parent)
        end = channels[parent].slot_for(spec(FrameKind.END, parent, role))
        await _receive_completion(channels[parent], end, step, last=False)
    subtrees: list[bytes] = []
    for child in children:
        step = where.at(f"waiting for the completion of role {child}'s subtree", child)
        done = channels[child].slot_for(spec(FrameKind.DONE, child, role))
        subtrees.append(await _receive_completion(channels[child], done, step, last=True))
        await channels[child].expect_eof(done, step=f"checking that role {child} ended its side")
    data = report.to_json().encode()
    reports.stage(data)
    mine = subtree_digest(data, subtrees)
    if parent is None:
        where.at("committing the run")
        record = CommitRecord(
            identity=description.identity.encode().hex(),
            participants=description.participants,
            reports=mine.hex(),
            rounds=report.rounds,
        )
        if saver is not None:
            where.at("publishing the checkpoint generation")
            await trio.to_thread.run_sync(saver.publish)
        reports.write_commit(record)  # the commit point
        commit = record.digest()
        if saver is not None:
            where.at("pointing the checkpoint at the new generation")

            def log(text: str) -> None:
                print(f"role {role}: {text}", file=sys.stderr, flush=True)

            try:
                saver.point(log)
            except CheckpointWriteFailed as error:
                # After the commit point nothing can be undone: the children learn of the
                # commit, and this role fails with the cause once they have (its generation
                # is published; the pointer still names the one before).
                unpointed = error
    else:
        upward = channels[parent]
        step = where.at(f"reporting its subtree's completion to role {parent}", parent)
        await upward.send(SendSlot(spec(FrameKind.DONE, role, parent)), mine, step=step)
        await upward.send_eof(step=step)
        step = where.at(f"waiting for role {parent} to say whether the run committed", parent)
        slot = upward.slot_for(spec(FrameKind.COMMIT, parent, role))
        try:
            commit = await _receive_completion(upward, slot, step, last=True)
        except RoundAborted:
            raise
        except AlphaError as error:
            raise CommitUnknown(
                f"role {role} reported its completion but cannot learn whether the run "
                f"committed: {error}; role 0's {COMMIT_NAME} says whether it did. Its report "
                "stays staged, not final"
            ) from error
    where.committed = report.committed = True
    reports.publish()
    failures: list[AlphaError] = []
    for child in children:
        step = where.at(f"telling role {child} that the run committed", child)
        try:
            await channels[child].send(
                SendSlot(spec(FrameKind.COMMIT, role, child)), commit, step=step
            )
            await channels[child].send_eof(step=step)
        except AlphaError as error:
            failures.append(error)
    if failures:
        raise failures[0]
    if unpointed is not None:
        raise unpointed
    if parent is not None:
        step = where.at(f"checking that role {parent} ended its side", parent)
        await channels[parent].expect_eof(slot, step=step)
