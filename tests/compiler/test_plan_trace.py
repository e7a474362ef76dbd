"""The ``[trace]`` table (docs/plans.md, docs/trace.md): its defaults and bounds, each refusal by
its exact class and field; and that it bounds a trace without entering the run identity."""

from __future__ import annotations

import pytest

from alpha.app import compiled_identity
from alpha.compiler.plan import parse_plan
from alpha.errors import PlanInvalid
from alpha.records.trace import DEFAULT_TRACE_LIMIT, MAX_TRACE_LIMIT, TraceBounds
from tests.support import raises_exactly

SUM = (
    "[run]\nname = 't'\nrounds = 10\n[membership]\ngroup = '(group (stride 0 1 4))'\n"
    "[topology]\nfanout = 2\n"
)


def test_no_table_is_none_and_an_empty_one_is_the_defaults() -> None:
    assert parse_plan(SUM).trace is None
    assert parse_plan(SUM + "[trace]\n").trace == TraceBounds(DEFAULT_TRACE_LIMIT, "first")


def test_the_fields_are_read_at_their_bounds() -> None:
    text = SUM + f"[trace]\nlimit = {MAX_TRACE_LIMIT}\nmode = 'ring'\n"
    assert parse_plan(text).trace == TraceBounds(MAX_TRACE_LIMIT, "ring")
    assert parse_plan(SUM + "[trace]\nlimit = 1\n").trace == TraceBounds(1, "first")


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("limit = 0", "trace.limit"),
        (f"limit = {MAX_TRACE_LIMIT + 1}", "trace.limit"),
        (f"limit = {2**63 - 1}", "trace.limit"),
        ("limit = 1.5", "trace.limit"),
        ("limit = true", "trace.limit"),
        ("mode = 'last'", "trace.mode"),
        ("mode = 1", "trace.mode"),
        ("limt = 5", "trace.limt"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_its_field(line: str, field: str) -> None:
    error = raises_exactly(PlanInvalid, parse_plan, SUM + f"[trace]\n{line}\n")
    assert error.field == field


def test_the_table_is_no_part_of_the_run_identity() -> None:
    bounded = parse_plan(SUM + "[trace]\nlimit = 64\nmode = 'ring'\n")
    assert compiled_identity(bounded) == compiled_identity(parse_plan(SUM))
