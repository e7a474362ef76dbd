"""The gate judge, branch by branch, on synthetic outcomes: a launch result, logs and reports
written as a participant writes them, and a relay record, built as values in a folder. No
participant runs (one test starts a plain process to be found left running).

Each FAIL condition of docs/gates.md "The verdict" has a test here that a run breaking it
alone fails, next to a run that passes; a judge without that condition passes the run and
the test fails.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from alpha.errors import AlphaError, BudgetExhausted, PeerLost, RoundAborted
from alpha.launch.launcher import LaunchResult, RoleOutcome
from alpha.records.commit import COMMIT_NAME
from gates.catalogue import GATES, Gate
from gates.run import (
    BUDGET_MARGIN,
    RELAY_BOUND,
    compare_native,
    control_problems,
    digests,
    judge,
    shared_problems,
    time_bound,
)
from harness.processes import running
from harness.relay import Relay
from harness.runs import Outcome

LAUNCHED = 1000.0  # time.monotonic() of the synthetic launch
FAULT = 1002.0  # when the synthetic relay acted


def gate(name: str, **changes: object) -> Gate:
    """A gate of the catalogue, optionally with fields changed."""
    found = next(each for each in GATES if each.name == name)
    return dataclasses.replace(found, **changes) if changes else found  # type: ignore[arg-type]


def line(error: AlphaError) -> str:
    """A failure line's text after ``failed:``, as ``alpha.artifact.participant`` logs it."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def aborted(role: int, origin: int, cause: str, via: int | None = None) -> str:
    return line(
        RoundAborted(
            role=role,
            peer=origin if via is None else via,
            origin=origin,
            cause=cause,
            edge=(0, 1),
            round=1,
            detail=f"role {origin}: refused",
        )
    )


def exhausted(role: int, peer: int, budget: str, seconds: float = 8.0) -> str:
    return line(
        BudgetExhausted(
            role=role, peer=peer, step=f"waiting for role {peer}", budget=budget, seconds=seconds
        )
    )


def lost(role: int, peer: int) -> str:
    return line(PeerLost(role=role, peer=peer, step="receiving", cause="reset by peer"))


@dataclass
class Role:
    """How one synthetic role ended."""

    failed: str | None = None  # its failure line after "failed:" (None: it logged none)
    at: float | None = None  # its failure clock
    code: int | None = 1
    killed: bool = False  # stopped by the launcher
    started_s: float = 0.25


def outcome(
    folder: Path,
    roles: Mapping[int, Role],
    *,
    relay_at: float | None = FAULT,
    committed: bool = False,
    final: tuple[int, ...] = (),
    staged: tuple[int, ...] = (),
    interrupted: tuple[int, ...] = (),
) -> Outcome:
    """A finished run in ``folder``: logs and reports as participants leave them, the
    launcher's outcomes, and a relay that acted at ``relay_at`` (None: no relay)."""
    (folder / "logs").mkdir(parents=True)
    (folder / "reports").mkdir()
    result = LaunchResult()
    for role, each in roles.items():
        log = folder / "logs" / f"role-{role:06d}.log"
        text = f"role {role}: started\n"
        if each.failed is not None:
            assert each.at is not None
            text += (
                f"role {role}: failure-clock {each.at:.6f}\nrole {role}: failed: {each.failed}\n"
            )
        log.write_text(text)
        result.outcomes[role] = RoleOutcome(
            role,
            each.code,
            cause="" if each.failed is None else f"role {role}: failed: {each.failed}",
            killed=each.killed,
            started_s=each.started_s,
            failed_at=each.at,
            logged=each.failed is not None,
            log=log,
        )
    failures = [each for each in result.outcomes.values() if each.failed_at is not None]
    result.first_to_fail = min(failures, key=lambda each: each.failed_at or 0.0, default=None)
    for role in final:
        report = {"role": role, "digests": {"w": "00"}, "machine": "x86_64"}
        (folder / "reports" / f"role-{role:06d}.json").write_text(json.dumps(report))
    for role in staged:
        (folder / "reports" / f"role-{role:06d}.json.staged").write_text("{}")
    if committed:
        (folder / "reports" / COMMIT_NAME).write_text("{}")
    relay = None
    if relay_at is not None:
        relay = Relay(0)
        relay.applied, relay.applied_at = True, relay_at
    run = Outcome(result, folder, relay, launched_at=LAUNCHED)
    run.interrupted.update({role: 4242 for role in interrupted})
    return run


