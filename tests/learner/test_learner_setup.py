"""The run-time learner never sees a plan: the compiler hands it a LearnerSetup.

``alpha.compiler.work_learn.learner_setup`` reads a plan's ``[learner]`` table (and its GPU
bindings) into the learner-side value every role's ``LearnerState`` is built from; no module of
``alpha/learner/`` imports the compiler, not even for types.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from alpha.compiler.work_learn import learner_setup, model_of
from alpha.errors import PlanInvalid
from alpha.learner.data import load_digits
from alpha.learner.optimizer import Optimizer
from alpha.learner.state import LearnerSetup, LearnerState, owned, split_of
from tests.support import plan_of, raises_exactly

LEARNER = Path(__file__).resolve().parents[2] / "alpha" / "learner"

LEARN = {
    "work": {"kind": "learn"},
    "topology": {"shape": "tree", "fanout": 2},
    "learner": {
        "kind": "mlp",
        "hidden": 8,
        "rate": 0.25,
        "seed": 11,
        "batch": 5,
        "holdout": 0.3,
        "optimizer": "momentum",
        "momentum": 0.5,
        "partition": "optimizer",
        "contributors": 6,
    },
}
GPU = '[gpu.roles]\n"2" = "GPU-5c3a1f0e-8d2b-4c6a-9e7f-0123456789ab"\n'


def _imported(path: Path) -> set[str]:
    """Every module ``path`` names in an import, under ``if TYPE_CHECKING:`` too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(LEARNER.glob("*.py")), ids=lambda p: p.name)
def test_no_learner_module_imports_the_compiler_even_for_types(path: Path) -> None:
    assert sorted(m for m in _imported(path) if m.startswith("alpha.compiler")) == []


def test_the_setup_carries_the_plans_learner_and_nothing_else() -> None:
    plan = plan_of("setup", roles=4, rounds=3, extra=GPU, **LEARN)
    setup = learner_setup(plan)
    assert setup == LearnerSetup(
        model=model_of(plan),
        seed=11,
        rate=0.25,
        batch=5,
        holdout=0.3,
        participants=4,
        optimizer=Optimizer.of("momentum", momentum=0.5),
        partition="optimizer",
        contributors=6,
        gpus=((2, "GPU-5c3a1f0e-8d2b-4c6a-9e7f-0123456789ab"),),
    )


def test_each_role_is_built_from_the_setup_alone() -> None:
    plan = plan_of("setup", roles=4, rounds=3, extra=GPU, **LEARN)
    setup = learner_setup(plan)
    digits = load_digits()
    parts = split_of(setup, digits)
    states = [LearnerState.for_role(setup, digits, role, parts) for role in range(4)]
    # Six logical contributors over four roles: 2, 2, 1, 1, in role order.
    assert [state.hosted for state in states] == [(0, 1), (2, 3), (4,), (5,)]
    assert [state.own for state in states] == [owned(setup, role) for role in range(4)]
    assert [state.gpu_uuid for state in states] == [None, None, setup.gpus[0][1], None]
    assert states[0].holdout_labels is not None
    assert all(state.holdout_labels is None for state in states[1:])
    assert {state.samples for state in states} == {5 * 6}


def test_a_sum_check_has_no_learner_setup() -> None:
    plan = plan_of("sums", roles=2, rounds=1, topology={"shape": "pair"})
    error = raises_exactly(PlanInvalid, learner_setup, plan)
    assert error.field == "work.kind"
