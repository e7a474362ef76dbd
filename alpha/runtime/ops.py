"""The operations the interpreter runs: the registry in ``alpha.schedule.operations``, re-exported.

The implementations live in ``schedule.operations`` (pure numpy, no trio) so that the pure layers
can read the operation names from the same tables the runtime calls: an operation is declared
by being implemented, once.
"""

from __future__ import annotations

from alpha.schedule.operations import LOCAL_OPS, SELECTORS, Context

__all__ = ["LOCAL_OPS", "SELECTORS", "Context"]
