"""The one exception tree of Alpha.

Every refusal Alpha makes is an instance of exactly one leaf class below
:class:`AlphaError`, so that callers and tests can name the cause precisely.
Families group causes of one layer (membership admission, the participant
tree, the frame codec, ...). Each class's docstring says when it is raised and
what an operator should do about it; each message names the offending part.

Later layers add their families here, so the whole tree reads in one file.
"""

from __future__ import annotations

__all__ = [
    "AdmissionError",
    "AlphaError",
    "CoverageBroken",
    "EmptySelection",
    "FanoutInvalid",
    "GroupFieldInvalid",
    "GroupSyntaxError",
    "IndexBudgetExceeded",
    "NotAMember",
    "OverlappingParts",
    "RoleOutOfRange",
    "RoleOutsideUniverse",
    "TopologyError",
    "TreeSizeInvalid",
    "UsageError",
]


class AlphaError(Exception):
    """Base of every error Alpha raises on purpose."""


class UsageError(AlphaError, ValueError):
    """A command-line argument or option is wrong; the message names it."""


# --- membership -------------------------------------------------------------


class GroupSyntaxError(AlphaError, ValueError):
    """The textual form of a participant group does not parse.

    The message gives the position of the first token that does not fit and
    what was expected there.
    """


class AdmissionError(AlphaError, ValueError):
    """A participant group was refused at admission; the subclass names why."""


class EmptySelection(AdmissionError):
    """The selection (or one of its parts: a stride or repeat of count 0, an
    empty join) selects no role at all."""


class OverlappingParts(AdmissionError):
    """Two parts select a common role, or parts are not in ascending order:
    a join whose parts are out of order, a repeat whose copies overlap or
    interleave, a stride whose step does not advance."""


class RoleOutsideUniverse(AdmissionError):
    """A selected role is below 0, at or past the universe, or the arithmetic
    that computes it passes the documented role width."""


class IndexBudgetExceeded(AdmissionError):
    """The selection needs more index nodes than its budget allows."""


class GroupFieldInvalid(AdmissionError):
    """A group's epoch or identity is outside its documented range (epoch in
    ``0..2**64-1``, identity at most ``MAX_IDENTITY_BYTES`` bytes)."""


class NotAMember(AlphaError, LookupError):
    """A role was looked up in a group whose selection does not contain it."""


# --- topology ---------------------------------------------------------------


class TopologyError(AlphaError, ValueError):
    """A participant tree was asked for something that cannot exist."""


class TreeSizeInvalid(TopologyError):
    """A participant tree needs at least one role."""


class FanoutInvalid(TopologyError):
    """A participant tree needs a fan-out of at least one."""


class RoleOutOfRange(TopologyError, LookupError):
    """A role outside ``0..n-1`` was asked of an ``n``-role tree."""


class CoverageBroken(TopologyError):
    """A node's children do not exactly cover its subtree (``certify``)."""
