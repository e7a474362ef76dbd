"""Running gates: a control run per scenario that must commit, then each gate's faulted run,
judged.

A gate passes when its scenario's control run committed (and, for a scenario with an emulated
AArch64 role, computed bit for bit what the all-native run computes), and in the faulted run:
the fault was applied; the role that refused first (by the participants' own clocks, among the
roles the fault did not take out) is one the gate names, with the expected refusal class; that
refusal came within the scenario's budgets after the fault (``start + receive``: the longest
any one wait may take); every role the fault did not take out exited non-zero by itself;
nothing was committed; and no participant is left running. A gate that expects ``commit``
passes when its run committed like the control run.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import trio

from alpha.artifact import artifact_name
from alpha.compile import compile_plan
from alpha.plan import parse_plan
from gates.catalogue import GATES, Gate, Scenario
from harness.adversary import build_adversary, compile_with_code, foreign_artifact
from harness.emulation import EmulationUnavailable, aarch64_interpreter
from harness.runs import Outcome, relayed_run

__all__ = ["Verdict", "run_gates", "select", "table", "to_json"]


@dataclass
class Verdict:
    """One row of the gate table."""

    gate: str
    fault: str
    expected: str
    observed: str
    role: int | None
    seconds: float | None  # from the fault to the first refusal
    passed: bool
    why: str = ""


def select(names: Sequence[str], shard: tuple[int, int] | None) -> list[Gate]:
    """The gates named (all when none), then shard K of N of them (every N-th from K-1).

    Raises:
        KeyError: a name is no gate's; the message lists the known ones.
    """
    known = {gate.name: gate for gate in GATES}
    chosen = [gate for gate in GATES if not names or gate.name in names]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(f"no gate named {unknown[0]!r}; `alpha observe gate --list` lists them")
    if shard is not None:
        index, count = shard
        chosen = chosen[index - 1 :: count]
    return chosen


def _first_refusal(gate: Gate, outcome: Outcome) -> tuple[int, float] | None:
    """The role that failed first by the clocks, among those the fault did not take out."""
    found = [
        (each.failed_at, role)
        for role, each in outcome.result.outcomes.items()
        if each.failed_at is not None and role not in gate.disabled and role >= 0
    ]
    if not found:
        return None
    at, role = min(found)
    return role, at


def judge(gate: Gate, outcome: Outcome) -> Verdict:
    """The verdict on one faulted run."""
    result = outcome.result
    relay = outcome.relay
    first = _first_refusal(gate, outcome)
    observed = outcome.cause(first[0]) if first is not None else ""
    fault_at = outcome.launched_at
    if gate.fault is not None and relay is not None and relay.applied_at is not None:
        fault_at = relay.applied_at
    seconds = None if first is None else first[1] - fault_at
    problems = []
    if gate.fault is not None and (relay is None or not relay.applied):
        problems.append("the fault was never applied")
    if gate.expected == "commit":
        observed = "commit" if outcome.committed() else "no commit"
        if not (result.ok and outcome.committed()):
            problems.append(f"the run did not commit: {result.first_failure}")
    else:
        if gate.interrupt is not None and gate.interrupt.role not in outcome.interrupted:
            problems.append(f"role {gate.interrupt.role} was never signalled")
        if first is None:
            problems.append("no role failed")
        elif first[0] not in gate.at or observed != gate.expected:
            problems.append(
                f"role {first[0]} failed first with {observed or 'no logged cause'}; expected "
                f"{gate.expected} at role {' or '.join(map(str, gate.at))}"
            )
        bound = gate.scenario.bound
        if seconds is not None and seconds > bound:
            problems.append(f"the refusal took {seconds:.1f} s, past the budgets ({bound:g} s)")
        for role, each in sorted(result.outcomes.items()):
            if role in gate.disabled:
                continue
            if each.returncode in (0, None) or each.killed:
                problems.append(f"role {role} did not fail by itself (exit {each.returncode})")
        if outcome.committed() or outcome.final_reports():
            problems.append("the run committed")
    if outcome.left_running():
        problems.append(f"processes left running: {outcome.left_running()}")
    return Verdict(
        gate=gate.name,
        fault=gate.fault_text(),
        expected=gate.expected,
        observed=observed or "none",
        role=None if first is None else first[0],
        seconds=seconds,
        passed=not problems,
        why="; ".join(problems),
    )


def _digests(outcome: Outcome) -> dict[int, dict[str, str]]:
    found = {}
    for path in outcome.final_reports():
        report = json.loads(path.read_text())
        found[int(report["role"])] = {**report["digests"], "machine": report.get("machine", "")}
    return found


def _native(plan: str) -> str:
    """The plan with every role built for x86-64."""
    return plan.replace("[targets]\naarch64 = [1]\n", "")


class _Scenarios:
    """Each scenario compiled once and its control run, as the first gate that needs it comes."""

    def __init__(self, work: Path, on_verdict: Callable[[Verdict], None]) -> None:
        self.work = work
        self.on_verdict = on_verdict
        self.compiled: dict[str, Path] = {}
        self.controls: dict[str, Verdict] = {}
        self.interpreters: dict[str, Mapping[str, Sequence[str]]] = {}
        self.count = 0

    def folder(self, label: str) -> Path:
        self.count += 1
        return self.work / f"{self.count:03d}-{label}"

    async def ready(self, scenario: Scenario) -> Verdict:
        if scenario.name in self.controls:
            return self.controls[scenario.name]
        compiled = self.work / f"compiled-{scenario.name}"
        compile_plan(
            parse_plan(scenario.plan, source=scenario.name), compiled, range(scenario.roles)
        )
        self.compiled[scenario.name] = compiled
        verdict = Verdict(f"control.{scenario.name}", "none", "commit", "none", None, None, False)
        try:
            interpreters = {"aarch64": aarch64_interpreter()} if scenario.emulated else {}
        except EmulationUnavailable as error:
            verdict.why = str(error)
            self.controls[scenario.name] = verdict
            self.on_verdict(verdict)
            return verdict
        self.interpreters[scenario.name] = interpreters
        control = await relayed_run(
            compiled, self.folder(f"control-{scenario.name}"), scenario.edge, None,
            interpreters=interpreters,
        )  # fmt: skip
        problems = []
        verdict.observed = "commit" if control.committed() else "no commit"
        if not (control.result.ok and control.committed()):
            problems.append(
                f"the run without a fault did not commit: {control.result.first_failure}"
            )
        if control.left_running():
            problems.append(f"processes left running: {control.left_running()}")
        if scenario.emulated and not problems:
            problems += await self._bit_equal(scenario, control)
        verdict.passed = not problems
        verdict.why = "; ".join(problems)
        self.controls[scenario.name] = verdict
        self.on_verdict(verdict)
        return verdict

    async def _bit_equal(self, scenario: Scenario, control: Outcome) -> list[str]:
        """The emulated roles ran as AArch64, and every role's final bytes equal the
        all-native run's."""
        native_compiled = self.work / f"compiled-{scenario.name}-native"
        plan = _native(scenario.plan)
        compile_plan(parse_plan(plan, source=scenario.name), native_compiled, range(scenario.roles))
        native = await relayed_run(native_compiled, self.folder(f"native-{scenario.name}"))
        if not (native.result.ok and native.committed()):
            return [f"the all-native run did not commit: {native.result.first_failure}"]
        emulated, reference = _digests(control), _digests(native)
        problems = []
        for role in range(scenario.roles):
            machine = emulated[role].pop("machine")
            reference[role].pop("machine")
            wanted = "aarch64" if role in scenario.emulated else "x86_64"
            if machine != wanted:
                problems.append(f"role {role} ran on {machine!r}, not {wanted}")
            if emulated[role] != reference[role]:
                problems.append(f"role {role}'s final bytes differ from the all-native run's")
        return problems

    async def run(self, gate: Gate) -> Verdict:
        if gate.scenario.name == "checkpoint":  # checkpointed runs: gates/checkpoints.py
            from gates.checkpoints import run_checkpoint_gate

            return await run_checkpoint_gate(
                gate, self.work, self.folder(gate.name), self.on_verdict
            )
        scenario = gate.scenario
        control = await self.ready(scenario)
        if not control.passed:
            return Verdict(
                gate.name, gate.fault_text(), gate.expected, "none", None, None, False,
                f"its scenario's control run failed: {control.why}",
            )  # fmt: skip
        compiled = self.compiled[scenario.name]
        folder = self.folder(gate.name)
        built = self.work / f"built-{gate.name}"
        built.mkdir()
        replace: dict[int, Path] = {}
        for role, behaviour in gate.adversaries.items():
            out = built / artifact_name(role)
            await trio.to_thread.run_sync(
                build_adversary, compiled / artifact_name(role), behaviour, out
            )
            replace[role] = out
        if gate.foreign is not None:
            role, text, replacement = gate.foreign
            if scenario.plan.count(text) != 1:
                raise ValueError(f"{gate.name}: {text!r} is not in its plan exactly once")
            plan = scenario.plan.replace(text, replacement)
            replace[role] = foreign_artifact(plan, role, built / "foreign")
        if gate.program is not None:
            other = built / "program"
            await trio.to_thread.run_sync(
                compile_with_code, scenario.plan, "other-program", other, [gate.program]
            )
            replace[gate.program] = other / artifact_name(gate.program)
        outcome = await relayed_run(
            compiled,
            folder,
            scenario.edge if gate.fault is not None else None,
            gate.fault,
            replace=replace,
            interpreters=self.interpreters[scenario.name],
            absent=gate.absent,
            delays=gate.delays,
            stranger=gate.stranger,
            interrupt=gate.interrupt,
        )
        return judge(gate, outcome)


