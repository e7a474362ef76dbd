"""schedule/ is below the compiler (issue 23): no module of it names ``alpha.compiler`` in any
import, at run time, inside a function or for types only; the check that walks a protocol's
forms for operations without an implementation is the compiler's (``compiler.implemented``)."""

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
