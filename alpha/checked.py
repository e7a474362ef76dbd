"""The one check for integer fields: an ``int`` that is not a ``bool``, within bounds. Pure.

Python's ``bool`` is a subclass of ``int``, so ``isinstance(True, int)`` holds; in a plan, a
description, a header field or a count, ``true`` is never 1. Every integer Alpha takes from a
person or a file goes through :func:`int_in`.
"""

from __future__ import annotations

from typing import TypeGuard

__all__ = ["int_in"]


def int_in(value: object, low: int | None = None, high: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is an ``int``, not a ``bool``, with ``low <= value <= high`` for the
    bounds given (both inclusive; None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (low is None or value >= low) and (high is None or value <= high)
