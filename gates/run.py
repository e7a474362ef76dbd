"""Running gates: a control run that must commit, then each gate's faulted run, judged.

A gate passes when the control run committed, and in the faulted run: the fault was applied;
the role that failed first (by the participants' own clocks) is one the gate names, with the
expected refusal class; that refusal came within the budgets after the fault (``START +
RECEIVE``: the longest any wait may take); every role exited non-zero by itself; nothing was
committed; and no participant is left running.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import trio

from alpha.compile import compile_plan
from alpha.plan import parse_plan
from gates.catalogue import EDGE, GATES, PAIR_PLAN, RECEIVE, START, Gate
from harness.runs import Outcome, relayed_run

__all__ = ["Verdict", "run_gates", "select"]


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


def _fault_text(gate: Gate) -> str:
    fault = gate.fault
    at = fault.frame.name if hasattr(fault.frame, "name") else f"frame {fault.frame}"
    return f"{fault.kind} {fault.direction} at {at}"


def judge(gate: Gate, outcome: Outcome) -> Verdict:
    """The verdict on one faulted run."""
    result = outcome.result
    first = result.first_failure
    observed = outcome.cause(first.role) if first is not None and first.role >= 0 else ""
    relay = outcome.relay
    seconds = None
    if first is not None and first.failed_at is not None and relay and relay.applied_at:
        seconds = first.failed_at - relay.applied_at
    verdict = Verdict(
        gate=gate.name,
        fault=_fault_text(gate),
        expected=gate.expected,
        observed=observed or "none",
        role=None if first is None else first.role,
        seconds=seconds,
        passed=False,
    )
    problems = []
    if relay is None or not relay.applied:
        problems.append("the fault was never applied")
    if first is None:
        problems.append("no role failed")
    elif first.role not in gate.at or observed != gate.expected:
        problems.append(
            f"role {first.role} failed first with {observed or 'no logged cause'}; expected "
            f"{gate.expected} at role {' or '.join(map(str, gate.at))}"
        )
    if seconds is not None and seconds > START + RECEIVE:
        problems.append(
            f"the refusal took {seconds:.1f} s, past the budgets ({START + RECEIVE:g} s)"
        )
    for role, each in sorted(result.outcomes.items()):
        if each.returncode in (0, None) or each.killed:
            problems.append(f"role {role} did not fail by itself (exit {each.returncode})")
    if outcome.committed() or outcome.final_reports():
        problems.append("the run committed")
    if outcome.left_running():
        problems.append(f"processes left running: {outcome.left_running()}")
    verdict.passed = not problems
    verdict.why = "; ".join(problems)
    return verdict


async def _run_all(
    gates: Sequence[Gate], work: Path, on_verdict: Callable[[Verdict], None]
) -> list[Verdict]:
    compiled = work / "compiled"
    compile_plan(parse_plan(PAIR_PLAN, source="gates"), compiled, range(2))
    control = await relayed_run(compiled, work / "control", EDGE, None)
    verdicts = []
    ok = control.result.ok and control.committed() and not control.left_running()
    row = Verdict(
        gate="control",
        fault="none",
        expected="commit",
        observed="commit" if control.committed() else "no commit",
        role=None,
        seconds=None,
        passed=ok,
        why="" if ok else f"the run without a fault did not commit: {control.result.first_failure}",
    )
    on_verdict(row)
    verdicts.append(row)
    for index, gate in enumerate(gates):
        outcome = await relayed_run(compiled, work / f"gate-{index}", EDGE, gate.fault)
        verdict = judge(gate, outcome)
        on_verdict(verdict)
        verdicts.append(verdict)
    return verdicts


def run_gates(
    gates: Sequence[Gate], *, out: TextIO = sys.stdout, progress: TextIO = sys.stderr
) -> list[Verdict]:
    """Run ``gates`` after one control run; print a row per gate as it ends; return them."""
    started = time.monotonic()
    total = len(gates) + 1

    def report(verdict: Verdict) -> None:
        done = len(shown) + 1
        shown.append(verdict)
        state = "pass" if verdict.passed else "FAIL"
        print(
            f"gate: [{done}/{total}] {verdict.gate}: {state} ({time.monotonic() - started:.0f} s)",
            file=progress,
            flush=True,
        )

    shown: list[Verdict] = []
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
