"""``alpha run [PLAN]``: the main job. Compile, launch with live progress, compare with the
replicated learner, and report.

Progress comes from role 0's log (one line per round: loss, training and held-out accuracy),
read while the participants run. At the end the run folder holds the artifacts, every role's
log and report, and ``loss.png``, the loss and held-out accuracy per round.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

import trio

from alpha.artifact import REPORTS_DIR, launch_specs
from alpha.compile import compile_plan, parse_roles
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.launch import launch
from alpha.learner.data import load_digits
from alpha.learner.replicate import replicate, require_learner
from alpha.plan import Plan, load_plan
from alpha.plot import write_loss_curve

__all__ = ["DEFAULT_PLAN", "RunSummary", "run_plan"]

DEFAULT_PLAN: Final = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "digits.toml"
"""The shipped default plan: 8 roles, a tree of fan-out 2, 30 rounds of the digits learner."""

_ROUND_LINE: Final = re.compile(
    r"round (\d+) loss (\S+) train-accuracy (\S+) holdout-accuracy (\S+)"
)
_POLL_SECONDS: Final = 0.2  # how often the progress display reads role 0's log
_BAR_WIDTH: Final = 30


@dataclass
class RunSummary:
    ok: bool
    distributed: str
    replicated: str
    holdout_accuracy: float
    wall_s: float
    curve: Path | None
    cause: str = ""


def _bar(done: int, total: int, loss: float, accuracy: float, live: bool) -> str:
    """One progress line: redrawn in place on a terminal, one line per update elsewhere."""
    filled = _BAR_WIDTH * done // max(1, total)
    text = (
        f"[{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] round {done}/{total} "
        f"loss {loss:.4f} held-out accuracy {100 * accuracy:5.1f}%"
    )
    return f"\r{text}" if live else f"{text}\n"


async def _follow(log: Path, total: int, out: TextIO) -> None:
    live = out.isatty()
    seen = 0
    while True:
        try:
            text = log.read_text(errors="replace")
        except OSError:
            text = ""
        rounds = _ROUND_LINE.findall(text)
        if len(rounds) > seen:
            seen = len(rounds)
            number, loss, _, accuracy = rounds[-1]
            out.write(_bar(int(number), total, float(loss), float(accuracy), live))
            out.flush()
        await trio.sleep(_POLL_SECONDS)


def run_plan(plan: Plan, directory: Path, out: TextIO = sys.stderr) -> RunSummary:
    """Compile ``plan`` into ``directory``, run it, and compare with the replicated learner."""
    started = time.monotonic()
    require_learner(plan)
    roles = parse_roles("all", plan.participants)
    compile_plan(plan, directory, roles)
    reports = directory / REPORTS_DIR
    if reports.exists():
        for stale in reports.glob("*.json"):
            stale.unlink()
    specs, deadline = launch_specs(directory)
    print(
        f"run: {plan.name}: {plan.participants} participants on a tree of fan-out "
        f"{plan.tree.fanout}, {plan.rounds} rounds, {plan.dtype}",
        file=out,
    )

    async def main() -> object:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_follow, directory / "logs" / "role-000000.log", plan.rounds, out)
            result = await launch(specs, deadline=deadline)
            nursery.cancel_scope.cancel()
        return result

    result = trio.run(main)
    if out.isatty():
        out.write("\n")
    wall = time.monotonic() - started
    failure = getattr(result, "first_failure", None)
    if failure is not None:
        return RunSummary(False, "", "", 0.0, wall, None, f"role {failure.role}: {failure.cause}")
    found = {
        int(data["role"]): data
        for data in (json.loads(p.read_text()) for p in reports.glob("role-*.json"))
    }
    digests = {data["digests"]["w"] for data in found.values()}
    replica = replicate(plan, load_digits())
    history = found[0]["history"]
    losses = [entry[1] for entry in history]
    accuracies = [entry[3] for entry in history]
    curve = write_loss_curve(
        directory / "loss.png", losses, accuracies, title=f"{plan.name} loss per round"
    )
    distributed = digests.pop() if len(digests) == 1 else "differs between roles"
    return RunSummary(
        ok=distributed == replica.digest and len(found) == plan.participants,
        distributed=distributed,
        replicated=replica.digest,
        holdout_accuracy=accuracies[-1],
        wall_s=time.monotonic() - started,
        curve=curve,
    )


def main_run(plan_path: str | None, directory: str | None) -> int:
    plan = load_plan(plan_path or DEFAULT_PLAN)
    folder = Path(directory or f"runs/{plan.name}")
    summary = run_plan(plan, folder)
    if summary.cause:
        print(f"run: failed: {summary.cause}", file=sys.stderr)
        print(f"run: logs are in {folder / 'logs'}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"final parameters    {summary.distributed}")
    print(f"replicated learner  {summary.replicated}")
    print(f"equal bit for bit   {'yes' if summary.ok else 'NO'}")
    print(f"held-out accuracy   {100 * summary.holdout_accuracy:.1f}%")
    print(f"wall time           {summary.wall_s:.1f} s")
    print(f"loss curve          {summary.curve}")
    return EXIT_OK if summary.ok else EXIT_FAILURE


def main_replicate(plan_path: str) -> int:
    plan = load_plan(plan_path)
    replica = replicate(plan, load_digits())
    print(replica.digest)
    return EXIT_OK
