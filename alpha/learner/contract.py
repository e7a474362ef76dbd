"""Contract arithmetic: the operations a learner computes its contribution with, each the same
bits on every CPU (x86-64, AArch64) and in every process, so that a distributed run equals the
replicated learner bit for bit (``docs/learners.md``, "The contract").

Every value is computed with correctly rounded IEEE operations (add, subtract, multiply,
divide, square root) and exact ones (comparisons, selections, negation), one at a time, in an
order each operation here declares. No BLAS (``@``, ``np.dot``: its summation order depends on
the CPU and the library), no reduction whose order is numpy's to choose (``np.sum`` sums
pairwise with SIMD), no transcendental (``exp``, ``log``, ``tanh``: library approximations
whose last bit differs between libms). A learner module (``docs/learners.md``) builds its
contribution from these and from elementwise array arithmetic (``+ - * /``, comparisons,
``np.where``); ``alpha compile`` checks its source for anything else.

The products of a matrix product are folded over the inner dimension in ascending order, one
rounded product and one rounded add at a time, vectorised across the outputs (which leaves each
output's order as declared): :func:`alpha.learner.kernels.fold_reference` with numpy, or the
same fold in C where a compiler is at hand, to the same bits (``docs/kernels.md``). The other
loops here are the references of their operations.
"""

from __future__ import annotations

import math
from typing import final

import numpy as np
import numpy.typing as npt

from alpha.learner.kernels import fold_products, fold_reference

__all__ = [
    "Random",
    "affine",
    "correct",
    "fan_in_uniform",
    "hard_tanh",
    "hard_tanh_backward",
    "hinge",
    "leaky_relu",
    "leaky_relu_backward",
    "matmul",
    "outer_sum",
    "relu",
    "relu_backward",
    "squared_error",
    "sum_rows",
    "zeros",
]

Array = npt.NDArray[np.floating]
Labels = npt.NDArray[np.integer]


@final
class Random:
    """The one source of randomness a learner module is handed: uniform variates in [0, 1)
    from the plan's seed, as float64, the same on every platform and in every process. Only
    ``uniform`` is offered: a module that needs other distributions builds them from it in
    contract arithmetic."""

    __slots__ = ("_generator",)

    def __init__(self, seed: int) -> None:
        self._generator = np.random.Generator(np.random.PCG64(seed))

    def uniform(self, shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
        """Uniform variates in [0, 1) of ``shape``, each from 53 random bits."""
        found: npt.NDArray[np.float64] = self._generator.random(shape)
        return found


def zeros(shape: tuple[int, ...] | int, like: Array) -> Array:
    """An array of +0 of ``shape`` in ``like``'s dtype (the contract's)."""
    return np.zeros(shape, dtype=like.dtype)


def fan_in_uniform(weights: Array, random: Random) -> None:
    """Fill ``weights`` (its first axis the inputs) with variates uniform in
    ``[-1/sqrt(fan_in), 1/sqrt(fan_in))``: ``(u - 0.5) * (2 / sqrt(fan_in))`` in float64, each
    rounded once to the weights' dtype (``sqrt`` is correctly rounded)."""
    scale = 1.0 / math.sqrt(weights.shape[0])
    uniform = random.uniform(weights.shape)
    weights[...] = ((uniform - 0.5) * (2.0 * scale)).astype(weights.dtype)


def _fold(out: Array, a: Array, b: Array) -> Array:
    """``out[i, j] += a[i, k] * b[k, j]`` for ``k`` ascending: each product rounded, then added
    and rounded, vectorised across ``(i, j)``; ``out`` is changed in place and returned."""
    if not fold_products(out, a, b):
        fold_reference(out, a, b)
    return out


def _check(a: Array, b: Array) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(
            f"a contract product needs (n, k) and (k, m) arrays of one dtype, got {a.shape} "
            f"{a.dtype} and {b.shape} {b.dtype}"
        )


def matmul(a: Array, b: Array) -> Array:
    """The product ``a b`` (``a`` of shape (n, k), ``b`` (k, m)): each output starts at +0 and
    adds ``a[i, k] * b[k, j]`` for ``k`` ascending. Transposed views (``a.T``) are fine:
    ``matmul(x.T, d)`` is the outer products of the rows summed over the samples, in order."""
    _check(a, b)
    return _fold(np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype), a, b)


