"""Scale: a sum-check tree of hundreds to a thousand roles on one host, compiled by ``alpha
compile`` and started by ``alpha launch`` (warm, the default), as a user runs it.

For each size the plan (fan-out 4, 8 float64 elements per region, 3 rounds, budgets roomy
enough that none shapes the figures) is compiled by the command ``alpha compile`` (timed), then
launched by the command ``alpha launch DIR --json`` (timed, from this process starting it to
its exit). Every participant reports ``established_at``, the moment all its edges were up on
the host's monotonic clock, which this process shares: the latest of them, less the moment
this process started the launch, is when every edge was up. The commit is the moment role 0
wrote ``reports/commit.json`` (its modification time, on the wall clock this process read when
it started the launch). The participants' memory is the largest sum of the proportional set
sizes (``Pss`` in ``/proc/PID/smaps_rollup``) of every process below this one, sampled every
:data:`PSS_POLL` seconds (the launcher and the warm starter are among them, a few tens of MiB).

Run it alone: ``python -m bench scale`` (sizes :data:`ROLES`), or ``python -m bench.scale N
...`` for chosen sizes, one JSON line per launch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.endpoints import _peak_pss

NAME = "scale"
ROOT = Path(__file__).resolve().parent.parent
ROLES = (256, 1024)
FANOUT = 4
SIZE = 8  # float64 elements per region: what each edge carries each way per round
ROUNDS = 3
BUDGET = 600.0  # seconds for accept, receive and start: roomy, so that none shapes the figures
PSS_POLL = 2.0  # seconds between samples: a sample of a thousand processes takes a second


def plan_text(roles: int) -> str:
    """The sum-check plan of ``roles`` roles this benchmark compiles."""
    return "\n".join(
        [
            "[run]",
            f'name = "scale-{roles}"',
            f"rounds = {ROUNDS}",
            "[membership]",
            f'group = "(group (stride 0 1 {roles}))"',
            "[topology]",
            f"fanout = {FANOUT}",
            "[work]",
            'kind = "sum-check"',
            f"size = {SIZE}",
            "[budgets]",
            f"accept = {BUDGET}",
            f"receive = {BUDGET}",
            f"start = {BUDGET}",
            "",
        ]
    )


@dataclass(frozen=True, slots=True)
class Scaled:
    """One compile and launch of ``roles`` roles; seconds unless named otherwise."""

    roles: int
    compile_s: float  # the command alpha compile, start to exit
    command_s: float  # the command alpha launch, start to exit
    launcher_s: float  # the launcher's own elapsed time, first start to last exit
    all_up_s: float  # the command's start to the last edge up
    commit_s: float  # the command's start to role 0's commit record
    peak_pss: int  # bytes
    load: tuple[float, float, float]  # the host's load average when the launch ended


def _alpha(*args: str) -> list[str]:
    return [sys.executable, "-m", "alpha", *args]


def scale_once(roles: int) -> Scaled:
    """Compile and launch the plan of ``roles`` roles once, in a temporary folder."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="alpha-bench-scale-") as folder:
        directory = Path(folder)
        plan = directory / "plan.toml"
        plan.write_text(plan_text(roles))
        run = directory / "run"
        began = time.perf_counter()
        subprocess.run(
            _alpha("compile", str(plan), "-o", str(run)),
            check=True,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        compile_s = time.perf_counter() - began
        with _peak_pss(PSS_POLL) as peak:
            origin, wall = time.monotonic(), time.time()
            done = subprocess.run(
                _alpha("launch", str(run), "--json"),
                env=environment,
                capture_output=True,
                text=True,
            )
            command_s = time.monotonic() - origin
        load = os.getloadavg()
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-3:]
            raise RuntimeError(f"the launch of {roles} roles failed: {' | '.join(tail)}")
        result = json.loads(done.stdout)
        reports = run / "reports"
        commit = reports / "commit.json"
        if not commit.exists():
            raise RuntimeError(f"the launch of {roles} roles committed nothing")
        up = [
            float(json.loads(path.read_text())["established_at"])
            for path in reports.glob("role-*.json")
        ]
        if len(up) != roles:
            raise RuntimeError(f"the launch of {roles} roles left {len(up)} reports")
        return Scaled(
            roles=roles,
            compile_s=compile_s,
            command_s=command_s,
            launcher_s=float(result["elapsed_s"]),
            all_up_s=max(up) - origin,
            commit_s=commit.stat().st_mtime - wall,
            peak_pss=peak[0],
            load=load,
        )


def run(repeat: int) -> str:
    rows = []
    for roles in ROLES:
        runs = [scale_once(roles) for _ in range(max(1, min(repeat, 3)))]

        def median(field: str, runs: list[Scaled] = runs) -> float:
            return statistics.median(float(getattr(one, field)) for one in runs)

        loads = ", ".join(f"{one.load[0]:.1f}" for one in runs)
        rows.append(
            f"| {roles} | {len(runs)} | {median('compile_s'):.1f} s | {median('all_up_s'):.1f} s "
            f"| {median('commit_s'):.1f} s | {median('command_s'):.1f} s "
            f"| {median('launcher_s'):.1f} s | {median('peak_pss') / (1 << 30):.2f} GiB | {loads} |"
        )
    return "\n".join(
        [
            f"A sum-check tree, fan-out {FANOUT}, {SIZE} float64 per region, {ROUNDS} rounds:",
            "`alpha compile`, then `alpha launch DIR --json` (warm); times from the launch",
            "command's start, medians (docs in bench/scale.py).",
            "",
            "| roles | runs | compile | every edge up | committed | launch command "
            "| launcher | peak PSS | load (1 min) |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def main(argv: list[str]) -> int:
    for roles in [int(word) for word in argv] or list(ROLES):
        one = scale_once(roles)
        print(json.dumps({**asdict(one), "peak_pss_gib": one.peak_pss / (1 << 30)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
