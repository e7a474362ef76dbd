"""The learner in contract arithmetic: a small MLP (or a linear model), its gradient and its
evaluation. Its optimizers (the update of the parameters from a combined gradient) are in
``alpha.learner.optimizer``.

Every value a contribution or an update produces is computed with correctly rounded IEEE
operations on whole arrays (add, subtract, multiply, divide, maximum, comparisons), in an
order this module declares with explicit loops: no BLAS (``@``, ``np.dot``), no reductions
whose order depends on the CPU (``np.sum``'s pairwise SIMD sums), no ``exp``, ``log`` or
``tanh``. So a contribution is the same bits on x86-64 and AArch64, and a distributed run equals
the replicated learner bit for bit.

Model: ``z1 = x W1 + b1``, ``h = z1 if z1 > 0 else +0``, ``z2 = h W2 + b2`` (linear: ``z2 = x W
+ b``); loss: squared error against one-hot labels, summed over classes and samples. Parameters
live in one flat vector (``layout``), and a contribution is one flat vector too: the gradient
summed over the role's batch, then the batch's summed loss and its count of correct
predictions, so one combine carries all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "CLASSES",
    "FEATURES",
    "Model",
    "contribute",
    "evaluate",
    "initial_parameters",
]

FEATURES: Final = 64
"""Inputs: the 8x8 digit's pixels, scaled to [0, 1]."""

CLASSES: Final = 10
"""Outputs: one score per digit."""

#: Statistics appended to every contribution: summed loss, correct predictions.
STATS: Final = 2

Array = npt.NDArray[np.floating]


@final
@dataclass(frozen=True, slots=True)
class Model:
    """The shape of a learner: ``hidden`` units (None: the linear model) in ``dtype``."""

    hidden: int | None
    dtype: str

    @property
    def layout(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """The parameters in the flat vector, in order, with their shapes."""
        if self.hidden is None:
            return (("W", (FEATURES, CLASSES)), ("b", (CLASSES,)))
        h = self.hidden
        return (("W1", (FEATURES, h)), ("b1", (h,)), ("W2", (h, CLASSES)), ("b2", (CLASSES,)))

    @property
    def size(self) -> int:
        return sum(math.prod(shape) for _, shape in self.layout)

    @property
    def contribution_size(self) -> int:
        return self.size + STATS

    def unpack(self, flat: Array) -> dict[str, Array]:
        """Views of the flat vector's parts (no copies)."""
        parts: dict[str, Array] = {}
        start = 0
        for name, shape in self.layout:
            count = math.prod(shape)
            parts[name] = flat[start : start + count].reshape(shape)
            start += count
        return parts


def initial_parameters(model: Model, seed: int) -> Array:
    """Seeded initial parameters: uniform in ``[-1/sqrt(fan_in), 1/sqrt(fan_in))`` for the
    weights, zero biases. ``Generator.random`` builds each double from 53 integer bits, so the
    values are the same on every platform (unlike normal variates, whose tails use ``log``)."""
    generator = np.random.Generator(np.random.PCG64(seed))
    flat = np.zeros(model.size, dtype=model.dtype)
    parts = model.unpack(flat)
    for name, shape in model.layout:
        if name.startswith("W"):
            scale = 1.0 / math.sqrt(shape[0])  # sqrt is correctly rounded
            uniform = generator.random(shape)  # float64 in [0, 1)
            parts[name][...] = ((uniform - 0.5) * (2.0 * scale)).astype(model.dtype)
    return flat


def _affine(x: Array, weights: Array, bias: Array) -> Array:
    """``x @ weights + bias`` as an ordered fold over the inner dimension, ascending."""
    out = np.empty((x.shape[0], weights.shape[1]), dtype=x.dtype)
    out[...] = bias
    for k in range(weights.shape[0]):
        np.add(out, x[:, k : k + 1] * weights[k : k + 1, :], out=out)
    return out


def _relu(z: Array) -> Array:
    """``z`` where it is above 0, else +0: a selection, so it is the same bits on every CPU and
    GPU (``np.maximum`` leaves the sign of a zero and NaN handling to the CPU's max
    instruction)."""
    return np.where(z > 0, z, z.dtype.type(0))


def _forward(model: Model, parts: dict[str, Array], x: Array) -> tuple[Array, Array | None]:
    if model.hidden is None:
        return _affine(x, parts["W"], parts["b"]), None
    z1 = _affine(x, parts["W1"], parts["b1"])
    h = _relu(z1)
    return _affine(h, parts["W2"], parts["b2"]), z1


def _sum_rows(values: Array) -> Array:
    """Sum over the first axis, row by row in ascending order."""
    total = np.zeros(values.shape[1:], dtype=values.dtype)
    for row in values:
        np.add(total, row, out=total)
    return total


def _outer_sum(a: Array, b: Array) -> Array:
    """``sum_s outer(a[s], b[s])``, the samples folded in ascending order."""
    total = np.zeros((a.shape[1], b.shape[1]), dtype=a.dtype)
    for s in range(a.shape[0]):
        np.add(total, a[s][:, None] * b[s][None, :], out=total)
    return total


def _predictions(scores: Array) -> npt.NDArray[np.intp]:
    # argmax compares values only: exact on every CPU; the first maximum wins ties.
    found: npt.NDArray[np.intp] = np.argmax(scores, axis=1)
    return found


def contribute(model: Model, parameters: Array, x: Array, labels: npt.NDArray[np.uint8]) -> Array:
    """The gradient of the summed loss over the batch ``(x, labels)``, then the summed loss and
    the number of correct predictions: one flat vector of ``model.contribution_size``."""
    dtype = np.dtype(model.dtype)
    parts = model.unpack(parameters)
    scores, z1 = _forward(model, parts, x)
    target = np.zeros_like(scores)
    target[np.arange(len(labels)), labels] = 1
    error = scores - target
    squares = error * error
    per_sample = np.zeros(len(labels), dtype=dtype)
    for c in range(CLASSES):
        np.add(per_sample, squares[:, c], out=per_sample)
    loss = np.zeros((), dtype=dtype)
    for value in per_sample:
        loss = loss + value
    correct = dtype.type(int(np.count_nonzero(_predictions(scores) == labels)))
    dz2 = error * dtype.type(2)
    out = np.zeros(model.contribution_size, dtype=dtype)
    grads = model.unpack(out[: model.size])
    if model.hidden is None:
        grads["W"][...] = _outer_sum(x, dz2)
        grads["b"][...] = _sum_rows(dz2)
    else:
        assert z1 is not None
        h = _relu(z1)
        grads["W2"][...] = _outer_sum(h, dz2)
        grads["b2"][...] = _sum_rows(dz2)
        dh = np.zeros_like(z1)
        w2 = parts["W2"]
        for c in range(CLASSES):
            np.add(dh, dz2[:, c : c + 1] * w2[None, :, c], out=dh)
        dz1 = dh * (z1 > 0).astype(dtype)
        grads["W1"][...] = _outer_sum(x, dz1)
        grads["b1"][...] = _sum_rows(dz1)
    out[model.size] = loss
    out[model.size + 1] = correct
    return out


def evaluate(model: Model, parameters: Array, x: Array, labels: npt.NDArray[np.uint8]) -> float:
    """The share of ``x`` whose predicted digit is its label."""
    scores, _ = _forward(model, model.unpack(parameters), x)
    return int(np.count_nonzero(_predictions(scores) == labels)) / max(1, len(labels))
