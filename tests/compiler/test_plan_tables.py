"""The plan's schema, one reader per table: each table's module owns its keys and reads it,
and the top-level read only calls them in documentation order."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from alpha.compiler import (
    plan_budgets,
    plan_checkpoint,
    plan_contract,
    plan_learner,
    plan_membership,
    plan_placement,
    plan_recovery,
    plan_run,
    plan_trace,
    plan_work,
)
from alpha.compiler.plan import parse_plan
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid
from tests.support import raises_exactly

TREE = ParticipantTree(4, 2)

# table: (its keys, its reader called on a plan root)
READERS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, object]], object]]] = {
    "run": (plan_run.RUN_KEYS, plan_run.read_run),
    "membership": (
        plan_membership.MEMBERSHIP_KEYS,
        lambda r: plan_membership.read_membership(r, 0),
    ),
    "topology": (plan_membership.TOPOLOGY_KEYS, lambda r: plan_membership.read_topology(r, 4)),
    "contract": (plan_contract.CONTRACT_KEYS, plan_contract.read_contract),
    "budgets": (plan_budgets.BUDGET_KEYS, plan_budgets.read_budgets),
    "addresses": (plan_placement.ADDRESSES_KEYS, lambda r: plan_placement.read_addresses(r, TREE)),
    "targets": (plan_placement.TARGETS_KEYS, lambda r: plan_placement.read_targets(r, 4)),
    "work": (plan_work.WORK_KEYS, plan_work.read_work),
    "learner": (
        plan_learner.LEARNER_KEYS,
        lambda r: plan_learner.read_learner(r, "learn", "float32"),
    ),
    "gpu": (plan_placement.GPU_KEYS, lambda r: plan_placement.read_gpu(r, 4)),
    "checkpoint": (
        plan_checkpoint.CHECKPOINT_KEYS,
        lambda r: plan_checkpoint.read_checkpoint(r, "learn", 10),
    ),
    "recovery": (plan_recovery.RECOVERY_KEYS, lambda r: plan_recovery.read_recovery(r, "learn")),
    "trace": (plan_trace.TRACE_KEYS, plan_trace.read_trace),
}


@pytest.mark.parametrize("table", READERS)
def test_each_tables_reader_refuses_a_key_its_module_does_not_know(table: str) -> None:
    keys, read = READERS[table]
    assert "misspelt" not in keys
    error = raises_exactly(PlanInvalid, read, {table: {"misspelt": 1}})
    assert error.field == f"{table}.misspelt"
    assert ", ".join(keys) in str(error)


@pytest.mark.parametrize("table", READERS)
def test_the_top_level_read_refuses_it_the_same_way(table: str) -> None:
    root = (
        "[run]\nname = 't'\nrounds = 10\n[membership]\ngroup = '(group (stride 0 1 4))'\n"
        "[topology]\nfanout = 2\n[work]\nkind = 'learn'\n[learner]\nrate = 0.1\n"
    )
    if table in ("run", "membership", "topology", "work", "learner"):
        lines = root.replace(f"[{table}]\n", f"[{table}]\nmisspelt = 1\n")
    else:
        lines = root + f"[{table}]\nmisspelt = 1\n"
    assert raises_exactly(PlanInvalid, parse_plan, lines).field == f"{table}.misspelt"
