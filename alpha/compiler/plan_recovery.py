"""The ``[recovery]`` table of a learn plan: how many times ``alpha run`` starts a failed run
again from its latest generation, and how long it waits first (docs/plans.md,
docs/recovery.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from alpha.compiler._fields import Table, float_at, int_at, one_of, refuse_unknown, table_at
from alpha.errors import PlanInvalid

__all__ = [
    "DEFAULT_BACKOFF",
    "LOST_ROLE",
    "MAX_BACKOFF",
    "MAX_RESTARTS",
    "RECOVERY_KEYS",
    "RecoverySpec",
    "read_recovery",
]

# The keys the table knows, in documentation order; messages list them in this order.
RECOVERY_KEYS: Final = ("restarts", "backoff", "lost_role")
#: What the next attempt does about a role whose failure was a ``lost`` one: start it again
#: (on one machine, on this host), or run without it, on one role fewer (only a plan whose
#: ``learner.contributors`` is set computes the same bits on any number of roles).
LOST_ROLE: Final = ("restart", "drop")
#: More restarts than this is a plan that means "for ever", which a failure that recurs at
#: every attempt would turn into a run that never ends.
MAX_RESTARTS: Final = 100_000
DEFAULT_BACKOFF: Final = 1.0  # seconds before each restart
MAX_BACKOFF: Final = 3600.0


@final
@dataclass(frozen=True, slots=True)
class RecoverySpec:
    """The ``[recovery]`` table (``docs/recovery.md``).

    Attributes:
        restarts: attempts ``alpha run`` starts after the first, at most, each after a
            failure that may be retried; 0..MAX_RESTARTS (0: a failure ends the run).
        backoff: seconds it waits before each restart, 0..MAX_BACKOFF.
        lost_role: ``"restart"`` (the next attempt starts every role again) or ``"drop"``
            (after a ``lost`` failure the next attempt runs on one role fewer, never fewer
            than one; needs ``learner.contributors``).
    """

    restarts: int = 0
    backoff: float = DEFAULT_BACKOFF
    lost_role: str = "restart"


def read_recovery(
    root: Table, work_kind: str, contributors: int | None = None
) -> RecoverySpec | None:
    """The ``[recovery]`` table of a learn plan (whose ``learner.contributors`` is
    ``contributors``), or None when it is absent.

    Raises:
        PlanInvalid: the first field of the table that is unknown or out of range (``field``
            names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "recovery")
    if table is None:
        return None
    refuse_unknown(table, "recovery", RECOVERY_KEYS)
    if work_kind != "learn":
        raise PlanInvalid(
            "only a learner's run is started again from its generations: remove [recovery] "
            'or use work.kind = "learn"',
            field="recovery",
        )
    restarts = int_at(table, "recovery.restarts", low=0, high=MAX_RESTARTS, default=0)
    backoff = float_at(
        table, "recovery.backoff", high=MAX_BACKOFF, default=DEFAULT_BACKOFF, zero=True
    )
    lost_role = one_of(table, "recovery.lost_role", LOST_ROLE, default="restart")
    if lost_role == "drop" and contributors is None:
        raise PlanInvalid(
            "'drop' needs learner.contributors: only then does a run on fewer roles compute "
            "the same bits; set learner.contributors, or lost_role = 'restart'",
            field="recovery.lost_role",
        )
    return RecoverySpec(restarts=restarts, backoff=backoff, lost_role=lost_role)
