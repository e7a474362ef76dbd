"""The learner's optimizers in contract arithmetic: SGD, momentum and Adam, with their state.

Every role steps its own copy of the parameters with the same combined gradient, so every
role's optimizer must compute the same bits, on every CPU. Each step is therefore elementwise
and made of correctly rounded IEEE operations on whole arrays: add, subtract, multiply, divide
and square root (IEEE 754 requires ``sqrt`` to be correctly rounded, like the four others, so
it has one result on every conforming CPU). There is no ``exp``, ``log`` or ``pow``: Adam's
bias corrections use the running products of its betas, kept as state, instead of
``beta ** t``. Every constant is converted to the model's dtype first and every operation is
done in that dtype, in the order written below (``T`` is the dtype, ``d = g / T(samples)``,
``samples`` the batch of every role together):

* ``sgd``: ``w := w - T(rate) * d``.
* ``momentum``: ``v := T(momentum) * v + d``; ``w := w - T(rate) * v``.
* ``adam``: ``m := T(beta1) * m + (T(1) - T(beta1)) * d``;
  ``v := T(beta2) * v + (T(1) - T(beta2)) * (d * d)``;
  ``p1 := p1 * T(beta1)``; ``p2 := p2 * T(beta2)``;
  ``mhat := m / (T(1) - p1)``; ``vhat := v / (T(1) - p2)``;
  ``w := w - (T(rate) * mhat) / (sqrt(vhat) + T(epsilon))``.

Because each element's new value depends on that element and the shared scalars ``p1, p2``
alone, a step can be taken range by range (:meth:`OptimizerState.step_range`, then
:meth:`OptimizerState.advance` once): the result is the whole step's, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from alpha.errors import LearnerStateInvalid

__all__ = [
    "DEFAULT_BETA1",
    "DEFAULT_BETA2",
    "DEFAULT_EPSILON",
    "DEFAULT_MOMENTUM",
    "OPTIMIZERS",
    "OPTIMIZER_CONSTANTS",
    "OPTIMIZER_DTYPES",
    "SGD",
    "LearnerStateInvalid",
    "Optimizer",
    "OptimizerState",
    "constant_refusal",
]

#: The optimizers, the first the default (plain SGD, the learner's original step).
OPTIMIZERS: Final = ("sgd", "momentum", "adam")

#: The constants each optimizer takes, in the order of the plan's documentation.
OPTIMIZER_CONSTANTS: Final[Mapping[str, tuple[str, ...]]] = {
    "sgd": (),
    "momentum": ("momentum",),
    "adam": ("beta1", "beta2", "epsilon"),
}

#: The state arrays each optimizer keeps, and whether each is per parameter (else one element,
#: a scalar shared by every range of the parameters).
_STATE: Final[Mapping[str, tuple[tuple[str, bool], ...]]] = {
    "sgd": (),
    "momentum": (("v", True),),
    "adam": (("m", True), ("v", True), ("p1", False), ("p2", False)),
}

#: The dtypes a model (and so an optimizer's state) is computed in.
OPTIMIZER_DTYPES: Final = ("float32", "float64")

DEFAULT_MOMENTUM: Final = 0.9
DEFAULT_BETA1: Final = 0.9
DEFAULT_BETA2: Final = 0.999
DEFAULT_EPSILON: Final = 1e-8
_DEFAULTS: Final[Mapping[str, float]] = {
    "momentum": DEFAULT_MOMENTUM,
    "beta1": DEFAULT_BETA1,
    "beta2": DEFAULT_BETA2,
    "epsilon": DEFAULT_EPSILON,
}

Array = npt.NDArray[np.floating]


def constant_refusal(name: str, value: object, dtype: str = "float64") -> str | None:
    """Why ``value`` cannot be the optimizer constant ``name`` computed in ``dtype``, or None.

    ``momentum``, ``beta1`` and ``beta2`` are in [0, 1); ``epsilon`` is finite and above 0.
    Each must stay so once converted to ``dtype``: 0.99999999 is 1.0 in float32, which would
    stop Adam's bias correction (``1 - p1`` would be 0), and 1e-50 is 0 in float32.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, got {value!r}"
    number = float(value)
    with np.errstate(over="ignore"):  # a value past the dtype's range is refused below
        exact = float(np.array(number, dtype=np.float64).astype(dtype))
    if name == "epsilon":
        if not (math.isfinite(number) and number > 0):
            return f"must be a finite number above 0, got {value!r}"
        if not (math.isfinite(exact) and exact > 0):
            return f"must stay finite and above 0 in {dtype}, where {value!r} is {exact!r}"
        return None
    if not (math.isfinite(number) and 0 <= number < 1):
        return f"must be a number in [0, 1), got {value!r}"
    if not exact < 1:
        return f"must stay below 1 in {dtype}, where {value!r} is {exact!r}"
    return None


