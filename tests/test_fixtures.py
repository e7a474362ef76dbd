"""fixtures/: every file is one the README describes, and each plan there reads as a plan; the
gate scenarios' plans are those files, read from the checkout beside gates/."""

from __future__ import annotations

import re

from alpha.compiler.plan import parse_plan
from gates.catalogue import SCENARIO_PLANS, SCENARIOS
from gates.checkpoints import CHECKPOINT
from gates.recovery import RECOVERY
from tests.support import FIXTURES

README = FIXTURES / "README.md"


def _files() -> set[str]:
    return {
        path.relative_to(FIXTURES).as_posix()
        for path in FIXTURES.rglob("*")
        if path.is_file() and path != README and "__pycache__" not in path.parts
    }


def _named() -> set[str]:
    """The files README names: a backquoted name in a section ``## FOLDER/: ...``."""
    named: set[str] = set()
    folder = ""
    for line in README.read_text().splitlines():
        if heading := re.match(r"## (\w+)/:", line):
            folder = heading.group(1)
        elif folder and line.startswith("| `"):
            named.add(f"{folder}/{line.split('`')[1]}")
    return named


def test_the_readme_names_every_fixture_and_no_other() -> None:
    assert _files() == _named()


def test_every_plan_in_fixtures_reads_as_a_plan() -> None:
    plans = sorted(FIXTURES.rglob("*.toml"))
    assert plans
    for path in plans:
        parse_plan(path.read_text(), source=str(path))
    # The checkpoint scenario's template, filled in as gates/checkpoints.py fills it.
    template = (SCENARIO_PLANS / "checkpoint.toml.template").read_text()
    parse_plan(template.format(rounds=2, rate="0.01", seed=5, folder="ck"), source="template")
    # The recovery scenario's, as gates/recovery.py fills it.
    template = (SCENARIO_PLANS / "recovery.toml.template").read_text()
    parse_plan(template.format(rate="1e6", folder="ck"), source="template")


def test_each_gate_scenario_runs_the_plan_its_fixture_holds() -> None:
    assert SCENARIO_PLANS == FIXTURES / "gates"
    for name, scenario in SCENARIOS.items():
        assert scenario.plan == (SCENARIO_PLANS / f"{name}.toml").read_text(), name
    assert CHECKPOINT.plan == (SCENARIO_PLANS / "checkpoint.toml.template").read_text()
    assert RECOVERY.plan == (SCENARIO_PLANS / "recovery.toml.template").read_text()
    templates = {"checkpoint.toml.template", "recovery.toml.template"}
    assert {f"{name}.toml" for name in SCENARIOS} | templates == {
        path.name for path in SCENARIO_PLANS.iterdir()
    }
