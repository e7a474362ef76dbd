"""The operations the interpreter runs: the registry in ``alpha.operations``, re-exported.

The implementations live in ``alpha.operations`` (pure numpy, no trio) so that the pure layers
can read the operation names from the same tables the runtime calls: an operation is declared
by being implemented, once.
"""

from __future__ import annotations

from alpha.operations import LOCAL_OPS, SELECTORS, Context

__all__ = ["LOCAL_OPS", "SELECTORS", "Context"]
