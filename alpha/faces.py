"""Lazy package faces (PEP 562): a folder's ``__init__.py`` names its public API and where each
name lives, and a name's module is imported on first use of that name.

A participant passes through several packages on its way to its work (``alpha.artifact``,
``alpha.runtime``, ``alpha.schedule``, ``alpha.wire``, ``alpha.core``...). Were their faces to
import every module they re-export, its start would pay for all of them: the learner's numpy
code in a sum check, the artifact builder in every role. A lazy face costs a dictionary.

A face reads::

    if TYPE_CHECKING:                      # what type checkers and readers see
        from alpha.core.membership import Membership

    __all__ = ["Membership"]
    __getattr__, __dir__ = lazy(__name__, {"alpha.core.membership": ("Membership",)})

``tests/test_faces.py`` keeps the three lists in step.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module


def lazy(
    package: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package ``package``, whose names live in the
    modules of ``homes`` (module: its names). A name is imported from its module on first use
    and then kept in the package, so the next use is an ordinary attribute.

    Raises:
        ValueError: a name is given two homes.
    """
    where: dict[str, str] = {}
    for module, names in homes.items():
        for name in names:
            if where.setdefault(name, module) != module:
                raise ValueError(f"{package}: {name} has two homes, {where[name]} and {module}")
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        home = where.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
