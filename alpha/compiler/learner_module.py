"""The learner module a plan names (``[learner] kind = "module"``, ``docs/learners.md``): found,
read, checked against the numerical contract, and loaded as a learner program.

``module`` is a ``.py`` file (a path with a ``/`` or ending in ``.py``, relative to the plan's
folder, or to the working folder for a plan given as text) or a dotted module name, whose
source file is found the way ``import`` would find it (never imported here: its text is what is
checked, run and bundled). Its text must pass :func:`alpha.compiler.contract_check.check_contract`
before a line of it runs. A program is loaded once per text (its SHA-256), however often the
compiler asks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Final

from alpha.compiler.contract_check import check_contract
from alpha.errors import LearnerModuleInvalid, PlanInvalid
from alpha.files import read_regular_file
from alpha.learner.program import Program, builtin, from_source

if TYPE_CHECKING:  # a type only: the plan's module is above this one
    from alpha.compiler.plan import Plan

__all__ = ["MAX_MODULE_BYTES", "learner_program", "module_file", "program_of_source"]

MAX_MODULE_BYTES: Final = 1 << 20
"""A learner module's source, at most: a megabyte of Python is a program, not a learner, and
every artifact carries it."""

# Programs by their source's SHA-256 and name: a module is checked and run once per process.
_LOADED: dict[tuple[str, str], Program] = {}


def module_file(plan: Plan) -> Path:
    """The file of the plan's learner module.

    Raises:
        PlanInvalid: (``learner.module``) the plan has no module learner, or a dotted name
            that no source file answers.
    """
    learner = plan.learner
    if learner is None or learner.kind != "module":
        raise PlanInvalid("this plan's learner is no module", field="learner.module")
    named = learner.module
    if named.endswith(".py") or "/" in named:
        path = Path(named)
        if not path.is_absolute() and Path(plan.source).is_file():
            path = Path(plan.source).parent / path
        return path
    try:
        spec = importlib.util.find_spec(named)
    except (ImportError, ValueError) as error:
        raise PlanInvalid(
            f"no module {named!r} is found: {error}", field="learner.module"
        ) from None
    origin = None if spec is None else spec.origin
    if origin is None or not origin.endswith(".py"):
        raise PlanInvalid(
            f"no Python source file is found for module {named!r} (a .py file beside the plan "
            "works too)",
            field="learner.module",
        )
    return Path(origin)


def program_of_source(name: str, source: str, path: str = "") -> Program:
    """The program of the module text ``source`` called ``name`` (read from ``path``, which
    refusals name; default ``name``), checked against the contract first, loaded once per
    text.

    Raises:
        ContractBroken: the text uses an operation outside the contract (file, line, operation).
        LearnerModuleInvalid: it does not compile or run, or lacks a function of the interface.
    """
    program = _LOADED.get((name, source))
    if program is None:
        check_contract(source, path or name)
        program = _LOADED[(name, source)] = from_source(name, source)
    return program


def learner_program(plan: Plan) -> Program:
    """The program the plan's learner runs: a shipped one, or its module's.

    Raises:
        PlanInvalid: the plan has no learner, or its module is not found or cannot be read.
        ContractBroken: the module's source breaks the contract.
        LearnerModuleInvalid: the module does not compile or run, or lacks a function.
    """
    learner = plan.learner
    if learner is None:
        raise PlanInvalid("only a plan with work.kind = 'learn' has a learner", field="work.kind")
    if learner.kind != "module":
        return builtin(learner.kind)
    path = module_file(plan)
    try:
        raw = read_regular_file(path, MAX_MODULE_BYTES)
    except OSError as error:
        raise PlanInvalid(
            f"cannot read the learner module {path}: {error.strerror or error} (a learner "
            f"module is a .py file of at most {MAX_MODULE_BYTES} bytes)",
            field="learner.module",
        ) from None
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LearnerModuleInvalid(str(path), f"is not UTF-8 text: {error}") from None
    return program_of_source(path.name, source, str(path))
