"""The ``[work]`` table of a plan: the kind of work each round does, and the sum check's
fields (docs/plans.md). The kinds themselves live in ``alpha.compiler.work``.
"""

from __future__ import annotations

from typing import Final

from alpha.compiler._fields import Table, int_at, one_of, refuse_unknown, table_at
from alpha.errors import PlanInvalid
from alpha.schedule.operations import SELECTORS

__all__ = [
    "CHOICES",
    "MAX_WORK_SIZE",
    "WORK_KEYS",
    "WORK_KINDS",
    "read_work",
]

#: The work of a round: the demonstration's checked sum, or a learner's update.
WORK_KINDS: Final = ("sum-check", "learn")

#: Elements per region of the sum check. 2**28 float64 elements are 2 GiB per region per role;
#: past that a plan is a mistake, and the bound keeps it from asking every participant for an
#: absurd buffer.
MAX_WORK_SIZE: Final = 2**28
_DEFAULT_WORK_SIZE: Final = 1024

#: The per-round agreed choice's selector: none, or any selector implemented in
#: ``schedule.operations`` (``const-2`` among them, to show a word out of range refused at run
#: time).
CHOICES: Final = ("none", *SELECTORS)

# The keys the table knows, in documentation order; messages list them in this order.
WORK_KEYS: Final = ("kind", "size", "choice")
_SUM_CHECK_KEYS: Final = ("size", "choice")


def read_work(root: Table) -> tuple[str, int | None, str | None]:
    """The ``[work]`` table: the kind, and the sum check's size and choice (None otherwise).

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "work") or {}
    refuse_unknown(table, "work", WORK_KEYS)
    kind = one_of(table, "work.kind", WORK_KINDS, default="sum-check")
    if kind != "sum-check":
        for key in _SUM_CHECK_KEYS:
            if key in table:
                raise PlanInvalid(
                    f"is a field of work.kind = 'sum-check' only; this plan's work is {kind!r}",
                    field=f"work.{key}",
                )
        return kind, None, None
    size = int_at(table, "work.size", low=1, high=MAX_WORK_SIZE, default=_DEFAULT_WORK_SIZE)
    choice = one_of(table, "work.choice", CHOICES, default="none")
    return kind, size, choice
