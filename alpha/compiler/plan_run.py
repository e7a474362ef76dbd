"""The ``[run]`` table of a plan: the run's name, its rounds and its epoch (docs/plans.md)."""

from __future__ import annotations

import re
from typing import Final

from alpha.compiler._fields import Table, int_at, refuse_unknown, required_table, str_at
from alpha.core.membership import MAX_EPOCH
from alpha.errors import PlanInvalid

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_ROUNDS",
    "RUN_KEYS",
    "read_run",
]

#: Rounds are the count of the protocol's outer repeat, which travels as a u64, but every
#: round spends one version of each slot's per-slot counter; 2**32 - 1 keeps a run's versions far
#: inside the u64 version space even with several transfers per slot and round, and is more
#: rounds than any run needs.
MAX_ROUNDS: Final = 2**32 - 1

#: A run's name names directories, artifacts and log lines; 64 characters of [a-z0-9._-] are
#: enough to be descriptive and keep every path and line short and shell-safe.
MAX_NAME_CHARS: Final = 64
_NAME: Final = re.compile(r"[a-z0-9._-]+")

# The keys the table knows, in documentation order; messages list them in this order.
RUN_KEYS: Final = ("name", "rounds", "epoch")


def read_run(root: Table) -> tuple[str, int, int]:
    """The ``[run]`` table: name, rounds and epoch.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    run = required_table(root, "run")
    refuse_unknown(run, "run", RUN_KEYS)
    name = str_at(run, "run.name")
    if len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        raise PlanInvalid(
            f"must be 1..{MAX_NAME_CHARS} characters of a-z, 0-9, '.', '_' and '-', got {name!r}",
            field="run.name",
        )
    rounds = int_at(run, "run.rounds", low=1, high=MAX_ROUNDS)
    epoch = int_at(run, "run.epoch", low=0, high=MAX_EPOCH, default=0)
    return name, rounds, epoch
