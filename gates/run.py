"""Running gates: a control run per scenario that must commit, then each gate's faulted run,
judged.

The judge (:func:`judge`) passes a faulted run only when: the fault happened as the gate says
(relayed, signalled, absent, late by at least its delay); the first refusal (by the
participants' own clocks, among the roles the fault did not take out) is at a role the gate
names, of the expected class, naming the expected budget for ``BudgetExhausted``, after the
fault and within the bound for its kind (:func:`time_bound`); an honest role of those the
gate names refused by itself, unless the gate says its check is the replaced role's own;
every other live role refused the same fault itself or names the original cause in its
``RoundAborted``; every live role failed by itself; nothing was committed, published or left
staged; and no participant is left running. A gate that expects ``commit`` passes when its
run committed like the control run. docs/gates.md "The verdict" lists each condition.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final, TextIO

import trio

import alpha.errors
from alpha.app import compile_plan
from alpha.artifact import artifact_name
from alpha.compiler import parse_plan
from alpha.files import STAGED_SUFFIX
from alpha.records import report_name
from gates.catalogue import GATES, PINNED, Gate, Scenario
from harness.adversary import (
    build_adversary,
    compile_with_code,
    foreign_artifact,
    keyless_hello,
)
from harness.emulation import EmulationUnavailable, aarch64_interpreter
from harness.runs import HTTP_REQUEST, Outcome, relayed_run

__all__ = [
    "BUDGET_MARGIN",
    "RELAY_BOUND",
    "Verdict",
    "compare_native",
    "control_problems",
    "digests",
    "fault_moment",
    "judge",
    "run_gates",
    "select",
    "shared_problems",
    "table",
    "time_bound",
    "to_json",
]


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
    """The gates named (all when none), then shard K of N of them (every N-th from K-1). A name
    may be a pattern (``fnmatch``: ``frames.*``, ``*.late-peer``), choosing every gate it
    matches; the gates keep the catalogue's order, each chosen once.

    Raises:
        KeyError: a name or pattern matches no gate; the message names it and the nearest
            gate name or family pattern, if one is close.
    """
    unknown = [n for n in names if not any(fnmatch.fnmatchcase(g.name, n) for g in GATES)]
    if unknown:
        raise KeyError(_no_gate(unknown[0]))
    chosen = [g for g in GATES if not names or any(fnmatch.fnmatchcase(g.name, n) for n in names)]
    if shard is not None:
        index, count = shard
        chosen = chosen[index - 1 :: count]
    return chosen


def _no_gate(name: str) -> str:
    """``name`` matches no gate: said, with the nearest gate name or family (``frames.*``)."""
    families = dict.fromkeys(f"{gate.family}.*" for gate in GATES)
    close = difflib.get_close_matches(name, [*(g.name for g in GATES), *families], n=1)
    pattern = any(mark in name for mark in "*?[")  # fnmatch's wildcards
    said = f"no gate matches the pattern {name!r}" if pattern else f"no gate named {name!r}"
    said += " (`alpha observe gate --list` lists them)"
    return f"{said}; did you mean {close[0]!r}?" if close else said


RELAY_BOUND: Final = 1.0
"""Seconds from a relay fault (a frame broken on the wire, a connection reset, a role killed)
to its refusal. The receiver refuses a frame as it reads it and a broken connection as it
breaks: measured 0.0006 to 0.01 s on a 2-core host (docs/gates.md); 1 s leaves room for a
loaded host and stays far below every budget, so a refusal that waited on one is a FAIL."""

BUDGET_MARGIN: Final = 3.0
"""Seconds past a waited-out budget by which its refusal must come. The wait may begin before
the fault (a relay fault) or a process start-up after it (a launch-time fault: about 0.3 s
natively, over 1 s on a loaded host); measured 7.99 to 8.01 s after a relay fault and 8.3 to
9.3 s after the launch for 8 s budgets. It is below every scenario's smallest budget, so a
refusal that waited out a second budget on top of the first is past it."""


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


def _measured(
    gate: Gate, outcome: Outcome, first: tuple[int, float] | None
) -> tuple[int, float] | None:
    """The refusal the gate is about: the first refusal; or, for a gate whose fault strikes
    the ABORT of a role that failed first (``after``), the earliest failure among ``at``."""
    if gate.after is None:
        return first
    found = [
        (each.failed_at, role)
        for role, each in outcome.result.outcomes.items()
        if each.failed_at is not None and role in gate.at and role not in gate.disabled
    ]
    if not found:
        return None
    at, role = min(found)
    return role, at


def fault_moment(gate: Gate, outcome: Outcome) -> float:
    """When the fault struck (``time.monotonic()``): when the signal was sent, for a gate that
    signals a role; when the relay acted; or, for a fault built into a participant or the
    launch, when the launch began."""
    if gate.interrupt is not None and outcome.signalled_at is not None:
        return outcome.signalled_at
    relay = outcome.relay
    if gate.fault is not None and relay is not None and relay.applied_at is not None:
        return relay.applied_at
    return outcome.launched_at


def time_bound(gate: Gate) -> tuple[float, str]:
    """The longest a gate's refusal may take after its fault, and that bound in words: a
    waited-out budget plus :data:`BUDGET_MARGIN`; a relay fault :data:`RELAY_BOUND`; a fault
    built into a participant or the launch, the scenario's ``start + receive``."""
    if gate.expected == "BudgetExhausted" and gate.budget is not None:
        size = gate.scenario.budget(gate.budget)
        return size + BUDGET_MARGIN, f"its {gate.budget} budget ({size:g} s) + {BUDGET_MARGIN:g} s"
    if gate.fault is not None:
        return RELAY_BOUND, f"{RELAY_BOUND:g} s of a relay fault"
    bound = gate.scenario.bound
    return bound, f"the scenario's budgets ({bound:g} s)"


