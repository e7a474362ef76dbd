"""The ordered matmul (issue 28): the contract's fold of a matrix product, compiled
(``fold_products``, the C loop of ``alpha/learner/ordered.c``) and as its numpy reference
(``fold_reference``), against numpy's BLAS ``a @ b`` with one thread, float32.

Each product starts from a fresh array of zeros, as ``alpha.learner.contract.matmul`` does, and
``a @ b`` allocates its own output, so the three do the same work but for the order. BLAS is
held to one thread (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1),
which must be set before numpy loads its BLAS: the measurement runs in a child process started
with that environment (``python -m bench.matmul``, which prints JSON). Samples of the three are
interleaved, so a noisy neighbour slows them alike; the ratios are against BLAS in the same
run. Issue 28's target: at 256x256x256, the compiled fold at most 4x BLAS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "matmul"
# (rows, inner, columns): square sizes, and the shipped MLP's kind of product at a wider layer
# (a batch of 64 through a 256 -> 512 affine layer).
SHAPES = ((64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (64, 256, 512))
TARGET_SHAPE = (256, 256, 256)
TARGET_RATIO = 4.0
"""Issue 28: the ordered matmul at 256x256x256 float32 at most 4x BLAS with one thread."""
MIN_SAMPLE_S = 0.005
"""A sample repeats a product until it takes about this long, so that a 64x64 product (some
microseconds) is not timed below the clock's resolution; figures are per product."""
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CHILD_TIMEOUT_S = 3600
"""The whole measurement in the child: the numpy reference at 512 is the slow part."""
ROOT = Path(__file__).resolve().parents[1]


def _count(work: Callable[[], object]) -> int:
    """How many runs of ``work`` fill :data:`MIN_SAMPLE_S` (from one timed run)."""
    start = time.perf_counter()
    work()
    once = time.perf_counter() - start
    return max(1, math.ceil(MIN_SAMPLE_S / max(once, 1e-9)))


def _sample(work: Callable[[], object], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        work()
    return (time.perf_counter() - start) / count


def measure(repeat: int) -> dict[str, Any]:
    """Per shape the median seconds of BLAS, the compiled fold and the numpy reference, and
    whether the two folds gave the same bits. Run where BLAS already has one thread."""
    import numpy as np

    from alpha.learner import fold_products, fold_reference, kernel_status

    rows_out = []
    rng = np.random.default_rng(28)
    for rows, inner, columns in SHAPES:
        a = rng.standard_normal((rows, inner)).astype(np.float32)
        b = rng.standard_normal((inner, columns)).astype(np.float32)

        def blas(a: Any = a, b: Any = b) -> object:
            return a @ b

        def compiled(a: Any = a, b: Any = b, shape: Any = (rows, columns)) -> Any:
            out = np.zeros(shape, dtype=np.float32)
            if not fold_products(out, a, b):
                raise RuntimeError(f"the compiled fold did not run: {kernel_status()}")
            return out

        def reference(a: Any = a, b: Any = b, shape: Any = (rows, columns)) -> Any:
            out = np.zeros(shape, dtype=np.float32)
            fold_reference(out, a, b)
            return out

        works = {"blas": blas, "compiled": compiled, "reference": reference}
        counts = {name: _count(work) for name, work in works.items()}
        samples: dict[str, list[float]] = {name: [] for name in works}
        for _ in range(repeat):
            for name, work in works.items():
                samples[name].append(_sample(work, counts[name]))
        same = compiled().tobytes() == reference().tobytes()
        rows_out.append(
            {
                "shape": [rows, inner, columns],
                **{name: statistics.median(found) for name, found in samples.items()},
                "same_bits": same,
            }
        )
    return {
        "rows": rows_out,
        "fold": kernel_status(),
        "numpy": np.__version__,
        "threads": {name: os.environ.get(name, "") for name in ONE_THREAD},
    }


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds < 0.01 else f"{seconds * 1e3:,.1f} ms"


def run(repeat: int) -> str:
    child = subprocess.run(
        [sys.executable, "-m", "bench.matmul", "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        env={**os.environ, **ONE_THREAD},
        cwd=ROOT,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"bench.matmul's child failed: {child.stderr.strip()}")
    found = json.loads(child.stdout)
    lines = []
    verdict = ""
    for row in found["rows"]:
        rows, inner, columns = row["shape"]
        blas, compiled, reference = row["blas"], row["compiled"], row["reference"]
        lines.append(
            f"| {rows}x{inner} @ {inner}x{columns} | {_time(blas)} | {_time(compiled)} "
            f"({compiled / blas:.2f}) | {_time(reference)} ({reference / blas:.1f}) | "
            f"{'yes' if row['same_bits'] else 'NO'} |"
        )
        if tuple(row["shape"]) == TARGET_SHAPE:
            ratio = compiled / blas
            met = "met" if ratio <= TARGET_RATIO else "not met"
            verdict = (
                f"Target (issue 28): the compiled fold at {'x'.join(map(str, TARGET_SHAPE))} at "
                f"most {TARGET_RATIO:g}x BLAS: {met} ({ratio:.2f}x in this run)."
            )
    about = (
        "The contract's ordered matmul, float32, against numpy's BLAS `a @ b` with one thread "
        "(OpenBLAS, OpenMP and MKL thread counts 1, set before numpy loaded, in a child "
        "process): the compiled fold (`fold_products`, `alpha/learner/ordered.c`) and the numpy "
        "reference (`fold_reference`, one `np.multiply` and one `np.add` per inner index), each "
        "from a fresh array of zeros as `contract.matmul` does. Per product, medians of "
        f"{repeat} samples, the three interleaved; a sample repeats a product for at least "
        f"{MIN_SAMPLE_S * 1e3:g} ms. In parentheses: the time over BLAS's in the same run. "
        "'same bits': the two folds' outputs are equal byte for byte."
    )
    fold = found["fold"]
    if fold.startswith("compiled: "):  # the library's name, not where this user's cache is
        fold = f"compiled, {Path(fold.removeprefix('compiled: ')).name[:20]}....so"
    return "\n".join(
        [
            textwrap.fill(about, width=92),
            "",
            f"Fold: {fold}; numpy {found['numpy']}; {_cpu()}.",
            "",
            "| product | BLAS `@`, 1 thread | ordered, C (x BLAS) | ordered, numpy (x BLAS) "
            "| same bits |",
            "|---|---|---|---|---|",
            *lines,
            "",
            verdict,
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.matmul", description=__doc__)
    parser.add_argument("--repeat", type=int, default=9, help="samples per median (default 9)")
    args = parser.parse_args()
    if any(os.environ.get(name) != value for name, value in ONE_THREAD.items()):
        # BLAS reads its thread count when numpy loads: this process is already too late.
        parser.error(f"run with {' '.join(f'{n}={v}' for n, v in ONE_THREAD.items())}")
    print(json.dumps(measure(args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
