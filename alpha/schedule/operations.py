"""Every local operation and selector, implemented once: the one registry of their names.

An operation's name exists because its implementation is registered here, in ``LOCAL_OPS`` or
``SELECTORS``; everything else reads the names from these tables: the plan's choices
(``alpha.compiler.plan.CHOICES``), the programs' declarations of where each is realized
(``alpha.compiler.work_sum_check.SUM_CHECK_OPERATIONS``,
``alpha.compiler.work_learn.learner_operations``)
and the interpreter (``alpha.runtime.interpreter``). So an operation cannot be declared without
being implemented, and ``alpha compile`` refuses a protocol that names one this registry lacks
(``alpha.compiler.implemented.unimplemented``, which reads these tables) rather than let a
participant fail on it mid-run. The registry knows nothing of the compiler's forms: the
schedule is below the compiler, so the check that walks a protocol lives up there.

The module is pure numpy (no trio, no runtime), so the pure layers (plan, kinds of work, forms)
may import it: that is why it lives here and not in ``alpha.runtime``, whose package imports
trio. Every operation is contract arithmetic: elementwise IEEE operations in a declared order,
no BLAS and no transcendental functions, so x86-64 and AArch64 participants compute the same
bits.
"""

from __future__ import annotations

import mmap
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from alpha.errors import ArtifactInvalid, CheckFailed
from alpha.schedule.learner_regions import CONTRIBUTIONS, PARAMETERS, STORE

__all__ = [
    "LEARNER_OPS",
    "LOCAL_OPS",
    "SELECTORS",
    "SUM_CHECK_OPS",
    "Context",
    "Learner",
    "LocalOp",
    "Selector",
]


Floats = npt.NDArray[np.floating]


class Learner(Protocol):
    """What the learner's operations ask of a role's learner, by structure: the learner's
    run-time half (``alpha.learner.state.LearnerState``) has these methods. The schedule is
    below the learner, so it names what it calls without importing it, not even for types."""

    def init(self, w: Floats, /) -> None: ...
    def contribute(self, w: Floats, g: Floats, round: int, /) -> None: ...
    def update(self, w: Floats, g: Floats, /) -> None: ...
    def contribute_logical(self, w: Floats, c: Floats, round: int, /) -> None: ...
    def fold_logical(self, c: Floats, g: Floats, /) -> None: ...
    def keep_own(self, w: Floats, p: Floats, /) -> None: ...
    def load_own(self, w: Floats, p: Floats, /) -> None: ...
    def observe(self, w: Floats, g: Floats, round: int, role: int, /) -> None: ...
    def save(self, w: Floats, k: Array, round: int, /) -> None: ...
    def publish(self, k: Array, round: int, /) -> None: ...


@dataclass
class Context:
    """What an operation may know: who runs it, in which round, in which run, the role's
    buffers, and (for the learner) its model and data."""

    role: int
    participants: int
    round: int = 0
    buffers: dict[str, Any] = field(default_factory=dict)
    learner: Learner | None = None

    def need_learner(self) -> Learner:
        """
        Raises:
            ArtifactInvalid: the role runs a learner operation but was given no learner.
        """
        if self.learner is None:
            raise ArtifactInvalid(
                f"role {self.role}: its schedule runs a learner operation, but its artifact "
                "carries no learner data; recompile it"
            )
        return self.learner


Array = npt.NDArray[Any]
LocalOp = Callable[[Context, Array], None]
"""A local operation: it reads the context and rewrites one region in place."""
Selector = Callable[[Context], int]
"""A selector: the authority's word for a choice, 0 or 1 (anything else aborts the round)."""


def _fill(ctx: Context, region: Array, sign: int) -> None:
    # Small whole numbers: exact in float32 and float64, so sums are exact too and a check
    # can compare with the closed form.
    region[...] = sign * (ctx.role + 1) * (ctx.round + 1)


def _check(ctx: Context, region: Array, sign: int) -> None:
    n = ctx.participants
    expected = sign * (ctx.round + 1) * n * (n + 1) // 2
    wrong = np.flatnonzero(region != expected)
    if wrong.size:
        index = int(wrong[0])
        raise CheckFailed(
            f"role {ctx.role}, round {ctx.round}: element {index} of the combined sum is "
            f"{region.flat[index].item()!r}, but the sum over {n} roles is {expected}"
        )


