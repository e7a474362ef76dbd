"""The launch's outcome ledger as a state machine, driven against a small model.

Outcomes arrive in any order, as a launch's do: a role ends well, fails with its own
failure-clock line (logged a little before the launcher sees it), dies of a signal the launcher
saw, exits non-zero without a clock line, is found stopped, is killed by the launcher after
another failed (with or without a failure of its own logged first), loses its exit status with
the warm starter, is diagnosed by the launcher (silent past its bound), or its end is only
recorded at teardown; the launcher finds
failures of the run as a whole; the run passes its commit point. The model holds only what
``alpha/launch/outcome.py`` writes at its top: one outcome per role, failures kept once in the
order found, a failure stops the others only when failing fast before the commit point, and
the role named first is the lowest stopped one, else the earliest on the monotonic clock, an
exit the launcher saw placed ``EXIT_NOTICE`` earlier, whatever the order of arrival.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from alpha.launch.outcome import EXIT_NOTICE, OutcomeLedger, RoleOutcome, first_to_fail

ROLES = 6

# How a role fails, as the launcher records it (alpha.launch.launcher._Launch.record).
HOWS = ("logged", "logged_then_killed", "signal", "exit", "stopped", "status_lost", "diagnosed")

LOG = Path("logs/role.log")

# Seconds by which a participant's own clock line precedes the moment the launcher reads it:
# within a process wake-up, or up to a few seconds on a loaded host.
EARLIER = st.floats(0.0, 3.0, allow_nan=False)
STEPS = st.floats(0.0, 2.0, allow_nan=False)


@dataclass
class Model:
    fail_fast: bool
    committed: bool = False
    now: float = 1000.0


def _blame(outcome: RoleOutcome) -> float:
    assert outcome.failed_at is not None
    return outcome.failed_at - (EXIT_NOTICE if outcome.exit_seen else 0.0)


def expected_first(failures: list[RoleOutcome]) -> RoleOutcome | None:
    """The rule, written again from the module's text: the lowest stopped role, else the
    earliest blame time, the first found among equals."""
    stopped = [each for each in failures if each.stopped]
    if stopped:
        return sorted(stopped, key=lambda each: each.role)[0]
    if not failures:
        return None
    order = {id(each): index for index, each in enumerate(failures)}
    return sorted(failures, key=lambda each: (_blame(each), order[id(each)]))[0]


class OutcomeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(fail_fast=True)
        self.ledger = OutcomeLedger(fail_fast=True)
        self.settled: dict[int, RoleOutcome] = {}
        self.found: list[RoleOutcome] = []  # failures, in the order given to the ledger
        self.closed = False

    @initialize(fail_fast=st.booleans())
    def start(self, fail_fast: bool) -> None:
        self.model = Model(fail_fast=fail_fast)
        self.ledger = OutcomeLedger(fail_fast=fail_fast)

    def _open_roles(self) -> list[int]:
        return [role for role in range(ROLES) if role not in self.settled]

    def _fail(self, outcome: RoleOutcome) -> None:
        asked: list[bool] = []

        def committed() -> bool:
            asked.append(True)
            return self.model.committed

        was_timed = outcome.failed_at is not None
        stop = self.ledger.fail(outcome, self.model.now, committed)
        assert stop == (self.model.fail_fast and not self.model.committed)
        # The commit point is a file the launcher looks for: asked only when it matters.
        assert asked == ([True] if self.model.fail_fast else [])
        if not was_timed:
            assert outcome.failed_at == self.model.now
        if self.model.committed:
            event("a failure past the commit point")
        if not any(each is outcome for each in self.found):
            self.found.append(outcome)

    @rule(step=STEPS)
    def time_passes(self, step: float) -> None:
        self.model.now += step

    @rule()
    def commit_point_passes(self) -> None:
        self.model.committed = True

    def _ended(
        self, role: int, code: int | None, log: tuple[str, float] | None, **kwargs: bool
    ) -> RoleOutcome:
        """The launcher's watch(): the role's outcome from how it ended (its log's last line
        and failure clock, when it has one), kept as its one outcome, then failed if it is a
        failure."""
        read: list[bool] = []

        def cause() -> tuple[str, float | None]:
            read.append(True)
            return ("", None) if log is None else log

        outcome = self.ledger.ended(role, code, self.model.now, log=LOG, cause=cause, **kwargs)
        assert outcome.role == role and outcome.log == LOG
        if code == 0 and not kwargs:
            assert not read, "a role that ended well has no cause to read"
            assert outcome.ok and outcome.cause == "" and not outcome.failed
        if outcome.cause:
            assert outcome.cause.endswith(f"; its log: {LOG}")
        self.ledger.settle(outcome)
        self.settled[role] = outcome
        if outcome.failed:
            self._fail(outcome)
        return outcome

    @precondition(lambda self: not self.closed and bool(self._open_roles()))
    @rule(data=st.data())
    def role_ends_well(self, data: st.DataObject) -> None:
        self._ended(data.draw(st.sampled_from(self._open_roles())), 0, None)

    @precondition(lambda self: not self.closed and bool(self._open_roles()))
    @rule(data=st.data(), logged=st.booleans(), earlier=EARLIER)
    def role_killed_by_the_launcher(
        self, data: st.DataObject, logged: bool, earlier: float
    ) -> None:
        role = data.draw(st.sampled_from(self._open_roles()))
        self.ledger.killed.add(role)  # the launcher sent it SIGKILL after another failed
        line = (f"role {role}: failed: PeerLost: gone", self.model.now - earlier)
        outcome = self._ended(role, -9, line if logged else None)
        # Rule 5: not a failure, unless it had logged its own failure first.
        assert outcome.failed == logged and outcome.killed == (not logged)
        assert "then it was killed" not in outcome.cause
        event(f"a killed role {'had' if logged else 'had not'} logged a failure")

    @precondition(lambda self: not self.closed and bool(self._open_roles()))
    @rule(data=st.data(), how=st.sampled_from(HOWS), earlier=EARLIER)
    def role_fails(self, data: st.DataObject, how: str, earlier: float) -> None:
        role = data.draw(st.sampled_from(self._open_roles()))
        now, at = self.model.now, self.model.now - earlier
        line = f"role {role}: failed: BudgetExhausted: waited"
        if how == "logged":
            outcome = self._ended(role, 1, (line, at))
            assert (outcome.failed_at, outcome.logged) == (at, True)
            assert outcome.cause.startswith(line)
        elif how == "logged_then_killed":  # by a signal the launcher did not send
            outcome = self._ended(role, -9, (line, at))
            assert outcome.failed_at == at and "(then it was killed by SIGKILL)" in outcome.cause
        elif how == "signal":
            outcome = self._ended(role, -9, None)
            assert (outcome.failed_at, outcome.exit_seen) == (now, True)
            assert outcome.cause.startswith(f"role {role} was killed by SIGKILL")
        elif how == "exit":
            outcome = self._ended(role, 2, None)
            assert (outcome.failed_at, outcome.exit_seen) == (now, True)
            assert outcome.cause.startswith("exited with code 2")
        elif how == "stopped":
            self.ledger.stopped[role] = ("T", at)  # found stopped when a failure was found
            outcome = self._ended(role, -9, None)
            assert (outcome.failed_at, outcome.stopped) == (at, True)
        elif how == "status_lost":
            # Its exit status was lost with the warm starter: not ok, and the launcher fails
            # the run for the starter's loss itself (launcher_finds_a_failure).
            outcome = self._ended(role, 0, None, status_lost=True)
            assert outcome.returncode is None and not outcome.ok and not outcome.failed
        else:  # "diagnosed": the launcher found it failing (silent), failed it, then it ended
            outcome = RoleOutcome(role, None, f"role {role} announced 0 of 2 port bytes")
            self._fail(outcome)
            outcome.returncode = -9
            self.ledger.settle(outcome)
            self.settled[role] = outcome
        event(f"a role fails: {how}")

    @precondition(lambda self: not self.closed)
    @rule()
    def launcher_finds_a_failure(self) -> None:
        # The run as a whole (a deadline, a signal, a lost warm starter): no role's outcome.
        self._fail(RoleOutcome(-1, None, "the launcher received SIGTERM and stopped the run"))

    @precondition(lambda self: not self.closed and bool(self.found))
    @rule(data=st.data())
    def a_failure_found_again(self, data: st.DataObject) -> None:
        # The launcher may see one failure twice (its watch, then the end of the launch).
        self._fail(data.draw(st.sampled_from(self.found)))

    @precondition(lambda self: not self.closed and bool(self.settled))
    @rule(data=st.data())
    def a_second_outcome_is_refused(self, data: st.DataObject) -> None:
        role = data.draw(st.sampled_from(sorted(self.settled)))
        with pytest.raises(ValueError, match=f"role {role} has an outcome already"):
            self.ledger.settle(RoleOutcome(role, 0))
        assert self.ledger.outcomes[role] is self.settled[role]

    @precondition(lambda self: not self.closed)
    @rule(earlier=EARLIER)
    def the_launch_ends(self, earlier: float) -> None:
        # Teardown: each role whose watch was cancelled is recorded now, a role that had logged
        # its failure as a failure never given to fail().
        for role in self._open_roles():
            outcome = RoleOutcome(role, 1, f"role {role} failed", logged=True)
            outcome.failed_at = self.model.now - earlier
            self.ledger.settle(outcome)
            self.settled[role] = outcome
            self.found.append(outcome)
        result = self.ledger.close()
        self.closed = True
        assert sorted(result.outcomes) == list(range(ROLES)), "every role ends with one outcome"
        assert result.first_to_fail is expected_first(self.found)
        assert result.first_to_fail is first_to_fail(self.found)
        assert result.ok == (not self.found and all(each.ok for each in self.settled.values()))

    @invariant()
    def outcomes_are_the_ones_given(self) -> None:
        assert self.ledger.outcomes == self.settled
        assert all(self.ledger.outcomes[role] is outcome for role, outcome in self.settled.items())

    @invariant()
    def failures_are_kept_once_in_the_order_found(self) -> None:
        assert len(self.ledger.failures) == len(self.found)
        assert all(a is b for a, b in zip(self.ledger.failures, self.found, strict=True))

    @invariant()
    def while_it_runs_the_first_found_is_named(self) -> None:
        if not self.closed:
            named = self.ledger.result.first_to_fail
            assert named is (self.found[0] if self.found else None)


OutcomeMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40)
test_outcome_ledger = OutcomeMachine.TestCase


def test_a_stopped_role_is_named_before_an_earlier_failure() -> None:
    early = RoleOutcome(3, 1, failed_at=1.0, logged=True)
    stopped = RoleOutcome(5, -9, failed_at=9.0, stopped=True)
    also = RoleOutcome(4, -9, failed_at=10.0, stopped=True)
    assert first_to_fail([early, stopped, also]) is also


def test_an_exit_the_launcher_saw_is_placed_before_the_moment_it_saw_it() -> None:
    logged = RoleOutcome(1, 1, failed_at=10.0, logged=True)
    seen = RoleOutcome(2, -9, failed_at=10.0 + EXIT_NOTICE / 2, exit_seen=True)
    assert first_to_fail([logged, seen]) is seen
    later = RoleOutcome(2, -9, failed_at=10.0 + 2 * EXIT_NOTICE, exit_seen=True)
    assert first_to_fail([logged, later]) is logged