@final
@dataclass(frozen=True, slots=True)
class Optimizer:
    """What a learner's optimizer is: its ``kind`` (one of ``OPTIMIZERS``) and its constants,
    None where they do not apply (``momentum`` for ``"momentum"``; ``beta1``, ``beta2`` and
    ``epsilon`` for ``"adam"``).

    Raises:
        LearnerStateInvalid: an unknown kind, a constant the kind does not take, one it needs
            missing, or one out of range (:func:`constant_refusal`, in float64).
    """

    kind: str = "sgd"
    momentum: float | None = None
    beta1: float | None = None
    beta2: float | None = None
    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise LearnerStateInvalid(
                f"unknown optimizer {self.kind!r}; the optimizers are {', '.join(OPTIMIZERS)}"
            )
        wanted = OPTIMIZER_CONSTANTS[self.kind]
        for name in _DEFAULTS:
            value = getattr(self, name)
            if name not in wanted:
                if value is not None:
                    raise LearnerStateInvalid(
                        f"{name} is not a constant of the {self.kind!r} optimizer"
                    )
                continue
            if value is None:
                raise LearnerStateInvalid(f"the {self.kind!r} optimizer needs {name}")
            why = constant_refusal(name, value)
            if why is not None:
                raise LearnerStateInvalid(f"optimizer {name} {why}")
            # Held as a float: the run identity encodes 0 and 0.0 differently.
            object.__setattr__(self, name, float(value))

    @classmethod
    def of(cls, kind: str, **constants: float) -> Optimizer:
        """``kind`` with its constants, those not given at their defaults:
        ``Optimizer.of("adam", beta2=0.99)``.

        Raises:
            LearnerStateInvalid: as the constructor; or a constant's name is unknown.
        """
        unknown = sorted(set(constants) - set(_DEFAULTS))
        if unknown:
            raise LearnerStateInvalid(
                f"unknown optimizer constant(s) {unknown}; the constants are {', '.join(_DEFAULTS)}"
            )
        wanted = OPTIMIZER_CONSTANTS.get(kind, ())
        values = {name: constants.get(name, _DEFAULTS[name]) for name in wanted}
        # A constant the kind does not take is passed on, for the constructor to refuse.
        values.update((name, value) for name, value in constants.items() if name not in wanted)
        return cls(kind, **values)

    @property
    def constants(self) -> dict[str, float]:
        """The constants the kind takes, by name, in documentation order."""
        found: dict[str, float] = {}
        for name in OPTIMIZER_CONSTANTS[self.kind]:
            value = getattr(self, name)
            assert value is not None  # checked at construction
            found[name] = value
        return found

    def state_layout(self, size: int) -> tuple[tuple[str, int], ...]:
        """The state arrays' names and lengths for ``size`` parameters, in a fixed order."""
        return tuple((name, size if per_element else 1) for name, per_element in _STATE[self.kind])


SGD: Final = Optimizer()
"""The default optimizer: plain SGD, no state."""


def _dtype_of(dtype: str | np.dtype[Any]) -> np.dtype[Any]:
    """The native dtype named by ``dtype``.

    Raises:
        LearnerStateInvalid: not float32 or float64.
    """
    name = dtype.name if isinstance(dtype, np.dtype) else dtype
    if name not in OPTIMIZER_DTYPES:
        raise LearnerStateInvalid(
            f"an optimizer's state is {' or '.join(OPTIMIZER_DTYPES)}, not {dtype!r}"
        )
    return np.dtype(name)


