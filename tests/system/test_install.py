"""An installed wheel runs the main job (docs/install.md).

The wheel is built, its contents checked (alpha alone at the top, with its plans and data), and
installed with ``pip`` into a fresh virtual environment; then ``alpha run`` runs from a folder
that is no checkout: on the data set that ships inside the package, and on a copy named by
``ALPHA_DIGITS`` once the shipped one is gone. Dependencies come from the package index (the
pip cache makes a second run quick).

Asserted on ``alpha run``: its exit code, its "equal bit for bit" line and its run folder, which
is what stays the same while its progress display and plots change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

import alpha
from alpha.compiler.plan import load_plan
from tests.support import PLANS, ROOT

pytestmark = pytest.mark.slow

DIGITS = ROOT / "alpha" / "data" / "digits"

#: What setuptools reads to build the wheel. The build runs on a copy of them, so that its
#: build/ and alpha.egg-info/ never land in the checkout, nor stale files from an earlier build
#: in the wheel.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "alpha")

#: The oldest setuptools that builds this pyproject.toml (the SPDX ``license`` string); with an
#: older one in this interpreter, pip builds in isolation with one from the index instead.
SETUPTOOLS_NEEDED = 77

#: Installing numpy, matplotlib and the rest on a cold pip cache downloads tens of megabytes.
INSTALL_TIMEOUT_S = 900

#: ``alpha run`` on the default plan takes seconds; a loaded CI machine, many more.
RUN_TIMEOUT_S = 600

EQUAL = "equal bit for bit   yes"


def _environment(**extra: str) -> dict[str, str]:
    """This process's environment, less what would let the installed alpha see the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ALPHA_DIGITS")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def _run(
    argv: list[str | Path], *, cwd: Path, timeout: float, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=_environment(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    """The command's stdout, asserting it exited 0 (else its output, for the reader)."""
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copyfile(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    fresh = int(version("setuptools").split(".")[0]) >= SETUPTOOLS_NEEDED
    isolation = ["--no-build-isolation"] if fresh else []
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", *isolation, "-w", out]
    built = _run([*argv, source], cwd=source, timeout=INSTALL_TIMEOUT_S)
    _ok(built)
    # No setuptools warning (as a TOML table, `license` printed a hundred lines of them).
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, and its dependencies."""
    where = tmp_path_factory.mktemp("venv")
    _ok(_run([sys.executable, "-m", "venv", where], cwd=where, timeout=INSTALL_TIMEOUT_S))
    python = where / "bin" / "python"
    installed = [python, "-m", "pip", "install", "-q", wheel]
    _ok(_run(installed, cwd=where, timeout=INSTALL_TIMEOUT_S))
    return where


def test_the_wheel_holds_alpha_alone_with_its_plans_and_data(wheel: Path) -> None:
    assert wheel.name.startswith(f"alpha-{alpha.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"alpha-{alpha.__version__}.dist-info/METADATA").decode()
    # No top-level harness or gates: names that belong to other projects on PyPI.
    assert {name.split("/")[0] for name in names} == {
        "alpha",
        f"alpha-{alpha.__version__}.dist-info",
    }
    shipped = {f"alpha/data/plans/{plan.name}" for plan in PLANS.glob("*.toml")}
    assert "alpha/data/plans/digits.toml" in shipped
    assert shipped <= names
    assert {"alpha/data/digits/digits.csv.gz", "alpha/data/digits/LICENSE-digits.txt"} <= names
    assert "alpha/data/aarch64-sysroot.sh" in names  # alpha emulation build runs it
    assert "alpha/learner/ordered.c" in names  # the compiled ordered fold (docs/kernels.md)
    assert f"alpha-{alpha.__version__}.dist-info/licenses/LICENSE" in names
    assert f"\nVersion: {alpha.__version__}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata


def test_installed_alpha_runs_the_main_job_from_any_folder(venv: Path, tmp_path: Path) -> None:
    bindir = venv / "bin"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    said = _ok(_run([bindir / "alpha", "--version"], cwd=elsewhere, timeout=RUN_TIMEOUT_S))
    assert said.strip() == f"alpha {alpha.__version__}"

    out = _ok(_run([bindir / "alpha", "run"], cwd=elsewhere, timeout=RUN_TIMEOUT_S))
    assert EQUAL in out.splitlines()
    folder = elsewhere / "runs" / load_plan(PLANS / "digits.toml").name
    assert sorted(folder.glob("role-*.pyz")), sorted(elsewhere.rglob("*"))

    # The gates stay in the checkout: one line, exit 2.
    gate = _run([bindir / "alpha", "observe", "gate", "--list"], cwd=elsewhere, timeout=60)
    assert (gate.returncode, gate.stdout) == (2, "")
    assert gate.stderr.startswith("alpha: error: observe gate: the gates run from a source ")
    assert len(gate.stderr.splitlines()) == 1


def test_installed_alpha_reads_the_data_set_alpha_digits_names(venv: Path, tmp_path: Path) -> None:
    bindir = venv / "bin"
    shown = [bindir / "python", "-c", "import alpha.learner as a; print(a.shipped_digits())"]
    shipped = Path(_ok(_run(shown, cwd=tmp_path, timeout=RUN_TIMEOUT_S)).strip())
    assert shipped.is_relative_to(venv), shipped  # package data, not the checkout's copy
    copy = tmp_path / "copy" / "digits.csv.gz"
    copy.parent.mkdir()
    shutil.copyfile(DIGITS / "digits.csv.gz", copy)
    shipped.unlink()  # now only the copy can be read
    try:
        missing = _run([bindir / "alpha", "run"], cwd=tmp_path, timeout=RUN_TIMEOUT_S)
        assert missing.returncode == 2, missing.stderr[-3000:]
        assert "(shipped with alpha) is missing; reinstall alpha" in missing.stderr
        assert "set ALPHA_DIGITS to an unchanged copy" in missing.stderr

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        run = [bindir / "alpha", "run"]
        out = _ok(_run(run, cwd=elsewhere, timeout=RUN_TIMEOUT_S, ALPHA_DIGITS=str(copy)))
        assert EQUAL in out.splitlines()
        assert (elsewhere / "runs" / load_plan(PLANS / "digits.toml").name).is_dir()
    finally:
        shutil.copyfile(copy, shipped)  # the other tests share this environment
