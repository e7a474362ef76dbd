"""learner/contract.py: the contract operations, each equal bit for bit to the scalar rule its
docstring declares, computed here one correctly rounded numpy scalar operation at a time.

Only the public functions are tested, so the laws hold whichever path computes a fold (the
numpy loops, or a compiled kernel where one is at hand).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from alpha.learner import contract as c
from tests.support import raises_exactly

DTYPES = (np.float32, np.float64)

# Finite values wide enough that the order of a sum shows in its last bits (and subnormal
# products occur), narrow enough that no product or sum of a few of them overflows.
BOUND = 1e6


def finite(dtype: type[np.floating]) -> st.SearchStrategy[float]:
    width = 32 if dtype is np.float32 else 64
    return st.floats(-BOUND, BOUND, width=width, allow_nan=False, allow_infinity=False)


def any_float(dtype: type[np.floating]) -> st.SearchStrategy[float]:
    """Every value of ``dtype``: NaN, the infinities and -0 included."""
    return st.floats(width=32 if dtype is np.float32 else 64)


def matrix(
    dtype: type[np.floating], rows: int, columns: int, elements: st.SearchStrategy[float]
) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(dtype, (rows, columns), elements=elements)


@st.composite
def product(draw: st.DrawFn, inner_min: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of shapes (n, k) and (k, m), small, in one dtype."""
    dtype = draw(st.sampled_from(DTYPES))
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(inner_min, 12)), draw(st.integers(1, 4))
    return (
        draw(matrix(dtype, n, k, finite(dtype))),
        draw(matrix(dtype, k, m, finite(dtype))),
    )


def same_bits(found: np.ndarray | np.floating, expected: np.ndarray | np.floating) -> bool:
    found, expected = np.asarray(found), np.asarray(expected)
    return (
        found.dtype == expected.dtype
        and found.shape == expected.shape
        and found.tobytes() == expected.tobytes()
    )


def same_bits_or_nan(found: np.ndarray, expected: np.ndarray) -> bool:
    """Bit for bit, where a NaN matches any NaN (the contract says which, not its payload)."""
    assert found.dtype == expected.dtype and found.shape == expected.shape
    both_nan = np.isnan(found) & np.isnan(expected)
    width = np.uint32 if found.dtype == np.float32 else np.uint64
    return bool(np.all(both_nan | (found.view(width) == expected.view(width))))


# --- the scalar references ------------------------------------------------------------------


def fold(start: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``out[i, j] = start[i, j]``, then ``+ a[i, k] * b[k, j]`` for ``k`` ascending: one
    rounded product and one rounded add at a time, in numpy scalars of the arrays' dtype."""
    out = np.empty(start.shape, dtype=start.dtype)
    for i in range(start.shape[0]):
        for j in range(start.shape[1]):
            total = start[i, j]
            for k in range(a.shape[1]):
                total = total + a[i, k] * b[k, j]
            out[i, j] = total
    return out


def zeros_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)


def row_fold(values: np.ndarray) -> np.ndarray:
    """The rows added one at a time from +0, ascending, element by element."""
    flat = values.reshape(values.shape[0], math.prod(values.shape[1:]))
    out = np.empty(flat.shape[1], dtype=values.dtype)
    for j in range(flat.shape[1]):
        total = values.dtype.type(0)
        for row in range(flat.shape[0]):
            total = total + flat[row, j]
        out[j] = total
    return out.reshape(values.shape[1:])


def elementwise(rule: Callable[..., np.floating], *arrays: np.ndarray) -> np.ndarray:
    out = np.empty(arrays[0].shape, dtype=arrays[0].dtype)
    for index in np.ndindex(arrays[0].shape):
        out[index] = rule(*(array[index] for array in arrays))
    return out


