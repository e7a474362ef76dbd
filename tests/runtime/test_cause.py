"""The first cause of a failure: one rule for the session, the channels and the participant.

An ABORT from a peer (``RoundAborted``) names the run's cause before the broken connections it
leaves behind; otherwise the first failure, groups opened in order; trio's cancellations are
how the other tasks stopped, never why (``alpha.runtime.cause``).
"""

from __future__ import annotations

import trio

from alpha.errors import PeerLost, RoundAborted, Truncated
from alpha.runtime.cause import as_one_error, failures, first_alpha_error, first_cause
from alpha.wire.abort import AbortCause

ABORT = AbortCause(2, "Corrupted", (2, 3), 1, "bytes were damaged").refusal(role=0, peer=2)
LOST = PeerLost(role=0, peer=1, step="receiving", cause="reset", when="round 1")
REFUSED = Truncated(
    "the stream ended", role=0, peer=1, slot=1, version=0, field="body", expected=10, received=3
)


async def _cancelled() -> trio.Cancelled:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep_forever()
        except trio.Cancelled as cancelled:
            return cancelled
    raise AssertionError("the scope was cancelled")


async def test_an_abort_wins_over_what_comes_before_it() -> None:
    cancelled = await _cancelled()
    group = BaseExceptionGroup("tasks", [LOST, cancelled, BaseExceptionGroup("inner", [ABORT])])
    assert type(ABORT) is RoundAborted
    assert first_cause(group) is ABORT
    assert first_alpha_error(group) is ABORT
    assert as_one_error(group) is ABORT
    assert failures(group) == [LOST, ABORT]


async def test_otherwise_the_first_failure_in_order_and_never_a_cancellation() -> None:
    cancelled = await _cancelled()
    oops = OSError("not one of Alpha's")
    group = BaseExceptionGroup("tasks", [cancelled, oops, BaseExceptionGroup("in", [REFUSED])])
    assert first_cause(group) is oops
    assert first_alpha_error(group) is REFUSED, "only Alpha's errors are a session's cause"
    assert first_cause(REFUSED) is REFUSED and first_alpha_error(oops) is None


async def test_cancellations_alone_are_no_cause_and_stay_the_group() -> None:
    group = BaseExceptionGroup("tasks", [await _cancelled(), await _cancelled()])
    assert first_cause(group) is None and first_alpha_error(group) is None
    assert as_one_error(group) is group, "for the cancel scope that caused it"
    assert failures(group) == []
