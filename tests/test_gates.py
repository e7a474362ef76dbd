"""The gates: `alpha observe gate` on real runs, its selection, its verdicts and its output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import alpha.cli
from alpha.cli import main
from alpha.errors import UsageError
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from gates.catalogue import GATES, SCENARIOS
from gates.run import run_gates, select
from harness.adversary import BEHAVIOURS


def test_every_gate_has_a_unique_name_in_a_family_and_an_expected_refusal() -> None:
    import alpha.errors

    names = [gate.name for gate in GATES]
    assert len(names) == len(set(names))
    for gate in GATES:
        assert gate.family in ("frames", "identity", "connection", "choice", "failure")
        if gate.expected != "commit":
            assert issubclass(getattr(alpha.errors, gate.expected), alpha.errors.AlphaError)
            assert gate.at and set(gate.at) <= set(range(gate.scenario.roles))
        assert gate.scenario is SCENARIOS[gate.scenario.name]
        assert set(gate.adversaries.values()) <= set(BEHAVIOURS)
        if gate.foreign is not None:
            assert gate.scenario.plan.count(gate.foreign[1]) == 1, gate.name
        assert gate.fault_text(), gate.name


def test_the_gates_cover_what_issue_12_asks() -> None:
    names = {gate.name for gate in GATES}
    asked = {
        "frames": "replay skipped-version double-rearm overflow corrupt-header corrupt-payload "
        "corrupt-trailer truncation trailing-bytes trailing-after-last swapped wrong-edge "
        "wrong-kind",
        "identity": "learner rate contract tree membership program",
        "connection": "absent-peer late-peer trickle stranger silent-peer stopped-peer",
        "choice": "inverted independent-forwarder noncanonical-word mismatched-binding",
        "failure": "killed-mid-round",
    }
    for family, gates in asked.items():
        assert {f"{family}.{name}" for name in gates.split()} <= names
    # The choice gates run three processes, one of them emulated AArch64.
    for gate in GATES:
        if gate.family == "choice":
            assert gate.scenario.roles == 3 and len(gate.scenario.emulated) == 1


def test_shards_split_the_gates_without_overlap() -> None:
    shards = [select([], (k, 3)) for k in (1, 2, 3)]
    assert sorted(g.name for shard in shards for g in shard) == sorted(g.name for g in GATES)
    assert select(["frames.replay"], None) == [GATES[0]]
    with pytest.raises(KeyError):
        select(["frames.nonexistent"], None)


def test_the_list_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["observe", "gate", "--list"]) == EXIT_OK
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == [gate.name for gate in GATES]
    assert main(["observe", "gate", "frames.nonexistent"]) == EXIT_USAGE
    assert main(["observe", "gate", "--shard", "4/3"]) == EXIT_USAGE
    assert main(["observe", "gate", "--shard", "x"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("alpha: error: ") for line in err)


def test_outside_a_checkout_the_command_says_where_the_gates_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An installed wheel carries alpha alone: no gates/ or harness/ beside the package.
    monkeypatch.setattr(alpha.cli, "_CHECKOUT", tmp_path)
    with pytest.raises(UsageError) as info:
        alpha.cli._checkout_gates()
    assert type(info.value) is UsageError
    assert main(["observe", "gate", "--list"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "alpha: error: observe gate: the gates run from a source checkout of alpha only, with "
        "its test harness, sshd and the AArch64 sysroot; in a checkout, run `make venv` and "
        "then `.venv/bin/alpha observe gate` (docs/install.md)\n"
    )


@pytest.mark.slow
def test_every_gate_passes_after_its_scenarios_control_run() -> None:
    out, progress = io.StringIO(), io.StringIO()
    verdicts = run_gates(GATES, out=out, progress=progress)
    failed = [(v.gate, v.why) for v in verdicts if not v.passed]
    assert failed == []
    controls = [v.gate for v in verdicts if v.gate.startswith("control.")]
    scenarios = dict.fromkeys(gate.scenario.name for gate in GATES)  # in order of first use
    assert controls == [f"control.{name}" for name in scenarios]
    assert [v.gate for v in verdicts if v.gate not in controls] == [g.name for g in GATES]
    table = out.getvalue().splitlines()
    assert table[0].split()[:4] == ["gate", "fault", "expected", "observed"]
    assert len(table) == len(verdicts) + 1
    assert progress.getvalue().count("gate: [") == len(verdicts)
    by_name = {v.gate: v for v in verdicts}
    for gate in GATES:
        verdict = by_name[gate.name]
        assert verdict.observed == gate.expected
        if gate.expected != "commit":
            assert verdict.role in gate.at
            assert verdict.seconds is not None and verdict.seconds >= 0


@pytest.mark.slow
def test_the_command_writes_json_and_exits_0_when_the_gates_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "gates.json"
    code = main(["observe", "gate", "frames.replay", "--json", str(report)])
    assert code == EXIT_OK, capsys.readouterr().err
    rows = json.loads(report.read_text())
    assert [row["gate"] for row in rows] == ["control.pair", "frames.replay"]
    assert all(row["passed"] for row in rows)
    assert set(rows[1]) == {
        "gate", "fault", "expected", "observed", "role", "seconds", "passed", "why"
    }  # fmt: skip


@pytest.mark.slow
def test_a_gate_whose_refusal_differs_fails_and_says_why() -> None:
    import dataclasses

    wrong = dataclasses.replace(GATES[0], name="frames.replay-misjudged", expected="Corrupted")
    verdicts = run_gates([wrong], out=io.StringIO(), progress=io.StringIO())
    control, verdict = verdicts
    assert control.passed and not verdict.passed
    assert verdict.observed == "Replayed"
    assert "failed first with Replayed; expected Corrupted at role 0" in verdict.why
