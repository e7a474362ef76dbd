"""The replicated learner: one process computes every role's contribution and folds them in
the same tree order as the distributed combine, so the two runs agree bit for bit."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alpha.combine import ordered_sum
from alpha.learner.data import Digits, features
from alpha.learner.model import evaluate, initial_parameters, update
from alpha.learner.program import LearnerState, model_of, split_of
from alpha.learner.protocol import require_learner
from alpha.plan import Plan

# require_learner is named here too: ``alpha run`` checks a plan with it before it replicates.
__all__ = ["Replica", "RoundHook", "replicate", "require_learner"]


@dataclass
class Replica:
    parameters: npt.NDArray[np.floating]
    history: list[tuple[int, float, float, float]] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.parameters.tobytes()).hexdigest()


RoundHook = Callable[[int, float, float], None]
"""Called after each round with the rounds done, the round's loss and held-out accuracy."""


def replicate(plan: Plan, digits: Digits, on_round: RoundHook | None = None) -> Replica:
    """Train the plan's learner in this process, folding contributions in contract order."""
    learner = require_learner(plan)
    model = model_of(plan)
    n = plan.participants
    parts = split_of(plan, digits)
    states = [LearnerState.for_role(plan, digits, role, parts) for role in range(n)]
    parameters = initial_parameters(model, learner.seed)
    scratch = np.zeros(model.contribution_size, dtype=model.dtype)
    held = features(parts.holdout_pixels, model.dtype)
    replica = Replica(parameters)
    samples = learner.batch * n
    for round in range(plan.rounds):

        def contribution(role: int, round: int = round) -> npt.NDArray[np.floating]:
            states[role].contribute(parameters, scratch, round)
            return scratch.copy()

        total = ordered_sum(plan.tree, contribution)
        update(model, parameters, total, rate=learner.rate, batch=samples)
        accuracy = evaluate(model, parameters, held, parts.holdout_labels)
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
    return replica
