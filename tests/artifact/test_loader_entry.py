"""The loader's hand-off and its bounds, which it must write itself (it imports the standard
library only): each held to what it stands for elsewhere in the package."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from alpha.artifact import entry, loader, payload


def test_the_loader_hands_off_to_the_entry() -> None:
    module, function = loader.ENTRY
    assert getattr(importlib.import_module(module), function) is entry.run_embedded


def test_the_loader_bounds_every_member_by_the_payload_bound() -> None:
    # The largest member is the payload: a bound below it would refuse a valid artifact, one
    # above it would let a damaged member be read past what any build writes.
    assert loader.MAX_MEMBER_BYTES == payload.MAX_PAYLOAD_BYTES


def test_the_loader_imports_the_standard_library_only() -> None:
    tree = ast.parse(Path(loader.__file__).read_text())
    names = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert names and all(name.split(".")[0] != "alpha" for name in names), names


def test_what_the_entry_imports_never_imports_the_loader() -> None:
    # The loader and the entry are the one hand-off: the modules the entry imports before it
    # runs the participant (the payload's checks) do not import the loader back.
    for module in (entry, payload):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "alpha.artifact.loader" not in found, module.__name__


def _modules(**files: str | None) -> dict[str, ModuleType]:
    """Fake modules named as keys, each with ``__file__`` its value (None: no file)."""
    made = {}
    for name, file in files.items():
        module = ModuleType(name.replace("_", "."))
        module.__file__ = file
        made[name.replace("_", ".")] = module
    return made


RUNTIME = "/run/x/runtime-" + "0" * 64 + ".pyz"


def test_the_loader_keeps_modules_of_alpha_from_its_own_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As a warm starter's child inherits them: every one from the runtime just checked.
    found = {
        **_modules(
            alpha=f"{RUNTIME}/alpha/__init__.pyc", alpha_errors=f"{RUNTIME}/alpha/errors.pyc"
        ),
        "json": json,
    }
    monkeypatch.setattr(sys, "modules", dict(found))
    assert loader.keep_own_alpha(RUNTIME) is True
    assert sys.modules == found


@pytest.mark.parametrize(
    "stranger",
    [
        "/run/y/runtime-" + "0" * 64 + ".pyz/alpha/errors.pyc",  # the same digest, elsewhere
        RUNTIME + "x/alpha/errors.pyc",  # a file whose name only begins with the runtime's
        "/usr/lib/python3/site-packages/alpha/errors.py",  # an installed alpha
        None,  # a module without a file
    ],
)
def test_the_loader_drops_every_module_of_alpha_if_one_is_not_from_its_runtime(
    stranger: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _modules(alpha=f"{RUNTIME}/alpha/__init__.pyc", alpha_errors=stranger)
    monkeypatch.setattr(sys, "modules", {**found, "json": json})
    assert loader.keep_own_alpha(RUNTIME) is False
    assert sys.modules == {"json": json}  # the role imports its own, from its runtime


def test_the_loader_finds_no_alpha_in_a_process_started_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "modules", {"json": json})
    assert loader.keep_own_alpha(RUNTIME) is False
    assert sys.modules == {"json": json}