def _roles(roles: Sequence[int] | frozenset[int]) -> str:
    return " or ".join(map(str, sorted(roles)))


def _fault_problems(gate: Gate, outcome: Outcome) -> list[str]:
    """The fault happened as the gate says: relayed, signalled, absent, late."""
    problems = []
    outcomes = outcome.result.outcomes
    if gate.fault is not None and (outcome.relay is None or not outcome.relay.applied):
        problems.append("the fault was never applied")
    if gate.interrupt is not None and gate.interrupt.role not in outcome.interrupted:
        problems.append(f"role {gate.interrupt.role} was never signalled")
    for role in sorted(gate.absent):
        each = outcomes.get(role)
        if each is not None and (each.returncode is not None or each.started_s > 0):
            problems.append(f"role {role} was started; the gate has it absent")
    for role, delay in sorted(gate.delays.items()):
        each = outcomes.get(role)
        if each is None or each.returncode is None:
            problems.append(f"role {role} never ran to an end; the gate starts it {delay:g} s late")
        elif each.started_s < delay:
            problems.append(
                f"role {role} started {each.started_s:.2f} s after the launch, not {delay:g} s late"
            )
    return problems


def _refusal_problems(
    gate: Gate,
    outcome: Outcome,
    first: tuple[int, float] | None,
    measured: tuple[int, float] | None,
    seconds: float | None,
) -> list[str]:
    """The first refusal is the expected one, where and when the gate says; for a gate whose
    fault strikes an ABORT (``after``), the first refusal is the one that made that role fail,
    and the expected one follows at ``at``."""
    if first is None:
        return ["no role failed"]
    problems = []
    if gate.after is not None:
        origin, cause = gate.after
        if first[0] != origin or outcome.cause(origin) != cause:
            problems.append(
                f"role {first[0]} failed first with {outcome.cause(first[0]) or 'no cause'}; "
                f"the gate's ABORT is role {origin}'s, failing with {cause}"
            )
        if measured is None:
            return [*problems, f"no role among {_roles(gate.at)} failed"]
        first = measured
    role = first[0]
    observed = outcome.cause(role) or "no logged cause"
    if role not in gate.at:
        problems.append(f"role {role} failed first; expected role {_roles(gate.at)}")
    if observed != gate.expected:
        problems.append(
            f"role {role} failed first with {observed}; expected {gate.expected} at role "
            f"{_roles(gate.at)}"
        )
    elif gate.expected == "BudgetExhausted":
        named = outcome.budget(role)
        if gate.budget is None:
            problems.append("the gate names no budget its BudgetExhausted must name")
        elif named != gate.budget:
            problems.append(f"role {role} ran out of its {named} budget, not its {gate.budget}")
    if gate.through is not None and observed == gate.expected:
        advice = getattr(alpha.errors, gate.through).advice
        if advice not in outcome.failure(role):
            problems.append(
                f"role {role}'s {observed} does not name the {gate.through} it met ({advice!r})"
            )
    assert seconds is not None
    bound, words = time_bound(gate)
    if seconds < 0:
        problems.append(f"role {role} refused {-seconds:.3f} s before the fault")
    elif seconds > bound:
        problems.append(f"the refusal took {seconds:.2f} s, past {words}")
    if gate.honest:
        honest = [
            other
            for other in gate.at
            if other not in gate.replaced
            and other not in gate.disabled
            and outcome.cause(other) == gate.expected
        ]
        if not honest:
            replaced = (
                f" (role {_roles(gate.replaced)} replaced by the fault)" if gate.replaced else ""
            )
            problems.append(
                f"no honest role among {_roles(gate.at)} refused with {gate.expected} by "
                f"itself{replaced}"
            )
    return problems


