"""The sum check, one kind of work (``work.kind = "sum-check"``): its global protocol, its part
of the run identity, and the plan of the edge exchange built on it (pure).

Every round, every role fills region ``x`` with ``(role + 1) * (round + 1)``, the tree combines
it in contract order, and every owner checks the total against the closed form. With a choice,
role 0 (the authority) evaluates the plan's selector each round and sends the word down the
tree; arm 1 runs the same round on negated values. The registry of every kind of work is
``alpha.compiler.work``.
"""

from __future__ import annotations

from typing import Final

from alpha.compiler.forms import (
    Choice,
    Combine,
    Dissemination,
    Everyone,
    Form,
    Local,
    Operation,
    Protocol,
    Region,
    Repeat,
    Roles,
    Seq,
    Targets,
)
from alpha.compiler.plan import Plan, parse_plan
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.core.digests import learner_digest
from alpha.core.targets import HOSTS
from alpha.errors import PlanInvalid
from alpha.learner.data import Dataset
from alpha.schedule.operations import SELECTORS, SUM_CHECK_OPS

__all__ = [
    "SUM_CHECK_OPERATIONS",
    "SUM_CHECK_PROGRAM",
    "exchange_plan",
    "sum_check_identity",
    "sum_check_protocol",
]

SUM_CHECK_PROGRAM: Final = "alpha.sum-check/1"
"""The learner digest's program name for the sum check: a change of its meaning changes this."""

SUM_CHECK_OPERATIONS: Final = {
    **{name: Operation(name, "local", HOSTS) for name in SUM_CHECK_OPS},
    **{name: Operation(name, "selector", HOSTS) for name in SELECTORS},
}
"""Every local operation and selector the sum check may name, with the targets that realize
it: the names are those implemented in ``alpha.schedule.operations``, every one realized on
every host. (Not the contract's combine operations, ``alpha.core.identity.OPERATIONS``.)"""

# Whole numbers add exactly in a float up to its significand's width.
_EXACT: Final = {"float32": 2**24, "float64": 2**53}


def sum_check_identity(plan: Plan, digits: Dataset | None) -> bytes:
    """The learner part of a sum check's run identity: its program, size, choice and rounds
    (``digits`` is not read: the sum check has no data)."""
    return learner_digest(
        program=SUM_CHECK_PROGRAM,
        config={"size": plan.work_size, "choice": plan.choice, "rounds": plan.rounds},
        initial_state=(),
        rate=0.0,
        samples=(),
    )


def _round(plan: Plan, sign: str) -> Form:
    owners = Everyone() if plan.delivery == "all" else Roles((0,))
    return Seq(
        (
            Local(Everyone(), f"fill{sign}", "x"),
            Combine("x", "all" if plan.delivery == "all" else "one"),
            Local(owners, f"check{sign}_sum", "x"),
        )
    )


def sum_check_protocol(plan: Plan) -> Protocol:
    """The sum check's protocol.

    Raises:
        PlanInvalid: the plan's work is not the sum check, or its sums would not be exact in
            its dtype (``work.size`` is fine; ``run.rounds`` or the role count is too large).
    """
    if plan.work_kind != "sum-check" or plan.work_size is None:
        raise PlanInvalid(
            f"the sum check's protocol was asked for a plan whose work is {plan.work_kind!r}",
            field="work.kind",
        )
    n = plan.participants
    largest = plan.rounds * n * (n + 1) // 2
    if largest >= _EXACT[plan.dtype]:
        raise PlanInvalid(
            f"the sum check's totals reach {largest}, past what {plan.dtype} holds exactly "
            f"({_EXACT[plan.dtype]}); use fewer rounds or float64",
            field="run.rounds",
        )
    if plan.choice in (None, "none"):
        round_form = _round(plan, "")
    else:
        round_form = Choice(
            authority=0,
            selector=plan.choice,
            dissemination=Dissemination.tree(),
            arm0=_round(plan, ""),
            arm1=_round(plan, "_neg"),
        )
    return Protocol(
        participants=n,
        tree=plan.tree,
        regions={"x": Region("x", plan.dtype, plan.work_size)},
        operations=SUM_CHECK_OPERATIONS,
        body=Repeat(plan.rounds, plan.rounds, round_form),
        targets=Targets(plan.default_target, plan.target_roles),
    )


def exchange_plan(
    n: int,
    fanout: int,
    *,
    payload: int = 64,
    budgets: Budgets = DEFAULT_BUDGETS,
    rounds: int = 1,
    name: str | None = None,
) -> Plan:
    """The plan that establishes every edge of the tree of ``n`` roles and fan-out ``fanout``
    and moves a checked payload of about ``payload`` bytes each way on each: a sum check over
    float64 regions (every edge carries a contribution up and the combined total down, and
    every role checks the total), written as a plan like any other (``alpha exchange``).

    Raises:
        PlanInvalid: the values make no plan (the message names the field).
    """
    size = max(1, -(-payload // 8))  # float64 elements carrying at least ``payload`` bytes
    limits = "\n".join(
        f"{key} = {value!r}" for key, value in budgets.to_dict().items() if value is not None
    )
    return parse_plan(
        f"""
[run]
name = "{name or f"exchange-{n}-{fanout}"}"
rounds = {rounds}
[membership]
group = "(group (stride 0 1 {n}))"
[topology]
shape = "tree"
fanout = {fanout}
[contract]
dtype = "float64"
[budgets]
{limits}
[work]
kind = "sum-check"
size = {size}
""",
        source="alpha exchange",
    )