async def _run_all(
    gates: Sequence[Gate], work: Path, on_verdict: Callable[[Verdict], None]
) -> list[Verdict]:
    verdicts: list[Verdict] = []

    def record(verdict: Verdict) -> None:
        verdicts.append(verdict)
        on_verdict(verdict)

    scenarios = _Scenarios(work, record)
    for gate in gates:
        record(await scenarios.run(gate))
    return verdicts


def run_gates(
    gates: Sequence[Gate], *, out: TextIO = sys.stdout, progress: TextIO = sys.stderr
) -> list[Verdict]:
    """Run ``gates``, each scenario's control run before its first gate; print a progress
    line per row as it ends, then the table; return the rows (controls included)."""
    started = time.monotonic()
    scenarios = {gate.scenario.name for gate in gates}
    total = len(gates) + len(scenarios)
    shown: list[Verdict] = []

    def report(verdict: Verdict) -> None:
        shown.append(verdict)
        state = "pass" if verdict.passed else "FAIL"
        print(
            f"gate: [{len(shown)}/{total}] {verdict.gate}: {state} "
            f"({time.monotonic() - started:.0f} s)",
            file=progress,
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="alpha-gates-") as work:
        verdicts = trio.run(_run_all, gates, Path(work), report)
    print(table(verdicts), file=out)
    return verdicts


def table(verdicts: Sequence[Verdict]) -> str:
    rows = [("gate", "fault", "expected", "observed", "role", "to refusal", "verdict")]
    for v in verdicts:
        rows.append(
            (
                v.gate,
                v.fault,
                v.expected,
                v.observed,
                "-" if v.role is None else str(v.role),
                "-" if v.seconds is None else f"{v.seconds:.2f} s",
                "pass" if v.passed else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def to_json(verdicts: Sequence[Verdict]) -> str:
    return json.dumps([asdict(v) for v in verdicts], indent=1)
