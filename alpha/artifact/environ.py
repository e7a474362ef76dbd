"""The environment an artifact's participant reads, in one place: imported by the entry
before numpy or trio (so it imports nothing), by the participant, and by the warm starter,
which prepares its interpreter as a participant's."""

from __future__ import annotations

from typing import Final

__all__ = [
    "BLAS_THREADS",
    "FAILURE_CLOCK_ENV",
    "REALTIME",
    "TRACEBACK_ENV",
    "TRACE_ENV",
    "TRACE_ON",
]

TRACEBACK_ENV: Final = "ALPHA_TRACEBACK"
"""Set to ``1``, a participant that fails on an exception that is not one of Alpha's prints its
traceback on stderr before its one-line cause (for debugging; ``docs/launch.md``)."""

BLAS_THREADS: Final = ("OPENBLAS_NUM_THREADS", "1")
"""The environment variable, and its value, that gives numpy's BLAS one thread in a
participant, set before numpy is imported unless the environment sets it already. A
participant computes without BLAS (contract arithmetic in explicit loops, docs/learner.md), yet
OpenBLAS starts a thread per core when numpy is imported, and they spin a while: about 0.1 s
of CPU at every start here, a quarter of a participant's start-up, paid by every role of a run
that starts them all at once on a few cores."""

FAILURE_CLOCK_ENV: Final = "ALPHA_FAILURE_CLOCK"
"""Which clock a failing participant's failure-clock line reads (``docs/launch.md``): the
host's monotonic clock by default, one clock for every process of a host, which the launcher
compares with its own; ``realtime`` (:data:`REALTIME`), the wall clock, where the roles run
on several hosts whose monotonic clocks are unrelated (``alpha run --slurm`` sets it,
``docs/slurm.md``): wall clocks kept in step (NTP) compare across hosts."""

REALTIME: Final = "realtime"
"""The value of :data:`FAILURE_CLOCK_ENV` that asks for the wall clock."""

TRACE_ENV: Final = "ALPHA_TRACE"
"""Set to :data:`TRACE_ON` (``alpha run --trace`` and ``alpha launch --trace`` set it for every
role they start), a participant writes its trace, ``trace/role-NNNNNN.trace`` beside its
artifact, within the bounds its artifact carries (the plan's ``[trace]``) or the defaults
(``docs/trace.md``). Unset, nothing is traced, and nothing of the trace writer is loaded."""

TRACE_ON: Final = "1"
"""The value of :data:`TRACE_ENV` that turns tracing on; any other leaves it off."""
