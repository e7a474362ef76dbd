"""An ABORT is seen wherever it waits: real runs of the gates' ``fan`` scenario (role 0 and its
children 1 and 2, each in its own process, over TCP on 127.0.0.1) in which role 0 waits on a
silent edge while role 2's ABORT lies behind role 2's unread contribution.

Role 0 reads role 1's contribution before role 2's. When nothing comes from role 1, role 0
waits on its start budget (12 s), while role 2, which heard the round's word, waits for the
total on its receive budget (4 s). Its ABORT then queues at role 0 behind the contribution the
schedule has not read yet; the watch must read past that frame and stop role 0 at once, not
leave it to its own start budget (issue 22: 120 s against the ABORT's 30 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from alpha.app.compile import compile_plan
from alpha.compiler.plan import parse_plan
from gates.catalogue import FAN, GATES, Gate
from harness.runs import Outcome, relayed_run

pytestmark = pytest.mark.slow

BY_NAME = {gate.name: gate for gate in GATES}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fan")
    compile_plan(parse_plan(FAN.plan, source=FAN.name), folder, range(FAN.roles))
    return folder


async def _faulted(compiled: Path, folder: Path, gate: Gate) -> Outcome:
    outcome = await relayed_run(compiled, folder, FAN.edge, gate.fault)
    assert outcome.relay is not None and outcome.relay.applied
    return outcome


def _stops(outcome: Outcome) -> dict[int, float]:
    """Each role's failure clock, in seconds after the relay applied its fault."""
    assert outcome.relay is not None and outcome.relay.applied_at is not None
    stops = {}
    for role, each in sorted(outcome.result.outcomes.items()):
        assert each.returncode not in (0, None) and not each.killed, (role, each)
        assert each.failed_at is not None and each.logged, (role, each)
        stops[role] = each.failed_at - outcome.relay.applied_at
    return stops


async def test_the_fan_scenario_commits_without_a_fault(compiled: Path, tmp_path: Path) -> None:
    outcome = await relayed_run(compiled, tmp_path / "run", FAN.edge, None)
    assert outcome.result.ok and outcome.committed(), outcome.result.first_to_fail
    assert not outcome.left_running()


@pytest.mark.parametrize(
    ("name", "role_1"),
    [
        # role 1 waits for the lost word on its start budget: role 0's ABORT stops it
        ("failure.abort-behind-data", {"RoundAborted"}),
        # role 1 heard the word: its own receive budget runs out about when role 2's does, so
        # it stops by itself or on role 0's ABORT, whichever comes first
        ("connection.greets-then-silent", {"BudgetExhausted", "RoundAborted"}),
        # the real role 1 never gets a hello: its receive budget runs out, nobody can reach it
        ("connection.impostor-hello", {"BudgetExhausted"}),
    ],
)
async def test_an_abort_behind_an_unread_contribution_stops_role_0_at_once(
    compiled: Path, tmp_path: Path, name: str, role_1: set[str]
) -> None:
    gate = BY_NAME[name]
    outcome = await _faulted(compiled, tmp_path / "run", gate)
    stops = _stops(outcome)
    # Role 2 waits for the total on its receive budget, and its budget runs out.
    assert outcome.cause(2) == "BudgetExhausted", outcome.log(2)
    assert f"its receive budget ({FAN.receive:g} s)" in outcome.log(2)
    # Role 0 stops on role 2's ABORT, which came behind role 2's contribution, never on its
    # own start budget (its read of role 1 had most of it left).
    assert outcome.cause(0) == "RoundAborted", outcome.log(0)
    assert "aborted by role 2: BudgetExhausted on edge 0-2" in outcome.log(0)
    cause = outcome.cause(1)
    assert cause in role_1, outcome.log(1)
    if cause == "RoundAborted":
        assert "aborted by role 2 (relayed by role 0): BudgetExhausted" in outcome.log(1)
    else:
        assert f"its receive budget ({FAN.receive:g} s)" in outcome.log(1)
    # So every role stops within one receive budget of the first failure, and within one
    # budget of the fault, never a sum: without the watch reading past, role 0 stopped on its
    # start budget, 9 s after the others.
    assert max(stops.values()) - min(stops.values()) < FAN.receive, stops
    assert max(stops.values()) < FAN.start, stops
    assert not outcome.committed() and outcome.final_reports() == []
    assert not outcome.left_running()
