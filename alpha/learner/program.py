"""A learner program: the module that says what a learner is, in four functions
(``docs/learners.md``, "The interface"):

- ``layout(features, classes, options)``: the parameters, as ``(name, shape)`` pairs in the
  order they lie in the one flat parameter vector (C order each);
- ``initialize(parameters, random)``: set the initial parameters (``parameters`` maps each
  name to a view of the flat vector, all +0), drawing only from ``random``
  (:class:`alpha.learner.contract.Random`, seeded from the plan);
- ``contribute(parameters, gradient, x, labels)``: the gradient of the loss summed over the
  batch ``(x, labels)`` into ``gradient`` (views like ``parameters``, all +0), returning the
  summed loss and the number of correct predictions;
- ``evaluate(parameters, x, labels)``: the number of correct predictions on ``(x, labels)``.

``x`` is the batch's features, an (n, features) array in the contract's dtype; ``labels`` the
classes, integers from 0. Everything a function computes must be contract arithmetic
(:mod:`alpha.learner.contract`), which ``alpha compile`` checks in the module's source.

The shipped learners (``mlp``, ``linear``) are two such programs in
``alpha/learner/programs/``, imported as package modules; a user's module is run from its
source text, which the compiler bundles into every artifact, so a participant never reads it
from a disk of its own. Either way the same four functions are called.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, final

from alpha.errors import LearnerModuleInvalid

__all__ = [
    "BUILTINS",
    "INTERFACE",
    "MAX_PARAMETERS",
    "Layout",
    "Program",
    "builtin",
    "from_source",
    "recorded",
]

#: The functions a learner program defines, in the order the docs describe them.
INTERFACE: Final = ("layout", "initialize", "contribute", "evaluate")

#: The shipped programs, each a module of ``alpha.learner.programs``.
BUILTINS: Final = ("mlp", "linear")

#: Parameters of one learner, at most: 2**28 float64 values are 2 GiB in every role (and as
#: much again for the gradient and an optimizer's moments), past which a plan is a mistake.
MAX_PARAMETERS: Final = 2**28

# A parameter's name: what a checkpoint's about and a message call it.
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MAX_NAME: Final = 64

Layout = tuple[tuple[str, tuple[int, ...]], ...]


@final
@dataclass(frozen=True, eq=False)
class Program:
    """A loaded learner program. ``name`` is what the plan calls it (``mlp``, ``linear``, or
    the module's file or dotted name); ``source`` its text and ``sha256`` that text's digest,
    both empty for a shipped program (the package's own code digest covers it). Two programs
    are equal when their name and digest are."""

    name: str
    source: str
    sha256: str
    functions: Mapping[str, Callable[..., object]] = field(repr=False)

    @property
    def builtin(self) -> bool:
        return not self.sha256

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return (self.name, self.sha256) == (other.name, other.sha256)

    def __hash__(self) -> int:
        return hash((self.name, self.sha256))

    def layout(self, features: int, classes: int, options: Mapping[str, object]) -> Layout:
        """The program's parameters for ``features`` inputs and ``classes`` outputs, checked.

        Raises:
            LearnerModuleInvalid: ``layout`` failed, or returned no array, a name that is not
                an identifier of at most 64 characters or appears twice, a shape that is not
                a tuple of positive ints, or more than MAX_PARAMETERS parameters in all.
        """
        try:
            found = self.functions["layout"](features, classes, dict(options))
        except Exception as error:  # a user's code: any failure is its module's to mend
            raise LearnerModuleInvalid(self.name, f"layout() failed: {_said(error)}") from None
        return _checked_layout(self.name, found)

    def call(self, function: str, *args: object) -> object:
        """Call the program's ``function``; what it raises is its module's failure.

        Raises:
            LearnerModuleInvalid: the function raised (its class and message quoted).
        """
        try:
            return self.functions[function](*args)
        except Exception as error:  # a user's code: any failure is its module's to mend
            raise LearnerModuleInvalid(self.name, f"{function}() failed: {_said(error)}") from None


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _checked_layout(module: str, found: object) -> Layout:
    if not isinstance(found, list | tuple) or not found:
        raise LearnerModuleInvalid(
            module, f"layout() must return a non-empty list of (name, shape), got {found!r}"
        )
    layout: list[tuple[str, tuple[int, ...]]] = []
    total = 0
    for entry in found:
        if not (isinstance(entry, list | tuple) and len(entry) == 2):
            raise LearnerModuleInvalid(module, f"a layout entry is not (name, shape): {entry!r}")
        name, shape = entry
        if (
            not isinstance(name, str)
            or not name
            or len(name) > _MAX_NAME
            or not set(name) <= _NAME_CHARS
            or name[0].isdigit()
        ):
            raise LearnerModuleInvalid(
                module, f"a parameter's name must be an identifier of 1 to {_MAX_NAME} "
                f"characters, got {name!r}",
            )  # fmt: skip
        if any(name == seen for seen, _ in layout):
            raise LearnerModuleInvalid(module, f"the parameter {name!r} is named twice")
        if not (
            isinstance(shape, list | tuple)
            and shape
            and all(type(n) is int and n >= 1 for n in shape)
        ):
            raise LearnerModuleInvalid(
                module, f"{name}'s shape must be a tuple of ints >= 1, got {shape!r}"
            )
        total += math.prod(shape)
        if total > MAX_PARAMETERS:
            raise LearnerModuleInvalid(
                module, f"the layout has more than {MAX_PARAMETERS} parameters"
            )
        layout.append((name, tuple(shape)))
    return tuple(layout)


def _functions(module: str, namespace: Mapping[str, object]) -> dict[str, Callable[..., object]]:
    found: dict[str, Callable[..., object]] = {}
    for name in INTERFACE:
        function = namespace.get(name)
        if not callable(function):
            raise LearnerModuleInvalid(
                module,
                f"it defines no function {name}(); a learner module defines "
                f"{', '.join(f'{each}()' for each in INTERFACE)} (docs/learners.md)",
            )
        found[name] = function
    return found


def builtin(kind: str) -> Program:
    """The shipped program ``kind`` (one of :data:`BUILTINS`).

    Raises:
        LearnerModuleInvalid: ``kind`` is not a shipped program.
    """
    if kind not in BUILTINS:
        raise LearnerModuleInvalid(kind, f"is not a shipped learner ({', '.join(BUILTINS)})")
    module = importlib.import_module(f"alpha.learner.programs.{kind}")
    return Program(kind, "", "", _functions(kind, vars(module)))


def from_source(name: str, source: str) -> Program:
    """The program whose module text is ``source``, run in a fresh module of its own (never
    imported from a path: the text is what the artifact carries and its digest names).

    Raises:
        LearnerModuleInvalid: it does not compile, running it fails, or a function of
            :data:`INTERFACE` is missing.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()
    try:
        code = compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise LearnerModuleInvalid(name, f"does not compile: {error}") from None
    module = types.ModuleType(f"alpha_learner_{digest[:16]}")
    module.__file__ = name
    # While its top level runs the module is in sys.modules, where a dataclass of a module with
    # `from __future__ import annotations` looks its module up by name; never after.
    sys.modules[module.__name__] = module
    try:
        exec(code, vars(module))  # the module's own top level: its imports and definitions
    except Exception as error:  # a user's code: any failure is its module's to mend
        raise LearnerModuleInvalid(name, f"running it failed: {_said(error)}") from None
    finally:
        sys.modules.pop(module.__name__, None)
    return Program(name, source, digest, _functions(name, vars(module)))


def recorded(name: str, sha256: str, layout: Layout) -> Program:
    """A program known only by what a generation recorded of it (its name, digest and layout):
    enough to name a checkpoint's parameters, never to run. Its other functions refuse.

    Raises:
        LearnerModuleInvalid: ``layout`` is not one.
    """
    checked = _checked_layout(name, layout)

    def layout_of(features: int, classes: int, options: Mapping[str, object]) -> Layout:
        return checked

    def absent(*args: object) -> object:
        raise LearnerModuleInvalid(name, "only its recorded layout is known here: it cannot run")

    functions: dict[str, Callable[..., object]] = dict.fromkeys(INTERFACE, absent)
    functions["layout"] = layout_of
    return Program(name, "", sha256, functions)