def _other_problems(gate: Gate, outcome: Outcome, first: tuple[int, float] | None) -> list[str]:
    """Every other live role names the original cause: it refused the same fault itself (a
    role the gate names, with the expected class), or its ``RoundAborted`` names as origin a
    role the gate names that refused with the expected class, and that class. Where the
    refusing role refused before any edge existed (``gate.unreached``), each other live role
    names instead the class and budget of the absence it saw."""
    if first is None:
        return []
    problems = []
    # The original cause: the expected refusal at `at`, or the failure the gate's ABORT
    # comes from (`after`).
    origins, original = gate.at, gate.expected
    if gate.after is not None:
        origins, original = (gate.after[0],), gate.after[1]
    for role in sorted(outcome.result.outcomes):
        if role == first[0] or role in gate.disabled or role < 0:
            continue
        if role in gate.at and outcome.cause(role) == gate.expected:
            continue
        if gate.committed and role not in gate.at:
            continue  # it ended after the commit point, as it should (_exit_problems)
        if gate.unreached is not None:
            kind, budget = gate.unreached
            if outcome.cause(role) == kind and outcome.budget(role) == budget:
                continue
            problems.append(
                f"role {role} named {outcome.cause(role) or 'no cause'}"
                f" ({outcome.budget(role) or 'no'} budget), not {kind} ({budget}): the absence "
                f"of role {first[0]}, which refused before any edge existed"
            )
            continue
        by = outcome.aborted_by(role)
        if (
            by is not None
            and by[1] == original
            and by[0] in origins
            and outcome.cause(by[0]) == original
        ):
            continue
        named = outcome.cause(role) or "no cause"
        if by is not None:
            named += f" (aborted by role {by[0]}: {by[1]})"
        problems.append(
            f"role {role} named {named}, not the original cause ({original} at role "
            f"{_roles(origins)})"
        )
    return problems


def _exit_problems(gate: Gate, outcome: Outcome) -> list[str]:
    """Every role the fault did not take out exited non-zero by itself; for a fault after the
    commit point (``committed``), every role outside ``at`` exited 0."""
    problems = []
    for role, each in sorted(outcome.result.outcomes.items()):
        if role in gate.disabled:
            continue
        killed = ", killed by the launcher" if each.killed else ""
        if gate.committed and role not in gate.at:
            if each.returncode != 0 or each.killed:
                problems.append(
                    f"role {role} did not end 0 after the commit point (exit "
                    f"{each.returncode}{killed})"
                )
        elif each.returncode in (0, None) or each.killed:
            problems.append(f"role {role} did not fail by itself (exit {each.returncode}{killed})")
    return problems