# --- products and sums: the declared order --------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(product())
def test_matmul_is_the_ascending_fold_from_positive_zero(ab: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = ab
    assert same_bits(c.matmul(a, b), fold(zeros_of(a, b), a, b))


@settings(max_examples=200, deadline=None)
@given(product(), st.data())
def test_affine_starts_each_output_at_its_bias(
    ab: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    a, b = ab
    bias = data.draw(hnp.arrays(a.dtype, (b.shape[1],), elements=finite(a.dtype.type)))
    start = np.broadcast_to(bias, (a.shape[0], b.shape[1]))
    assert same_bits(c.affine(a, b, bias), fold(start, a, b))


@st.composite
def samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of shapes (s, i) and (s, j): an affine layer's inputs and output gradient."""
    dtype = draw(st.sampled_from(DTYPES))
    s, i, j = draw(st.integers(0, 12)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return draw(matrix(dtype, s, i, finite(dtype))), draw(matrix(dtype, s, j, finite(dtype)))


@settings(max_examples=200, deadline=None)
@given(samples())
def test_outer_sum_folds_the_samples_ascending(ab: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = ab
    assert same_bits(c.outer_sum(a, b), fold(np.zeros((a.shape[1], b.shape[1]), a.dtype), a.T, b))


@settings(max_examples=100, deadline=None)
@given(product(inner_min=1))
def test_transposed_views_fold_as_their_values(ab: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = ab
    # The same values in other memory: column-major, and every other element of a wider array.
    wide = np.zeros((b.shape[0], 2 * b.shape[1]), b.dtype)
    wide[:, ::2] = b
    assert same_bits(c.matmul(np.asfortranarray(a), wide[:, ::2]), fold(zeros_of(a, b), a, b))
    assert same_bits(c.matmul(a.T.copy().T, b.T.copy().T), fold(zeros_of(a, b), a, b))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(DTYPES).flatmap(
        lambda dtype: hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=12),
            elements=finite(dtype),
        )
    )
)
def test_sum_rows_folds_the_rows_ascending_from_positive_zero(values: np.ndarray) -> None:
    assert same_bits(c.sum_rows(values), row_fold(values))


def test_the_order_shows_in_the_result() -> None:
    # float32: 1e8 + 1 rounds to 1e8, so ascending order gives 1, other orders 0.
    a = np.float32([[1e8, 1.0, -1e8, 1.0]])
    ones = np.ones((4, 1), np.float32)
    assert c.matmul(a, ones).tolist() == [[1.0]]
    assert c.affine(a, ones, np.float32([0.0])).tolist() == [[1.0]]
    assert c.outer_sum(a.T, ones).tolist() == [[1.0]]
    assert c.sum_rows(a.T).tolist() == [1.0]
    # The bias comes first, not last: 1 + 1e8 rounds to 1e8, so bias first gives 0, last 1.
    x = np.float32([[1e8, -1e8]])
    assert c.affine(x, np.ones((2, 1), np.float32), np.float32([1.0])).tolist() == [[0.0]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fold_starts_at_positive_zero(dtype: type[np.floating]) -> None:
    negative = np.array([[-0.0]], dtype)
    one = np.array([[1.0]], dtype)
    assert same_bits(c.matmul(negative, one), np.array([[0.0]], dtype))  # +0 + -0 is +0
    assert same_bits(
        c.matmul(np.zeros((2, 0), dtype), np.zeros((0, 3), dtype)), np.zeros((2, 3), dtype)
    )
    assert same_bits(c.outer_sum(negative, one), np.array([[0.0]], dtype))
    assert same_bits(c.sum_rows(np.array([[-0.0], [-0.0]], dtype)), np.array([0.0], dtype))
    # affine starts at the bias: -0 + -0 stays -0.
    assert same_bits(c.affine(negative, one, np.array([-0.0], dtype)), np.array([[-0.0]], dtype))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)),
        (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float64)),
        (np.zeros(3, np.float32), np.zeros((3, 2), np.float32)),
        (np.zeros((2, 3), np.float32), np.zeros(3, np.float32)),
        (np.zeros((1, 2, 3), np.float32), np.zeros((3, 2), np.float32)),
    ],
    ids=["inner", "dtypes", "a-1d", "b-1d", "a-3d"],
)
def test_a_product_of_arrays_that_do_not_fit_is_refused(a: np.ndarray, b: np.ndarray) -> None:
    assert "a contract product needs (n, k) and (k, m)" in str(
        raises_exactly(ValueError, c.matmul, a, b)
    )
    bias = np.zeros(b.shape[-1], a.dtype)
    raises_exactly(ValueError, c.affine, a, b, bias)


# --- activations: selections ----------------------------------------------------------------


def relu_rule(z: np.floating) -> np.floating:
    return z if z > 0 else z.dtype.type(0)


def relu_backward_rule(g: np.floating, z: np.floating) -> np.floating:
    return g * g.dtype.type(1 if z > 0 else 0)


def hard_tanh_rule(z: np.floating) -> np.floating:
    one = z.dtype.type(1)
    return one if z > one else (-one if z < -one else z)


def hard_tanh_backward_rule(g: np.floating, z: np.floating) -> np.floating:
    return g * g.dtype.type(1 if -1 < z < 1 else 0)


@st.composite
def two_arrays(
    draw: st.DrawFn, values: Callable[..., st.SearchStrategy[float]]
) -> tuple[np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=6))
    return (
        draw(hnp.arrays(dtype, shape, elements=values(dtype))),
        draw(hnp.arrays(dtype, shape, elements=values(dtype))),
    )


