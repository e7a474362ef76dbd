"""The learner's model: a learner program (:mod:`alpha.learner.program`: the shipped MLP or
linear model, or a module of the user's) with its options, over a data set's features and
classes, in the contract's dtype; its parameters in one flat vector, its contribution, its
evaluation. Its optimizers (the update of the parameters from a combined gradient) are in
``alpha.learner.optimizer``.

A contribution is one flat vector: the gradient of the loss summed over the role's batch, then
the batch's summed loss and its count of correct predictions, so one combine carries all three.
The program computes them in contract arithmetic (:mod:`alpha.learner.contract`), so a
contribution is the same bits on x86-64 and AArch64, and a distributed run equals the
replicated learner bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, final

import numpy as np
import numpy.typing as npt

from alpha.errors import LearnerModuleInvalid
from alpha.learner.contract import Random
from alpha.learner.program import Layout, Program, builtin

__all__ = [
    "CLASSES",
    "FEATURES",
    "STATS",
    "Model",
    "contribute",
    "evaluate",
    "initial_parameters",
    "options_of",
]

FEATURES: Final = 64
"""The digits' inputs: the 8x8 digit's pixels, scaled to [0, 1]."""

CLASSES: Final = 10
"""The digits' outputs: one score per digit."""

#: Statistics appended to every contribution: summed loss, correct predictions.
STATS: Final = 2

Array = npt.NDArray[np.floating]

#: A program's options, as the plan's ``[learner.options]`` gives them, sorted by name.
Options = tuple[tuple[str, object], ...]


@final
@dataclass(frozen=True, slots=True)
class Model:
    """The shape of a learner: ``program`` with ``options``, over ``features`` inputs and
    ``classes`` outputs, in ``dtype``; ``layout`` is what the program says its parameters are.

    Raises:
        LearnerModuleInvalid: the program's layout is not one (``Program.layout``).
    """

    program: Program
    dtype: str
    features: int = FEATURES
    classes: int = CLASSES
    options: Options = ()
    layout: Layout = field(init=False, compare=False)

    def __post_init__(self) -> None:
        found = self.program.layout(self.features, self.classes, dict(self.options))
        object.__setattr__(self, "layout", found)

    @classmethod
    def shipped(
        cls,
        hidden: int | None,
        dtype: str,
        features: int = FEATURES,
        classes: int = CLASSES,
    ) -> Model:
        """The shipped MLP of ``hidden`` units, or (None) the shipped linear model."""
        if hidden is None:
            return cls(builtin("linear"), dtype, features, classes)
        return cls(builtin("mlp"), dtype, features, classes, (("hidden", hidden),))

    @property
    def hidden(self) -> int | None:
        """The shipped MLP's hidden width; None for any other program (the shipped linear
        model's included): only the shipped MLP has GPU kernels (``alpha.learner.gpu``)."""
        if self.program.builtin and self.program.name == "mlp":
            width = dict(self.options)["hidden"]
            assert isinstance(width, int)
            return width
        return None

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
    """The program's initial parameters from ``seed``: the flat vector, +0 where the program's
    ``initialize`` sets nothing.

    Raises:
        LearnerModuleInvalid: ``initialize`` failed.
    """
    flat = np.zeros(model.size, dtype=model.dtype)
    model.program.call("initialize", model.unpack(flat), Random(seed))
    return flat


def contribute(model: Model, parameters: Array, x: Array, labels: npt.NDArray[np.integer]) -> Array:
    """The gradient of the summed loss over the batch ``(x, labels)``, then the summed loss and
    the number of correct predictions: one flat vector of ``model.contribution_size``.

    Raises:
        LearnerModuleInvalid: the program's ``contribute`` failed or did not return
            ``(loss, correct)``.
    """
    out = np.zeros(model.contribution_size, dtype=model.dtype)
    found = model.program.call(
        "contribute", model.unpack(parameters), model.unpack(out[: model.size]), x, labels
    )
    loss, correct = _loss_and_correct(model.program.name, found)
    out[model.size] = loss
    out[model.size + 1] = np.dtype(model.dtype).type(correct)
    return out


def _loss_and_correct(module: str, found: object) -> tuple[object, int]:
    loss, correct = found if isinstance(found, tuple) and len(found) == 2 else (None, None)
    scalar = isinstance(loss, float | np.floating) or (
        isinstance(loss, np.ndarray) and loss.shape == ()
    )
    if scalar and isinstance(correct, int | np.integer) and not isinstance(correct, bool):
        return loss, int(correct)
    raise LearnerModuleInvalid(
        module,
        f"contribute() must return (summed loss, correct count): a float and an int, got {found!r}",
    )


def evaluate(model: Model, parameters: Array, x: Array, labels: npt.NDArray[np.integer]) -> float:
    """The share of ``x`` the program predicts right.

    Raises:
        LearnerModuleInvalid: the program's ``evaluate`` failed or did not return an int.
    """
    found = model.program.call("evaluate", model.unpack(parameters), x, labels)
    if isinstance(found, bool) or not isinstance(found, int | np.integer):
        raise LearnerModuleInvalid(
            model.program.name, f"evaluate() must return the correct count, an int, got {found!r}"
        )
    return int(found) / max(1, len(labels))


def options_of(options: Mapping[str, object]) -> Options:
    """``options`` as a Model holds them: sorted by name, a list as a tuple (a plan's
    ``[learner.options]`` holds numbers, strings, booleans and lists of them)."""
    return tuple(
        (name, tuple(value) if isinstance(value, list) else value)
        for name, value in sorted(options.items())
    )