# A relay gate: role 0 refuses role 1's replayed frame; role 1 hears the ABORT.
REPLAY = "frames.replay"


def replayed(**changes: Role) -> dict[int, Role]:
    roles = {
        0: Role("Replayed: role 0: frame on edge 1->0 refused", FAULT + 0.001),
        1: Role(aborted(1, 0, "Replayed"), FAULT + 0.002),
    }
    roles.update({int(key[1:]): value for key, value in changes.items()})
    return roles


def failing(verdict_why: str, *phrases: str) -> None:
    for phrase in phrases:
        assert phrase in verdict_why, verdict_why


def test_a_relay_gate_refused_as_claimed_passes(tmp_path: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed()))
    assert verdict.passed, verdict.why
    assert (verdict.role, verdict.observed) == (0, "Replayed")
    assert verdict.seconds == pytest.approx(0.001)


def test_a_fault_never_applied_fails(tmp_path: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(), relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "the fault was never applied")


def test_the_first_refusal_at_a_role_the_gate_does_not_name_fails(tmp_path: Path) -> None:
    # Role 1 refuses first with the right class; role 0 (the one the gate names) hears of it.
    roles = {
        0: Role(aborted(0, 1, "Replayed"), FAULT + 0.002),
        1: Role("Replayed: role 1: refused", FAULT + 0.001),
    }
    verdict = judge(gate(REPLAY), outcome(tmp_path, roles))
    assert not verdict.passed
    failing(verdict.why, "role 1 failed first; expected role 0")


def test_another_class_fails(tmp_path: Path) -> None:
    roles = replayed(r0=Role("Corrupted: role 0: refused", FAULT + 0.001))
    roles[1] = Role(aborted(1, 0, "Corrupted"), FAULT + 0.002)
    verdict = judge(gate(REPLAY), outcome(tmp_path, roles))
    assert not verdict.passed
    failing(verdict.why, "role 0 failed first with Corrupted; expected Replayed at role 0")


def test_no_logged_cause_fails(tmp_path: Path) -> None:
    roles = {0: Role(None, None, code=1), 1: Role(None, None, code=1)}
    verdict = judge(gate(REPLAY), outcome(tmp_path, roles))
    assert not verdict.passed
    failing(verdict.why, "no role failed")


def test_a_refusal_before_the_fault_fails(tmp_path: Path) -> None:
    roles = replayed(
        r0=Role("Replayed: role 0: refused", FAULT - 0.5),
        r1=Role(aborted(1, 0, "Replayed"), FAULT - 0.49),
    )
    verdict = judge(gate(REPLAY), outcome(tmp_path, roles))
    assert not verdict.passed
    failing(verdict.why, "role 0 refused 0.500 s before the fault")


def test_a_relay_fault_refused_past_its_small_bound_fails(tmp_path: Path) -> None:
    late = RELAY_BOUND + 0.5
    roles = replayed(
        r0=Role("Replayed: role 0: refused", FAULT + late),
        r1=Role(aborted(1, 0, "Replayed"), FAULT + late + 0.001),
    )
    verdict = judge(gate(REPLAY), outcome(tmp_path, roles))
    assert not verdict.passed
    failing(verdict.why, "past 1 s of a relay fault")
    # Within it, the same run passes.
    roles = replayed(
        r0=Role("Replayed: role 0: refused", FAULT + RELAY_BOUND - 0.01),
        r1=Role(aborted(1, 0, "Replayed"), FAULT + RELAY_BOUND),
    )
    assert judge(gate(REPLAY), outcome(tmp_path / "within", roles)).passed


def test_a_launch_time_fault_refused_past_its_scenarios_budgets_fails(tmp_path: Path) -> None:
    identity = gate("identity.learner")
    bound = identity.scenario.bound
    assert time_bound(identity) == (bound, f"the scenario's budgets ({bound:g} s)")

    def run(folder: Path, after: float) -> Outcome:
        at = LAUNCHED + after
        return outcome(
            folder,
            {
                0: Role("IdentityMismatch: role 0: refused", at),
                1: Role(aborted(1, 0, "IdentityMismatch"), at + 0.01),
                2: Role(aborted(2, 0, "IdentityMismatch"), at + 0.01),
                3: Role("IdentityMismatch: role 3: refused", at + 0.002),
            },
            relay_at=None,
        )

    assert judge(identity, run(tmp_path / "in", 0.7)).passed
    verdict = judge(identity, run(tmp_path / "past", bound + 1.0))
    assert not verdict.passed
    failing(verdict.why, f"past the scenario's budgets ({bound:g} s)")