@settings(max_examples=200, deadline=None)
@given(two_arrays(any_float))
def test_relu_and_hard_tanh_select_as_declared(arrays: tuple[np.ndarray, np.ndarray]) -> None:
    g, z = arrays
    with np.errstate(invalid="ignore"):  # inf * 0 in the gradients: NaN, as declared
        assert same_bits_or_nan(c.relu(z), elementwise(relu_rule, z))
        assert same_bits_or_nan(c.relu_backward(g, z), elementwise(relu_backward_rule, g, z))
        assert same_bits_or_nan(c.hard_tanh(z), elementwise(hard_tanh_rule, z))
        assert same_bits_or_nan(
            c.hard_tanh_backward(g, z), elementwise(hard_tanh_backward_rule, g, z)
        )


@settings(max_examples=200, deadline=None)
@given(two_arrays(any_float), st.sampled_from([0.01, 0.1, 0.2, 0.5, 1.0 / 3.0]))
def test_leaky_relu_selects_z_or_its_product_with_the_slope(
    arrays: tuple[np.ndarray, np.ndarray], slope: float
) -> None:
    g, z = arrays
    low = z.dtype.type(slope)

    def forward(v: np.floating) -> np.floating:
        return v if v > 0 else v * low

    def backward(gradient: np.floating, v: np.floating) -> np.floating:
        return gradient * (gradient.dtype.type(1) if v > 0 else low)

    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        assert same_bits_or_nan(c.leaky_relu(z, slope), elementwise(forward, z))
        assert same_bits_or_nan(c.leaky_relu_backward(g, z, slope), elementwise(backward, g, z))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_special_values_are_selected_as_documented(dtype: type[np.floating]) -> None:
    z = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, -2.0, 2.0, -1.0, 1.0, 0.5], dtype)
    bits = np.uint32 if dtype is np.float32 else np.uint64
    # relu: z above 0, else +0 (a -0 and a NaN become +0, never the CPU's max's choice).
    expected = np.array([0.0, 0.0, 0.0, np.inf, 0.0, 0.0, 2.0, 0.0, 1.0, 0.5], dtype)
    assert c.relu(z).view(bits).tolist() == expected.view(bits).tolist()
    # hard_tanh: clipped by selection; a NaN and a -0 pass through as they are.
    found = c.hard_tanh(z)
    assert np.signbit(found[0]) and not np.signbit(found[1]) and np.isnan(found[2])
    assert found[3:].tolist() == [1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 0.5]
    # leaky_relu: z * slope below or at 0: -0 stays -0, NaN stays NaN, -inf stays -inf.
    leaky = c.leaky_relu(z, 0.25)
    assert np.signbit(leaky[0]) and not np.signbit(leaky[1]) and np.isnan(leaky[2])
    assert leaky[3:].tolist() == [np.inf, -np.inf, -0.5, 2.0, -0.25, 1.0, 0.5]
    # The gradients: 1 strictly inside, else 0 (so at 0, at +-1, at NaN: 0).
    ones = np.ones_like(z)
    assert c.relu_backward(ones, z).tolist() == [0, 0, 0, 1, 0, 0, 1, 0, 1, 1]
    assert c.hard_tanh_backward(ones, z).tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    assert c.leaky_relu_backward(ones, z, 0.25).tolist() == [
        0.25, 0.25, 0.25, 1, 0.25, 0.25, 1, 0.25, 1, 1,
    ]  # fmt: skip
    for out in (c.relu(z), found, leaky):
        assert out.dtype == dtype


# --- losses ---------------------------------------------------------------------------------


@st.composite
def scores_and_labels(
    draw: st.DrawFn, elements: Callable[..., st.SearchStrategy[float]] = finite
) -> tuple[np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from(DTYPES))
    n, classes = draw(st.integers(1, 12)), draw(st.integers(2, 20))
    scores = draw(matrix(dtype, n, classes, elements(dtype)))
    labels = draw(hnp.arrays(np.uint8, (n,), elements=st.integers(0, classes - 1)))
    return scores, labels


def squared_error_rule(scores: np.ndarray, labels: np.ndarray) -> tuple[np.floating, np.ndarray]:
    kind = scores.dtype.type
    gradient = np.empty_like(scores)
    loss = kind(0)
    for s in range(scores.shape[0]):
        total = kind(0)
        for k in range(scores.shape[1]):
            error = scores[s, k] - kind(1 if k == labels[s] else 0)
            total = total + error * error
            gradient[s, k] = error * kind(2)
        loss = loss + total
    return loss, gradient


def hinge_rule(scores: np.ndarray, labels: np.ndarray) -> tuple[np.floating, np.ndarray]:
    kind = scores.dtype.type
    gradient = np.zeros_like(scores)
    loss = kind(0)
    for s in range(scores.shape[0]):
        label, total, count = int(labels[s]), kind(0), 0
        for k in range(scores.shape[1]):
            margin = (scores[s, k] - scores[s, label]) + kind(1)
            active = k != label and margin > 0
            total = total + (margin if active else kind(0))
            gradient[s, k] = kind(1 if active else 0)
            count += active
        gradient[s, label] = -kind(count)
        loss = loss + total
    return loss, gradient


