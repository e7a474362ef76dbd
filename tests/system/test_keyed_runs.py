"""``alpha run`` with each way of sealing frames (issue 25): keyed with BLAKE3 payload digests,
and unkeyed, each among real participant processes, equal bit for bit to the replicated
learner; and a BLAKE3 run whose participants lack the blake3 package, refused in one line.

Each run's artifacts are read back, so a passing run is one that sealed as its plan says (the
keyed default with SHA-256 is ``make run``'s, covered by tests/system/test_learner.py).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from alpha.app.cli import EXIT_FAILURE, EXIT_OK
from alpha.compiler.plan import parse_plan
from alpha.compiler.replicate import replicate
from alpha.learner.data import load_digits
from tests.support import plan_text, run_alpha

ROLES = 3
EQUAL = "equal bit for bit   yes"


def _text(contract: dict[str, str]) -> str:
    """A small digits learner on a tree of 3 roles, with ``contract``'s sealing keys."""
    return plan_text(
        "keyed-runs",
        roles=ROLES,
        rounds=2,
        topology={"shape": "tree", "fanout": 2},
        contract={"dtype": "float32", "delivery": "all", **contract},
        budgets={"accept": 30.0, "receive": 30.0, "start": 30.0},
        work={"kind": "learn"},
        learner={"kind": "mlp", "hidden": 8, "rate": 0.15, "seed": 7, "batch": 32},
    )


def _descriptions(folder: Path) -> list[dict[str, Any]]:
    """Every role's description, as its artifact in the run folder carries it."""
    found = []
    for role in range(ROLES):
        with zipfile.ZipFile(folder / f"role-{role:06d}.pyz") as artifact:
            found.append(json.loads(artifact.read("role.json"))["description"])
    return found


def _run(tmp_path: Path, contract: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """``alpha run`` of the plan: it must exit 0 and equal the replicated learner bit for bit;
    its stdout and its roles' descriptions."""
    plan = tmp_path / "plan.toml"
    plan.write_text(_text(contract))
    folder = tmp_path / "run"
    ran = run_alpha("run", str(plan), "--dir", str(folder))
    assert ran.returncode == EXIT_OK, ran.stderr
    lines = ran.stdout.splitlines()
    assert EQUAL in lines, ran.stdout
    replicated = replicate(parse_plan(_text(contract), source="test"), load_digits()).digest
    assert f"final parameters    {replicated}" in lines, ran.stdout
    assert (folder / "reports" / "commit.json").is_file()
    return ran.stdout, _descriptions(folder)


@pytest.mark.slow
def test_a_keyed_blake3_run_commits_the_replicated_learners_parameters(tmp_path: Path) -> None:
    _, descriptions = _run(tmp_path, {"payload_digest": "blake3"})
    for description in descriptions:
        assert (description["integrity"], description["payload_digest"]) == (
            "hmac-sha256",
            "blake3",
        )
        assert description["edges"], "every role of the tree has an edge"
        for edge in description["edges"]:
            assert {len(bytes.fromhex(key)) for key in edge["keys"].values()} == {32}


@pytest.mark.slow
def test_an_unkeyed_run_commits_the_replicated_learners_parameters(tmp_path: Path) -> None:
    _, descriptions = _run(tmp_path, {"integrity": "sha256"})
    for description in descriptions:
        assert (description["integrity"], description["payload_digest"]) == ("sha256", "sha256")
        assert description["edges"], "every role of the tree has an edge"
        assert all("keys" not in edge for edge in description["edges"]), "no key is written"


@pytest.mark.slow
def test_a_blake3_run_whose_participants_lack_blake3_fails_in_one_line(tmp_path: Path) -> None:
    # The participants inherit alpha's environment: a blake3 package first on PYTHONPATH that
    # cannot be imported is a host without it, for them (and for nothing else: compiling and
    # the replicated learner never import it).
    shadow = tmp_path / "without-blake3" / "blake3"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no blake3 on this host")\n')
    plan = tmp_path / "plan.toml"
    plan.write_text(_text({"payload_digest": "blake3"}))
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    ran = run_alpha("run", str(plan), "--dir", str(tmp_path / "run"), env=env)
    assert ran.returncode == EXIT_FAILURE, ran.stderr
    failed = [line for line in ran.stderr.splitlines() if line.startswith("run: failed: ")]
    assert len(failed) == 1, ran.stderr
    assert (
        "FrameSpecInvalid: the plan's payload digest is BLAKE3, but the blake3 package is not "
        'installed here: pip install blake3, or set [contract] payload_digest = "sha256"'
    ) in failed[0]
    assert "Traceback" not in ran.stderr
    assert not (tmp_path / "run" / "reports" / "commit.json").exists()
