"""What a failed launch's first failure was, as a class of failure that ``alpha run
--restarts`` retries or does not (``docs/recovery.md``). Sans-IO: it reads a
:class:`~alpha.launch.outcome.RoleOutcome` (the launcher's finding and the failed role's one
line), never a process or a file.

A failure is retried only when a fresh attempt, from the last published generation, as a new
epoch, with fresh keys, can end otherwise: a role or its host is gone (``lost``), a frame was
refused on the way (``refused``: what a line or a relay did to bytes is not in the plan), or a
wait ran past its budget (``budget``: a stalled role, a lost packet). It is never retried when
the same attempt would fail the same way: the learner diverged (``divergence``: the same
bits give the same loss), the plan, an artifact or an input is wrong (``usage``), or the run
itself erred (``error``: a check that failed on agreed values, a misuse of a slot, a commit
that does not read, an exception that is not one of Alpha's refusals), or Slurm ended the job
the run was in (``cancelled``: ``scancel``, or the job's time limit: no attempt can run in an
allocation that is gone, and a run its user cancelled stays stopped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from alpha import errors
from alpha.errors import (
    AlphaError,
    BudgetExhausted,
    FrameRefused,
    InputInvalid,
    LauncherLost,
    LossNotFinite,
    NodeUnreachable,
    PeerLost,
    PortMissing,
    PortTaken,
    RegionRefused,
    RoundAborted,
    SlurmJobEnded,
)

if TYPE_CHECKING:
    from alpha.launch.outcome import RoleOutcome

__all__ = ["FAILURE_CLASSES", "RETRIED", "Classified", "classify", "classify_error"]

#: Every class of failure, with what it means, in documentation order (docs/recovery.md).
FAILURE_CLASSES: Final = {
    "lost": "a role died, was killed or stopped, or its peer or launcher is gone",
    "refused": "a frame was refused (corrupted, forged, truncated, out of order) or an edge's "
    "shared-memory region was not the one the schedule makes",
    "budget": "a wait ran past its budget",
    "divergence": "the learner's loss stopped being finite",
    "usage": "the plan, an artifact or another input is wrong",
    "error": "a check on agreed values failed, a slot was misused, the commit does not read, "
    "or an exception that is not one of Alpha's refusals",
    "cancelled": "Slurm ended the job or its step: scancel, or the job's time limit",
}
#: The classes a restart may end otherwise: what a fresh attempt does not repeat.
RETRIED: Final = frozenset({"lost", "refused", "budget"})

_LOST: Final = (PeerLost, LauncherLost, NodeUnreachable, PortMissing, PortTaken)
_REFUSED: Final = (FrameRefused, RegionRefused)
# "role R: failed: Class: message", a participant's one line (alpha.wire.console).
_FAILED_CLASS: Final = re.compile(r"failed: ([A-Za-z_][A-Za-z0-9_]*): ")


@final
@dataclass(frozen=True, slots=True)
class Classified:
    """A failure's class (a key of :data:`FAILURE_CLASSES`), the name it was known by (an
    error's class name, or what the launcher saw), and whether a restart may end otherwise."""

    kind: str
    name: str

    @property
    def retried(self) -> bool:
        return self.kind in RETRIED


def classify_error(name: str) -> str:
    """The class of a failure known by the name of one of Alpha's errors (``error`` for a
    name that is not one: an exception that is not one of Alpha's refusals)."""
    found = getattr(errors, name, None)
    if not (isinstance(found, type) and issubclass(found, AlphaError)):
        return "error"
    if issubclass(found, LossNotFinite):
        return "divergence"
    if issubclass(found, InputInvalid):
        return "usage"
    if issubclass(found, SlurmJobEnded):
        return "cancelled"
    if issubclass(found, _LOST):
        return "lost"
    if issubclass(found, _REFUSED):
        return "refused"
    if issubclass(found, BudgetExhausted):
        return "budget"
    if issubclass(found, RoundAborted):
        return "refused"  # its origin's own cause was not named: a peer refused the round
    return "error"


def classify(outcome: RoleOutcome | None, cause: str = "") -> Classified:
    """The class of a launch's first failure ``outcome`` (None: the launch ended with no role
    failing, and ``cause`` says what went wrong after, e.g. a commit that does not read)."""
    if outcome is None:
        return Classified("error", "CommitInvalid" if "commit" in cause else "unknown")
    if outcome.error is not None:
        name = type(outcome.error).__name__
        return Classified(classify_error(name), name)
    line = outcome.cause
    found = _FAILED_CLASS.search(line)
    if found is not None:
        name = found.group(1)
        if name == RoundAborted.__name__:
            origin = RoundAborted.origin_in(line)
            if origin is not None:
                return Classified(classify_error(origin[1]), origin[1])
        return Classified(classify_error(name), name)
    if outcome.stopped:
        return Classified("lost", "stopped")
    if outcome.returncode is None:
        return Classified("lost", "status lost")
    if outcome.returncode < 0:
        return Classified("lost", "killed")
    if outcome.returncode == InputInvalid.exit_code:
        return Classified("usage", f"exit {outcome.returncode}")
    return Classified("lost", f"exit {outcome.returncode}")  # it died without its one line
