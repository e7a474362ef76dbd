"""Operations are declared by being implemented, once (``alpha.schedule.operations``): the plan's
choices, the programs' declarations and the interpreter read the same tables, and ``alpha
compile`` refuses a protocol that names an operation or selector with no implementation."""

from __future__ import annotations

from pathlib import Path

import pytest

import alpha.runtime.interpreter
from alpha.app.cli import main
from alpha.app.compile import compile_plan
from alpha.compiler import Everyone, Local, Protocol, Region, check
from alpha.compiler.implemented import unimplemented
from alpha.compiler.plan import CHOICES, load_plan
from alpha.compiler.work import protocol_for
from alpha.compiler.work_learn import GPU_TARGET, learner_operations, learner_protocol
from alpha.compiler.work_sum_check import SUM_CHECK_OPERATIONS
from alpha.core.topology import ParticipantTree
from alpha.errors import NoRealization, OperationUnimplemented, ProtocolRejected
from alpha.exitcodes import EXIT_USAGE
from alpha.learner.model import Model
from alpha.schedule import operations
from alpha.schedule.operations import LEARNER_OPS, LOCAL_OPS, SELECTORS, SUM_CHECK_OPS
from tests.support import PLANS

# --- one set of names ----------------------------------------------------------------------


def test_a_plan_may_choose_every_selector_and_nothing_else() -> None:
    assert ("none", *SELECTORS) == CHOICES


def test_the_sum_check_declares_exactly_its_implemented_operations() -> None:
    assert {name: op.kind for name, op in SUM_CHECK_OPERATIONS.items()} == {
        **dict.fromkeys(SUM_CHECK_OPS, "local"),
        **dict.fromkeys(SELECTORS, "selector"),
    }


@pytest.mark.parametrize("hidden", [None, 16])
def test_the_learner_declares_exactly_its_implemented_operations(hidden: int | None) -> None:
    declared = learner_operations(Model.shipped(hidden, "float32"))
    assert list(declared) == list(LEARNER_OPS)
    assert {op.kind for op in declared.values()} == {"local"}
    # Only the MLP's contribution has GPU kernels; the linear model's is refused on a GPU.
    on_gpu = {name for name, op in declared.items() if GPU_TARGET in op.targets}
    expected = set(LEARNER_OPS) if hidden else set(LEARNER_OPS) - {"contribute"}
    assert on_gpu == expected


def test_the_interpreter_calls_the_same_tables() -> None:
    assert alpha.runtime.interpreter.LOCAL_OPS is LOCAL_OPS
    assert alpha.runtime.interpreter.SELECTORS is SELECTORS
    assert alpha.runtime.interpreter.Context is operations.Context
    assert dict(LOCAL_OPS) == {**SUM_CHECK_OPS, **LEARNER_OPS}
    assert not set(SUM_CHECK_OPS) & set(LEARNER_OPS)


def test_every_local_operation_is_a_live_view_of_its_program_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def added(ctx: operations.Context, region: object) -> None:
        del ctx, region

    monkeypatch.setitem(SUM_CHECK_OPS, "added", added)
    assert LOCAL_OPS["added"] is added
    monkeypatch.delitem(LEARNER_OPS, "observe")
    assert "observe" not in LOCAL_OPS


@pytest.mark.parametrize("fixture", ["pair.toml", "star.toml", "tree.toml", "digits.toml"])
def test_every_shipped_plan_names_only_implemented_operations(fixture: str) -> None:
    assert unimplemented(protocol_for(load_plan(PLANS / fixture))) == []


# --- declared without an implementation ------------------------------------------------------


def test_compile_refuses_a_local_operation_without_implementation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = load_plan(PLANS / "pair.toml")
    monkeypatch.delitem(SUM_CHECK_OPS, "check_sum")
    out = tmp_path / "out"
    with pytest.raises(ProtocolRejected) as refused:
        compile_plan(plan, out, range(plan.participants))
    assert [type(f) for f in refused.value.failures] == [OperationUnimplemented]
    assert "'check_sum'" in str(refused.value)
    assert not out.exists()  # refused before anything was written


def test_compile_refuses_a_selector_without_implementation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan = load_plan(PLANS / "tree.toml")
    assert plan.choice == "parity"
    monkeypatch.delitem(SELECTORS, "parity")
    with pytest.raises(ProtocolRejected) as refused:
        compile_plan(plan, tmp_path / "out", range(plan.participants))
    assert [type(f) for f in refused.value.failures] == [OperationUnimplemented]
    assert "selector operation 'parity'" in str(refused.value)


def test_a_learner_operation_without_implementation_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    protocol = learner_protocol(load_plan(PLANS / "digits.toml"))
    monkeypatch.delitem(LEARNER_OPS, "update")
    (failure,) = unimplemented(protocol)
    assert type(failure) is OperationUnimplemented
    assert "'update'" in str(failure)
    assert failure.form == "body.1.repeat.2"


def test_alpha_compile_names_the_operation_in_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(SUM_CHECK_OPS, "fill")
    code = main(["compile", str(PLANS / "pair.toml"), "-o", str(tmp_path / "out")])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "OperationUnimplemented" in err
    assert "'fill'" in err


def test_an_undeclared_operation_is_refused_once_by_the_checks() -> None:
    protocol = Protocol(
        participants=3,
        tree=ParticipantTree(3, 2),
        regions={"x": Region("x", "float32", 4)},
        operations=SUM_CHECK_OPERATIONS,
        body=Local(Everyone(), "nowhere", "x"),
    )
    assert [type(f) for f in check(protocol)] == [NoRealization]
    assert unimplemented(protocol) == []


def test_every_kind_of_work_is_one_object_and_the_plan_names_exactly_those() -> None:
    from alpha.compiler.plan import WORK_KINDS
    from alpha.compiler.work import WORKS, work_of

    assert tuple(WORKS) == WORK_KINDS
    for kind, work in WORKS.items():
        assert work.kind == kind
    for name in ("pair.toml", "digits.toml"):
        plan = load_plan(PLANS / name)
        work = work_of(plan)
        assert work.kind == plan.work_kind
        # Its protocol names only operations implemented in alpha.schedule.operations.
        assert not unimplemented(work.protocol(plan))
