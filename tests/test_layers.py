"""The layering check (scripts/check_layers.py, run by `make lint`) passes on the package and
fails on a wrong-way import, an impure import in a pure layer, and a shell arrow not allowed."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _checker()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package to break on purpose."""
    copy = tmp_path / "alpha"
    shutil.copytree(ROOT / "alpha", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _run(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(package)], capture_output=True, text=True, check=False
    )


def test_the_package_has_no_new_violation_and_every_known_one_still_occurs() -> None:
    result = _run(ROOT / "alpha")
    assert result.returncode == 0, result.stdout
    found = {(a, b) for a, b, _ in CHECK.violations(ROOT / "alpha")}
    assert found == set(CHECK.KNOWN)


@pytest.mark.parametrize(
    ("module", "line", "what"),
    [
        ("wire/frame.py", "import alpha.runtime.channel", "values imports runtime, a higher layer"),
        (
            "core/topology.py",
            "from alpha.compiler import plan",
            "shape imports program, a higher layer",
        ),
        (
            "runtime/whereabouts.py",
            "from alpha.app.cli import main",
            "runtime imports shell, a higher layer",
        ),
        ("wire/abort.py", "import socket", "the pure layer values imports socket"),
        ("compiler/forms.py", "import trio", "the pure layer program imports trio"),
        (
            "launch/launcher.py",
            "from alpha.app.run import main_run",
            "shell modules are independent",
        ),
        ("runtime/session.py", "from alpha.learner import program", "a sum check's too"),
        ("schedule/operations.py", "import alpha.learner.program", "a sum check's too"),
    ],
)
def test_a_wrong_import_fails_the_check(tree: Path, module: str, line: str, what: str) -> None:
    path = tree / module
    path.write_text(path.read_text() + f"\n\ndef _late() -> None:\n    {line}  # noqa\n")
    result = _run(tree)
    assert result.returncode == 1
    assert what in result.stdout, result.stdout


def test_an_import_for_types_only_does_not_count(tree: Path) -> None:
    path = tree / "wire" / "frame.py"
    path.write_text(
        path.read_text() + "\nif TYPE_CHECKING:\n    from alpha.runtime.channel import X\n"
    )
    assert _run(tree).returncode == 0


def test_a_known_violation_that_is_gone_must_leave_the_list(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A list entry for an import that does not occur is reported, so the list only shrinks.
    monkeypatch.setattr(CHECK, "KNOWN", {("alpha.wire.frame", "alpha.app.cli"): "an old reason"})
    assert CHECK.main(["check_layers", str(tree)]) == 1
