"""What a module of ``alpha`` imports, read from its source: no import runs.

Edges go to concrete modules (``from alpha.core.identity import RunIdentity`` is an edge to
``alpha.core.identity``; ``from alpha.core import membership`` one to ``alpha.core.membership``).
A package's face (its ``__init__.py``) is left out of the closure: inside ``alpha`` modules
import concrete modules, so the floors counted here are the code's own, whatever a face
re-exports.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

__all__ = ["ROOT", "floors", "imported", "module_path", "reachable"]

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: ``alpha/`` lies below it."""


def module_path(module: str) -> Path:
    """The source file of ``module`` (a module file, or a package's ``__init__.py``)."""
    base = ROOT.joinpath(*module.split("."))
    file = base.with_suffix(".py")
    return file if file.is_file() else base / "__init__.py"


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, *, type_only: bool, nested: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append(child)
        elif isinstance(child, ast.If) and _type_checking(child):
            for part in child.body if type_only else ():
                found.extend(_walk_one(part, type_only=type_only, nested=nested))
            for part in child.orelse:
                found.extend(_walk_one(part, type_only=type_only, nested=nested))
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if nested:
                found.extend(_walk(child, type_only=type_only, nested=nested))
        else:
            found.extend(_walk(child, type_only=type_only, nested=nested))
    return found


def _walk_one(node: ast.AST, *, type_only: bool, nested: bool) -> list[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [node]
    return _walk(node, type_only=type_only, nested=nested)


def imported(module: str, *, type_only: bool = False, nested: bool = True) -> set[str]:
    """Every ``alpha`` module that ``module`` imports: at its top level and (``nested``) inside
    its functions; imports under ``if TYPE_CHECKING:`` only with ``type_only``."""
    tree = ast.parse(module_path(module).read_text())
    names: set[str] = set()
    for node in _walk(tree, type_only=type_only, nested=nested):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif node.module is not None and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                names.add(candidate if _is_module(candidate) else node.module)
    return {name for name in names if name == "alpha" or name.startswith("alpha.")}


@cache
def _edges(module: str) -> frozenset[str]:
    """The run-time edges of ``module`` to concrete modules (faces left out)."""
    return frozenset(
        name
        for name in imported(module)
        if name != module and module_path(name).name != "__init__.py"
    )


def reachable(module: str) -> set[str]:
    """Every concrete ``alpha`` module that importing ``module`` runs, ``module`` excluded."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        for name in _edges(pending.pop()):
            if name not in seen:
                seen.add(name)
                pending.append(name)
    return seen


def floors(module: str) -> int:
    """The longest chain of run-time imports from ``module`` down to a module that imports no
    other ``alpha`` module, counted in modules: a module importing none has one floor.

    Raises:
        ValueError: the imports below ``module`` run in a circle.
    """
    depth: dict[str, int] = {}
    on_path: set[str] = set()

    def visit(name: str) -> int:
        if name in depth:
            return depth[name]
        if name in on_path:
            raise ValueError(f"an import circle through {name}")
        on_path.add(name)
        below = [visit(each) for each in _edges(name)]
        on_path.discard(name)
        depth[name] = 1 + max(below, default=0)
        return depth[name]

    return visit(module)