def affine(x: Array, weights: Array, bias: Array) -> Array:
    """``x weights + bias``: each output starts at its bias and adds ``x[i, k] * w[k, j]`` for
    ``k`` ascending (the bias first, so it is not added last)."""
    _check(x, weights)
    out = np.empty((x.shape[0], weights.shape[1]), dtype=x.dtype)
    out[...] = bias
    return _fold(out, x, weights)


def outer_sum(a: Array, b: Array) -> Array:
    """``sum_s outer(a[s], b[s])``, the samples folded in ascending order from +0: the weight
    gradient of an affine layer (``a`` its inputs, ``b`` the gradient at its outputs)."""
    return matmul(a.T, b)


def sum_rows(values: Array) -> Array:
    """The sum over the first axis, from +0, row by row in ascending order: a bias gradient."""
    total = np.zeros(values.shape[1:], dtype=values.dtype)
    for row in values:
        np.add(total, row, out=total)
    return total


def relu(z: Array) -> Array:
    """``z`` where it is above 0, else +0: a selection, so the same bits on every CPU and GPU
    (``np.maximum`` leaves the sign of a zero and NaNs to the CPU's max instruction)."""
    return np.where(z > 0, z, z.dtype.type(0))


def relu_backward(gradient: Array, z: Array) -> Array:
    """The gradient through :func:`relu` at ``z``: ``gradient * (1 where z > 0, else 0)``."""
    return gradient * (z > 0).astype(gradient.dtype)


def leaky_relu(z: Array, slope: float) -> Array:
    """``z`` where it is above 0, else ``z * slope`` (``slope`` in the dtype of ``z``)."""
    return np.where(z > 0, z, z * z.dtype.type(slope))


def leaky_relu_backward(gradient: Array, z: Array, slope: float) -> Array:
    """The gradient through :func:`leaky_relu`: ``gradient * (1 where z > 0, else slope)``."""
    one, low = gradient.dtype.type(1), gradient.dtype.type(slope)
    return gradient * np.where(z > 0, one, low)


def hard_tanh(z: Array) -> Array:
    """``z`` clipped to [-1, 1] by selection: -1 below -1, 1 above 1."""
    one = z.dtype.type(1)
    return np.where(z > one, one, np.where(z < -one, -one, z))


def hard_tanh_backward(gradient: Array, z: Array) -> Array:
    """The gradient through :func:`hard_tanh`: ``gradient`` where ``-1 < z < 1``, else 0."""
    one = gradient.dtype.type(1)
    return gradient * ((z > -one) & (z < one)).astype(gradient.dtype)


def _one_hot(scores: Array, labels: Labels) -> Array:
    target = np.zeros_like(scores)
    target[np.arange(len(labels)), labels] = 1
    return target


def _total(per_sample: Array) -> np.floating:
    """The samples' values folded in ascending order from +0, one rounded add at a time."""
    loss: np.floating = per_sample.dtype.type(0)
    for value in per_sample:
        loss = loss + value
    return loss


def squared_error(scores: Array, labels: Labels) -> tuple[np.floating, Array]:
    """The squared error of ``scores`` (n, classes) against one-hot ``labels``, summed over the
    classes (ascending) then the samples (ascending), and its gradient ``2 (scores - target)``."""
    error = scores - _one_hot(scores, labels)
    squares = error * error
    per_sample = np.zeros(len(labels), dtype=scores.dtype)
    for c in range(scores.shape[1]):
        np.add(per_sample, squares[:, c], out=per_sample)
    return _total(per_sample), error * scores.dtype.type(2)


def hinge(scores: Array, labels: Labels) -> tuple[np.floating, Array]:
    """The multiclass hinge loss ``sum over j != y of max(0, (s_j - s_y) + 1)``, summed over
    the classes (ascending) then the samples (ascending), and its gradient: 1 at each class
    whose margin is above 0, minus their count at the label."""
    dtype = scores.dtype
    rows = np.arange(len(labels))
    margins = (scores - scores[rows, labels][:, None]) + dtype.type(1)
    active = margins > 0
    active[rows, labels] = False
    counted = np.where(active, margins, dtype.type(0))
    per_sample = np.zeros(len(labels), dtype=dtype)
    for c in range(scores.shape[1]):
        np.add(per_sample, counted[:, c], out=per_sample)
    gradient = active.astype(dtype)
    gradient[rows, labels] = -np.count_nonzero(active, axis=1).astype(dtype)
    return _total(per_sample), gradient


def correct(scores: Array, labels: Labels) -> int:
    """How many samples' highest score is at their label (comparisons only: exact on every
    CPU; the first of equal maxima wins)."""
    return int(np.count_nonzero(np.argmax(scores, axis=1) == labels))
