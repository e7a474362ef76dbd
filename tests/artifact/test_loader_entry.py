"""The loader's hand-off and its bounds, which it must write itself (it imports the standard
library only): each held to what it stands for elsewhere in the package."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

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
