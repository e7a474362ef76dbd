"""What checkpoints cost a whole run: ``alpha run`` of the shipped digits plan (8 roles, a
tree of fan-out 2, 30 rounds) without a ``[checkpoint]`` table, with ``every = 10`` (3
generations) and with ``every = 1`` (30 generations), each ``keep = 2``, into a fresh run and
checkpoint folder each time. Timed: ``RunSummary.wall_s`` (compile, launch, every round and
generation, the replicated learner's check), medians of ``repeat`` runs, the three kinds
interleaved so that the machine's noise falls on each alike; ratio = against no checkpoint.
"""

from __future__ import annotations

import io
import shutil
import statistics
import tempfile
from pathlib import Path

from alpha.app import DEFAULT_PLAN, run_plan
from alpha.compiler import parse_plan

NAME = "checkpoint-runs"

_KINDS = (("no checkpoint", None), ("every = 10 (3 generations)", 10), ("every = 1 (30)", 1))


def _plan_text(folder: Path, every: int | None) -> str:
    text = Path(DEFAULT_PLAN).read_text()
    if every is None:
        return text
    return text + f'\n[checkpoint]\nevery = {every}\nfolder = "{folder}"\nkeep = 2\n'


def _once(work: Path, index: int, every: int | None) -> float:
    base = work / f"{index}-{every}"
    plan = parse_plan(_plan_text(base / "ckpt", every), source="bench")
    summary = run_plan(plan, base / "run", out=io.StringIO())
    if not summary.ok:
        raise RuntimeError(f"the benchmark's run failed: {summary.cause}")
    shutil.rmtree(base, ignore_errors=True)
    return summary.wall_s


def run(repeat: int) -> str:
    times = max(3, min(repeat, 5))
    work = Path(tempfile.mkdtemp(prefix="alpha-bench-checkpoint-runs-", dir=Path.cwd()))
    walls: dict[int | None, list[float]] = {every: [] for _, every in _KINDS}
    try:
        for index in range(times):
            for _, every in _KINDS:
                walls[every].append(_once(work, index, every))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(walls[None])
    rows = ["| run | wall (median) | ratio | per generation |", "|---|---|---|---|"]
    for label, every in _KINDS:
        wall = statistics.median(walls[every])
        count = 0 if every is None else len(range(every, 30 + 1, every))
        each = f"{(wall - plain) / count * 1e3:,.0f} ms" if count else "-"
        rows.append(f"| {label} | {wall:.2f} s | {wall / plain:.2f} | {each} |")
    return (
        "`alpha run` of the digits plan (8 roles, fan-out 2, 30 rounds) without checkpoints, "
        "with a generation every 10 rounds and every round (`keep = 2`), medians of "
        f"{times} runs each, interleaved; 'per generation' is the wall time over the plain "
        "run's, divided by the generations published. A checkpointed run is one launch: each "
        "generation is written within it, at its own commit step.\n\n" + "\n".join(rows)
    )
