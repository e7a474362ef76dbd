"""The completion of a run at one role (``docs/failure.md``): after the work, before the exit.

Completion digests travel up the participant tree in DONE frames, role 0 writes the commit
record (the run's one commit point), and COMMIT frames carry the news down; each role
publishes its staged report only when it learns of the commit. At one role:

1. END to each child, then END from the parent: nothing more of the schedule follows;
2. DONE (and end-of-stream) from each child: its subtree completed, with its reports' digest;
3. the report staged, and DONE up with this subtree's digest;
4. role 0: the checkpoint generation published, the commit record written (the commit point),
   the checkpoint pointed at the new generation; every other role: COMMIT from the parent;
5. the report published, COMMIT (and end-of-stream) to each child, the parent's end-of-stream.

A role that fails before it learned of the commit discards its staged report (the session
does, :mod:`alpha.runtime.session`); one that cannot learn whether the run committed keeps it
staged for the operator (:class:`~alpha.errors.CommitUnknown`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from alpha.errors import (
    AlphaError,
    CheckpointWriteFailed,
    CommitUnknown,
    RoundAborted,
    TrailingBytes,
    WrongFrame,
)
from alpha.files import STAGED_SUFFIX, fsync_folder, write_bytes_atomically
from alpha.records.commit import COMMIT_NAME, CommitRecord, subtree_digest
from alpha.runtime.channel import FrameChannel
from alpha.runtime.edge import EdgeEnd
from alpha.runtime.whereabouts import Whereabouts
from alpha.schedule.role import RoleDescription
from alpha.wire.frame import FrameKind
from alpha.wire.receive import ReceiveSlot

if TYPE_CHECKING:  # types only: a role without a learner (a sum check) loads no learner code
    from alpha.learner.saving import Saver

__all__ = ["ReportFiles", "complete", "expect_completion"]


class ReportFiles:
    """Where a role's report goes: staged first, published only through the commit; and, at
    role 0, where the commit record goes."""

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


def _end(channel: FrameChannel) -> EdgeEnd:
    assert channel.edge is not None, "a session's channels carry their edge's end"
    return channel.edge


def expect_completion(description: RoleDescription, channels: dict[int, FrameChannel]) -> None:
    """Register the completion's receive slots with their channels (END and COMMIT from the
    parent, DONE from each child; COMMIT and DONE end their edge), so that each abort watch
    can read them past too, and see an ABORT behind them."""
    if description.lower:
        parent = channels[description.lower[0].peer]
        parent.expect(_end(parent).completion_in(FrameKind.END), last=False)
        parent.expect(_end(parent).completion_in(FrameKind.COMMIT), last=True)
    for edge in description.higher:
        child = channels[edge.peer]
        child.expect(_end(child).completion_in(FrameKind.DONE), last=True)


async def _receive(channel: FrameChannel, slot: ReceiveSlot, step: str, *, last: bool) -> bytes:
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


async def complete(
    description: RoleDescription,
    channels: dict[int, FrameChannel],
    where: Whereabouts,
    report: bytes,
    rounds: int,
    reports: ReportFiles,
    saver: Saver | None = None,
) -> None:
    """The completion at one role, whose ``report`` (its bytes) covers ``rounds`` rounds: END
    down, END from the parent, DONE (and end-of-stream) from each child, the report staged, DONE
    up; then the commit (role 0) or COMMIT from the parent; the report published (and
    ``where.committed`` set); COMMIT down; the parent's end-of-stream.

    Raises:
        RoundAborted: a peer aborted the run before it committed.
        CommitUnknown: this role reported its completion but could not learn whether the run
            committed.
        CheckpointWriteFailed: role 0 could not publish the generation (before the commit
            point: the run aborts) or point at it (after: the run committed).
        FrameRefused, PeerLost, BudgetExhausted: a completion frame was refused, a connection
            broke, or a budget ran out.
    """
    role = description.role
    parent = description.lower[0].peer if description.lower else None
    children = [edge.peer for edge in description.higher]
    unpointed: CheckpointWriteFailed | None = None

    for child in children:
        step = where.at(f"ending its schedule toward role {child}", child)
        end = _end(channels[child]).completion_out(FrameKind.END)
        await channels[child].send(end, b"", step=step)
    if parent is not None:
        step = where.at(f"waiting for the end of role {parent}'s schedule", parent)
        upward = channels[parent]
        await _receive(upward, _end(upward).completion_in(FrameKind.END), step, last=False)
    subtrees: list[bytes] = []
    for child in children:
        step = where.at(f"waiting for the completion of role {child}'s subtree", child)
        done = _end(channels[child]).completion_in(FrameKind.DONE)
        subtrees.append(await _receive(channels[child], done, step, last=True))
        await channels[child].expect_eof(done, step=f"checking that role {child} ended its side")
    reports.stage(report)
    mine = subtree_digest(report, subtrees)
    if parent is None:
        where.at("committing the run")
        record = CommitRecord(
            identity=description.identity.encode().hex(),
            participants=description.participants,
            reports=mine.hex(),
            rounds=rounds,
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
        await upward.send(_end(upward).completion_out(FrameKind.DONE), mine, step=step)
        await upward.send_eof(step=step)
        step = where.at(f"waiting for role {parent} to say whether the run committed", parent)
        slot = _end(upward).completion_in(FrameKind.COMMIT)
        try:
            commit = await _receive(upward, slot, step, last=True)
        except RoundAborted:
            raise
        except AlphaError as error:
            raise CommitUnknown(
                f"role {role} reported its completion but cannot learn whether the run "
                f"committed: {error}; role 0's {COMMIT_NAME} says whether it did. Its report "
                "stays staged, not final"
            ) from error
    where.committed = True
    if where.trace is not None:
        where.trace.committed()
    reports.publish()
    failures: list[AlphaError] = []
    for child in children:
        step = where.at(f"telling role {child} that the run committed", child)
        try:
            news = _end(channels[child]).completion_out(FrameKind.COMMIT)
            await channels[child].send(news, commit, step=step)
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
