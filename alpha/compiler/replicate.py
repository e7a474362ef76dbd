"""The replicated learner: one process computes every role's contribution and folds them in
the same tree order as the distributed combine, so the two runs agree bit for bit.

It can start from a saved point (:class:`Start`: the round, the parameters and the optimizer's
state after that many rounds) and stop before the plan's last round, so a resumed run can be
checked against the uninterrupted one."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alpha.compiler.plan import Plan
from alpha.compiler.work_learn import learner_setup, require_learner
from alpha.core.combine import ordered_sum
from alpha.learner.data import Dataset, features
from alpha.learner.model import evaluate, initial_parameters
from alpha.learner.optimizer import LearnerStateInvalid, OptimizerState
from alpha.learner.state import LearnerState, logical_tree, split_of

# require_learner is named here too: ``alpha run`` checks a plan with it before it replicates.
__all__ = ["Replica", "RoundHook", "Start", "replicate", "require_learner"]


@dataclass
class Replica:
    """The replicated learner's result: the parameters and the optimizer's state arrays (by
    name, as ``OptimizerState.arrays``; empty for sgd) after ``rounds`` rounds, and each
    round's ``(round, loss, training accuracy, held-out accuracy)``."""

    parameters: npt.NDArray[np.floating]
    history: list[tuple[int, float, float, float]] = field(default_factory=list)
    optimizer: dict[str, npt.NDArray[np.floating]] = field(default_factory=dict)
    rounds: int = 0
    diverged_at: int | None = None
    """The round (from 1) whose loss was not finite, where the replica stopped; None if none
    was. Its history ends with that round; its parameters are that round's (not finite)."""

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.parameters.tobytes()).hexdigest()

    def start(self) -> Start:
        """Where this replica stopped, as a starting point for another run (copies)."""
        return Start(
            self.rounds,
            self.parameters.copy(),
            {name: array.copy() for name, array in self.optimizer.items()},
        )


@dataclass(frozen=True)
class Start:
    """A run's state after ``round`` rounds: its ``parameters`` and its optimizer's state
    arrays (``OptimizerState.saved()``), from which the next round is ``round``."""

    round: int
    parameters: npt.NDArray[np.floating]
    optimizer: dict[str, npt.NDArray[np.floating]]


RoundHook = Callable[[int, float, float], None]
"""Called after each round with the rounds done, the round's loss and held-out accuracy."""


def replicate(
    plan: Plan,
    digits: Dataset,
    on_round: RoundHook | None = None,
    *,
    start: Start | None = None,
    stop: int | None = None,
) -> Replica:
    """Train the plan's learner in this process, folding contributions in contract order:
    rounds ``start.round`` (0 without a start) up to ``stop`` (the plan's rounds by default),
    each round's batches chosen by its index as in the uninterrupted run.

    Raises:
        PlanInvalid: whatever ``require_learner`` refuses.
        LearnerStateInvalid: ``start`` does not fit the plan (its round outside
            ``0..stop``, its parameters not the model's size and dtype, its optimizer arrays
            not the plan's optimizer's), or ``stop`` is outside ``0..plan.rounds``.
    """
    learner = require_learner(plan)
    setup = learner_setup(plan)
    model = setup.model
    last = plan.rounds if stop is None else stop
    if isinstance(last, bool) or not isinstance(last, int) or not 0 <= last <= plan.rounds:
        raise LearnerStateInvalid(f"stop must be a round in 0..{plan.rounds}, got {stop!r}")
    if start is None:
        first = 0
        parameters = initial_parameters(model, learner.seed)
        optimizer = OptimizerState.initial(learner.optimizer, model.size, model.dtype)
    else:
        first = start.round
        if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= last:
            raise LearnerStateInvalid(f"a start's round must be in 0..{last}, got {first!r}")
        if (
            not isinstance(start.parameters, np.ndarray)
            or start.parameters.shape != (model.size,)
            or start.parameters.dtype != np.dtype(model.dtype)
        ):
            raise LearnerStateInvalid(
                f"a start's parameters must be {model.size} {model.dtype} values, got "
                f"{getattr(start.parameters, 'shape', None)} of "
                f"{getattr(start.parameters, 'dtype', type(start.parameters).__name__)}"
            )
        optimizer = OptimizerState.restore(
            learner.optimizer, model.size, model.dtype, start.optimizer
        )
        parameters = start.parameters.copy()
    n = plan.participants
    parts = split_of(setup, digits)
    tree = plan.tree
    if learner.contributors is None:
        states = [LearnerState.for_role(setup, digits, role, parts) for role in range(n)]
    else:
        # Logical contributors: each one's shard and contribution, folded in the logical
        # tree's order whatever roles host them (docs/learner.md).
        tree = logical_tree(learner.contributors)
        states = [
            LearnerState.for_role(setup, digits, 0, parts) for _ in range(learner.contributors)
        ]
        for k, state in enumerate(states):
            state.x, state.labels = parts.shard(k)
    for state in states:
        state.first_round = first
    scratch = np.zeros(model.contribution_size, dtype=model.dtype)
    held = features(parts.holdout_x, model.dtype, digits.divisor)
    replica = Replica(parameters, optimizer=optimizer.arrays, rounds=first)
    samples = learner.batch * (learner.contributors or n)
    for index in range(last - first):

        def contribution(role: int, index: int = index) -> npt.NDArray[np.floating]:
            states[role].contribute(parameters, scratch, index)
            return scratch.copy()

        # A diverging learner's values become inf and nan, reported once below, not as a
        # warning per array (the participants do the same: alpha.schedule.operations).
        with np.errstate(over="ignore", invalid="ignore"):
            total = ordered_sum(tree, contribution)
            optimizer.step(parameters, total, rate=learner.rate, batch=samples)
            accuracy = evaluate(model, parameters, held, parts.holdout_labels)
        round = first + index
        replica.rounds = round + 1
        replica.history.append(
            (
                round,
                float(total[model.size]) / samples,
                float(total[model.size + 1]) / samples,
                accuracy,
            )
        )
        if on_round is not None:
            on_round(round + 1, replica.history[-1][1], accuracy)
        if not math.isfinite(replica.history[-1][1]):
            replica.diverged_at = round + 1  # as the distributed run stops: LossNotFinite
            break
    return replica