SUM_CHECK_OPS: Final[dict[str, LocalOp]] = {
    "fill": lambda ctx, region: _fill(ctx, region, 1),
    "fill_neg": lambda ctx, region: _fill(ctx, region, -1),
    "check_sum": lambda ctx, region: _check(ctx, region, 1),
    "check_neg_sum": lambda ctx, region: _check(ctx, region, -1),
}
"""The sum check's local operations (``alpha.compiler.work`` declares them on every host)."""


def release(region: Array) -> None:
    """Give a transient region's memory back to the system: its pages are dropped
    (``MADV_DONTNEED``) and read as zeros until written again. A region not in a mapping of
    its own is zeroed instead (the bytes are gone either way)."""
    base: object = region
    while isinstance(base, np.ndarray):  # a view's base is the array it views
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer keeps the buffer's memoryview
        base = base.obj
    if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        base.madvise(mmap.MADV_DONTNEED)
    else:
        region.fill(0)


def _update(ctx: Context, g: Array) -> None:
    store = ctx.buffers[STORE] if STORE in ctx.buffers else ctx.buffers[PARAMETERS]
    ctx.need_learner().update(store, g)


def _own(ctx: Context) -> Array:
    """The parameters as this role keeps them between rounds: its own range with partitioned
    parameters (``p``), else the whole parameters."""
    own: Array = ctx.buffers[STORE] if STORE in ctx.buffers else ctx.buffers[PARAMETERS]
    return own


def _quiet(op: LocalOp) -> LocalOp:
    """``op`` with numpy's overflow and invalid-value warnings off: a diverging learner's
    values become inf and nan, which ``observe`` reports once, as ``LossNotFinite``, instead of
    a warning per array on every role's log."""

    def quiet(ctx: Context, region: Array) -> None:
        with np.errstate(over="ignore", invalid="ignore"):
            op(ctx, region)

    return quiet


LEARNER_OPS: Final[dict[str, LocalOp]] = {
    "init": lambda ctx, w: ctx.need_learner().init(w),
    "keep_own": lambda ctx, p: ctx.need_learner().keep_own(ctx.buffers[PARAMETERS], p),
    "load_own": lambda ctx, p: ctx.need_learner().load_own(ctx.buffers[PARAMETERS], p),
    "release": lambda ctx, region: release(region),
    "contribute_logical": lambda ctx, c: ctx.need_learner().contribute_logical(
        ctx.buffers[PARAMETERS], c, ctx.round
    ),
    "fold_logical": lambda ctx, g: ctx.need_learner().fold_logical(ctx.buffers[CONTRIBUTIONS], g),
    "contribute": lambda ctx, g: ctx.need_learner().contribute(
        ctx.buffers[PARAMETERS], g, ctx.round
    ),
    "update": _update,
    # A generation round of a checkpointed run (docs/checkpoints.md): every owner writes its
    # ranges of the state, durably, and its owner manifest's digest into its entry of ``k``;
    # role 0, once every entry has come up the tree, publishes the generation.
    "save": lambda ctx, k: ctx.need_learner().save(_own(ctx), k, ctx.round),
    "publish": lambda ctx, k: ctx.need_learner().publish(k, ctx.round),
    "observe": lambda ctx, g: ctx.need_learner().observe(
        ctx.buffers[PARAMETERS], g, ctx.round, ctx.role
    ),
}
LEARNER_OPS.update({name: _quiet(op) for name, op in LEARNER_OPS.items()})
"""The learner's local operations (``alpha.compiler.work_learn`` declares where each runs)."""

LOCAL_OPS: Final[Mapping[str, LocalOp]] = ChainMap(SUM_CHECK_OPS, LEARNER_OPS)
"""Every local operation, by name: a live view of the two tables above, not a copy."""

SELECTORS: Final[dict[str, Selector]] = {
    "parity": lambda ctx: ctx.round % 2,
    "const-0": lambda ctx: 0,
    "const-1": lambda ctx: 1,
    # 2 is not an arm: this selector exists to show that a word out of range is refused at
    # run time, so a plan may name it.
    "const-2": lambda ctx: 2,
}
"""Every selector, by name; each is a plan's possible ``work.choice``."""
