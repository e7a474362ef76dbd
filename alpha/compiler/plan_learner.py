"""The ``[learner]`` table of a plan whose work is ``learn``: the model, its numbers, the
optimizer and its constants, the partition and the logical contributors (docs/plans.md,
docs/learner.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from alpha.compiler._fields import (
    Table,
    float_at,
    int_at,
    one_of,
    optional_int_at,
    refuse_unknown,
    shown,
    table_at,
)
from alpha.errors import PlanInvalid
from alpha.learner.data import MAX_SEED
from alpha.learner.optimizer import (
    OPTIMIZER_CONSTANTS,
    OPTIMIZERS,
    SGD,
    Optimizer,
    constant_refusal,
)

__all__ = [
    "DATASETS",
    "LEARNER_KEYS",
    "LEARNER_KINDS",
    "MAX_BATCH",
    "MAX_CONTRIBUTORS",
    "MAX_HIDDEN",
    "MAX_HOLDOUT",
    "PARTITIONS",
    "LearnerSpec",
    "read_learner",
]

#: What a learner partitions among its roles (``docs/learner.md``, "Partitioned state").
PARTITIONS: Final = ("none", "optimizer", "gradients", "parameters")

#: Logical contributors: each is a data shard and a contribution every round; 4096 of them
#: each send a contribution toward role 0, which folds them all.
MAX_CONTRIBUTORS: Final = 4096

#: Learner models, and the data sets a learner can read (shipped in alpha/data/, docs/data.md).
LEARNER_KINDS: Final = ("mlp", "linear")
DATASETS: Final = ("digits",)

#: An MLP's hidden width. 4096 units over the digits' 64 features are far more than the data can
#: use; the bound keeps a typo from allocating a huge state in every role.
MAX_HIDDEN: Final = 4096
_DEFAULT_HIDDEN: Final = 32

#: Samples per role per round. A batch is an array in every role every round; 2**20 samples of
#: 64 float64 features are 512 MiB, past which a plan is wrong rather than ambitious.
MAX_BATCH: Final = 2**20
_DEFAULT_BATCH: Final = 32

#: The held-out share of the data set. More than half held out leaves the learner less to learn
#: from than it is judged on.
MAX_HOLDOUT: Final = 0.5
_DEFAULT_HOLDOUT: Final = 0.2

# The keys the table knows, in documentation order; messages list them in this order.
LEARNER_KEYS: Final = (
    "kind",
    "hidden",
    "rate",
    "seed",
    "dataset",
    "batch",
    "holdout",
    "optimizer",
    "momentum",
    "beta1",
    "beta2",
    "epsilon",
    "partition",
    "contributors",
)
# The optimizers' constants, in documentation order; each is a key of [learner].
_OPTIMIZER_KEYS: Final = ("momentum", "beta1", "beta2", "epsilon")


@final
@dataclass(frozen=True, slots=True)
class LearnerSpec:
    """The ``[learner]`` table of a plan whose work is ``learn``.

    Attributes:
        kind: ``"mlp"`` or ``"linear"``.
        hidden: the MLP's hidden width (1..MAX_HIDDEN); None for a linear model.
        rate: the learning rate, a finite float above 0.
        seed: the seed of initial state and sampling, 0..MAX_SEED.
        dataset: the data set's name (``"digits"``).
        batch: samples each role contributes per round, 1..MAX_BATCH.
        holdout: the share of the data set held out for evaluation, in (0, MAX_HOLDOUT].
        optimizer: the optimizer and its constants (``SGD`` unless the plan names another);
            its constants are checked in the plan's dtype too.
        partition: what is partitioned among the roles (``PARTITIONS``): ``"none"``, the
            optimizer's state (``"optimizer"``), or also the combined gradient
            (``"gradients"``), or also the parameters (``"parameters"``).
        contributors: the logical contributors whose contributions each round sums, whatever
            the number of roles that host them; None: one per role.

    Raises:
        Nothing: values are checked when a plan is read; construct through :func:`parse_plan`.
    """

    kind: str
    hidden: int | None
    rate: float
    seed: int
    dataset: str
    batch: int
    holdout: float
    optimizer: Optimizer = SGD
    partition: str = "none"
    contributors: int | None = None


def read_learner(root: Table, work_kind: str, dtype: str) -> LearnerSpec | None:
    """The ``[learner]`` table of a plan whose work is ``learn``; None for other work.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "learner")
    if work_kind != "learn":
        if table is not None:
            raise PlanInvalid(
                f"a [learner] table needs work.kind = 'learn'; this plan's work is {work_kind!r}",
                field="learner",
            )
        return None
    if table is None:
        raise PlanInvalid("work.kind = 'learn' needs a [learner] table", field="learner")
    refuse_unknown(table, "learner", LEARNER_KEYS)
    kind = one_of(table, "learner.kind", LEARNER_KINDS, default="mlp")
    hidden: int | None = None
    if kind == "mlp":
        hidden = int_at(table, "learner.hidden", low=1, high=MAX_HIDDEN, default=_DEFAULT_HIDDEN)
    elif "hidden" in table:
        raise PlanInvalid(
            f"is a field of learner.kind = 'mlp' only; this learner is {kind!r}",
            field="learner.hidden",
        )
    return LearnerSpec(
        kind=kind,
        hidden=hidden,
        rate=float_at(table, "learner.rate"),
        seed=int_at(table, "learner.seed", low=0, high=MAX_SEED, default=0),
        dataset=one_of(table, "learner.dataset", DATASETS, default=DATASETS[0]),
        batch=int_at(table, "learner.batch", low=1, high=MAX_BATCH, default=_DEFAULT_BATCH),
        holdout=float_at(table, "learner.holdout", high=MAX_HOLDOUT, default=_DEFAULT_HOLDOUT),
        optimizer=_read_optimizer(table, dtype),
        partition=one_of(table, "learner.partition", PARTITIONS, default="none"),
        contributors=optional_int_at(table, "learner.contributors", low=1, high=MAX_CONTRIBUTORS),
    )


def _read_optimizer(table: Table, dtype: str) -> Optimizer:
    """The optimizer of a [learner] table; a constant of another optimizer is refused, and
    each constant is checked as read and again as converted to the plan's ``dtype``."""
    kind = one_of(table, "learner.optimizer", OPTIMIZERS, default=SGD.kind)
    constants: dict[str, float] = {}
    for key in _OPTIMIZER_KEYS:
        dotted = f"learner.{key}"
        if key not in OPTIMIZER_CONSTANTS[kind]:
            if key in table:
                owner = next(name for name in OPTIMIZERS if key in OPTIMIZER_CONSTANTS[name])
                raise PlanInvalid(
                    f"is a field of learner.optimizer = {owner!r} only; this learner's "
                    f"optimizer is {kind!r}",
                    field=dotted,
                )
            continue
        if key not in table:
            continue
        value = table[key]
        allowed = "a finite number above 0" if key == "epsilon" else "a number in [0, 1)"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlanInvalid(f"must be {allowed}, got {shown(value)}", field=dotted)
        why = constant_refusal(key, value, dtype)
        if why is not None:
            raise PlanInvalid(why, field=dotted)
        constants[key] = float(value)
    return Optimizer.of(kind, **constants)