@final
class OptimizerState:
    """An optimizer with its state: named arrays of the model's dtype (``arrays``: none for
    sgd; ``v`` for momentum; ``m``, ``v`` of the parameters' size and ``p1``, ``p2`` of one
    element for adam). Build one with :meth:`initial` (a fresh run) or :meth:`restore` (from
    saved arrays); step it with :meth:`step`, or range by range with :meth:`step_range` and
    then :meth:`advance`.

    ``arrays`` is the live state: save copies of its arrays (``saved()``), never alias them.
    """

    __slots__ = ("_constants", "arrays", "dtype", "optimizer", "size")

    def __init__(
        self, optimizer: Optimizer, size: int, dtype: np.dtype[Any], arrays: dict[str, Array]
    ) -> None:
        # Private: callers go through initial() or restore(), which check.
        self.optimizer = optimizer
        self.size = size
        self.dtype = dtype
        self.arrays = arrays
        # Every constant converted to the dtype once: T(1), and the optimizer's own.
        t = dtype.type
        self._constants: dict[str, np.floating[Any]] = {"one": t(1)} | {
            name: t(value) for name, value in optimizer.constants.items()
        }

    @classmethod
    def initial(cls, optimizer: Optimizer, size: int, dtype: str | np.dtype[Any]) -> OptimizerState:
        """The state before the first step: zero moments, running products 1.

        Raises:
            LearnerStateInvalid: ``size`` is not a positive int, ``dtype`` not float32 or
                float64, or a constant of ``optimizer`` leaves its range in ``dtype``.
        """
        found = _check_setting(optimizer, size, dtype)
        arrays: dict[str, Array] = {}
        for name, length in optimizer.state_layout(size):
            fill = 1 if name in ("p1", "p2") else 0
            arrays[name] = np.full(length, fill, dtype=found)
        return cls(optimizer, size, found, arrays)

    @classmethod
    def restore(
        cls,
        optimizer: Optimizer,
        size: int,
        dtype: str | np.dtype[Any],
        arrays: Mapping[str, object],
    ) -> OptimizerState:
        """The state held by ``arrays`` (say, read from a checkpoint), copied.

        Raises:
            LearnerStateInvalid: as :meth:`initial`; or a name of ``optimizer.state_layout``
                is missing from ``arrays`` or one is extra, or an array is not a numpy array
                of shape ``(length,)`` and exactly ``dtype`` (no conversion is ever made: a
                float64 state restored as float32 would not be the run's state).
        """
        found = _check_setting(optimizer, size, dtype)
        layout = optimizer.state_layout(size)
        names = [name for name, _ in layout]
        extra = sorted(set(arrays) - set(names))
        missing = [name for name in names if name not in arrays]
        if extra or missing:
            raise LearnerStateInvalid(
                f"the {optimizer.kind!r} optimizer's state is {names or 'no arrays'}; "
                f"missing {missing}, extra {extra}"
            )
        copied: dict[str, Array] = {}
        for name, length in layout:
            array = arrays[name]
            if not isinstance(array, np.ndarray):
                raise LearnerStateInvalid(
                    f"optimizer state {name!r} must be a numpy array, got {type(array).__name__}"
                )
            if array.shape != (length,) or array.dtype != found:
                raise LearnerStateInvalid(
                    f"optimizer state {name!r} must have shape ({length},) and dtype "
                    f"{found.name}, got shape {array.shape} and dtype {array.dtype}"
                )
            copied[name] = np.array(array, dtype=found, copy=True)
        return cls(optimizer, size, found, copied)

    def saved(self) -> dict[str, Array]:
        """Copies of the state arrays, by name: what :meth:`restore` takes back."""
        return {name: array.copy() for name, array in self.arrays.items()}

    def step(self, w: Array, total: Array, *, rate: float, batch: int) -> None:
        """One whole step in place: every parameter of ``w`` from the combined ``total`` (a
        contribution: the gradient summed over ``batch`` samples, then statistics, which are
        ignored), then :meth:`advance`.

        Raises:
            LearnerStateInvalid: ``w`` is not the state's size and dtype, ``total`` shorter
                or of another dtype; nothing is changed.
        """
        if total.ndim != 1 or total.shape[0] < self.size:
            raise LearnerStateInvalid(
                f"the combined total has shape {total.shape}; it must hold {self.size} "
                "gradient elements first"
            )
        self.step_range(w, total[: self.size], 0, self.size, rate=rate, batch=batch)
        self.advance()

    def step_range(
        self, w_part: Array, total_part: Array, start: int, stop: int, *, rate: float, batch: int
    ) -> None:
        """Step the parameters ``[start, stop)`` in place: ``w_part`` and ``total_part`` are
        those elements of ``w`` and of the gradient, and the state's per-parameter arrays are
        read and written at ``[start, stop)``. The running products are read, not moved: a
        step is ``step_range`` once over each of ranges that cover ``[0, size)``, then
        :meth:`advance` once; it equals :meth:`step` bit for bit, whatever the ranges.

        Raises:
            LearnerStateInvalid: the range is not within ``[0, size]`` or the parts are not
                1-d arrays of its length and the state's dtype; nothing is changed.
        """
        self._check_range(w_part, total_part, start, stop)
        t, c = self.dtype.type, self._constants
        d = total_part / t(batch)
        kind = self.optimizer.kind
        if kind == "sgd":
            np.subtract(w_part, t(rate) * d, out=w_part)
            return
        if kind == "momentum":
            v = self.arrays["v"][start:stop]
            np.add(c["momentum"] * v, d, out=v)
            np.subtract(w_part, t(rate) * v, out=w_part)
            return
        one, beta1, beta2 = c["one"], c["beta1"], c["beta2"]
        m = self.arrays["m"][start:stop]
        v = self.arrays["v"][start:stop]
        np.add(beta1 * m, (one - beta1) * d, out=m)
        np.add(beta2 * v, (one - beta2) * (d * d), out=v)
        p1, p2 = self._products()
        mhat = m / (one - p1)
        vhat = v / (one - p2)
        np.subtract(w_part, (t(rate) * mhat) / (np.sqrt(vhat) + c["epsilon"]), out=w_part)

    def advance(self) -> None:
        """End a step: move the running products (adam's ``p1 := p1 * beta1``, ``p2 := p2 *
        beta2``); nothing for the others. Call it once per step, after every range."""
        if self.optimizer.kind == "adam":
            p1, p2 = self._products()
            self.arrays["p1"][...] = p1
            self.arrays["p2"][...] = p2

    def _products(self) -> tuple[Array, Array]:
        """Adam's running products after this step: ``p1 * T(beta1)``, ``p2 * T(beta2)``."""
        c = self._constants
        return self.arrays["p1"] * c["beta1"], self.arrays["p2"] * c["beta2"]

    def _check_range(self, w_part: Array, total_part: Array, start: int, stop: int) -> None:
        if not (
            isinstance(start, int)
            and isinstance(stop, int)
            and not isinstance(start, bool)
            and not isinstance(stop, bool)
            and 0 <= start <= stop <= self.size
        ):
            raise LearnerStateInvalid(
                f"a range of the parameters is within [0, {self.size}], got [{start!r}, {stop!r})"
            )
        for what, part in (("parameters", w_part), ("gradient", total_part)):
            if not isinstance(part, np.ndarray) or part.ndim != 1 or part.shape[0] != stop - start:
                raise LearnerStateInvalid(
                    f"the {what} of range [{start}, {stop}) must be a 1-d array of "
                    f"{stop - start} elements, got {getattr(part, 'shape', type(part).__name__)}"
                )
            if part.dtype != self.dtype:
                raise LearnerStateInvalid(
                    f"the {what} are {part.dtype}, but the optimizer computes in {self.dtype.name}"
                )


def _check_setting(optimizer: Optimizer, size: int, dtype: str | np.dtype[Any]) -> np.dtype[Any]:
    """The dtype, once ``size`` and ``optimizer``'s constants in it are checked.

    Raises:
        LearnerStateInvalid: see :meth:`OptimizerState.initial`.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise LearnerStateInvalid(f"an optimizer steps at least 1 parameter, got {size!r}")
    found = _dtype_of(dtype)
    for name, value in optimizer.constants.items():
        why = constant_refusal(name, value, found.name)
        if why is not None:
            raise LearnerStateInvalid(f"optimizer {name} {why}")
    return found
