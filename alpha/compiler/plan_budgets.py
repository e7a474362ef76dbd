"""The ``[budgets]`` table of a plan: the bound of every wait, in seconds (docs/plans.md,
docs/budgets.md); each value is checked by ``alpha.core.budgets.Budgets`` itself.
"""

from __future__ import annotations

from typing import Final

from alpha.compiler._fields import Table, refuse_unknown, table_at
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.errors import PlanInvalid, RoleDescriptionInvalid

__all__ = ["BUDGET_KEYS", "read_budgets"]

# The keys the table knows, in documentation order; messages list them in this order.
BUDGET_KEYS: Final = tuple(Budgets.__dataclass_fields__)


def read_budgets(root: Table) -> Budgets:
    """The ``[budgets]`` table (every wait's bound); the defaults when it is absent.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "budgets")
    if table is None:
        return DEFAULT_BUDGETS
    if "connect" in table:  # the whole connect wait is derived; say how to set it
        raise PlanInvalid(
            "the connect wait is connect_attempts x connect_interval; set those two instead",
            field="budgets.connect",
        )
    refuse_unknown(table, "budgets", BUDGET_KEYS)
    values: dict[str, object] = {}
    for key, value in table.items():
        if key != "connect_attempts" and type(value) is int:
            value = float(value)  # TOML `accept = 10` means 10 seconds, like 10.0
        try:
            Budgets(**{key: value})  # type: ignore[arg-type]  # Budgets checks the type
        except RoleDescriptionInvalid as error:
            dotted = f"budgets.{key}"
            message = str(error).removeprefix(f"{dotted} ")
            raise PlanInvalid(message, field=dotted) from None
        values[key] = value
    return Budgets(**values)  # type: ignore[arg-type]  # every value checked above
