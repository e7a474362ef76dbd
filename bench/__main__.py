"""Run the benchmarks; with no names, all of them, rewriting docs/benchmarks.md."""

from __future__ import annotations

import argparse
import datetime
import importlib
import platform
import sys
from pathlib import Path

# Each module has NAME and run(repeat) -> markdown section. A module with options of its own
# also has add_arguments(parser), which adds them, and arguments(args), the keywords of its
# run that they give.
MODULES = (
    "bench.frames",
    "bench.endpoints",
    "bench.projection",
    "bench.startup",
    "bench.watch",
    "bench.checkpoint",
    "bench.checkpoint_runs",
    "bench.partition",
    "bench.combine",
    "bench.combine_keyed",
    "bench.combine_shared",
    "bench.scale",
    "bench.matmul",
    "bench.slurm",
    "bench.trace",
)
# Run only when named: each takes far longer than the rest together (chaos: most of an hour;
# teacher: minutes, its AArch64 role under emulation).
ALONE = ("bench.chaos", "bench.teacher")
REPORT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names",
        nargs="*",
        help="benchmarks to run, of: frames, endpoints, projection, startup, watch, checkpoint, "
        "checkpoint-runs, partition, combine, combine-keyed (issue 25: Alpha keyed against "
        "unkeyed at 1 KiB, 1 MiB and 64 MiB, and BLAKE3 against SHA-256 payload digests at "
        "64 MiB, n = 4, interleaved), combine-shared (issue 26: TCP against shared memory, "
        "n = 2 and 4, side by side with gloo), scale (issue 26: 256 and 1,024 roles compiled "
        "and launched warm: every edge up, the commit, peak PSS), matmul (issue 28: the "
        "contract's ordered matmul, compiled and in numpy, against BLAS with one thread, "
        "float32, 64 to 512 and a learner-like shape), chaos (issue 27: 16 learner "
        "roles with restarts under a fault every 15-30 s, --runs runs of --minutes each: most "
        "of an hour at the defaults, so only when named), teacher (issue 28: the teacher "
        "example on 8 roles, and with an AArch64 role under QEMU: accuracy, time, equal bit "
        "for bit; minutes, so only when named), slurm (issue 29: an 8-role learner's every edge up "
        "under srun on the tests' Slurm cluster, which it starts, against alpha launch on one "
        "host, warm and cold), trace (issue 30: traced against untraced combine at 1 KiB and "
        "1 MiB, n = 4, interleaved, and alpha observe diff on two traces of 10^6 frames); "
        "default: all but chaos and teacher, and "
        "docs/benchmarks.md is rewritten",
    )
    parser.add_argument("--repeat", type=int, default=9, help="runs per median (default 9)")
    modules = [importlib.import_module(name) for name in MODULES]
    alone = [importlib.import_module(name) for name in ALONE]
    for module in [*modules, *alone]:
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    args = parser.parse_args()
    known = {module.NAME: module for module in [*modules, *alone]}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; known: {', '.join(known)}")
    chosen = [known[name] for name in args.names] if args.names else modules
    sections = []
    for module in chosen:
        print(f"bench: running {module.NAME} ...", file=sys.stderr, flush=True)
        options = module.arguments(args) if hasattr(module, "arguments") else {}
        section = f"## {module.NAME}\n\n{module.run(args.repeat, **options)}\n"
        print(section, flush=True)
        sections.append(section)
    if not args.names:
        stamp = datetime.date.today().isoformat()
        head = (
            "# Benchmarks\n\n"
            "Written by `make bench` (`python -m bench`). Medians of repeated runs, and ratios "
            "against a reference measured in the same run, on a shared and noisy machine: "
            "compare ratios, not absolute figures.\n\n"
            f"Last run: {stamp}, {platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}.\n\n"
        )
        REPORT.write_text(head + "\n".join(sections))
        print(f"bench: wrote {REPORT.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
