"""schedule/ is below the compiler and the learner (issue 23): no module of it names
``alpha.compiler`` or ``alpha.learner`` in any import, at run time, inside a function or for
types only. The check that walks a protocol's forms for operations without an implementation is
the compiler's (``compiler.implemented``); what the learner's operations call on a learner is a
structural type of the schedule's own (``operations.Learner``), which mypy holds the learner to."""

from __future__ import annotations

import pytest

from tests.support.imports import ROOT, imported

SCHEDULE = sorted(
    f"alpha.schedule.{path.stem}"
    for path in (ROOT / "alpha" / "schedule").glob("*.py")
    if path.stem != "__init__"
)


def test_the_schedule_has_modules() -> None:
    assert {"alpha.schedule.operations", "alpha.schedule.local"} <= set(SCHEDULE)


@pytest.mark.parametrize("module", SCHEDULE)
def test_no_schedule_module_imports_the_compiler(module: str) -> None:
    names = imported(module, type_only=True, nested=True)
    assert not {name for name in names if name.startswith("alpha.compiler")}, names


def test_the_unimplemented_check_reads_the_schedule_registry() -> None:
    assert "alpha.schedule.operations" in imported("alpha.compiler.implemented")
    assert "alpha.compiler.forms" in imported("alpha.compiler.implemented")


@pytest.mark.parametrize("module", SCHEDULE)
def test_no_schedule_module_imports_the_learner(module: str) -> None:
    names = imported(module, type_only=True, nested=True)
    assert not {name for name in names if name.startswith("alpha.learner")}, names
