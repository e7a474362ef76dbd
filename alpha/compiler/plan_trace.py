"""The ``[trace]`` table: how much of a traced run each role's trace keeps (docs/plans.md,
docs/trace.md). Tracing itself is turned on at launch (``alpha run|launch --trace``); the table
only bounds it, and is no part of the run identity: a traced run is the untraced run's bits.
"""

from __future__ import annotations

from typing import Final

from alpha.compiler._fields import Table, int_at, one_of, refuse_unknown, table_at
from alpha.records.trace import DEFAULT_TRACE_LIMIT, MAX_TRACE_LIMIT, TRACE_MODES, TraceBounds

__all__ = ["TRACE_KEYS", "read_trace"]

# The keys the table knows, in documentation order; messages list them in this order.
TRACE_KEYS: Final = ("limit", "mode")


def read_trace(root: Table) -> TraceBounds | None:
    """The ``[trace]`` table, or None when it is absent (a traced run then keeps the first
    ``DEFAULT_TRACE_LIMIT`` records of each role).

    Raises:
        PlanInvalid: the first field of the table that is unknown or out of range (``field``
            names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "trace")
    if table is None:
        return None
    refuse_unknown(table, "trace", TRACE_KEYS)
    limit = int_at(table, "trace.limit", low=1, high=MAX_TRACE_LIMIT, default=DEFAULT_TRACE_LIMIT)
    mode = one_of(table, "trace.mode", TRACE_MODES, default="first")
    return TraceBounds(limit, mode)
