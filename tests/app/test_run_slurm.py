"""``alpha run --slurm`` before anything runs (alpha.app._slurm_run, alpha.launch.slurm): a
run with no allocation and no words to make one, ``--slurm-option`` without ``--slurm`` or
inside an allocation, ``--slurm`` with ``--deploy`` and a plan that lists edge addresses are
each one line before any folder is made, exit 2. The runs themselves are
tests/system/test_slurm.py's, on a real cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from alpha.app.cli import main
from alpha.errors import SlurmUnavailable
from alpha.exitcodes import EXIT_USAGE
from alpha.launch.slurm import slurm_allocation
from tests.support import plan_text, raises_exactly


def _plan(tmp_path: Path, extra: str = "", name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(
        plan_text(
            "slurmed",
            roles=3,
            rounds=2,
            topology={"shape": "tree", "fanout": 2},
            work={"kind": "learn"},
            learner={"kind": "linear", "rate": 0.05, "batch": 8},
            extra=extra,
        )
    )
    return path


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """No allocation around this process."""
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)


def test_wrong_slurm_options_are_refused_before_any_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], outside: None
) -> None:
    plan, out = _plan(tmp_path), tmp_path / "run"
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--slurm-option=--nodes=3"])
    assert line == (
        "alpha: error: run: --slurm-option is for the Slurm allocation, which --slurm uses"
    )
    deploy = tmp_path / "deploy.json"
    deploy.write_text("{}")
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--slurm", "--deploy", str(deploy)])
    assert line == "alpha: error: run: --slurm and --deploy each place the roles: give one of them"
    listed = _plan(tmp_path, '[addresses.edges]\n"0-1" = "127.0.0.2"\n', "listed.toml")
    line = _refused(capsys, ["run", str(listed), "-o", str(out), "--slurm"])
    assert line.startswith("alpha: error: ") and "addresses.edges: with --slurm every edge" in line
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--slurm"])
    assert line.startswith("alpha: error: alpha run --slurm runs in a Slurm allocation")
    assert not out.exists()


def test_an_allocation_is_the_callers_or_one_asked_for_outside_one() -> None:
    inside = slurm_allocation((), "x", {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-3]"})
    assert (inside.job, inside.made, inside.nodelist) == (42, False, "n[1-3]")
    error = raises_exactly(
        SlurmUnavailable, slurm_allocation, ("--nodes=3",), "x", {"SLURM_JOB_ID": "42"}
    )
    assert "inside job 42 already" in str(error)
    raises_exactly(SlurmUnavailable, slurm_allocation, (), "x", {"SLURM_JOB_ID": "4 2"})
    error = raises_exactly(SlurmUnavailable, slurm_allocation, (), "x", {})
    assert "--slurm-option=--nodes=3" in str(error)
