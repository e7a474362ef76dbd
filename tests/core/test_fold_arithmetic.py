"""The fold arithmetic is written once (``alpha.core.combine.fold_into`` and its step
``fold_add``): ``ordered_sum``, and through it the replicated learner and the learner's logical
contributors, and both of the interpreter's folds call it; none writes its own adds."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from alpha.core.combine import fold_add, fold_into, fold_order, ordered_sum
from alpha.core.topology import ParticipantTree
from tests.support import raises_exactly
from tests.support.imports import ROOT

FAST = settings(max_examples=100, deadline=None)

DTYPES = st.sampled_from([np.float32, np.float64])


def _by_hand(parts: list[np.ndarray]) -> np.ndarray:
    """Left to right, one IEEE addition per element and step: the contract's fold."""
    total = parts[0].copy()
    for part in parts[1:]:
        for i in range(total.size):
            total[i] = total.dtype.type(total[i] + part[i])
    return total


# Finite and far from overflow: a NaN's sign bit is not part of the contract (numpy's vector
# and scalar additions may differ there), every finite sum's bits are.
_FINITE = {
    "min_value": -(2.0**100),
    "max_value": 2.0**100,
    "allow_nan": False,
    "allow_infinity": False,
}


def _parts(dtype: type[np.floating]) -> st.SearchStrategy[list[np.ndarray]]:
    width = 32 if dtype is np.float32 else 64
    values = st.floats(width=width, **_FINITE)  # type: ignore[arg-type]
    return st.lists(hnp.arrays(dtype, 5, elements=values), min_size=1, max_size=6)


@FAST
@given(DTYPES.flatmap(_parts))
def test_fold_into_folds_left_to_right(parts: list[np.ndarray]) -> None:
    out = np.empty_like(parts[0])
    got = fold_into(out, parts)
    expected = _by_hand(parts)
    assert got is out
    assert got.tobytes() == expected.tobytes()


def test_the_order_is_part_of_the_result() -> None:
    # float32 is not associative: the declared order, not another, gives these bits.
    big, one = np.float32(2**24), np.float32(1)
    parts = [np.array([v], dtype=np.float32) for v in (big, one, one)]
    assert fold_into(np.empty(1, np.float32), parts)[0] == big  # (2^24 + 1) + 1 rounds twice
    reordered = [parts[1], parts[2], parts[0]]
    assert fold_into(np.empty(1, np.float32), reordered)[0] == big + 2


def test_fold_into_folds_in_place_into_its_first_part() -> None:
    own = np.array([1.5, 2.5], dtype=np.float64)
    other = np.array([0.25, 0.5], dtype=np.float64)
    assert fold_into(own, [own, other]) is own
    assert own.tolist() == [1.75, 3.0]


def test_a_fold_of_nothing_is_refused() -> None:
    error = raises_exactly(ValueError, fold_into, np.zeros(2), [])
    assert "at least one part" in str(error)


def test_fold_add_is_one_step() -> None:
    total = np.array([1.0, 2.0], dtype=np.float32)
    fold_add(total, np.array([0.5, 0.5], dtype=np.float32))
    assert total.tolist() == [1.5, 2.5]


@FAST
@given(st.integers(1, 40), st.integers(1, 5))
def test_ordered_sum_is_fold_into_over_the_tree(n: int, fanout: int) -> None:
    tree = ParticipantTree(n, fanout)
    rng = np.random.default_rng(n * 10 + fanout)
    values = rng.standard_normal((n, 3)).astype(np.float32)

    def total(role: int) -> np.ndarray:
        order = fold_order(tree, role)
        parts = [values[r] if r == role else total(r) for r in order]
        return _by_hand(parts)

    assert ordered_sum(tree, lambda r: values[r]).tobytes() == total(0).tobytes()


def _calls(path: str) -> set[str]:
    """The names of functions ``path`` calls: ``fold_into``, or ``np.add`` for numpy's."""
    tree = ast.parse((ROOT / path).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                names.add(f"{func.value.id}.{func.attr}")
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


@pytest.mark.parametrize(
    ("path", "calls"),
    [
        ("alpha/runtime/interpreter.py", {"fold_into", "fold_add"}),
        ("alpha/core/combine.py", {"fold_into"}),
        ("alpha/compiler/replicate.py", {"ordered_sum"}),
        ("alpha/learner/state.py", {"ordered_sum"}),
    ],
)
def test_every_fold_calls_the_one_arithmetic(path: str, calls: set[str]) -> None:
    found = _calls(path)
    assert calls <= found
    if path != "alpha/core/combine.py":
        # np.add or np.copyto in a fold's module would be a second copy of the arithmetic.
        assert not found & {"np.add", "np.copyto", "numpy.add", "numpy.copyto"}, path
