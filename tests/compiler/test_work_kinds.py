"""compiler/work.py: one registry of the kinds of work, each in its own module."""

from __future__ import annotations

from alpha.compiler.plan import WORK_KINDS
from alpha.compiler.work import WORKS, run_identity, work_of
from alpha.compiler.work_learn import learn_identity, learner_protocol
from alpha.compiler.work_sum_check import (
    SUM_CHECK_OPERATIONS,
    sum_check_identity,
    sum_check_protocol,
)
from alpha.core.digests import OPERATIONS
from alpha.errors import PlanInvalid
from alpha.schedule.operations import SELECTORS, SUM_CHECK_OPS
from tests.support import plan_of, raises_exactly


def test_each_kind_of_work_is_its_own_modules() -> None:
    assert tuple(WORKS) == WORK_KINDS
    assert (WORKS["sum-check"].protocol, WORKS["sum-check"].identity) == (
        sum_check_protocol,
        sum_check_identity,
    )
    assert (WORKS["learn"].protocol, WORKS["learn"].identity) == (learner_protocol, learn_identity)


def test_the_sum_checks_operations_are_not_the_contracts() -> None:
    # Two notions, two names: the contract's combine operations, and the local operations
    # and selectors the sum check's protocol declares with where each is realized.
    assert set(SUM_CHECK_OPERATIONS) == set(SUM_CHECK_OPS) | set(SELECTORS)
    assert set(OPERATIONS) & set(SUM_CHECK_OPERATIONS) == set()


def test_a_sum_checks_identity_is_its_modules() -> None:
    plan = plan_of("sums", roles=3, rounds=2, topology={"shape": "star"})
    assert work_of(plan) is WORKS["sum-check"]
    assert run_identity(plan).learner == sum_check_identity(plan, None)


def test_each_protocol_refuses_the_other_kinds_plan() -> None:
    sums = plan_of("sums", roles=3, rounds=2, topology={"shape": "star"})
    learn = plan_of(
        "learn",
        roles=3,
        rounds=2,
        topology={"shape": "star"},
        work={"kind": "learn"},
        learner={"rate": 0.1},
    )
    assert raises_exactly(PlanInvalid, learner_protocol, sums).field == "work.kind"
    assert raises_exactly(PlanInvalid, sum_check_protocol, learn).field == "work.kind"
