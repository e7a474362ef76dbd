"""Compile then launch: plans become one artifact per role, run as real processes."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from alpha.app.compile import ALL_ROLES_LIMIT, compile_plan, parse_roles
from alpha.artifact import read_artifact
from alpha.compiler.plan import Plan, load_plan, parse_plan
from alpha.errors import PlanInvalid, UsageError
from alpha.launch.launcher import launch, launch_specs
from alpha.records.commit import COMMIT_NAME
from alpha.records.reports import committed_reports
from harness.compiled import CompiledRun
from tests.support import PLANS, plans, run_alpha


def plan_text(
    name: str = "demo",
    *,
    n: int = 5,
    fanout: int = 2,
    rounds: int = 4,
    size: int = 64,
    choice: str = "none",
    extra: str = "",
) -> str:
    return plans.plan_text(
        name,
        roles=n,
        rounds=rounds,
        topology={"shape": "tree", "fanout": fanout},
        contract={"dtype": "float64"},
        budgets={"connect_attempts": 50, "accept": 60.0, "receive": 30.0, "deadline": 120.0},
        work={"kind": "sum-check", "size": size, "choice": choice},
        extra=f"{extra}\n",
    )


def reports(directory: Path) -> dict[int, dict[str, object]]:
    """The run's reports, checked against its commit record; empty when it did not commit."""
    folder = directory / "reports"
    if not (folder / COMMIT_NAME).exists():
        assert not list(folder.glob("role-*.json")), "a report is final only through the commit"
        return {}
    # A role's children in the tree are its higher peers, as run.json lists them.
    run = json.loads((directory / "run.json").read_text())
    children = {entry["role"]: entry["higher"] for entry in run["roles"]}
    return dict(committed_reports(folder, children.__getitem__)[1])


def expected_digest(plan: Plan, sign: int = 1) -> str:
    n, last = plan.participants, plan.rounds - 1
    total = sign * (last + 1) * n * (n + 1) // 2
    assert plan.work_size is not None
    return hashlib.sha256(np.full(plan.work_size, total, dtype=plan.dtype).tobytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["pair", "star", "tree"])
async def test_compile_then_launch_the_shipped_plans(fixture: str, tmp_path: Path) -> None:
    plan = load_plan(PLANS / f"{fixture}.toml")
    result = compile_plan(plan, tmp_path, range(plan.participants))
    assert result.roles == tuple(range(plan.participants))
    specs, deadline = launch_specs(tmp_path)
    outcome = await launch(specs, deadline=deadline)
    assert outcome.ok, outcome.first_to_fail
    found = reports(tmp_path)
    assert sorted(found) == list(range(plan.participants))
    # Every role ran every round, and every owner holds the same, correct total.
    last_sign = -1 if plan.choice == "parity" and (plan.rounds - 1) % 2 else 1
    for role, report in found.items():
        assert report["rounds"] == plan.rounds
        if plan.delivery == "all" or role == 0:
            digests = report["digests"]
            assert isinstance(digests, dict)
            assert digests["x"] == expected_digest(plan, last_sign)


@pytest.mark.slow
async def test_choices_reach_every_process_and_both_arms_are_taken(tmp_path: Path) -> None:
    plan = parse_plan(plan_text(n=7, fanout=2, rounds=6, choice="parity"))
    outcome = await CompiledRun(plan, tmp_path).launch()
    assert outcome.ok, outcome.first_to_fail
    found = reports(tmp_path)
    assert len(found) == 7
    for report in found.values():
        assert report["arms"] == [3, 3], "rounds 0, 2, 4 take arm 0; 1, 3, 5 arm 1"


@pytest.mark.slow
async def test_a_selector_of_two_aborts_the_round_everywhere(tmp_path: Path) -> None:
    plan = parse_plan(plan_text(n=6, fanout=2, rounds=3, choice="const-2"))
    # Without fail-fast every role stops by itself: the abort travels over the connections.
    outcome = await CompiledRun(plan, tmp_path).launch(fail_fast=False)
    assert outcome.first_to_fail is not None
    assert outcome.first_to_fail.role == 0
    assert "SelectorOutOfRange" in outcome.first_to_fail.cause
    for role, result in outcome.outcomes.items():
        assert result.returncode == 1, (role, result)
        assert not result.killed
    assert reports(tmp_path) == {}, "an aborted run commits nothing"


def test_artifacts_do_not_grow_with_rounds(tmp_path: Path) -> None:
    def size(rounds: int) -> tuple[int, int]:
        plan = parse_plan(plan_text(n=13, fanout=3, rounds=rounds))
        out = tmp_path / str(rounds)
        result = compile_plan(plan, out, [1])
        with zipfile.ZipFile(out / "role-000001.pyz") as archive:
            return result.artifact_bytes[0], archive.getinfo("role.json").file_size

    small, small_json = size(4)
    large, large_json = size(200_000)
    digits = len("200000") - len("4")
    assert large_json - small_json == digits  # only the digits of the loop count differ
    assert large - small == large_json - small_json


def test_one_role_of_a_200000_role_plan_compiles(tmp_path: Path) -> None:
    plan = load_plan(PLANS / "tree-200k.toml")
    assert plan.participants == 200_000
    result = compile_plan(plan, tmp_path, parse_roles("0,1,199999", plan.participants))
    assert result.roles == (0, 1, 199_999)
    payload = read_artifact(tmp_path / "role-199999.pyz")
    description = payload["description"]
    assert isinstance(description, dict)
    assert [e["peer"] for e in description["edges"]] == list(plan.tree.edges(199_999))
    run = json.loads((tmp_path / "run.json").read_text())
    assert [entry["role"] for entry in run["roles"]] == [0, 1, 199_999]


def test_roles_spec() -> None:
    assert parse_roles("0,3,5-7", 10) == [0, 3, 5, 6, 7]
    assert parse_roles("all", 3) == [0, 1, 2]
    assert parse_roles(None, 3) == [0, 1, 2]
    for bad in ("x", "3-1", "0-10", "-1"):
        with pytest.raises(UsageError):
            parse_roles(bad, 10)
    with pytest.raises(UsageError):
        parse_roles(None, ALL_ROLES_LIMIT + 1)


def test_sums_that_would_not_be_exact_are_refused() -> None:
    plan = parse_plan(plan_text(n=5000, fanout=8, rounds=10).replace("float64", "float32"))
    with pytest.raises(PlanInvalid) as caught:
        compile_plan(plan, Path("/nonexistent"), [0])
    assert caught.value.field == "run.rounds"


@pytest.mark.slow
def test_the_compile_and_launch_commands(tmp_path: Path) -> None:
    out = tmp_path / "pair"
    compiled = run_alpha("compile", str(PLANS / "pair.toml"), "-o", str(out))
    assert compiled.returncode == 0, compiled.stderr
    assert "2 of 2 role(s)" in compiled.stdout
    launched = run_alpha("launch", str(out))
    assert launched.returncode == 0, launched.stderr
    # Each artifact is an executable on its own: a bad plan field is one line, exit 2.
    bad = tmp_path / "bad.toml"
    bad.write_text(plan_text().replace("fanout = 2", "fanout = 0"))
    refused = run_alpha("compile", str(bad), "-o", str(tmp_path / "bad"))
    assert refused.returncode == 2
    assert len(refused.stderr.splitlines()) == 1
    assert "topology.fanout" in refused.stderr
