"""The command line's parser and its dispatch (alpha/app/cli.py): every command the parser holds
runs the function of its module, building the parser loads no command's module, a light command
loads only its own, and the checkout goes on ``sys.path`` in one function only."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from alpha.app.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "alpha"

# Every command line's words and the function its handler calls.
EXPECTED = {
    ("describe", "group"): "alpha.app.describe:describe_group",
    ("describe", "deploy"): "alpha.app.describe:describe_deploy",
    ("describe", "tree"): "alpha.app.describe:describe_tree",
    ("run",): "alpha.app.run:run_command",
    ("replicate",): "alpha.app.run:replicate_command",
    ("compile",): "alpha.app.compile:compile_command",
    ("launch",): "alpha.app.launch_command:launch_command",
    ("exchange",): "alpha.app.exchange:exchange_command",
    ("checkpoint", "list"): "alpha.app.checkpoint_command:checkpoint_command",
    ("checkpoint", "inspect"): "alpha.app.checkpoint_command:checkpoint_command",
    ("checkpoint", "verify"): "alpha.app.checkpoint_command:checkpoint_command",
    ("checkpoint", "restore"): "alpha.app.checkpoint_command:checkpoint_command",
    ("observe", "gate"): "alpha.app.observe:observe_gate",
    ("observe", "trace"): "alpha.app.trace_command:observe_trace",
    ("observe", "diff"): "alpha.app.trace_command:observe_diff",
    ("plans",): "alpha.app.plans:plans_command",
    ("plans", "show"): "alpha.app.plans:plans_command",
    ("plans", "copy"): "alpha.app.plans:plans_command",
    ("emulation",): "alpha.app.emulation_command:emulation_command",
    ("emulation", "show"): "alpha.app.emulation_command:emulation_command",
    ("emulation", "build"): "alpha.app.emulation_command:emulation_command",
}


def _commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of ``parser`` that runs, with the words that reach it: the leaves, and a
    parser whose sub-commands are optional and that runs a command of its own (``plans``)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield words, parser
        return
    if parser.get_default("handler") is not None and not any(a.required for a in subparsers):
        yield words, parser
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*words, name))


def _called(handler: object) -> str:
    """``MODULE:FUNCTION`` of the one function ``handler`` imports and calls."""
    source = ast.parse(textwrap.dedent(inspect.getsource(handler)))  # type: ignore[arg-type]
    imports = [node for node in ast.walk(source) if isinstance(node, ast.ImportFrom)]
    assert len(imports) == 1 and len(imports[0].names) == 1
    return f"{imports[0].module}:{imports[0].names[0].name}"


def test_every_command_runs_the_function_of_its_module() -> None:
    found = {words: sub.get_default("handler") for words, sub in _commands(build_parser())}
    assert found == dict(COMMANDS)
    assert {words: _called(handler) for words, handler in found.items()} == EXPECTED
    for name in EXPECTED.values():
        module, _, function = name.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), name


def _loaded(argv: list[str]) -> dict[str, object]:
    """Run ``alpha ARGV`` in a fresh interpreter; which modules it had loaded by the end."""
    code = (
        "import contextlib, io, json, sys\n"
        "from alpha.app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        code = main(sys.argv[1:])\n"
        "    except SystemExit as stop:\n"
        "        code = stop.code\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def _app_modules(modules: object) -> set[str]:
    assert isinstance(modules, list)
    return {m for m in modules if m.startswith("alpha.app.")}


INTERRUPT = "alpha.app.interrupted"  # cli.main holds it for every command; it loads no command


def test_the_whole_help_loads_no_command_module() -> None:
    loaded = _loaded(["--help"])
    assert loaded["code"] == 0
    # cli and its options, and the interrupt path every command runs under (signals_as_interrupts).
    assert _app_modules(loaded["modules"]) == {"alpha.app.cli", "alpha.app._options", INTERRUPT}
    assert isinstance(loaded["modules"], list)
    assert {"trio", "numpy", "rich"}.isdisjoint(loaded["modules"])


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["describe", "tree", "10", "3", "--role", "1"], "alpha.app.describe"),
        (["describe", "group", "(group (stride 0 1 8))"], "alpha.app.describe"),
        (["observe", "gate", "--list"], "alpha.app.observe"),
    ],
)
def test_a_light_command_loads_its_own_module_and_no_launcher(argv: list[str], module: str) -> None:
    loaded = _loaded(argv)
    assert loaded["code"] == 0
    modules = loaded["modules"]
    assert isinstance(modules, list)
    if module == "alpha.app.observe":  # the gates import the launcher and trio themselves
        assert _app_modules(modules) >= {"alpha.app.cli", "alpha.app._options", INTERRUPT, module}
        return
    assert _app_modules(modules) == {"alpha.app.cli", "alpha.app._options", INTERRUPT, module}
    assert {"trio", "numpy", "rich", "alpha.launch.launcher"}.isdisjoint(modules)


def _adds_to_path(node: ast.AST) -> bool:
    """``sys.path.insert(...)``, ``.append(...)`` or ``.extend(...)``: a folder put on the path
    (the warm server's removal of the working folder from it is not)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("insert", "append", "extend")
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "path"
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "sys"
    )


def _sites() -> set[tuple[str, str]]:
    """Where in alpha/ a folder is put on ``sys.path`` or gates/harness is imported: (file, the
    function that does it, or ``<module>``)."""
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        name = str(path.relative_to(ROOT))
        stack: list[tuple[ast.AST, str]] = [(tree, "<module>")]
        while stack:
            node, where = stack.pop()
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    inner = child.name
                if _adds_to_path(child):
                    found.add((name, inner))
                modules: list[str] = []
                if isinstance(child, ast.Import):
                    modules = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                    modules = [child.module]
                if any(m.split(".")[0] in ("gates", "harness") for m in modules):
                    found.add((name, inner))
                stack.append((child, inner))
    return found


def test_the_checkout_goes_on_the_path_in_one_function() -> None:
    # Besides it, two other sites, which never put a checkout there: an artifact's loader puts
    # the shared runtime it has just checked first on the path (docs/artifacts.md), and the
    # warm starter does the same with the runtime it checked before it imports from it once
    # for all its children (docs/launch.md).
    assert _sites() == {
        ("alpha/app/observe.py", "_checkout_gates"),
        ("alpha/artifact/loader.py", "main"),
        ("alpha/launch/warm_server.py", "preload"),
    }