def _left_problems(gate: Gate, outcome: Outcome) -> list[str]:
    """What the run left: a commit only where the gate expects one, no staged report, no
    process."""
    problems = []
    # A role that cannot learn whether the run committed (CommitUnknown) keeps its report
    # staged, never final; no other role keeps one.
    unknown = gate.at if gate.expected == "CommitUnknown" else ()
    staged_wanted = {report_name(role) + STAGED_SUFFIX for role in unknown}
    if gate.expected == "commit":
        if not (outcome.result.ok and outcome.committed()):
            problems.append(f"the run did not commit: {outcome.result.first_to_fail}")
    elif gate.committed:
        if not outcome.committed():
            problems.append("the run did not commit before the fault (no commit record)")
        final_wanted = {report_name(role) for role in outcome.result.outcomes if role >= 0} - {
            report_name(role) for role in gate.at
        }
        found = {path.name for path in outcome.final_reports()}
        if found != final_wanted:
            problems.append(
                f"the final reports are {', '.join(sorted(found)) or 'none'}, not "
                f"{', '.join(sorted(final_wanted)) or 'none'} (every role but "
                f"{_roles(gate.at)})"
            )
    else:
        if outcome.committed():
            problems.append("the run committed (a commit record was written)")
        if outcome.final_reports():
            names = ", ".join(path.name for path in outcome.final_reports())
            problems.append(f"final reports were published: {names}")
    staged = {path.name for path in outcome.staged_reports()}
    if staged - staged_wanted:
        names = ", ".join(sorted(staged - staged_wanted))
        problems.append(f"staged reports were left: {names}")
    if staged_wanted - staged:
        names = ", ".join(sorted(staged_wanted - staged))
        problems.append(f"no report was left staged by the role that cannot know: {names}")
    if outcome.left_running():
        problems.append(f"processes left running: {outcome.left_running()}")
    return problems


def judge(gate: Gate, outcome: Outcome) -> Verdict:
    """The verdict on one faulted run: every condition of docs/gates.md "The verdict"."""
    first = _first_refusal(gate, outcome)
    measured = _measured(gate, outcome, first)
    seconds = None if measured is None else measured[1] - fault_moment(gate, outcome)
    problems = _fault_problems(gate, outcome)
    if gate.expected == "commit":
        observed = "commit" if outcome.committed() else "no commit"
    else:
        observed = outcome.cause(measured[0]) if measured is not None else ""
        problems += _refusal_problems(gate, outcome, first, measured, seconds)
        problems += _other_problems(gate, outcome, first)
        problems += _exit_problems(gate, outcome)
    problems += _left_problems(gate, outcome)
    return Verdict(
        gate=gate.name,
        fault=gate.fault_text(),
        expected=gate.expected,
        observed=observed or "none",
        role=None if measured is None else measured[0],
        seconds=seconds,
        passed=not problems,
        why="; ".join(problems),
    )


def digests(outcome: Outcome) -> dict[int, dict[str, str]]:
    """Each final report's region digests by role, with the ``machine`` it ran on."""
    found = {}
    for path in outcome.final_reports():
        report = json.loads(path.read_text())
        found[int(report["role"])] = {**report["digests"], "machine": report.get("machine", "")}
    return found


def control_problems(control: Outcome) -> list[str]:
    """A run without a fault committed and left nothing running."""
    problems = []
    if not (control.result.ok and control.committed()):
        problems.append(f"the run without a fault did not commit: {control.result.first_to_fail}")
    if control.left_running():
        problems.append(f"processes left running: {control.left_running()}")
    return problems


def shared_problems(scenario: Scenario, control: Outcome) -> list[str]:
    """Every role's final report shows each of its edges moved payload bytes through a
    shared-memory region (``shared_bytes``): a scenario on that transport whose frames fell
    back to TCP would prove nothing about it."""
    problems = []
    found = {}
    for path in control.final_reports():
        report = json.loads(path.read_text())
        found[int(report["role"])] = report.get("edges", [])
    for role in range(scenario.roles):
        if role not in found:
            problems.append(f"role {role} has no final report")
            continue
        if not found[role]:
            problems.append(f"role {role}'s report lists no edge")
        for edge in found[role]:
            if not edge.get("shared_bytes", 0) > 0:
                problems.append(
                    f"role {role}'s edge to role {edge.get('peer')} moved no payload byte "
                    "through shared memory (shared_bytes 0): its frames fell back to TCP"
                )
    return problems


