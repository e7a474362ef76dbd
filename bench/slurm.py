"""Slurm: from the start of a run's ``srun`` step to every edge up, against the same plan
launched on one host as ``alpha launch`` launches it (issue 29, docs/slurm.md).

It needs a cluster, and starts the tests' own (``harness/slurm.py``: munged, slurmctld and
three ``slurmd -N`` on 127.0.0.2-4 of this machine) for the length of the benchmark, and one
allocation of its three nodes in it (``salloc``, as ``alpha run --slurm --slurm-option
--nodes=3`` holds one). The plan is the shipped digits learner, 8 roles on a tree of fan-out
2, for 3 rounds. Each repetition runs it three ways, interleaved, each compiled beforehand
(untimed) into a folder of its own:

- **slurm**: placed on the allocation's nodes in blocks of 3, 3 and 2 and started by one
  ``srun --multi-prog`` step (``alpha.launch.srun_launch``), every role an interpreter of its
  own (srun starts each task), every port fixed at compile time;
- **launch (warm)**: ``alpha.launch.launch`` on 127.0.0.1, every role forked by the warm
  starter, ports announced and relayed: what ``alpha launch DIR`` does;
- **launch (cold)**: the same with an interpreter per role (``--cold``), as srun starts them.

'every edge up' is from the moment just before the launcher is called (``srun`` started, or
the first role) to the latest of the roles' ``established_at``, on the host's monotonic
clock, which every process of this machine shares (on a real cluster the nodes' clocks would
not compare); 'run' is until the launcher returned, every role ended and, for srun, Slurm no
longer lists the step. The reports count only as the run committed them. The ratio divides
the medians of slurm by those of the warm launch, both measured in the same run.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from alpha.app import compile_plan, parse_roles
from alpha.compiler import Plan, load_plan
from alpha.core import DEFAULT_PORTS
from alpha.launch import (
    Allocation,
    LaunchResult,
    LaunchSpec,
    Placed,
    launch,
    launch_specs,
    place,
    slurm_allocation,
    srun_launch,
)
from alpha.records import committed_reports
from harness.slurm import running_cluster

NAME = "slurm"
ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "alpha" / "data" / "plans" / "digits.toml"
ROUNDS = 3
NODES = 3
WAYS = ("slurm", "launch (warm)", "launch (cold)")


def _log(text: str) -> None:
    print(f"bench: {NAME}: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Timed:
    all_up: float  # seconds from the launcher's call to the last role's edges up
    run: float  # seconds from the launcher's call to its return


async def _launched(
    way: str,
    specs: list[LaunchSpec],
    deadline: float | None,
    placed: Placed | None,
    allocation: Allocation,
    directory: Path,
) -> LaunchResult:
    if way == "slurm":
        assert placed is not None
        return await srun_launch(
            specs, placed, allocation, directory, name="bench", deadline=deadline
        )
    return await launch(specs, deadline=deadline, warm=way == "launch (warm)")


def _once(way: str, plan: Plan, directory: Path, allocation: Allocation, attempt: int) -> _Timed:
    """Compile ``plan`` into ``directory`` (untimed) and run it ``way``."""
    placed = None
    if way == "slurm":
        placed = place(allocation, plan.participants, attempt, DEFAULT_PORTS)
        plan = dataclasses.replace(plan, placement=placed.placement)
    compile_plan(plan, directory, parse_roles("all", plan.participants))
    specs, deadline = launch_specs(directory)
    origin = time.monotonic()
    result = trio.run(_launched, way, specs, deadline, placed, allocation, directory)
    ended = time.monotonic()
    if not result.ok:
        failure = result.first_to_fail
        raise RuntimeError(f"{way} failed: {'unknown' if failure is None else failure.cause}")
    # The reports count only as the run committed them (docs/failure.md).
    found = committed_reports(directory / "reports", plan.tree.children)[1]
    if len(found) != plan.participants:
        raise RuntimeError(f"{way} reported {len(found)} roles")
    # Each role's moment of all its edges up, on the monotonic clock this host shares.
    all_up = max(float(report["established_at"]) for report in found.values())
    return _Timed(all_up - origin, ended - origin)


def run(repeat: int) -> str:
    plan = load_plan(PLAN, overrides=())
    plan = dataclasses.replace(plan, rounds=ROUNDS)
    samples: dict[str, list[_Timed]] = {way: [] for way in WAYS}
    with (
        running_cluster(NODES) as cluster,
        tempfile.TemporaryDirectory(prefix="alpha-bench-slurm-") as folder,
    ):
        os.environ["SLURM_CONF"] = str(cluster.conf)  # srun, salloc and scontrol find it
        allocation = slurm_allocation((f"--nodes={NODES}", "--time=30"), "bench")
        try:
            for attempt in range(repeat):
                for way in WAYS:
                    directory = Path(folder) / f"{attempt}-{WAYS.index(way)}"
                    timed = _once(way, plan, directory, allocation, attempt)
                    samples[way].append(timed)
                    _log(f"{way}: every edge up in {timed.all_up:.2f} s, run {timed.run:.2f} s")
        finally:
            allocation.release()
            os.environ.pop("SLURM_CONF", None)

    def median(way: str, field: str) -> float:
        return statistics.median(getattr(one, field) for one in samples[way])

    rows = [
        f"| {way} | {len(samples[way])} | {median(way, 'all_up'):.2f} s "
        f"| {median(way, 'run'):.2f} s |"
        for way in WAYS
    ]
    ratio = median("slurm", "all_up") / median("launch (warm)", "all_up")
    cold = median("slurm", "all_up") / median("launch (cold)", "all_up")
    return "\n".join(
        [
            f"The shipped digits plan (8 roles, fan-out 2) for {ROUNDS} rounds, on the tests' "
            f"cluster of {NODES} nodes (harness/slurm.py) and on one host, interleaved; "
            "medians (docs in bench/slurm.py).",
            "",
            "| way | runs | every edge up | run |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Every edge up under Slurm ÷ `alpha launch` (warm), same run: **{ratio:.2f}x** "
            f"(target: at most 1.5x); ÷ `alpha launch --cold`: {cold:.2f}x.",
        ]
    )
