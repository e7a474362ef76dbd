"""The gates: `alpha observe gate` on real runs, its selection, its verdicts and its output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

import alpha.app.observe
from alpha.app.cli import main
from alpha.errors import UsageError
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from alpha.launch import FAILURE_CLASSES
from alpha.launch.launcher import LaunchResult
from alpha.runtime import SHARED_MIN
from gates.catalogue import GATES, PINNED, REFERENCES, SCENARIOS
from gates.checkpoints import CHECKPOINT
from gates.recovery import RECOVERY
from gates.reference_fold import final_digests
from gates.run import _pinned, run_gates, select
from harness.adversary import BEHAVIOURS
from harness.runs import Outcome


def test_every_gate_has_a_unique_name_in_a_family_and_an_expected_refusal() -> None:
    import alpha.errors

    names = [gate.name for gate in GATES]
    assert len(names) == len(set(names))
    for gate in GATES:
        assert gate.family in (
            "frames",
            "identity",
            "connection",
            "choice",
            "failure",
            "artifact",
            "checkpoint",
            "forgery",
            "admission",
            "shared",
            "recovery",
        )
        if gate.family == "recovery":  # whole runs with restarts, judged in gates/recovery.py
            assert gate.scenario is RECOVERY and gate.meaning, gate.name
            assert set(gate.expected.split(" or ")) <= set(FAILURE_CLASSES), gate.name
            continue
        if gate.family == "checkpoint":  # whole checkpointed runs, judged in gates/checkpoints.py
            assert gate.scenario is CHECKPOINT and gate.meaning, gate.name
            assert issubclass(getattr(alpha.errors, gate.expected), alpha.errors.AlphaError)
            continue
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
    monkeypatch.setattr(alpha.app.observe, "_CHECKOUT", tmp_path)
    with pytest.raises(UsageError) as info:
        alpha.app.observe._checkout_gates()
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
        if verdict.observed == "skipped":  # no tmpfs, or no namespace here: it says why
            assert gate.name in ("checkpoint.enospc", "recovery.refused", "recovery.failing")
            assert verdict.why.startswith("skipped: ")
            continue
        if gate.family == "recovery":  # attempts' classes, then what attempt 0 was known by
            assert verdict.observed.split(" (")[0].split(",")[0] in gate.expected.split(" or ")
            continue
        assert verdict.observed == gate.expected
        if gate.family == "checkpoint":
            continue  # refused by a whole run, not by one role
        if gate.expected != "commit":
            assert verdict.role in gate.at
            assert verdict.seconds is not None and verdict.seconds >= 0


@pytest.mark.slow
def test_the_command_prints_json_and_exits_0_when_the_gates_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["observe", "gate", "frames.replay", "--json"])
    printed = capsys.readouterr()
    assert code == EXIT_OK, printed.err
    document = json.loads(printed.out)  # one object on stdout, as every --json; no table
    assert document["ok"] is True
    rows = document["rows"]
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


def test_the_gates_cover_what_issue_25_asks() -> None:
    # Rewrite-and-rehash of a data frame, a choice word, an ABORT (and an ABORT into a
    # COMMIT), a DONE and a COMMIT; a keyless stranger; another compile of the same plan; a
    # keyed role against an unkeyed one; and layout 2's Corrupted kept on an unkeyed plan.
    by_name = {gate.name: gate for gate in GATES}
    asked = {
        "forgery.rehash-data": "Forged",
        "forgery.rehash-choice": "Forged",
        "forgery.rehash-abort": "Forged",
        "forgery.abort-as-commit": "CommitUnknown",
        "forgery.rehash-done": "Forged",
        "forgery.rehash-commit": "CommitUnknown",
        "admission.keyless-stranger": "Forged",
        "admission.other-compile": "Forged",
        "admission.unkeyed-peer": "WrongFrame",
        "frames.corrupt-payload-unkeyed": "Corrupted",
        "frames.corrupt-trailer-unkeyed": "Corrupted",
    }
    assert {name: by_name[name].expected for name in asked} == asked
    for name in asked:
        gate = by_name[name]
        keyed = 'integrity = "sha256"' not in gate.scenario.plan
        assert keyed == (not name.endswith("-unkeyed")), name
        if gate.fault is not None and gate.fault.kind == "rehash":
            assert gate.fault.key != bytes(32) and gate.honest, name
        if gate.expected == "CommitUnknown":  # a child that refused where its COMMIT is due
            assert gate.through == "Forged", name
    assert by_name["forgery.rehash-commit"].committed
    assert not by_name["forgery.abort-as-commit"].committed


def test_the_gates_cover_what_issue_26_asks() -> None:
    # The refusals proved on the shared-memory transport too: relay faults on a doorbell,
    # adversaries that change, cut or misshape a region, a killed peer; each on `spair`, whose
    # relay frames doorbells because the scenario says its edge shares memory.
    from alpha.compiler.plan import parse_plan

    by_name = {gate.name: gate for gate in GATES}
    asked = {
        "shared.corrupt-header": ("WrongFrame", (0,)),
        "shared.replay": ("Replayed", (0,)),
        "shared.corrupt-trailer": ("Forged", (0,)),
        "shared.truncation": ("Truncated", (0,)),
        "shared.rewritten-payload": ("Forged", (0,)),
        "shared.cut-short": ("Truncated", (0,)),
        "shared.short-region": ("RegionRefused", (0,)),
        "shared.foreign-marker": ("RegionRefused", (0,)),
        "shared.killed-mid-round": (by_name["failure.killed-mid-round"].expected, (0,)),
    }
    assert {name: (by_name[name].expected, by_name[name].at) for name in asked} == asked
    assert {gate.name for gate in GATES if gate.family == "shared"} == set(asked)
    for name in asked:
        gate = by_name[name]
        assert gate.scenario.name == "spair" and gate.scenario.shared and gate.honest, name
        assert 'integrity = "sha256"' not in gate.scenario.plan  # keyed
    # Its payloads go through regions: every DATA payload is SHARED_MIN bytes or more.
    plan = parse_plan(by_name["shared.replay"].scenario.plan, source="spair")
    assert plan.work_size is not None
    assert plan.work_size * np.dtype(plan.dtype).itemsize >= SHARED_MIN
    assert not any(gate.scenario.shared for gate in GATES if gate.family != "shared")


# --- A gate for each check (issue 22) ---------------------------------------------------------


def test_the_gates_cover_the_checks_issue_22_names() -> None:
    by_name = {gate.name: gate for gate in GATES}
    asked = {
        "frames.wrong-receiver": "WrongEdge",
        "connection.receive-budget": "BudgetExhausted",
        "artifact.damaged-member": "ArtifactInvalid",
        "frames.overflow-receive-side": "VersionOverflow",
        "frames.overflow-send-side": "VersionOverflow",
        "choice.lying-forwarder": "WrongEdge",
        "frames.corrupt-emulated": "Forged",  # keyed since issue 25: damage looks forged
    }
    assert {name: by_name[name].expected for name in asked} == asked
    # One refusing role each, and never a role whose checks an adversary removed or whose
    # behaviour it changed: the refusing role runs the product's own check.
    changed_checks = {"overflowing-sender", "overflowing-receiver", "stall-after-first"}
    changed_checks |= {"lying-forwarder", "inverted-choice", "independent-forwarder"}
    for name in asked:
        gate = by_name[name]
        assert len(gate.at) == 1, name
        assert gate.adversaries.get(gate.at[0]) not in changed_checks, name
    # One-sided overflow: each gate has exactly one role whose own check is removed, and it
    # is not the refusing one.
    for name, refusing in (("frames.overflow-receive-side", 0), ("frames.overflow-send-side", 1)):
        gate = by_name[name]
        assert gate.at == (refusing,)
        removed = [r for r, b in gate.adversaries.items() if b.startswith("overflowing-")]
        assert removed == [1 - refusing]
    # The float chain: AArch64 role 1 on a float32 learner, bits pinned.
    lchain = SCENARIOS["lchain"]
    assert lchain.emulated == (1,) and 'dtype = "float32"' in lchain.plan
    assert 'kind = "learn"' in lchain.plan and "[targets]\naarch64 = [1]\n" in lchain.plan


def test_the_independent_reference_computes_the_pinned_digests() -> None:
    # The pins in the catalogue are what an implementation that shares no code with the
    # product computes for each learn scenario.
    assert set(PINNED) == set(REFERENCES) == {"learn", "lchain"}
    for name, reference in REFERENCES.items():
        assert final_digests(reference) == PINNED[name], name
        plan = SCENARIOS[name].plan
        for line in (
            f"hidden = {reference.hidden}",
            f"rate = {reference.rate}",
            f"seed = {reference.seed}",
            f"batch = {reference.batch}",
            f"rounds = {reference.rounds}",
            f"(stride 0 1 {reference.roles})",
        ):
            assert line in plan, (name, line)


def test_the_independent_reference_imports_nothing_of_alpha() -> None:
    import ast

    import gates.reference_fold

    tree = ast.parse(Path(gates.reference_fold.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "gzip", "hashlib", "math", "collections", "dataclasses",
                        "pathlib", "typing", "numpy"}  # fmt: skip


def test_the_reference_digests_move_with_the_fold_order() -> None:
    # The contract folds a node first, then its children in ascending role order; three
    # children folded in another order give other bits, so the pin sees a fold order.
    import dataclasses

    for reference in REFERENCES.values():
        for children in reference.children.values():
            assert list(children) == sorted(children)
    learn = REFERENCES["learn"]
    reordered = dataclasses.replace(learn, children={0: (3, 2, 1)})
    assert final_digests(reordered) != PINNED["learn"]


def _reports(folder: Path, digests: dict[int, dict[str, str]]) -> Outcome:
    (folder / "reports").mkdir(parents=True)
    for role, found in digests.items():
        report = {"role": role, "digests": found, "machine": "x86_64"}
        (folder / "reports" / f"role-{role:06d}.json").write_text(json.dumps(report))
    return Outcome(LaunchResult(), folder, None)


def test_a_control_whose_bits_differ_from_the_pin_fails(tmp_path: Path) -> None:
    learn = SCENARIOS["learn"]
    pinned = dict(PINNED["learn"])
    good = _reports(tmp_path / "good", dict.fromkeys(range(4), pinned))
    assert _pinned(learn, good) == []
    other = dict(pinned, w="0" * 64)
    bad = _reports(tmp_path / "bad", {0: pinned, 1: other, 2: pinned, 3: other})
    (problem,) = _pinned(learn, bad)
    assert problem.startswith("region w of role 1, 3 is 0000000000000000..., not the ")
    missing = _reports(tmp_path / "missing", {0: pinned, 1: pinned, 2: pinned})
    assert _pinned(learn, missing) == [
        f"region {name} of role 3 is None..., not the independent reference's "
        f"{digest[:16]}... (gates/reference_fold.py)"
        for name, digest in sorted(pinned.items())
    ]


@pytest.mark.slow
def test_the_receive_budget_gate_names_the_receive_budget(tmp_path: Path) -> None:
    import trio

    from alpha.app.compile import compile_plan
    from alpha.artifact import artifact_name
    from alpha.compiler.plan import parse_plan
    from harness.adversary import build_adversary
    from harness.runs import relayed_run

    pair = SCENARIOS["pair"]
    compiled = tmp_path / "compiled"
    compile_plan(parse_plan(pair.plan, source="pair"), compiled, range(2))
    stalling = build_adversary(
        compiled / artifact_name(1), "stall-after-first", tmp_path / artifact_name(1)
    )
    outcome = trio.run(lambda: relayed_run(compiled, tmp_path / "run", replace={1: stalling}))
    assert outcome.cause(0) == "BudgetExhausted"
    (line,) = [line for line in outcome.log(0).splitlines() if ": failed: " in line]
    assert "past its receive budget (4 s) while it was receiving 'x#1' from role 1" in line
    assert outcome.cause(1) == "RoundAborted"
    assert not outcome.committed() and not outcome.final_reports()


def test_the_products_replicated_learner_ends_on_the_pinned_parameters() -> None:
    # Today the product, the reference and the pins agree: the replicated learner (one
    # process, the product's own fold) ends on the pinned parameters for both learn scenarios.
    from alpha.compiler.plan import parse_plan
    from alpha.compiler.replicate import replicate
    from alpha.learner import load_digits

    digits = load_digits()
    for name in REFERENCES:
        replica = replicate(parse_plan(SCENARIOS[name].plan, source=name), digits)
        assert replica.digest == PINNED[name]["w"], name
