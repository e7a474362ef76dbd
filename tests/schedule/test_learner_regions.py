"""The learner's region names have one home (schedule/learner_regions.py): no module of alpha
spells one as a literal, and the learner's protocol declares exactly those regions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from alpha.compiler.work_learn import learner_protocol
from alpha.learner.saving import PARAMETERS as CHECKPOINT_PARAMETERS
from alpha.schedule.learner_regions import CONTRIBUTIONS, GRADIENT, PARAMETERS, STORE
from tests.support import plan_of
from tests.support.paths import ROOT

PACKAGE = ROOT / "alpha"
HOME = PACKAGE / "schedule" / "learner_regions.py"


# Calls whose "w" is a file mode, not a region.
_FILE_OPENERS = frozenset({"open", "fdopen", "ZipFile", "TarFile", "NamedTemporaryFile"})


def _opens_a_file(call: ast.Call) -> bool:
    name = getattr(call.func, "id", getattr(call.func, "attr", ""))
    return name in _FILE_OPENERS


def _region_literals(path: Path) -> list[int]:
    """Lines where ``path`` subscripts a mapping with, or names a region as, ``"w"``: a
    ``buffers["w"]``-style subscript, or a ``"w"`` argument or key (file modes aside)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value == PARAMETERS:
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and not _opens_a_file(node):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value == PARAMETERS:
                    lines.append(arg.lineno)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value == PARAMETERS:
                    lines.append(key.lineno)
    return lines


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p != HOME],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_module_spells_the_parameters_region(path: Path) -> None:
    assert _region_literals(path) == []


def test_the_learner_declares_its_regions_by_their_names() -> None:
    plan = plan_of(
        "learn",
        roles=3,
        rounds=2,
        topology={"shape": "star"},
        work={"kind": "learn"},
        learner={"rate": 0.1},
    )
    assert set(learner_protocol(plan).regions) == {PARAMETERS, GRADIENT}
    parts = plan_of(
        "learn",
        roles=3,
        rounds=2,
        topology={"shape": "star"},
        work={"kind": "learn"},
        learner={"rate": 0.1, "partition": "parameters", "contributors": 3},
    )
    names = set(learner_protocol(parts).regions)
    assert {PARAMETERS, GRADIENT, CONTRIBUTIONS, STORE} <= names
    assert {name.partition("@")[0] for name in names} == {
        PARAMETERS,
        GRADIENT,
        CONTRIBUTIONS,
        STORE,
    }
    # A checkpoint names the parameters' array as their region.
    assert CHECKPOINT_PARAMETERS == PARAMETERS
