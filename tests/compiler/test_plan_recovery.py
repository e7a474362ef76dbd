"""The ``[recovery]`` table (docs/plans.md, docs/recovery.md): its defaults, its bounds, and
the refusal of a sum check's, each by its exact class and field."""

from __future__ import annotations

import pytest

from alpha.compiler.plan import parse_plan
from alpha.compiler.plan_recovery import (
    DEFAULT_BACKOFF,
    MAX_BACKOFF,
    MAX_RESTARTS,
    RecoverySpec,
)
from alpha.errors import PlanInvalid
from tests.support import raises_exactly

SUM = (
    "[run]\nname = 't'\nrounds = 10\n[membership]\ngroup = '(group (stride 0 1 4))'\n"
    "[topology]\nfanout = 2\n"
)
LEARN = SUM + "[work]\nkind = 'learn'\n[learner]\nrate = 0.1\n"


def test_no_table_is_no_restart_and_an_empty_one_is_the_defaults() -> None:
    assert parse_plan(LEARN).recovery is None
    spec = parse_plan(LEARN + "[recovery]\n").recovery
    assert spec == RecoverySpec(restarts=0, backoff=DEFAULT_BACKOFF)


def test_the_fields_are_read_at_their_bounds() -> None:
    text = LEARN + f"[recovery]\nrestarts = {MAX_RESTARTS}\nbackoff = {MAX_BACKOFF}\n"
    assert parse_plan(text).recovery == RecoverySpec(restarts=MAX_RESTARTS, backoff=MAX_BACKOFF)
    text = LEARN + "[recovery]\nrestarts = 0\nbackoff = 0\n"
    assert parse_plan(text).recovery == RecoverySpec(restarts=0, backoff=0.0)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("restarts = -1", "recovery.restarts"),
        (f"restarts = {MAX_RESTARTS + 1}", "recovery.restarts"),
        ("restarts = 1.5", "recovery.restarts"),
        ("restarts = true", "recovery.restarts"),
        ("backoff = -0.1", "recovery.backoff"),
        (f"backoff = {MAX_BACKOFF + 1}", "recovery.backoff"),
        ("backoff = 'soon'", "recovery.backoff"),
        ("backoff = true", "recovery.backoff"),
        ("backoff = nan", "recovery.backoff"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_its_field(line: str, field: str) -> None:
    error = raises_exactly(PlanInvalid, parse_plan, LEARN + f"[recovery]\n{line}\n")
    assert error.field == field


def test_a_sum_check_has_no_generations_to_restart_from() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, SUM + "[recovery]\nrestarts = 1\n")
    assert error.field == "recovery" and "work.kind" in str(error)


def test_dropping_a_lost_role_needs_logical_contributors() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, LEARN + "[recovery]\nlost_role = 'drop'\n")
    assert error.field == "recovery.lost_role" and "learner.contributors" in str(error)
    text = LEARN + "contributors = 4\n[recovery]\nlost_role = 'drop'\n"
    spec = parse_plan(text).recovery
    assert spec is not None and spec.lost_role == "drop"
    error = raises_exactly(PlanInvalid, parse_plan, LEARN + "[recovery]\nlost_role = 'spare'\n")
    assert error.field == "recovery.lost_role"