# A budget gate: role 1 never starts; role 0's accept budget runs out.
ABSENT = "connection.absent-peer"


def absent_run(folder: Path, failed: str, after: float = 8.3) -> Outcome:
    roles = {
        0: Role(failed, LAUNCHED + after),
        1: Role(None, None, code=None, started_s=0.0),
    }
    return outcome(folder, roles, relay_at=None)


def test_a_waited_out_budget_passes_within_the_budget_and_its_margin(tmp_path: Path) -> None:
    absent = gate(ABSENT)
    bound, _ = time_bound(absent)
    assert bound == absent.scenario.budget("accept") + BUDGET_MARGIN == 11.0
    verdict = judge(absent, absent_run(tmp_path, exhausted(0, 1, "accept")))
    assert verdict.passed, verdict.why
    verdict = judge(absent, absent_run(tmp_path / "late", exhausted(0, 1, "accept"), bound + 0.5))
    assert not verdict.passed
    failing(verdict.why, "past its accept budget (8 s) + 3 s")


def test_another_budget_than_the_gates_fails(tmp_path: Path) -> None:
    verdict = judge(gate(ABSENT), absent_run(tmp_path, exhausted(0, 1, "start")))
    assert not verdict.passed
    failing(verdict.why, "role 0 ran out of its start budget, not its accept")


def test_a_budget_gate_that_names_no_budget_fails(tmp_path: Path) -> None:
    verdict = judge(gate(ABSENT, budget=None), absent_run(tmp_path, exhausted(0, 1, "accept")))
    assert not verdict.passed
    failing(verdict.why, "the gate names no budget")


def test_an_absent_role_that_was_started_fails(tmp_path: Path) -> None:
    roles = {
        0: Role(exhausted(0, 1, "accept"), LAUNCHED + 8.3),
        1: Role(None, None, code=0, started_s=0.25),
    }
    verdict = judge(gate(ABSENT), outcome(tmp_path, roles, relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "role 1 was started; the gate has it absent")


@pytest.mark.parametrize(
    ("ended", "why"),
    [
        (Role(None, None, code=0), "role 1 did not fail by itself (exit 0)"),
        (Role(None, None, code=None), "role 1 did not fail by itself (exit None)"),
        (
            Role(aborted(1, 0, "Replayed"), FAULT + 0.002, code=-9, killed=True),
            "role 1 did not fail by itself (exit -9, killed by the launcher)",
        ),
    ],
)
def test_a_live_role_that_did_not_fail_by_itself_fails(
    tmp_path: Path, ended: Role, why: str
) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(r1=ended)))
    assert not verdict.passed
    failing(verdict.why, why)


@pytest.mark.parametrize(
    ("named", "why"),
    [
        # It heard of another cause, or of this class from a role the gate does not name.
        (aborted(1, 0, "Corrupted"), "role 1 named RoundAborted (aborted by role 0: Corrupted)"),
        (aborted(1, 1, "Replayed"), "role 1 named RoundAborted (aborted by role 1: Replayed)"),
        # Its own wait ran out, or its connection broke: it never heard why.
        (exhausted(1, 0, "receive"), "role 1 named BudgetExhausted, not the original cause"),
        (lost(1, 0), "role 1 named PeerLost, not the original cause (Replayed at role 0)"),
        ("Replayed: role 1: refused", "role 1 named Replayed, not the original cause"),
    ],
)
def test_a_live_role_that_does_not_name_the_original_cause_fails(
    tmp_path: Path, named: str, why: str
) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(r1=Role(named, FAULT + 0.002))))
    assert not verdict.passed
    failing(verdict.why, why)


