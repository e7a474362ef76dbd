#!/usr/bin/env python3
"""Check that alpha's imports run one way: from the shell down to the pure core, never up.

Layers, top to bottom (docs/architecture.md):

    shell     cli, run, plot, progress, compile, launch, artifact (and its private _artifact_*,
              _run_json, _verified_roles), _loader, participant, __main__
    runtime   runtime.*
    program   protocol.*, plan, _fields, learner.*, program, operations, role, budgets
    values    frame, identity (and _run_identity, _digests), combine, abort, commit,
              _progress_records
    shape     membership, topology
    base      errors, exitcodes, _files, _checks, __init__

A module may import modules of its own layer or of a lower one; a module of a pure layer
(program, values, shape and base, less the I/O helpers named in ``IO_ALLOWED``) imports no
trio, socket, subprocess, os, asyncio or pycuda. The runtime and ``operations``, which every
participant runs (a sum check's too), import no ``learner`` module: a role with learner work is
handed its learner's state. Imports under ``if TYPE_CHECKING:`` are types only and do not count;
imports inside functions do (they run).

Known violations that are still to be fixed are listed in ``KNOWN`` with the reason; the check
fails on any violation not listed there, and on a listed one that no longer occurs, so the list
can only shrink. Run by ``make lint``; exit 0 when clean, 1 with one line per violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "alpha"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shell", ("app", "artifact", "launch", "__main__")),
    ("runtime", ("runtime",)),
    ("program", ("compiler", "learner", "schedule")),
    ("values", ("wire", "records", "checkpoint", "failpoints")),
    ("shape", ("core",)),
    ("base", ("errors", "exitcodes", "files", "checked", "__init__")),
)

PURE_LAYERS = frozenset({"program", "values", "shape", "base"})

# Within the shell, folders are independent of each other except along these arrows: the
# command line drives everything and the launcher starts artifacts.
SHELL_ARROWS = frozenset({("app", "*"), ("__main__", "app"), ("launch", "artifact")})

# Modules of pure layers allowed to do I/O: the file helpers, the data set reader, the GPU
# binding (isolated by design), the plan reader's one read of a plan file, and the progress
# records' writer and incremental reader (one file each).
IO_ALLOWED = frozenset(
    {
        "alpha.files",
        "alpha.learner.data",
        "alpha.learner.gpu",
        "alpha.learner.payload",
        "alpha.checkpoint.store",
        "alpha.failpoints",
        "alpha.records.progress",
    }
)

FORBIDDEN_IN_PURE = frozenset({"trio", "socket", "subprocess", "os", "asyncio", "pycuda"})

# Modules (and packages, with everything in them) that every participant runs, a sum check's
# too, and that so import no learner module at run time: a role with learner work is handed its
# LearnerState by the participant's entry, which imports the learner for such a role only.
LEARNER_FREE = ("alpha.runtime", "alpha.schedule.operations")
LEARNER = "alpha.learner"

# (importer, imported): why it is still here. Issue 11 removes them.
KNOWN: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> str:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    for layer, names in LAYERS:
        if name in names:
            return layer
    raise SystemExit(f"check_layers: {module} is in no layer; add it to LAYERS")


RANK = {layer: index for index, (layer, _) in enumerate(LAYERS)}


def module_name(path: Path, root: Path) -> str:
    relative = path.relative_to(root).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, package: str) -> Iterator[str]:
    """Every module ``tree`` imports at run time (absolute names)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            yield from (name for child in node.orelse for name in imports(child, package))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            elif node.module is not None:
                yield node.module
                for alias in node.names:  # `from alpha import runtime` imports a module
                    if node.module == PACKAGE:
                        yield f"{PACKAGE}.{alias.name}"
        else:
            yield from imports(node, package)


def _arrow(importer: str, imported: str) -> bool:
    def short(name: str) -> str:
        return name.split(".")[1] if "." in name else "__init__"

    a, b = short(importer), short(imported)
    return a == b or (a, b) in SHELL_ARROWS or (a, "*") in SHELL_ARROWS


def _within(module: str, packages: tuple[str, ...] | str) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one of them."""
    names = (packages,) if isinstance(packages, str) else packages
    return any(module == name or module.startswith(f"{name}.") for name in names)


def _is_module(name: str, root: Path) -> bool:
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def violations(root: Path) -> list[tuple[str, str, str]]:
    """(importer, imported, what is wrong) for every wrong-way or impure import."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root.parent)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        mine = layer_of(module)
        tree = ast.parse(path.read_text(), str(path))
        for imported in sorted(set(imports(tree, package))):
            top = imported.split(".")[0]
            if top == PACKAGE and imported != PACKAGE:
                if not _is_module(imported, root):
                    continue  # a name imported from a package, such as alpha.__version__
                theirs = layer_of(imported)
                if RANK[theirs] < RANK[mine]:
                    found.append((module, imported, f"{mine} imports {theirs}, a higher layer"))
                elif _within(module, LEARNER_FREE) and _within(imported, LEARNER):
                    found.append(
                        (
                            module,
                            imported,
                            "every participant runs it, a sum check's too: it imports the "
                            "learner for types only, and is handed the learner's state",
                        )
                    )
                elif mine == theirs == "shell" and not _arrow(module, imported):
                    found.append(
                        (
                            module,
                            imported,
                            "shell modules are independent but for the arrows in SHELL_ARROWS",
                        )
                    )
            elif mine in PURE_LAYERS and top in FORBIDDEN_IN_PURE and module not in IO_ALLOWED:
                found.append((module, imported, f"the pure layer {mine} imports {top}"))
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / PACKAGE
    found = violations(root)
    bad = [(a, b, why) for a, b, why in found if (a, b) not in KNOWN]
    gone = sorted(set(KNOWN) - {(a, b) for a, b, _ in found})
    for importer, imported, why in bad:
        print(f"check_layers: {importer} imports {imported}: {why}")
    for importer, imported in gone:
        print(f"check_layers: {importer} no longer imports {imported}; remove it from KNOWN")
    if bad or gone:
        return 1
    print(f"check_layers: {len(KNOWN)} known violation(s) left, no new one")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
