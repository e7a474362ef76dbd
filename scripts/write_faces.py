#!/usr/bin/env python3
"""Write the faces of alpha's folders again from their modules: ``python scripts/write_faces.py
[FOLDER ...]`` (every folder when none is named), run from the checkout with the project's
Python (``.venv/bin/python``).

A face (``alpha/FOLDER/__init__.py``, docs/architecture.md) lists each public name three times:
imported for type checkers, in ``__all__``, and in the lazy table that says which module it
lives in. After a module of the folder is added, renamed or changes its ``__all__``, this writes
the three lists again: every name of each public module's ``__all__``, at home in the module
that defines it (or, for a name a module only re-exports, the first module of the folder that
lists it). It keeps the face's docstring and the names it borrows from other folders, and leaves
out what ``tests/test_faces.py`` lists as outside a face or shadowed by a module of the same
name: that test is the one place those lists live, and it fails on any face this does not
match. Then run ``ruff format`` on what it wrote.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACE_TABLE = re.compile(r"lazy\(\s*__name__,\s*(\{.*\})\s*,?\s*\)", re.S)


def _test_lists() -> tuple[set[str], set[tuple[str, str]]]:
    """``OUTSIDE_FACE`` and ``SHADOWED`` of tests/test_faces.py."""
    spec = importlib.util.spec_from_file_location("test_faces", ROOT / "tests" / "test_faces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.OUTSIDE_FACE), set(module.SHADOWED)


def _defined(path: Path) -> set[str]:
    """The names ``path`` defines at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _sort_key(name: str) -> tuple[bool, bool, str]:
    # As ruff sorts __all__: constants, then classes, then functions.
    return (not name.isupper(), not name[:1].isupper(), name)


def homes_of(folder: str, outside: set[str], shadowed: set[tuple[str, str]]) -> dict[str, tuple]:
    """module -> the names the face of ``folder`` takes from it."""
    face = ROOT / "alpha" / folder / "__init__.py"
    found = FACE_TABLE.search(face.read_text())
    old: dict[str, tuple[str, ...]] = ast.literal_eval(found.group(1)) if found else {}
    homes: dict[str, tuple[str, ...]] = {
        module: tuple(names)
        for module, names in old.items()
        if not module.startswith(f"alpha.{folder}.") or module in outside
    }
    candidates: dict[str, list[tuple[bool, str]]] = {}
    for path in sorted((ROOT / "alpha" / folder).glob("*.py")):
        module = f"alpha.{folder}.{path.stem}"
        if path.name.startswith("_") or module in outside:
            continue
        defined = _defined(path)
        for name in getattr(importlib.import_module(module), "__all__", ()):
            if (module, name) not in shadowed:
                candidates.setdefault(name, []).append((name not in defined, module))
    for name, where in candidates.items():
        home = sorted(where)[0][1]
        homes[home] = (*homes.get(home, ()), name)
    return dict(sorted(homes.items()))


def face_text(docstring: str, homes: dict[str, tuple]) -> str:
    names = sorted({name for found in homes.values() for name in found}, key=_sort_key)
    lines = [f'"""{docstring}"""', "", "from typing import TYPE_CHECKING", ""]
    lines += ["from alpha.faces import lazy", "", "if TYPE_CHECKING:"]
    for module, found in homes.items():
        lines += [f"    from {module} import (", *(f"        {n}," for n in found), "    )"]
    lines += ["", "__all__ = [", *(f'    "{n}",' for n in names), "]", ""]
    lines += ["__getattr__, __dir__ = lazy(", "    __name__,", "    {"]
    for module, found in homes.items():
        lines += [f'        "{module}": (', *(f'            "{n}",' for n in found), "        ),"]
    lines += ["    },", ")", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    outside, shadowed = _test_lists()
    folders = argv[1:] or sorted(
        path.parent.name for path in (ROOT / "alpha").glob("*/__init__.py")
    )
    for folder in folders:
        face = ROOT / "alpha" / folder / "__init__.py"
        docstring = ast.get_docstring(ast.parse(face.read_text()), clean=False)
        if docstring is None:
            print(f"write_faces: {face} has no docstring: say the folder's one job first")
            return 1
        homes = homes_of(folder, outside, shadowed)
        face.write_text(face_text(docstring, homes))
        print(f"write_faces: alpha/{folder}: {sum(len(n) for n in homes.values())} names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