def test_an_abort_naming_an_origin_that_did_not_refuse_so_fails(tmp_path: Path) -> None:
    # The gate lets role 0 or 3 refuse; role 3 does, but role 2's ABORT names role 0, which
    # logged another cause.
    roles = {
        0: Role(lost(0, 3), LAUNCHED + 0.8),
        1: Role(aborted(1, 3, "IdentityMismatch", via=0), LAUNCHED + 0.81),
        2: Role(aborted(2, 0, "IdentityMismatch"), LAUNCHED + 0.81),
        3: Role("IdentityMismatch: role 3: refused", LAUNCHED + 0.7),
    }
    verdict = judge(gate("identity.learner", honest=False), outcome(tmp_path, roles, relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "role 0 named PeerLost", "role 2 named RoundAborted (aborted by role 0")
    assert "role 1 " not in verdict.why  # relayed, it names role 3, which refused


def test_an_abort_naming_an_origin_the_gate_does_not_name_fails(tmp_path: Path) -> None:
    # Role 1 refused with the class too, but the gate names role 0 or 3: an ABORT from role 1
    # is not the cause the gate claims.
    roles = {
        0: Role("IdentityMismatch: role 0: refused", LAUNCHED + 0.7),
        1: Role("IdentityMismatch: role 1: refused", LAUNCHED + 0.75),
        2: Role(aborted(2, 1, "IdentityMismatch"), LAUNCHED + 0.8),
        3: Role(aborted(3, 0, "IdentityMismatch"), LAUNCHED + 0.8),
    }
    verdict = judge(gate("identity.learner"), outcome(tmp_path, roles, relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "role 2 named RoundAborted (aborted by role 1: IdentityMismatch)")
    assert "role 3 " not in verdict.why


def test_both_ends_refusing_the_same_fault_each_name_the_cause(tmp_path: Path) -> None:
    reset = gate("connection.reset")
    roles = {0: Role(lost(0, 1), FAULT + 0.001), 1: Role(lost(1, 0), FAULT + 0.004)}
    verdict = judge(reset, outcome(tmp_path, roles))
    assert verdict.passed, verdict.why


def test_a_relayed_abort_names_the_original_cause(tmp_path: Path) -> None:
    inverted = gate("choice.inverted")
    roles = {
        0: Role(aborted(0, 1, "WrongEdge"), LAUNCHED + 3.01),
        1: Role("WrongEdge: role 1: refused", LAUNCHED + 3.0),
        2: Role(aborted(2, 1, "WrongEdge"), LAUNCHED + 3.02),
    }
    assert judge(inverted, outcome(tmp_path, roles, relay_at=None)).passed
    # Role 2 hears of it from role 0 after all: "relayed by role 0" names the same origin.
    roles[2] = Role(aborted(2, 1, "WrongEdge", via=0), LAUNCHED + 3.02)
    assert judge(inverted, outcome(tmp_path / "relayed", roles, relay_at=None)).passed


def identity_run(folder: Path, *, role0: str) -> Outcome:
    """Role 3, of another plan, refuses first; role 0 logs ``role0``."""
    roles = {
        0: Role(role0, LAUNCHED + 0.8),
        1: Role(aborted(1, 3, "IdentityMismatch", via=0), LAUNCHED + 0.81),
        2: Role(aborted(2, 3, "IdentityMismatch", via=0), LAUNCHED + 0.81),
        3: Role("IdentityMismatch: role 3: refused", LAUNCHED + 0.7),
    }
    return outcome(folder, roles, relay_at=None)


def test_a_refusal_by_the_replaced_role_alone_fails_where_the_gate_asks_an_honest_one(
    tmp_path: Path,
) -> None:
    identity = gate("identity.learner")
    assert identity.honest and identity.replaced == {3}
    verdict = judge(identity, identity_run(tmp_path, role0=aborted(0, 3, "IdentityMismatch")))
    assert not verdict.passed
    failing(verdict.why, "no honest role among 0 or 3 refused with IdentityMismatch by itself")
    # Role 0 refusing too (its own check) is what the gate proves: then it passes.
    honest = identity_run(tmp_path / "honest", role0="IdentityMismatch: role 0: refused")
    assert judge(identity, honest).passed
    # A gate that does not ask for an honest refuser takes the replaced role's refusal.
    loose = gate("identity.learner", honest=False)
    loose_run = identity_run(tmp_path / "loose", role0=aborted(0, 3, "IdentityMismatch"))
    assert judge(loose, loose_run).passed


def test_only_gates_with_no_honest_role_to_ask_take_a_replaced_roles_refusal() -> None:
    own = {each.name for each in GATES if not each.honest}
    assert {"frames.double-rearm", "frames.overflow", "choice.independent-forwarder"} <= own
    for each in GATES:
        # Checkpoint and recovery gates judge whole runs of `alpha run` (gates/checkpoints.py,
        # gates/recovery.py), not roles.
        if each.expected == "commit" or each.family in ("checkpoint", "recovery"):
            continue
        honest_roles = set(each.at) - each.replaced - each.disabled
        # A gate that names an honest role asks it to refuse; one that names none says so.
        assert bool(honest_roles) == each.honest, each.name


def test_a_commit_fails_a_refusal_gate(tmp_path: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(), committed=True))
    assert not verdict.passed
    failing(verdict.why, "the run committed")


def test_a_final_report_fails_a_refusal_gate(tmp_path: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(), final=(1,)))
    assert not verdict.passed
    failing(verdict.why, "final reports were published: role-000001.json")


