"""The one way a test asserts a refusal: the exact class, never a parent of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

E = TypeVar("E", bound=BaseException)


def raises_exactly(cls: type[E], call: Callable[..., object], *args: object, **kwargs: object) -> E:
    """Run ``call(*args, **kwargs)``; return its exception, which must be exactly ``cls``.

    ``pytest.raises`` alone accepts any subclass; a refusal family's leaves are told apart by
    their class (STYLE.md: tests assert the exact class), so a subclass raised is a failure.
    """
    with pytest.raises(cls) as info:
        call(*args, **kwargs)
    assert type(info.value) is cls, f"{type(info.value).__name__} raised, {cls.__name__} wanted"
    return info.value