def correct_rule(scores: np.ndarray, labels: np.ndarray) -> int:
    hits = 0
    for s in range(scores.shape[0]):
        best = 0
        for k in range(1, scores.shape[1]):
            if scores[s, k] > scores[s, best]:
                best = k
        hits += best == labels[s]
    return hits


@settings(max_examples=200, deadline=None)
@given(scores_and_labels())
def test_squared_error_and_its_gradient_follow_the_scalar_rule(
    case: tuple[np.ndarray, np.ndarray],
) -> None:
    scores, labels = case
    loss, gradient = c.squared_error(scores, labels)
    expected_loss, expected_gradient = squared_error_rule(scores, labels)
    assert same_bits(loss, expected_loss)
    assert same_bits(gradient, expected_gradient)


@settings(max_examples=200, deadline=None)
@given(scores_and_labels())
def test_hinge_and_its_gradient_follow_the_scalar_rule(case: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = case
    loss, gradient = c.hinge(scores, labels)
    expected_loss, expected_gradient = hinge_rule(scores, labels)
    assert same_bits(loss, expected_loss)
    assert same_bits(gradient, expected_gradient)


def test_the_losses_on_a_worked_example() -> None:
    scores = np.float64([[0.5, 2.0, -1.0], [3.0, 3.0, 0.0]])
    labels = np.uint8([1, 0])
    loss, gradient = c.squared_error(scores, labels)
    assert loss == 0.25 + 1.0 + 1.0 + 4.0 + 9.0 + 0.0
    assert gradient.tolist() == [[1.0, 2.0, -2.0], [4.0, 6.0, 0.0]]
    # Margins (s_j - s_y) + 1: row 0 [-0.5, -, -2.0]: none; row 1 [-, 1.0, -2.0]: class 1.
    loss, gradient = c.hinge(scores, labels)
    assert loss == 1.0
    assert gradient.tolist() == [[0.0, 0.0, 0.0], [-1.0, 1.0, 0.0]]


@settings(max_examples=200, deadline=None)
@given(scores_and_labels(lambda dtype: st.sampled_from([-1.0, 0.0, 1.0, 2.0])))
def test_correct_counts_the_first_of_equal_maxima(case: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = case
    found = c.correct(scores, labels)
    assert type(found) is int
    assert found == correct_rule(scores, labels)


def test_correct_on_ties() -> None:
    scores = np.float32([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0], [-0.0, 0.0, -1.0]])
    assert c.correct(scores, np.uint8([0, 1, 0])) == 3
    assert c.correct(scores, np.uint8([1, 2, 1])) == 0


# --- randomness and initial weights ---------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 2**64 - 1),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7),
)
def test_random_is_pcg64_of_the_seed_and_nothing_else(seed: int, shape: tuple[int, ...]) -> None:
    first, again = c.Random(seed), c.Random(seed)
    drawn = first.uniform(shape)
    assert drawn.dtype == np.float64 and drawn.shape == shape
    assert same_bits(drawn, again.uniform(shape))
    assert bool(np.all((drawn >= 0) & (drawn < 1)))
    reference = np.random.Generator(np.random.PCG64(seed))
    assert same_bits(drawn, reference.random(shape))
    # A stream: the next draw continues where the last stopped, as the generator's does.
    assert same_bits(first.uniform((3,)), reference.random((3,)))
    assert not same_bits(first.uniform((4,)), again.uniform((4,)))


def test_other_seeds_draw_other_values() -> None:
    draws = {c.Random(seed).uniform((8,)).tobytes() for seed in (0, 1, 2, 2**63, 2**64 - 1)}
    assert len(draws) == 5


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(DTYPES),
    st.integers(1, 70),
    st.integers(1, 5),
    st.integers(0, 2**64 - 1),
)
def test_fan_in_uniform_rounds_each_float64_variate_once(
    dtype: type[np.floating], fan_in: int, outputs: int, seed: int
) -> None:
    weights = np.zeros((fan_in, outputs), dtype)
    c.fan_in_uniform(weights, c.Random(seed))
    uniform = np.random.Generator(np.random.PCG64(seed)).random((fan_in, outputs))
    scale = 1.0 / math.sqrt(fan_in)
    expected = np.array(
        [[dtype((float(u) - 0.5) * (2.0 * scale)) for u in row] for row in uniform], dtype
    )
    assert same_bits(weights, expected)
    assert bool(np.all(np.abs(weights) <= dtype(scale)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros_are_positive_zeros_in_the_dtype_of_like(dtype: type[np.floating]) -> None:
    found = c.zeros((2, 3), np.ones(1, dtype))
    assert found.dtype == dtype and found.shape == (2, 3)
    assert found.tobytes() == bytes(found.nbytes)
    assert c.zeros(4, np.ones(1, dtype)).shape == (4,)