def test_a_staged_report_left_fails(tmp_path: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(tmp_path, replayed(), staged=(1,)))
    assert not verdict.passed
    failing(verdict.why, "staged reports were left: role-000001.json.staged")


@pytest.fixture
def lingering(tmp_path: Path) -> Iterator[Path]:
    """A run folder with a process still running one of its artifacts."""
    folder = tmp_path / "run"
    artifact = folder / "role-000001.pyz"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(artifact)],
        stdin=subprocess.DEVNULL,
    )
    try:
        while child.pid not in running(folder):
            time.sleep(0.01)  # its command line shows once exec ends
        yield folder
    finally:
        child.kill()
        child.wait()


def test_a_process_left_running_fails(lingering: Path) -> None:
    verdict = judge(gate(REPLAY), outcome(lingering, replayed()))
    assert not verdict.passed
    failing(verdict.why, "processes left running: [")


# A late peer: role 1 starts 3 s late and the run must commit.
LATE = "connection.late-peer"


def late_run(folder: Path, started_s: float, *, committed: bool = True) -> Outcome:
    roles = {0: Role(None, None, code=0), 1: Role(None, None, code=0, started_s=started_s)}
    return outcome(folder, roles, relay_at=None, committed=committed, final=(0, 1))


def test_a_late_peer_that_started_late_and_committed_passes(tmp_path: Path) -> None:
    verdict = judge(gate(LATE), late_run(tmp_path, 3.16))
    assert verdict.passed, verdict.why
    assert verdict.observed == "commit"


def test_a_late_peer_that_was_not_late_fails(tmp_path: Path) -> None:
    verdict = judge(gate(LATE), late_run(tmp_path, 0.25))
    assert not verdict.passed
    failing(verdict.why, "role 1 started 0.25 s after the launch, not 3 s late")


