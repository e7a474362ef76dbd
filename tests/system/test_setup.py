"""What `make run` and `make test` set up on a fresh machine: `make run` only what the main
job needs (a virtual environment for the project), `make test` the suite's packages besides
(scripts/system-deps.sh, README.md). Run as real processes: make's own plan of the commands,
and the script itself with a PATH on which nothing it checks is found."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "system-deps.sh"


def _make_plan(target: str) -> str:
    """The commands `make -n TARGET` would run (nothing runs)."""
    shown = subprocess.run(
        ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_make_run_sets_up_only_what_the_main_job_needs_and_make_test_the_rest() -> None:
    run = _make_plan("run")
    assert "scripts/system-deps.sh run" in run
    assert "system-deps.sh test" not in run
    assert "[test]" not in run  # the test extra (pytest, hypothesis) is make test's
    test = _make_plan("test")
    assert "scripts/system-deps.sh test" in test


def _missing(scope: str, tmp_path: Path) -> str:
    """What the script says is missing on a machine that has bash and nothing else it checks
    for (and no apt-get to install it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "env"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).unlink(missing_ok=True)
        (bin_dir / tool).symlink_to(found)
    said = subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT), scope],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert said.returncode == 1, said.stderr
    assert said.stderr.startswith("system-deps: missing "), said.stderr
    assert said.stderr.endswith(" and apt-get is not available; install them by hand\n")
    return said.stderr.removeprefix("system-deps: missing ").split(" and apt-get")[0]


def test_the_main_jobs_packages_are_python3_venv_alone(tmp_path: Path) -> None:
    assert _missing("run", tmp_path).split() == ["python3-venv"]
    suite = set(_missing("test", tmp_path).split())
    assert {
        "python3-venv",
        "qemu-user",
        "openssh-client",
        "iproute2",
        "slurm-wlm",
        "munge",
    } <= suite


def test_an_unknown_scope_is_refused(tmp_path: Path) -> None:
    said = subprocess.run(["bash", str(SCRIPT), "all"], capture_output=True, text=True, check=False)
    assert said.returncode == 2
    assert said.stderr == "system-deps: usage: system-deps.sh [run|test], not all\n"
