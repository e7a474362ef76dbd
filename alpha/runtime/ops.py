"""Local operations and selectors, as each target realizes them (numpy on the host CPUs).

Every operation is contract arithmetic: elementwise IEEE operations in a declared order, no
BLAS and no transcendental functions, so x86-64 and AArch64 participants compute the same
bits. The declarations (name, kind, targets) that compile-time checks use are in
``alpha.program``; this module holds the implementations the runtime calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from alpha.errors import ArtifactInvalid, CheckFailed
from alpha.learner.program import LearnerState

__all__ = ["LOCAL_OPS", "SELECTORS", "Context"]


@dataclass
class Context:
    """What an operation may know: who runs it, in which round, in which run, the role's
    buffers, and (for the learner) its model and data."""

    role: int
    participants: int
    round: int = 0
    buffers: dict[str, Any] = field(default_factory=dict)
    learner: LearnerState | None = None

    def need_learner(self) -> LearnerState:
        if self.learner is None:
            raise ArtifactInvalid(
                f"role {self.role}: its schedule runs a learner operation, but its artifact "
                "carries no learner data; recompile it"
            )
        return self.learner


Array = npt.NDArray[Any]


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
            f"{region.flat[index]!r}, but the sum over {n} roles is {expected}"
        )


LOCAL_OPS: Final[dict[str, Callable[[Context, Array], None]]] = {
    "fill": lambda ctx, region: _fill(ctx, region, 1),
    "fill_neg": lambda ctx, region: _fill(ctx, region, -1),
    "check_sum": lambda ctx, region: _check(ctx, region, 1),
    "check_neg_sum": lambda ctx, region: _check(ctx, region, -1),
    "init": lambda ctx, w: ctx.need_learner().init(w),
    "contribute": lambda ctx, g: ctx.need_learner().contribute(ctx.buffers["w"], g, ctx.round),
    "update": lambda ctx, g: ctx.need_learner().update(ctx.buffers["w"], g),
    "observe": lambda ctx, g: ctx.need_learner().observe(ctx.buffers["w"], g, ctx.round, ctx.role),
}

SELECTORS: Final[dict[str, Callable[[Context], int]]] = {
    "parity": lambda ctx: ctx.round % 2,
    "const-0": lambda ctx: 0,
    "const-1": lambda ctx: 1,
    "const-2": lambda ctx: 2,
}