def test_a_late_peer_that_never_ran_fails(tmp_path: Path) -> None:
    roles = {0: Role(exhausted(0, 1, "accept"), LAUNCHED + 8.3), 1: Role(None, None, code=None)}
    verdict = judge(gate(LATE), outcome(tmp_path, roles, relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "role 1 never ran to an end", "the run did not commit")


def test_a_commit_gate_that_did_not_commit_fails(tmp_path: Path) -> None:
    verdict = judge(gate(LATE), late_run(tmp_path, 3.16, committed=False))
    assert not verdict.passed
    failing(verdict.why, "the run did not commit")


# A killed peer: role 1 is killed as a total reaches it; role 0 loses it.
KILLED = "failure.killed-mid-round"


def killed_run(folder: Path, *, signalled: bool) -> Outcome:
    roles = {
        0: Role(lost(0, 1), FAULT + 0.006),
        # The fault takes it out: it neither refuses nor fails by itself.
        1: Role(None, FAULT + 0.005, code=-9),
    }
    return outcome(folder, roles, interrupted=(1,) if signalled else ())


def test_a_signalled_role_is_taken_out_and_the_gate_passes(tmp_path: Path) -> None:
    verdict = judge(gate(KILLED), killed_run(tmp_path, signalled=True))
    assert verdict.passed, verdict.why
    assert verdict.role == 0


def test_a_role_never_signalled_fails(tmp_path: Path) -> None:
    verdict = judge(gate(KILLED), killed_run(tmp_path, signalled=False))
    assert not verdict.passed
    failing(verdict.why, "role 1 was never signalled")


def test_the_time_bound_follows_the_kind_of_fault() -> None:
    assert time_bound(gate(REPLAY))[0] == RELAY_BOUND
    assert time_bound(gate(KILLED))[0] == RELAY_BOUND
    stopped = gate("connection.stopped-peer")
    assert time_bound(stopped)[0] == stopped.scenario.budget("start") + BUDGET_MARGIN
    assert time_bound(gate("frames.double-rearm"))[0] == gate(REPLAY).scenario.bound


def test_the_budget_margin_is_below_every_scenarios_smallest_budget() -> None:
    # So a refusal that waited out two budgets, one after the other, is past the bound.
    # (Checkpoint and recovery gates judge whole runs of `alpha run`, not a refusal time:
    # gates/checkpoints.py, gates/recovery.py)
    whole = ("checkpoint", "recovery")
    for scenario in {each.scenario for each in GATES if each.family not in whole}:
        smallest = min(scenario.budget(name) for name in ("accept", "start", "receive"))
        assert smallest > BUDGET_MARGIN, scenario.name


def test_a_signalled_role_is_timed_from_its_signal(tmp_path: Path) -> None:
    # Finding the pid to signal read /proc for 0.8 s after the relay reached the frame; the
    # refusal came 0.01 s after the signal.
    run = killed_run(tmp_path, signalled=True)
    for each in run.result.outcomes.values():
        assert each.failed_at is not None
        each.failed_at += 0.8
    (tmp_path / "logs" / "role-000000.log").write_text(
        f"role 0: failure-clock {FAULT + 0.806:.6f}\nrole 0: failed: {lost(0, 1)}\n"
    )
    run.signalled_at = FAULT + 0.796
    verdict = judge(gate(KILLED), run)
    assert verdict.passed, verdict.why
    assert verdict.seconds == pytest.approx(0.01)
    run.signalled_at = None  # timed from the relay, it would be 0.806 s
    assert judge(gate(KILLED), run).seconds == pytest.approx(0.806)


def test_the_outcome_reads_the_errors_own_text(tmp_path: Path) -> None:
    roles = {
        0: Role(exhausted(0, 1, "connect", 10.0), LAUNCHED + 1),
        1: Role(aborted(1, 2, "WrongEdge", via=0), LAUNCHED + 1),
        2: Role(lost(2, 0), LAUNCHED + 1),
    }
    run = outcome(tmp_path, roles)
    assert (run.cause(0), run.budget(0), run.aborted_by(0)) == ("BudgetExhausted", "connect", None)
    assert (run.cause(1), run.budget(1), run.aborted_by(1)) == (
        "RoundAborted",
        None,
        (2, "WrongEdge"),
    )
    assert (run.cause(2), run.budget(2), run.aborted_by(2)) == ("PeerLost", None, None)
    assert run.failure(7) == run.cause(7) == ""  # no log: never started


# The control runs.


def test_a_control_run_must_commit(tmp_path: Path) -> None:
    committed = late_run(tmp_path / "ok", 0.25)
    assert control_problems(committed) == []
    failed = outcome(
        tmp_path / "failed",
        {0: Role(lost(0, 1), LAUNCHED + 1), 1: Role(None, None, code=-9)},
        relay_at=None,
    )
    (problem,) = control_problems(failed)
    assert problem.startswith("the run without a fault did not commit")
    uncommitted = late_run(tmp_path / "uncommitted", 0.25, committed=False)
    assert control_problems(uncommitted) != []


def test_a_control_run_must_leave_nothing_running(lingering: Path) -> None:
    run = late_run(lingering, 0.25)
    assert any("processes left running" in each for each in control_problems(run))


CHAIN = gate("choice.inverted").scenario
SAME = {"w": "ab" * 32, "state": "cd" * 32}


def chain_digests(**machines: str) -> dict[int, dict[str, str]]:
    return {int(role[1:]): {**SAME, "machine": machine} for role, machine in machines.items()}


def test_the_emulated_control_run_equal_to_the_native_one_passes() -> None:
    assert CHAIN.emulated == (1,)
    emulated = chain_digests(r0="x86_64", r1="aarch64", r2="x86_64")
    native = chain_digests(r0="x86_64", r1="x86_64", r2="x86_64")
    assert compare_native(CHAIN, emulated, native) == []


def test_an_emulated_role_that_ran_natively_fails() -> None:
    native = chain_digests(r0="x86_64", r1="x86_64", r2="x86_64")
    assert compare_native(CHAIN, native, native) == ["role 1 ran on 'x86_64', not aarch64"]
    other = chain_digests(r0="aarch64", r1="aarch64", r2="x86_64")
    assert compare_native(CHAIN, other, native) == ["role 0 ran on 'aarch64', not x86_64"]


def test_final_bytes_that_differ_from_the_native_run_fail() -> None:
    emulated = chain_digests(r0="x86_64", r1="aarch64", r2="x86_64")
    native = chain_digests(r0="x86_64", r1="x86_64", r2="x86_64")
    native[2]["w"] = "ef" * 32
    assert compare_native(CHAIN, emulated, native) == [
        "role 2's final bytes differ from the all-native run's"
    ]


def test_a_missing_or_empty_report_fails_the_comparison() -> None:
    emulated = chain_digests(r0="x86_64", r1="aarch64", r2="x86_64")
    native = chain_digests(r0="x86_64", r1="x86_64")
    assert compare_native(CHAIN, emulated, native) == [
        "role 2 has no final report in the all-native run"
    ]
    empty = {role: {"machine": each["machine"]} for role, each in emulated.items()}
    assert compare_native(CHAIN, empty, empty) == [
        f"role {role}'s report has no region digests" for role in range(3)
    ]


SPAIR = gate("shared.replay").scenario


def with_edges(run: Outcome, edges: Mapping[int, list[dict[str, int]]]) -> Outcome:
    """``run`` with each listed role's final report carrying ``edges``."""
    for role, listed in edges.items():
        path = run.folder / "reports" / f"role-{role:06d}.json"
        report = json.loads(path.read_text())
        path.write_text(json.dumps({**report, "edges": listed}))
    return run


def test_a_shared_control_run_whose_edges_moved_payloads_through_regions_passes(
    tmp_path: Path,
) -> None:
    assert SPAIR.shared and SPAIR.name == "spair"
    edges = {0: [{"peer": 1, "shared_bytes": 786432}], 1: [{"peer": 0, "shared_bytes": 786432}]}
    assert shared_problems(SPAIR, with_edges(late_run(tmp_path, 0.25), edges)) == []


def test_a_shared_control_run_that_fell_back_to_tcp_fails(tmp_path: Path) -> None:
    # A gate on the shared-memory transport whose frames went whole over TCP proves nothing.
    edges = {0: [{"peer": 1, "shared_bytes": 786432}], 1: [{"peer": 0, "shared_bytes": 0}]}
    assert shared_problems(SPAIR, with_edges(late_run(tmp_path / "a", 0.25), edges)) == [
        "role 1's edge to role 0 moved no payload byte through shared memory (shared_bytes 0): "
        "its frames fell back to TCP"
    ]
    run = with_edges(late_run(tmp_path / "b", 0.25), {0: [], 1: [{"peer": 0}]})
    assert shared_problems(SPAIR, run) == [
        "role 0's report lists no edge",
        "role 1's edge to role 0 moved no payload byte through shared memory (shared_bytes 0): "
        "its frames fell back to TCP",
    ]
    (tmp_path / "b" / "reports" / "role-000001.json").unlink()
    assert "role 1 has no final report" in shared_problems(SPAIR, run)


def test_digests_come_from_the_final_reports(tmp_path: Path) -> None:
    run = late_run(tmp_path, 3.2)
    assert digests(run) == {
        0: {"w": "00", "machine": "x86_64"},
        1: {"w": "00", "machine": "x86_64"},
    }


def test_peers_of_a_role_that_refused_before_any_edge_name_its_absence(tmp_path: Path) -> None:
    # Role 1's loader refused its own damaged artifact: no frame can carry that to role 0,
    # which must instead have waited out its accept budget for role 1.
    damaged = gate("artifact.damaged-member")
    roles = {
        0: Role(exhausted(0, 1, "accept"), LAUNCHED + 8.2),
        1: Role("ArtifactInvalid: role 1: member role.json is damaged", LAUNCHED + 0.5),
    }
    assert judge(damaged, outcome(tmp_path / "a", roles, relay_at=None)).passed
    roles[0] = Role(exhausted(0, 1, "start"), LAUNCHED + 8.2)
    verdict = judge(damaged, outcome(tmp_path / "b", roles, relay_at=None))
    assert not verdict.passed
    failing(verdict.why, "role 0 named BudgetExhausted (start budget), not BudgetExhausted")
    roles[0] = Role(lost(0, 1), LAUNCHED + 0.6)
    verdict = judge(damaged, outcome(tmp_path / "c", roles, relay_at=None))
    failing(verdict.why, "role 0 named PeerLost")


# --- authenticated frames (issue 25): after, through, committed -------------------------------

FORGED = "Forged: role 1: frame on edge 0->1 refused: the keyed trailer does not match; "
FORGED += "the frame was not made with this edge's key; the round must be aborted"
UNKNOWN = "CommitUnknown: role 1 reported its completion but cannot learn whether the run "
UNKNOWN += "committed: role 1: frame on edge 0->1, slot 0, version 0 refused: the keyed trailer "
UNKNOWN += "does not match; the frame was not made with this edge's key; the round must be aborted"


def abort_as_commit(**changes: Role) -> dict[int, Role]:
    # fan: role 0 refuses role 2's second DONE (the trigger), its ABORT to role 1 is rewritten
    # into a COMMIT (the fault, at FAULT), and role 1 cannot learn whether the run committed.
    roles = {
        0: Role("TrailingBytes: role 0: refused", FAULT - 0.001),
        1: Role(UNKNOWN, FAULT + 0.001),
        2: Role(aborted(2, 0, "TrailingBytes"), FAULT + 0.002),
    }
    roles.update({int(key[1:]): value for key, value in changes.items()})
    return roles


def test_an_abort_gate_measures_the_refusal_after_its_trigger(tmp_path: Path) -> None:
    run = outcome(tmp_path, abort_as_commit(), staged=(1,))
    verdict = judge(gate("forgery.abort-as-commit"), run)
    assert verdict.passed, verdict.why
    assert (verdict.role, verdict.observed) == (1, "CommitUnknown")
    assert verdict.seconds == pytest.approx(0.001)


def test_an_abort_gate_whose_first_refusal_is_not_its_trigger_fails(tmp_path: Path) -> None:
    roles = abort_as_commit(r0=Role("WrongEdge: role 0: refused", FAULT - 0.001))
    verdict = judge(gate("forgery.abort-as-commit"), outcome(tmp_path / "a", roles, staged=(1,)))
    failing(verdict.why, "role 0 failed first with WrongEdge; the gate's ABORT is role 0's")
    # An ABORT taken for what it says: role 1 aborted, not refusing the forged frame.
    roles = abort_as_commit(r1=Role(aborted(1, 0, "TrailingBytes"), FAULT + 0.001))
    verdict = judge(gate("forgery.abort-as-commit"), outcome(tmp_path / "b", roles))
    assert not verdict.passed
    failing(verdict.why, "role 1 failed first with RoundAborted; expected CommitUnknown")


def test_a_commit_unknown_that_does_not_name_the_forgery_fails(tmp_path: Path) -> None:
    other = UNKNOWN.replace("the frame was not made with this edge's key", "the peer went away")
    roles = abort_as_commit(r1=Role(other, FAULT + 0.001))
    verdict = judge(gate("forgery.abort-as-commit"), outcome(tmp_path, roles, staged=(1,)))
    assert not verdict.passed
    failing(verdict.why, "role 1's CommitUnknown does not name the Forged it met")


def test_the_child_that_cannot_know_keeps_its_report_staged_never_final(tmp_path: Path) -> None:
    verdict = judge(gate("forgery.abort-as-commit"), outcome(tmp_path / "a", abort_as_commit()))
    failing(verdict.why, "no report was left staged by the role that cannot know")
    run = outcome(tmp_path / "b", abort_as_commit(), final=(1,))
    failing(judge(gate("forgery.abort-as-commit"), run).why, "final reports were published")
    run = outcome(tmp_path / "c", abort_as_commit(), staged=(1, 2))
    failing(judge(gate("forgery.abort-as-commit"), run).why, "staged reports were left")


def rehashed_commit(**changes: Role) -> dict[int, Role]:
    # pair: role 0 committed and ended 0; role 1 refused the rehashed COMMIT.
    roles = {0: Role(None, None, code=0), 1: Role(UNKNOWN, FAULT + 0.001)}
    roles.update({int(key[1:]): value for key, value in changes.items()})
    return roles


def test_a_fault_after_the_commit_point_passes_as_committed(tmp_path: Path) -> None:
    run = outcome(tmp_path, rehashed_commit(), committed=True, final=(0,), staged=(1,))
    verdict = judge(gate("forgery.rehash-commit"), run)
    assert verdict.passed, verdict.why
    assert (verdict.role, verdict.observed) == (1, "CommitUnknown")


def test_after_the_commit_point_what_must_hold_fails_when_it_does_not(tmp_path: Path) -> None:
    name = "forgery.rehash-commit"
    run = outcome(tmp_path / "a", rehashed_commit(), final=(0,), staged=(1,))
    failing(judge(gate(name), run).why, "the run did not commit before the fault")
    run = outcome(tmp_path / "b", rehashed_commit(), committed=True, final=(0, 1))
    failing(judge(gate(name), run).why, "the final reports are role-000000.json, role-000001.json")
    run = outcome(tmp_path / "c", rehashed_commit(), committed=True, staged=(1,))
    failing(judge(gate(name), run).why, "the final reports are none")
    roles = rehashed_commit(r0=Role(None, None, code=1))
    run = outcome(tmp_path / "d", roles, committed=True, final=(0,), staged=(1,))
    failing(judge(gate(name), run).why, "role 0 did not end 0 after the commit point")
    roles = rehashed_commit(r1=Role(None, None, code=0))
    run = outcome(tmp_path / "e", roles, committed=True, final=(0, 1))
    failing(judge(gate(name), run).why, "no role failed")
