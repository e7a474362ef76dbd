"""The first cause of a failure, found once for the whole participant.

trio's nurseries wrap what their tasks raise in exception groups, and a failure on one edge
leaves others behind it: the peer's ABORT arrives with the broken connections its exit leaves,
and the tasks beside the failed one stop with ``trio.Cancelled``. One rule says which of those
is the cause: an ABORT from a peer (:class:`~alpha.errors.RoundAborted`) before anything else,
else the first failure found, groups opened in order; cancellations are how the other tasks
stopped, never why. Pure: exceptions in, one exception out.
"""

from __future__ import annotations

from typing import TypeVar

import trio

from alpha.errors import AlphaError, RoundAborted

__all__ = ["as_one_error", "failures", "first_alpha_error", "first_cause"]

_E = TypeVar("_E", bound=BaseException)


def failures(error: BaseException) -> list[BaseException]:
    """What ``error`` holds, exception groups opened in order, trio's cancellations left out."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in failures(inner)]
    return [] if isinstance(error, trio.Cancelled) else [error]


def first_cause(error: BaseException) -> BaseException | None:
    """The cause of ``error``: an abort from a peer before the broken connections it leaves
    behind, else its first failure; None when it holds cancellations only."""
    return _first(error, BaseException)


def first_alpha_error(error: BaseException) -> AlphaError | None:
    """The cause among the :class:`AlphaError` s ``error`` holds, by the same rule as
    :func:`first_cause`, or None: what a failing session reports and raises."""
    return _first(error, AlphaError)


def _first(error: BaseException, among: type[_E]) -> _E | None:
    found = [leaf for leaf in failures(error) if isinstance(leaf, among)]
    aborts = [leaf for leaf in found if isinstance(leaf, RoundAborted)]
    return (aborts or found or [None])[0]


def as_one_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a nursery of the runtime's own (reads or writes beside a hashing thread, receives
    from several peers at once) raises, as one error, as from one plain read or write: its
    :func:`first_cause`. A group of cancellations only is returned as it is, for the cancel
    scope that caused it."""
    cause = first_cause(group)
    return group if cause is None else cause