def compare_native(
    scenario: Scenario,
    emulated: Mapping[int, Mapping[str, str]],
    native: Mapping[int, Mapping[str, str]],
) -> list[str]:
    """The emulated control run's roles ran where they were built for (``machine``), and every
    role's final region digests equal the all-native run's."""
    problems = []
    for role in range(scenario.roles):
        if role not in emulated or role not in native:
            run = "emulated" if role not in emulated else "all-native"
            problems.append(f"role {role} has no final report in the {run} run")
            continue
        mine = dict(emulated[role])
        reference = dict(native[role])
        machine = mine.pop("machine", "")
        reference.pop("machine", "")
        wanted = "aarch64" if role in scenario.emulated else "x86_64"
        if machine != wanted:
            problems.append(f"role {role} ran on {machine!r}, not {wanted}")
        if not mine:
            problems.append(f"role {role}'s report has no region digests")
        elif mine != reference:
            problems.append(f"role {role}'s final bytes differ from the all-native run's")
    return problems


def _pinned(scenario: Scenario, control: Outcome) -> list[str]:
    """Every role's final region digests are the ones pinned for the scenario (computed by
    the independent reference, ``gates/reference_fold.py``); one problem per differing
    region, naming the roles."""
    wanted = PINNED[scenario.name]
    found = digests(control)
    problems = []
    for name, digest in sorted(wanted.items()):
        seen = {role: found.get(role, {}).get(name) for role in range(scenario.roles)}
        off = [role for role, got in seen.items() if got != digest]
        if off:
            problems.append(
                f"region {name} of role {', '.join(map(str, off))} is "
                f"{str(seen[off[0]])[:16]}..., not the independent reference's "
                f"{digest[:16]}... (gates/reference_fold.py)"
            )
    return problems


#: The key a keyless stranger seals its hello with: its own, not the edge's.
STRANGER_KEY: Final = bytes(range(0xA0, 0xC0))


def _stranger_sends(gate: Gate) -> bytes:
    """What the gate's stranger sends: an HTTP request, or (``keyless``) the hello of the
    listener's first higher peer, right in every header field, under the stranger's key."""
    if not gate.keyless or gate.stranger is None:
        return HTTP_REQUEST
    plan = parse_plan(gate.scenario.plan, source=gate.scenario.name)
    # The stranger takes the listener's first announced port: its edge to its first child.
    peer = min(r for r in range(plan.participants) if plan.tree.parent(r) == gate.stranger)
    return keyless_hello(gate.scenario.plan, peer, gate.stranger, STRANGER_KEY)


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
            interpreters=interpreters, shared=scenario.shared,
        )  # fmt: skip
        verdict.observed = "commit" if control.committed() else "no commit"
        problems = control_problems(control)
        if scenario.shared and not problems:
            problems += shared_problems(scenario, control)
        if scenario.emulated and not problems:
            problems += await self._bit_equal(scenario, control)
        if scenario.name in PINNED and not problems:
            problems += _pinned(scenario, control)
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
            return [f"the all-native run did not commit: {native.result.first_to_fail}"]
        return compare_native(scenario, digests(control), digests(native))

    async def run(self, gate: Gate) -> Verdict:
        if gate.scenario.name == "checkpoint":  # checkpointed runs: gates/checkpoints.py
            from gates.checkpoints import run_checkpoint_gate

            return await run_checkpoint_gate(
                gate, self.work, self.folder(gate.name), self.on_verdict
            )
        if gate.scenario.name == "recovery":  # whole runs with restarts: gates/recovery.py
            from gates.recovery import run_recovery_gate

            return await run_recovery_gate(gate, self.work, self.folder(gate.name), self.on_verdict)
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
        if gate.recompiled is not None:
            # Another compile of the same plan: compile draws its own run secret.
            replace[gate.recompiled] = foreign_artifact(
                scenario.plan, gate.recompiled, built / "recompiled"
            )
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
            stranger_sends=_stranger_sends(gate),
            interrupt=gate.interrupt,
            shared=scenario.shared,
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
    gates: Sequence[Gate], *, out: TextIO | None = sys.stdout, progress: TextIO = sys.stderr
) -> list[Verdict]:
    """Run ``gates``, each scenario's control run before its first gate; print a progress
    line per row as it ends, then the table on ``out`` (none when it is None); return the rows
    (controls included)."""
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
    if out is not None:
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


def to_json(verdicts: Sequence[Verdict]) -> list[dict[str, object]]:
    """The rows as ``alpha observe gate --json`` prints them (docs/gates.md)."""
    return [asdict(v) for v in verdicts]
