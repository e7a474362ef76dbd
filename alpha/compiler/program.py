"""From a plan to its global protocol and run identity (pure).

The sum check, the work of a ``sum-check`` plan: every round, every role fills region ``x``
with ``(role + 1) * (round + 1)``, the tree combines it in contract order, and every owner
checks the total against the closed form. With a choice, role 0 (the authority) evaluates the
plan's selector each round and sends the word down the tree; arm 1 runs the same round on
negated values. The learner's protocol and its part of the identity (``work.kind = "learn"``)
are the learner's own (``alpha.compiler.learner``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, final

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
from alpha.compiler.learner import learner_digest_of, learner_protocol
from alpha.compiler.plan import TARGETS, Plan, parse_plan
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.core.digests import contract_digest, learner_digest, membership_digest
from alpha.core.identity import RunIdentity
from alpha.errors import PlanInvalid
from alpha.learner.data import Digits, load_digits
from alpha.schedule.operations import SELECTORS, SUM_CHECK_OPS

__all__ = [
    "SUM_CHECK_OPERATIONS",
    "SUM_CHECK_PROGRAM",
    "WORKS",
    "Work",
    "exchange_plan",
    "protocol_for",
    "run_identity",
    "work_of",
]

SUM_CHECK_PROGRAM: Final = "alpha.sum-check/1"
"""The learner digest's program name for the sum check: a change of its meaning changes this."""

_HOSTS: Final = frozenset(TARGETS)

SUM_CHECK_OPERATIONS: Final = {
    **{name: Operation(name, "local", _HOSTS) for name in SUM_CHECK_OPS},
    **{name: Operation(name, "selector", _HOSTS) for name in SELECTORS},
}
"""Every operation the sum check may name, with the targets that realize it: the names are
those implemented in ``alpha.schedule.operations``, every one realized on every host."""

# Whole numbers add exactly in a float up to its significand's width.
_EXACT: Final = {"float32": 2**24, "float64": 2**53}


def plan_contract(plan: Plan) -> bytes:
    """The numerical contract's digest of ``plan``: dtype, operation, topology and order."""
    return contract_digest(
        dtype=plan.dtype,
        operation=plan.operation,
        topology=plan.shape,
        participants=plan.participants,
        fanout=plan.tree.fanout,
        delivery=plan.delivery,
    )


def run_identity(plan: Plan, digits: Digits | None = None) -> RunIdentity:
    """The identity every frame of ``plan``'s run carries: its work's learner part (a
    learner's includes its data: ``digits``, or the shipped data set read here), the contract
    and the membership.

    Raises:
        PlanInvalid: the plan's work is of no known kind.
    """
    return RunIdentity(
        learner=work_of(plan).identity(plan, digits),
        contract=plan_contract(plan),
        membership=membership_digest(plan.group),
    )


def _sum_check_identity(plan: Plan, digits: Digits | None) -> bytes:
    return learner_digest(
        program=SUM_CHECK_PROGRAM,
        config={"size": plan.work_size, "choice": plan.choice, "rounds": plan.rounds},
        initial_state=(),
        rate=0.0,
        samples=(),
    )


def _learn_identity(plan: Plan, digits: Digits | None) -> bytes:
    return learner_digest_of(plan, digits or load_digits())


def _round(plan: Plan, sign: str) -> Form:
    owners = Everyone() if plan.delivery == "all" else Roles((0,))
    return Seq(
        (
            Local(Everyone(), f"fill{sign}", "x"),
            Combine("x", "all" if plan.delivery == "all" else "one"),
            Local(owners, f"check{sign}_sum", "x"),
        )
    )


def protocol_for(plan: Plan) -> Protocol:
    """The global protocol of a plan: its work's (``work.kind``).

    Raises:
        PlanInvalid: the plan's work is of no known kind, or its protocol refuses the plan
            (see :func:`_sum_check_protocol` and ``alpha.compiler.learner.learner_protocol``).
    """
    return work_of(plan).protocol(plan)


def _sum_check_protocol(plan: Plan) -> Protocol:
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


@final
@dataclass(frozen=True, slots=True)
class Work:
    """One kind of work a plan can ask for (``work.kind``), in one place: its global protocol
    (whose operations name only operations implemented in ``alpha.schedule.operations``, with where
    each is realized) and the learner part of its run identity."""

    kind: str
    protocol: Callable[[Plan], Protocol]
    identity: Callable[[Plan, Digits | None], bytes]


WORKS: Final[Mapping[str, Work]] = {
    "sum-check": Work("sum-check", _sum_check_protocol, _sum_check_identity),
    "learn": Work("learn", learner_protocol, _learn_identity),
}
"""Every kind of work, by ``work.kind``; ``alpha.compiler.plan.WORK_KINDS`` names exactly these."""


def work_of(plan: Plan) -> Work:
    """
    Raises:
        PlanInvalid: the plan's work is of no known kind.
    """
    work = WORKS.get(plan.work_kind)
    if work is None:
        raise PlanInvalid(
            f"no work of kind {plan.work_kind!r}; known: {', '.join(WORKS)}", field="work.kind"
        )
    return work


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
