#!/usr/bin/env python3
"""GPU check, for a machine with an NVIDIA GPU and PyCUDA (``pip install '.[gpu]'``).

1. The GPU contribution equals the host one, bit for bit, in float32 and float64.
2. A run of the digits plan in which role 1 contributes on the GPU (bound by its UUID) equals
   the replicated learner, bit for bit.

Prints one line per check and exits 0 only when every check holds. Takes well under five
minutes (most of it PyCUDA compiling the kernels once per dtype).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alpha.learner.gpu import GpuContributor, gpu_status  # noqa: E402
from alpha.learner.model import Model, contribute, initial_parameters  # noqa: E402


def first_gpu_uuid() -> str:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[0]


def check_contributions() -> bool:
    ok = True
    rng = np.random.default_rng(5)
    for dtype in ("float32", "float64"):
        model = Model(64, dtype)
        gpu = GpuContributor(model)
        try:
            same = 0
            for round in range(8):
                w = initial_parameters(model, round)
                x = (rng.integers(0, 17, (32, 64)) / 16).astype(dtype)
                y = rng.integers(0, 10, 32).astype(np.uint8)
                host, device = contribute(model, w, x, y), gpu.contribute(w, x, y)
                same += host.tobytes() == device.tobytes()
        finally:
            gpu.close()
        print(f"contribution {dtype}: {same}/8 batches equal bit for bit")
        ok &= same == 8
    return ok


def check_run(uuid: str) -> bool:
    from alpha.app.run import DEFAULT_PLAN, run_plan
    from alpha.compiler.plan import parse_plan

    text = DEFAULT_PLAN.read_text() + f'\n[gpu]\nroles = {{ "1" = "{uuid}" }}\n'
    plan = parse_plan(text)
    with tempfile.TemporaryDirectory() as folder:
        summary = run_plan(plan, Path(folder), out=sys.stderr)
    print(
        f"run with role 1 on {uuid}: distributed {summary.distributed[:16]} "
        f"replicated {summary.replicated[:16]} equal {summary.ok} {summary.cause}"
    )
    return summary.ok


def main() -> int:
    started = time.monotonic()
    available, why = gpu_status()
    if not available:
        print(f"no GPU: {why}")
        return 2
    # Both checks run even when the first fails: a GPU session is short, and each says something.
    contributions = check_contributions()
    run = check_run(first_gpu_uuid())
    ok = contributions and run
    print(f"gpu check: {'passed' if ok else 'FAILED'} in {time.monotonic() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
