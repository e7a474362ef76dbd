"""The ``[checkpoint]`` table of a learn plan: how often a generation is published, where, how
many are kept, and what a resume may change (docs/plans.md, docs/checkpoints.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from alpha.compiler._fields import Table, int_at, refuse_unknown, shown, str_at, table_at
from alpha.errors import PlanInvalid

__all__ = [
    "CHECKPOINT_KEYS",
    "DEFAULT_KEEP",
    "MAX_FOLDER_CHARS",
    "MAX_KEEP",
    "MAY_CHANGE",
    "CheckpointSpec",
    "read_checkpoint",
]

# The keys the table knows, in documentation order; messages list them in this order.
CHECKPOINT_KEYS: Final = ("every", "folder", "keep", "may_change")
#: The fields of a plan's identity a generation records (``docs/checkpoints.md``) that a
#: resume may change on purpose when ``checkpoint.may_change`` lists them. The learner's
#: model, the contract and the state's layout are not among them: the state would not fit.
MAY_CHANGE: Final = (
    "run",
    "membership",
    "topology",
    "optimizer",
    "rate",
    "seed",
    "batch",
    "holdout",
    "contributors",
    "data",
)
DEFAULT_KEEP: Final = 2
#: Generations kept in a checkpoint folder: more than this many is a plan that means "all",
#: which a run that publishes every round would turn into a full disk.
MAX_KEEP: Final = 1000
MAX_FOLDER_CHARS: Final = 4096


@final
@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    """The ``[checkpoint]`` table of a learn plan (``docs/checkpoints.md``).

    Attributes:
        every: rounds between generations, 1..``run.rounds``.
        folder: the checkpoint folder; ``""`` for ``runs/NAME/checkpoints``.
        keep: published generations kept, 1..MAX_KEEP.
        may_change: fields of the plan's identity (``MAY_CHANGE``) a resume may change from
            the generation's; sorted, each once.
    """

    every: int
    folder: str
    keep: int
    may_change: tuple[str, ...] = ()


def read_checkpoint(root: Table, work_kind: str, rounds: int) -> CheckpointSpec | None:
    """The ``[checkpoint]`` table of a learn plan, or None when it is absent.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "checkpoint")
    if table is None:
        return None
    refuse_unknown(table, "checkpoint", CHECKPOINT_KEYS)
    if work_kind != "learn":
        raise PlanInvalid(
            "only a learner has state to checkpoint: remove [checkpoint] or use "
            'work.kind = "learn"',
            field="checkpoint",
        )
    every = int_at(table, "checkpoint.every", low=1, high=rounds)
    folder = str_at(table, "checkpoint.folder", default="")
    if len(folder) > MAX_FOLDER_CHARS or "\0" in folder:
        raise PlanInvalid(
            f"must be a path of at most {MAX_FOLDER_CHARS} characters", field="checkpoint.folder"
        )
    keep = int_at(table, "checkpoint.keep", low=1, high=MAX_KEEP, default=DEFAULT_KEEP)
    listed = table.get("may_change", [])
    if not isinstance(listed, list) or not all(isinstance(v, str) for v in listed):
        raise PlanInvalid(
            f"must be a list of field names among {list(MAY_CHANGE)}, got {shown(listed)}",
            field="checkpoint.may_change",
        )
    unknown = [name for name in listed if name not in MAY_CHANGE]
    if unknown or len(set(listed)) != len(listed):
        raise PlanInvalid(
            f"{shown(unknown[0]) if unknown else 'a field listed twice'} is not a field a "
            f"resume may change: list each of {list(MAY_CHANGE)} at most once",
            field="checkpoint.may_change",
        )
    return CheckpointSpec(every=every, folder=folder, keep=keep, may_change=tuple(sorted(listed)))
