"""What a participant is doing right now: its step, the peer it waits for, its round.

One :class:`Whereabouts` per role, shared by its establishment, its channels and its
interpreter, so that whichever budget runs out (a receive, the start of an edge, the optional
session deadline) names the role, the peer, the step and the round it struck; and, in a traced
role, through which each of them writes its trace (``trace``, ``docs/trace.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from alpha.errors import BudgetExhausted

if TYPE_CHECKING:  # the type only: an untraced role loads no trace writer
    from alpha.runtime.tracing import Tracer

__all__ = ["COMPLETING", "ESTABLISHING", "RUNNING", "Whereabouts"]

ESTABLISHING: Final = "establishing"
"""Binding, announcing, connecting, accepting and greeting: before the first round."""

RUNNING: Final = "running"
"""Running the role's work (its schedule, or the edge exchange)."""

COMPLETING: Final = "completing"
"""After the work: reporting completion up the tree and learning of the commit."""


@dataclass(slots=True)
class Whereabouts:
    role: int
    step: str = "starting"
    peer: int | None = None
    round: int | None = None
    phase: str = ESTABLISHING
    committed: bool = False  # the role learned that the run committed (docs/failure.md)
    # The role's trace writer when it is traced (docs/trace.md): every part of the role that
    # shares these whereabouts records through it; None untraced, one test per hook.
    trace: Tracer | None = None

    def at(self, step: str, peer: int | None = None) -> str:
        """Record the step about to start (and the peer it waits on); return the step."""
        self.step = step
        self.peer = peer
        return step

    def exhausted(
        self, budget: str, seconds: float, *, peer: int | None, step: str | None = None
    ) -> BudgetExhausted:
        """The refusal for a wait on ``peer`` (None: on no one peer) that ran past the budget
        named ``budget`` (``seconds`` long) while this role was at ``step`` (default: the
        step it is at), in the round it is in. Every spent budget of a participant is
        built here, so each names the role, the peer, the step and the round alike."""
        return BudgetExhausted(
            role=self.role,
            peer=peer,
            step=self.step if step is None else step,
            budget=budget,
            seconds=seconds,
            when=self.when(),
        )

    def when(self) -> str:
        """The round, in words: ``round 3``, ``before the first round``, ``after round 29``."""
        if self.phase == ESTABLISHING or (self.phase == RUNNING and self.round is None):
            return "before the first round"
        if self.phase == RUNNING:
            return f"round {self.round}"
        if self.round is None:
            return "after the work, completing the run"
        return f"after round {self.round}, completing the run"
