"""A participant's start loads what it runs and no more: no plan reader, no protocol checker.

Every participant is its own process started from its artifact, so each module the artifact's
entry imports is paid for at every start (``python -m bench startup``). Reading a plan (and
``tomllib``, which only the plan reader needs) and checking a protocol are the compiler's jobs;
a participant runs the description, schedule and learner its payload already holds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from alpha.compile import compile_plan, parse_roles
from alpha.exitcodes import EXIT_FAILURE
from alpha.plan import load_plan

COMPILE_ONLY = ("alpha.plan", "tomllib", "alpha.protocol.checks")
"""What only compiling needs: the plan reader, the TOML parser it uses, the protocol checker."""

DIGITS = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "digits.toml"

ENTRY_IMPORTS = (
    "from alpha.artifact import run_embedded",
    "from alpha.participant import run_payload",
    "from alpha.learner.payload import attach_gpu, learner_from_payload",
    "from alpha.protocol.local import decode",
    "from alpha.role import RoleDescription",
)
"""What an artifact's entry imports on its way to running its payload: ``alpha._loader`` calls
``run_embedded``, which calls ``run_payload``, which decodes the schedule and the learner."""


def _imported(*argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run Python on ``argv`` with ``-X importtime``; the process (its stderr) and every module
    it imported. stdout is left out: a participant announces its port there, in binary."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    modules = {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return done, modules


def test_the_artifact_entry_imports_no_plan_reader_and_no_protocol_checker() -> None:
    done, modules = _imported("-c", "\n".join(ENTRY_IMPORTS))
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"alpha.participant", "alpha.learner.program"} <= modules  # the check sees imports
    assert sorted(modules.intersection(COMPILE_ONLY)) == []


@pytest.mark.slow
def test_a_learner_role_starts_from_its_artifact_without_a_plan_reader_or_protocol_checker(
    tmp_path: Path,
) -> None:
    # Role 1 of the digits plan, with an empty stdin: it reads its payload (description,
    # schedule, learner shard), opens its listener and fails at its first wait, for role 0's
    # port; everything a real start imports is imported by then.
    plan = load_plan(DIGITS)
    compile_plan(plan, tmp_path, parse_roles("1", plan.participants))
    done, modules = _imported(str(tmp_path / "role-000001.pyz"))
    assert done.returncode == EXIT_FAILURE, done.stderr[-2000:]
    assert "failed: PortMissing" in done.stderr
    assert {"alpha.participant", "alpha.learner.payload", "alpha.protocol.local"} <= modules
    assert sorted(modules.intersection(COMPILE_ONLY)) == []
