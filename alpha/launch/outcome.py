"""The launch's outcome ledger: each role's outcome as it arrives, the failures in the order
they were found, the one to name first, and whether a failure stops the other roles. Pure: no
trio, no os; the launcher (``alpha.launch.launcher``) drives it with what it sees.

Its rules, which ``tests/launch/test_outcome_machine.py`` drives in any order:

1. Every role ends with exactly one outcome (:meth:`OutcomeLedger.settle`); a second is a bug
   in the launcher, refused.
2. A failure is kept once, in the order found (:meth:`OutcomeLedger.fail`); one without a time
   gets the time it was found at.
3. The first failure found stops every other role, as does every later one, when the launch
   fails fast and the run has not passed its commit point; past it a failure stops no role:
   each is publishing its final report, and the run's outcome is already decided.
4. The role named first (:func:`first_to_fail`) is the lowest role found stopped, else the
   earliest failure on the host's monotonic clock (a failure the launcher saw as an exit placed
   :data:`EXIT_NOTICE` earlier); the order in which exits reach the launcher follows teardown,
   not cause, and plays no part.
5. A role the launcher stopped (killed) after another failed is not a failure, unless it had
   logged its own failure first.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from alpha.launch.proc import STOPPED_HOW

if TYPE_CHECKING:
    from alpha.errors import AlphaError

__all__ = [
    "CAUSE_TAIL_BYTES",
    "EXIT_NOTICE",
    "LAUNCH_SLACK",
    "LaunchResult",
    "OutcomeLedger",
    "RoleOutcome",
    "first_to_fail",
    "signal_name",
    "with_log",
]

LAUNCH_SLACK: Final = 5.0
"""Seconds a launcher allows past the participants' own session deadline (and the start
allowance, ``alpha.launch.launcher.announce_bound``) before it stops them itself: time to
report, and to exit after their own budgets ran out."""

CAUSE_TAIL_BYTES: Final = 64 * 1024
"""How much of the end of a failed role's log the launcher reads for its cause: the last two
lines are a clock and a one-line cause (a long one lists a few failures, kilobytes); a
training role's log can be megabytes of progress lines before them."""

EXIT_NOTICE: Final = 1.0
"""Seconds by which a failure the launcher saw itself (an exit without a failure-clock line,
a death by a signal) is placed before the moment it saw it, when failures are ordered. The
kernel closes a dying process's connections before it tells the parent, and its peers may log
their failure (the connection broke) before the launcher's wait returns: by a process wake-up
or two, which a loaded host stretches to hundreds of milliseconds. A second covers that and is
far below every budget that could make an unrelated role fail just before."""


@dataclass(slots=True)
class RoleOutcome:
    """How one role ended, or one failure the launcher found.

    ``cause`` is one line and, for every role that did not end well, ends with ``its log:
    PATH``. ``failed_at`` is the failure's time on the host's monotonic clock (CLOCK_MONOTONIC,
    one clock for every process of a host): the participant's own ``failure-clock`` line when
    it logged one (``logged``), else when the launcher saw the failure.
    """

    role: int
    returncode: int | None  # None: never started, or still running when the launch ended
    cause: str = ""
    killed: bool = False  # stopped by the launcher after another role failed
    started_s: float = 0.0  # seconds from the launch's start to this role's start
    ended_s: float = 0.0  # seconds from the launch's start
    failed_at: float | None = None  # None: not a failure
    logged: bool = False  # failed_at is the participant's own failure-clock line
    exit_seen: bool = False  # failed_at is when the launcher saw it exit (see EXIT_NOTICE)
    stopped: bool = False  # found stopped (SIGSTOP, a debugger) when the run failed
    log: Path | None = None  # where the role's stderr went
    error: AlphaError | None = None  # the launcher's own finding, as its exact class

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def failed(self) -> bool:
        """A failure to name: it did not end well, and not because the launcher stopped it."""
        return self.failed_at is not None


@dataclass(slots=True)
class LaunchResult:
    outcomes: dict[int, RoleOutcome] = field(default_factory=dict)
    first_to_fail: RoleOutcome | None = None
    """The role that failed first (:func:`first_to_fail`), once the launch has ended; while it
    runs, the first failure found."""
    elapsed_s: float = 0.0
    signal: int | None = None
    """The signal (SIGINT, SIGTERM or SIGHUP) that made the launcher stop the run, if one did."""
    notes: list[str] = field(default_factory=list)
    """One line each for what went wrong without failing the run: a warm starter that failed
    before it was ready (every role then started cold), or one that stalled or died once every
    role had ended and been reported."""

    @property
    def ok(self) -> bool:
        return self.first_to_fail is None and all(o.ok for o in self.outcomes.values())


