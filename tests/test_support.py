"""The test helpers themselves: each one exists once, in tests/support/, and does its job."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.plan import parse_plan
from alpha.core.identity import IDENTITY_PART_SIZE, IDENTITY_PARTS
from alpha.errors import AlphaError, FrameRefused, WrongEdge
from alpha.wire.frame import FrameKind, FrameSpec
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot
from tests.support import (
    ALPHA,
    FIXTURES,
    IDENTITY,
    PLANS,
    ROOT,
    connected,
    plan_of,
    plan_text,
    raises_exactly,
    run_alpha,
    toml_value,
)

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / "support"
# The names that tests/support/ owns: a module elsewhere under tests/ must import them.
OWNED = ("raises_exactly", "IDENTITY", "connected", "toml_value", "run_alpha", "ALPHA")


def _raise(error: BaseException) -> None:
    raise error


def _wrong_edge() -> WrongEdge:
    return WrongEdge(
        "sender 3, not 2", role=1, peer=2, slot=7, version=0, field="sender", expected=2, received=3
    )


def test_raises_exactly_returns_the_exception_of_exactly_that_class() -> None:
    error = _wrong_edge()
    assert raises_exactly(WrongEdge, _raise, error) is error


def test_raises_exactly_passes_arguments_through() -> None:
    error = raises_exactly(ValueError, int, "x", base=10)
    assert "invalid literal" in str(error)


def test_raises_exactly_fails_on_a_subclass_of_the_class_asked_for() -> None:
    # pytest.raises(FrameRefused) alone would accept WrongEdge: the family is not the leaf.
    with pytest.raises(AssertionError, match="WrongEdge raised, FrameRefused wanted"):
        raises_exactly(FrameRefused, _raise, _wrong_edge())
    with pytest.raises(AssertionError, match="WrongEdge raised, AlphaError wanted"):
        raises_exactly(AlphaError, _raise, _wrong_edge())


def test_raises_exactly_fails_when_nothing_is_raised() -> None:
    with pytest.raises(pytest.fail.Exception):
        raises_exactly(WrongEdge, lambda: None)


def test_raises_exactly_lets_an_unrelated_exception_through() -> None:
    with pytest.raises(KeyError):
        raises_exactly(WrongEdge, _raise, KeyError("k"))


def test_the_identity_has_three_parts_of_the_identity_part_size() -> None:
    for part in IDENTITY_PARTS:
        assert len(getattr(IDENTITY, part)) == IDENTITY_PART_SIZE
    assert len({getattr(IDENTITY, part) for part in IDENTITY_PARTS}) == 3


async def test_connected_is_one_real_tcp_connection_carrying_the_identity() -> None:
    async with connected(low=3, high=5) as (low, high):
        assert (low.role, low.peer, high.role, high.peer) == (3, 5, 5, 3)
        spec = FrameSpec(IDENTITY, FrameKind.DATA, 3, 5, 1, 4)
        await low.send(SendSlot(spec), b"abcd")
        assert bytes(await high.receive(ReceiveSlot(spec))) == b"abcd"


def _modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if SUPPORT not in p.parents)


def test_conftest_is_never_imported_as_a_module() -> None:
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "conftest", f"{path.name}:{node.lineno} imports conftest"
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
                assert "conftest" not in names, f"{path.name}:{node.lineno} imports conftest"


def test_no_test_module_writes_its_own_copy_of_a_support_helper() -> None:
    for path in _modules():
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                assert name not in OWNED, (
                    f"{path.name}:{node.lineno} defines {name}; import it from tests.support"
                )


def _spells_the_command_line(node: ast.AST) -> bool:
    """``[..., "-m", "alpha", ...]``: the argv that starts ``alpha``, written out again."""
    if not isinstance(node, ast.List | ast.Tuple):
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(words[i : i + 2] == list(ALPHA[1:]) for i in range(len(words) - 1))


def test_no_test_module_spells_the_alpha_command_line() -> None:
    # One CLI runner: run_alpha for a run to its end, [*ALPHA, ...] for a process a test drives.
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            assert not _spells_the_command_line(node), (
                f"{path.name}:{getattr(node, 'lineno', '?')} writes python -m alpha; "
                "use tests.support.run_alpha or ALPHA"
            )


def test_run_alpha_is_a_real_process_whose_exit_code_is_the_tests_to_judge() -> None:
    assert " ".join(ALPHA[1:]) == "-m alpha"  # the package the tests import, not an install
    said = run_alpha("--version")
    assert (said.returncode, said.stderr) == (0, "") and said.stdout.startswith("alpha ")
    refused = run_alpha("describe", "tree", "-5", "2")  # a usage error: exit 2, not an exception
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("alpha: error: ") and refused.stderr.count("\n") == 1


def test_run_alpha_passes_the_folder_and_environment_given(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    said = run_alpha("describe", "tree", "3", "2", "--role", "1", cwd=tmp_path, env=env)
    assert said.returncode == 0, said.stderr
    assert "depth" in said.stdout


def test_the_paths_are_the_checkouts() -> None:
    assert (ROOT / "alpha" / "__init__.py").is_file() and (ROOT / "pyproject.toml").is_file()
    assert TESTS == ROOT / "tests"
    assert (PLANS / "digits.toml").is_file()
    assert (FIXTURES / "README.md").is_file()


# --- the plan builder -----------------------------------------------------------------------

SCALARS = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text()
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_a_toml_value_reads_back_equal(value: object) -> None:
    read = tomllib.loads(f"v = {toml_value(value)}")["v"]
    assert type(read) is type(value) and read == value


def test_a_toml_value_refuses_what_it_cannot_write() -> None:
    raises_exactly(TypeError, toml_value, None)
    raises_exactly(TypeError, toml_value, {"a": 1})
    raises_exactly(TypeError, toml_value, [1, None])


def test_the_plan_builder_writes_the_tables_given_and_leaves_out_none() -> None:
    text = plan_text(
        "built",
        roles=3,
        rounds=2,
        topology={"shape": "tree", "fanout": 2},
        contract=None,
        work={"kind": "sum-check", "size": 8, "choice": None},
        extra="[budgets]\nreceive = 4.0\n",
    )
    tables = tomllib.loads(text)
    assert tables == {
        "run": {"name": "built", "rounds": 2},
        "membership": {"group": "(group (stride 0 1 3))"},
        "topology": {"shape": "tree", "fanout": 2},
        "work": {"kind": "sum-check", "size": 8},
        "budgets": {"receive": 4.0},
    }
    plan = plan_of(
        "built",
        roles=3,
        rounds=2,
        source="test",
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "sum-check", "size": 8},
        extra="[budgets]\nreceive = 4.0\n",
    )
    assert plan == parse_plan(text, source="test")
    assert (plan.participants, plan.rounds, plan.work_size, plan.source) == (3, 2, 8, "test")
