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
    str_at,
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

#: Learner models: the shipped MLP and linear model, or a learner module of the user's
#: (``module``, docs/learners.md); and the data sets shipped in alpha/data/ (docs/data.md): any
#: other ``dataset`` is a ``.npz`` file, pinned by ``dataset_sha256``.
LEARNER_KINDS: Final = ("mlp", "linear", "module")
DATASETS: Final = ("digits",)

#: A learner module or data set's path, as a plan writes it.
MAX_PATH_CHARS: Final = 4096

#: Options handed to a learner module: more than this many is a table of data, not options.
MAX_OPTIONS: Final = 64

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
    "module",
    "options",
    "dataset_sha256",
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
        module: with ``kind = "module"``, the learner module as the plan names it: a ``.py``
            file (relative to the plan's folder) or a dotted module name; else ``""``.
        options: with ``kind = "module"``, the ``[learner.options]`` it is handed, sorted by
            name (numbers, strings, booleans and lists of them); else ``()``.
        dataset_sha256: with a ``dataset`` that is a file, its pinned SHA-256; else ``""``.

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
    module: str = ""
    options: tuple[tuple[str, object], ...] = ()
    dataset_sha256: str = ""


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
    module, options = _module(table, kind)
    dataset, dataset_sha256 = _dataset(table)
    return LearnerSpec(
        kind=kind,
        hidden=hidden,
        rate=float_at(table, "learner.rate"),
        seed=int_at(table, "learner.seed", low=0, high=MAX_SEED, default=0),
        dataset=dataset,
        batch=int_at(table, "learner.batch", low=1, high=MAX_BATCH, default=_DEFAULT_BATCH),
        holdout=float_at(table, "learner.holdout", high=MAX_HOLDOUT, default=_DEFAULT_HOLDOUT),
        optimizer=_read_optimizer(table, dtype),
        partition=one_of(table, "learner.partition", PARTITIONS, default="none"),
        contributors=optional_int_at(table, "learner.contributors", low=1, high=MAX_CONTRIBUTORS),
        module=module,
        options=options,
        dataset_sha256=dataset_sha256,
    )


def _path_at(table: Table, dotted: str) -> str:
    """A path or module name at ``dotted``: a non-empty string of at most MAX_PATH_CHARS."""
    value = str_at(table, dotted)
    if not value or len(value) > MAX_PATH_CHARS or "\0" in value:
        raise PlanInvalid(
            f"must name a file or module in 1 to {MAX_PATH_CHARS} characters, got {value!r}",
            field=dotted,
        )
    return value


def _module(table: Table, kind: str) -> tuple[str, tuple[tuple[str, object], ...]]:
    """``module`` and ``options``, which come with ``kind = "module"`` (and only with it)."""
    if kind != "module":
        for key in ("module", "options"):
            if key in table:
                raise PlanInvalid(
                    f'is a field of learner.kind = "module" only; this learner is {kind!r}',
                    field=f"learner.{key}",
                )
        return "", ()
    if "module" not in table:
        raise PlanInvalid(
            'learner.kind = "module" needs the module: a .py file beside the plan or a '
            "dotted module name (docs/learners.md)",
            field="learner.module",
        )
    module = _path_at(table, "learner.module")
    options = table_at(table, "learner.options") or {}
    if len(options) > MAX_OPTIONS:
        raise PlanInvalid(f"holds more than {MAX_OPTIONS} options", field="learner.options")
    for name, value in options.items():
        if not _option_value(value):
            raise PlanInvalid(
                f"must be a number, a string, a boolean or a list of them, got {shown(value)}",
                field=f"learner.options.{name}",
            )
    return module, tuple(
        (name, tuple(value) if isinstance(value, list) else value)
        for name, value in sorted(options.items())
    )


def _option_value(value: object) -> bool:
    scalar = (bool, int, float, str)
    if isinstance(value, list):
        return all(isinstance(each, scalar) for each in value)
    return isinstance(value, scalar)


def _dataset(table: Table) -> tuple[str, str]:
    """``dataset`` (a shipped name or a ``.npz`` file) and ``dataset_sha256``, which pins a
    file (and only a file)."""
    dataset = _path_at(table, "learner.dataset") if "dataset" in table else DATASETS[0]
    pinned = str_at(table, "learner.dataset_sha256", default="")
    if dataset in DATASETS:
        if "dataset_sha256" in table:
            raise PlanInvalid(
                f"pins a data set file; {dataset!r} ships with alpha and is pinned by it",
                field="learner.dataset_sha256",
            )
        return dataset, ""
    if not dataset.endswith(".npz"):
        raise PlanInvalid(
            f"must be one of {', '.join(DATASETS)} or a .npz file, got {dataset!r}",
            field="learner.dataset",
        )
    if len(pinned) != 64 or not set(pinned) <= set("0123456789abcdef"):
        raise PlanInvalid(
            f"must be the SHA-256 of {dataset} as 64 lowercase hex digits (sha256sum "
            f"{dataset}), got {pinned!r}",
            field="learner.dataset_sha256",
        )
    return dataset, pinned


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
