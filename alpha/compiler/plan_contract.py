"""The ``[contract]`` table of a plan: the numerical contract's dtype, delivery and operation,
and how frames are sealed: integrity and payload digest (docs/plans.md, docs/security.md).
"""

from __future__ import annotations

from typing import Final

from alpha.compiler._fields import Table, one_of, refuse_unknown, table_at
from alpha.core.digests import DELIVERIES, DTYPES, OPERATIONS
from alpha.core.sealing import INTEGRITIES, KEYED_INTEGRITY, PAYLOAD_DIGESTS

__all__ = ["CONTRACT_KEYS", "read_contract"]

# The keys the table knows, in documentation order; messages list them in this order.
CONTRACT_KEYS: Final = ("dtype", "delivery", "operation", "integrity", "payload_digest")


def read_contract(root: Table) -> tuple[str, str, str, str, str]:
    """The ``[contract]`` table: dtype, delivery, operation, integrity and payload digest.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "contract") or {}
    refuse_unknown(table, "contract", CONTRACT_KEYS)
    return (
        one_of(table, "contract.dtype", DTYPES, default="float32"),
        one_of(table, "contract.delivery", DELIVERIES, default="all"),
        one_of(table, "contract.operation", OPERATIONS, default="sum"),
        one_of(table, "contract.integrity", INTEGRITIES, default=KEYED_INTEGRITY),
        one_of(table, "contract.payload_digest", PAYLOAD_DIGESTS, default="sha256"),
    )
