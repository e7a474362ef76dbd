"""Shared helpers for the benchmarks: one way to take a median, and the one run identity the
frame benchmarks stamp on their frames."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable

from alpha.core import RunIdentity

IDENTITY = RunIdentity(learner=bytes(32), contract=bytes(32), membership=bytes(32))
"""A run identity for frames that no run checks but the benchmark's own two ends."""


def median_seconds(work: Callable[[], object], *, repeat: int, warmup: int = 1) -> float:
    """The median wall time of ``work()`` over ``repeat`` runs, after ``warmup`` unmeasured runs."""
    for _ in range(warmup):
        work()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def rate(nbytes: int, seconds: float) -> str:
    """A throughput in MB/s (10^6 bytes per second), for tables."""
    return f"{nbytes / seconds / 1e6:,.0f} MB/s"


def peak_bytes(work: Callable[[], object]) -> int:
    """tracemalloc's peak allocation during one ``work()``."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