def first_to_fail(failures: Iterable[RoleOutcome]) -> RoleOutcome | None:
    """The failure to name first, of those a launch found. In this order:

    1. A role found stopped (state ``T`` or ``t``: SIGSTOP, SIGTSTP, a debugger) when the run
       failed, the lowest such role: its peers' budgets ran out waiting for it, and each of
       them would otherwise look first.
    2. The earliest on the host's monotonic clock: a participant's own ``failure-clock`` time,
       or the time the launcher saw a failure, less :data:`EXIT_NOTICE` for an exit (a role
       killed by a signal, or one that exited without a clock line): its peers may log that
       its connections broke before the launcher sees it exit.
    3. None: nothing failed.
    """
    found = [failure for failure in failures if failure.failed]
    stopped = [failure for failure in found if failure.stopped]
    if stopped:
        return min(stopped, key=lambda failure: failure.role)
    if not found:
        return None
    return min(found, key=_blame_time)


def _blame_time(failure: RoleOutcome) -> float:
    assert failure.failed_at is not None
    return failure.failed_at - EXIT_NOTICE if failure.exit_seen else failure.failed_at


@dataclass(slots=True)
class OutcomeLedger:
    """What a launch knows of how its roles ended (the rules are at the top of this module).

    ``outcomes`` is shared with the launch's :class:`LaunchResult`; ``killed`` holds the roles
    the launcher sent SIGKILL, ``stopped`` the roles found stopped (state and when), each filled
    by the launcher as it acts.
    """

    fail_fast: bool
    result: LaunchResult = field(default_factory=LaunchResult)
    failures: list[RoleOutcome] = field(default_factory=list)  # in the order found
    killed: set[int] = field(default_factory=set)
    stopped: dict[int, tuple[str, float]] = field(default_factory=dict)

    @property
    def outcomes(self) -> dict[int, RoleOutcome]:
        return self.result.outcomes

    def settle(self, outcome: RoleOutcome) -> None:
        """Record ``outcome`` as its role's one outcome.

        Raises:
            ValueError: the role has an outcome already.
        """
        if outcome.role in self.result.outcomes:
            raise ValueError(f"role {outcome.role} has an outcome already")
        self.result.outcomes[outcome.role] = outcome

    def ended(
        self,
        role: int,
        code: int | None,
        seen: float,
        *,
        log: Path | None,
        cause: Callable[[], tuple[str, float | None]],
        status_lost: bool = False,
    ) -> RoleOutcome:
        """The outcome of ``role``, which ended with ``code`` (None: still running) and was
        seen to at ``seen`` on the monotonic clock; a failure, if it is one (rule 5), but not
        yet kept as one (:meth:`fail`). ``cause`` reads the one-line cause and failure clock
        its log ends with (``alpha.wire.console.cause_of``); it is asked only for a role that
        did not end well. ``status_lost``: a warm child whose exit status was lost with the
        warm starter."""
        outcome = RoleOutcome(role, code, log=log)
        if status_lost:
            # It ended, and the warm starter, lost, never said how: that loss is the failure.
            outcome.returncode = None
            outcome.cause = "it ended, but its exit status was lost with the warm starter"
        elif role in self.stopped and code != 0:
            state, found = self.stopped[role]
            outcome.cause = f"role {role} was {STOPPED_HOW[state]} and stopped answering"
            outcome.failed_at = found
            outcome.stopped = True
        elif code != 0:
            line, clock = cause()
            # A role that logged its own failure failed, whether or not it was then killed.
            if clock is not None:
                outcome.cause = line
                outcome.failed_at = clock
                outcome.logged = True
                if code is not None and code < 0 and role not in self.killed:
                    outcome.cause += f" (then it was killed by {signal_name(-code)})"
            elif role in self.killed:
                outcome.killed = True
                outcome.cause = "stopped by the launcher after another role failed"
            elif code is not None and code < 0:
                outcome.cause = f"role {role} was killed by {signal_name(-code)}"
                outcome.failed_at = seen
                outcome.exit_seen = True
            else:
                outcome.cause = line or f"exited with code {code}"
                outcome.failed_at = seen
                outcome.exit_seen = True
        if outcome.cause:
            outcome.cause = with_log(outcome.cause, log)
        return outcome

    def fail(
        self, outcome: RoleOutcome, now: float, committed: Callable[[], bool] | None = None
    ) -> bool:
        """Keep the failure ``outcome`` (found at ``now``, on the monotonic clock); whether the
        launcher is to stop every other role. ``committed`` says whether the run has passed its
        commit point; it is asked only when the answer depends on it."""
        if outcome.failed_at is None:
            outcome.failed_at = now
        if not any(found is outcome for found in self.failures):
            self.failures.append(outcome)
        if self.result.first_to_fail is None:
            self.result.first_to_fail = outcome
        return self.fail_fast and not (committed is not None and committed())

    def close(self) -> LaunchResult:
        """The launch has ended: name the role that failed first, by the rules, not by the
        order the failures were found in."""
        for outcome in self.result.outcomes.values():
            if outcome.failed and not any(found is outcome for found in self.failures):
                self.failures.append(outcome)
        self.result.first_to_fail = first_to_fail(self.failures)
        return self.result


def with_log(cause: str, log: Path | None) -> str:
    """``cause``, ending with where the role's log is, when it has one."""
    return cause if log is None else f"{cause}; its log: {log}"


def signal_name(number: int) -> str:
    """A signal's name (``SIGKILL``), or ``signal N`` for a number no name has."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
