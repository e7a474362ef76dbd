"""Every folder of alpha has a face, its ``__init__.py``, that is the way in from outside (trio's
``__init__.py``): its docstring says the folder's one job, its ``__all__`` lists the folder's
public API, and each name is loaded from its module on first use (``alpha.faces.lazy``), so that
a participant passing through a package pays for none of the modules it does not run.

The faces are kept complete: every name of a face resolves, to the object of the module the face
says it lives in, a module of that folder; every name of a public module's ``__all__`` is in its
folder's face; ``dir()`` shows them; importing a face imports none of its modules.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "alpha"

FOLDERS = (
    "core",
    "wire",
    "schedule",
    "records",
    "checkpoint",
    "learner",
    "compiler",
    "runtime",
    "artifact",
    "launch",
    "app",
)

# Modules left out of their folder's face on purpose, with the reason.
OUTSIDE_FACE = {
    "alpha.artifact.loader": (
        "the artifact's own start, standard library only, and no API: the face carries the "
        "manifest's names from it (MANIFEST_NAME, encode_manifest, decode_manifest)"
    ),
    "alpha.launch.warm_server": "the warm starter's process, run as a script by alpha.launch.warm",
    "alpha.learner.contract": (
        "the operations a learner module computes with, imported by learner modules as a "
        "module (import alpha.learner.contract as c): its names are that module's API"
    ),
}

# (face, name) re-exported from another folder, with the reason.
BORROWED = {
    ("alpha.compiler", name): (
        "what projection returns and compiling encodes: alpha.app.compile and tests still import "
        "it from the compiler; alpha.schedule is its face"
    )
    for name in ("LocalSchedule", "decode", "encode")
}


# (module, name) of a public module's __all__ left out of its face, with the reason.
SHADOWED = {
    ("alpha.compiler.replicate", "replicate"): (
        "named as its module: importing alpha.compiler.replicate binds the module to that name "
        "in the face, so the face cannot offer the function"
    ),
    **{
        (f"alpha.app.{name}", name): (
            "a command's body, named as its module (launch and checkpoint are folders of "
            "alpha, emulation a module of alpha.launch): the command line calls it, through "
            "alpha.app.cli.COMMANDS"
        )
        for name in ("launch_command", "checkpoint_command", "emulation_command")
    },
}


def _face(folder: str) -> ModuleType:
    return importlib.import_module(f"alpha.{folder}")


def _homes(folder: str) -> dict[str, str]:
    """name -> module, from the face's ``if TYPE_CHECKING:`` imports (what mypy reads)."""
    tree = ast.parse((PACKAGE / folder / "__init__.py").read_text())
    homes: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                assert isinstance(child, ast.ImportFrom) and child.module is not None
                for alias in child.names:
                    homes[alias.asname or alias.name] = child.module
    return homes


def _lazy_homes(folder: str) -> dict[str, str]:
    """name -> module, from the face's call of ``lazy`` (what it loads at run time)."""
    tree = ast.parse((PACKAGE / folder / "__init__.py").read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy"
    ]
    assert len(calls) == 1, folder
    table: dict[str, tuple[str, ...]] = ast.literal_eval(calls[0].args[1])
    return {name: module for module, names in table.items() for name in names}


def _public_modules(folder: str) -> list[str]:
    return [
        f"alpha.{folder}.{path.stem}"
        for path in sorted((PACKAGE / folder).glob("*.py"))
        if not path.stem.startswith("_")
    ]


def test_every_folder_of_the_package_has_a_face_in_this_list() -> None:
    folders = {path.parent.name for path in PACKAGE.glob("*/*.py")}
    assert folders == set(FOLDERS)
    for folder in FOLDERS:
        assert (PACKAGE / folder / "__init__.py").is_file(), folder


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_face_says_its_folders_job(folder: str) -> None:
    doc = _face(folder).__doc__
    assert doc is not None
    # A sentence, not the folder's name.
    assert len(doc.split()) >= 12, doc


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_name_of_a_face_resolves_to_its_module_in_the_folder(folder: str) -> None:
    face = _face(folder)
    homes = _homes(folder)
    assert len(face.__all__) == len(set(face.__all__))
    # What the face names is what it imports for the type checker: no more, no less (the
    # private helpers the tests probe aside).
    assert set(face.__all__) == {name for name in homes if not name.startswith("_")}
    for name, home in homes.items():
        if (face.__name__, name) not in BORROWED:
            assert home.startswith(f"alpha.{folder}."), (name, home)
        value = getattr(face, name)
        assert value is getattr(importlib.import_module(home), name), (name, home)


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_face_loads_each_name_from_the_module_it_shows_the_type_checker(folder: str) -> None:
    # scripts/check_layers.py reads the TYPE_CHECKING imports to know what a face loads.
    assert _lazy_homes(folder) == _homes(folder)


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_public_name_of_the_folder_is_in_its_face(folder: str) -> None:
    face = _face(folder)
    for name in _public_modules(folder):
        if name in OUTSIDE_FACE:
            continue
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), f"{name} has no __all__ (or belongs in OUTSIDE_FACE)"
        for public in module.__all__:
            if (name, public) in SHADOWED:
                assert public not in face.__all__, (name, public)
                continue
            assert public in face.__all__, f"{name}.{public} is not in {face.__name__}"
            assert getattr(face, public) is getattr(module, public), f"{name}.{public}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_name_of_a_face_is_the_name_of_one_of_its_modules(folder: str) -> None:
    # Importing alpha.x.y binds the module to the face's y, whatever the face meant by y.
    modules = {path.stem for path in (PACKAGE / folder).glob("*.py")}
    assert set(_face(folder).__all__) & modules == set()


def test_dir_shows_the_names_of_a_face_before_any_is_used() -> None:
    # Run apart: here every name has been used, and so stands in the face's namespace.
    code = (
        "import importlib; "
        f"faces = [importlib.import_module('alpha.' + f) for f in {list(FOLDERS)!r}]; "
        "print(' '.join(n for f in faces for n in f.__all__ if n not in dir(f)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.split() == []


def test_a_name_not_in_a_face_is_an_attribute_error() -> None:
    face = _face("core")
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        face.nothing_here  # noqa: B018


def test_importing_every_face_imports_none_of_their_modules() -> None:
    # Run apart: this process has imported them all by now.
    faces = "; ".join(f"import alpha.{folder}" for folder in FOLDERS)
    code = (
        f"import sys; {faces}; "
        "print(' '.join(sorted(m for m in sys.modules if m.count('.') >= 2 "
        "and m.startswith('alpha.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.split() == []


def test_a_name_loads_its_own_module_and_no_other_of_its_folder() -> None:
    code = (
        "import sys, alpha.core; alpha.core.Budgets; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('alpha.core.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.split() == ["alpha.core.budgets"]


def test_the_listed_exceptions_are_still_needed() -> None:
    # A module outside its face exists and is public; a borrowed name is still in its face.
    for name in OUTSIDE_FACE:
        assert name in {m for f in FOLDERS for m in _public_modules(f)}, name
    for face, name in BORROWED:
        assert name in importlib.import_module(face).__all__, (face, name)
