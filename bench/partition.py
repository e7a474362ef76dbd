"""Per-role memory of the learner's state, partitioned against replicated (``[learner]
partition``).

For the digits MLP (hidden 64) with Adam on 8 roles (a tree of fan-out 2), each role's bytes
are counted from what the role really allocates: its optimizer state (``LearnerState`` built
as the participant builds it) and its schedule's buffers (the regions that are not views, and
the scratch buffers its combines receive into, from the projected schedule, as the interpreter
allocates them). The reference is the same plan unpartitioned, counted the same way. The
counts are exact, not sampled: no timing is involved.
"""

from __future__ import annotations

import numpy as np

from alpha.compiler import learner_setup, parse_plan, project, protocol_for
from alpha.learner import LearnerState, load_digits

NAME = "partition"

_N = 8
_PLAN = f"""
[run]
name = "bench-partition"
rounds = 1
[membership]
group = "(group (stride 0 1 {_N}))"
[topology]
shape = "tree"
fanout = 2
[work]
kind = "learn"
[learner]
hidden = 64
rate = 0.01
optimizer = "adam"
partition = "PARTITION"
"""


def _per_role(partition: str) -> list[tuple[int, int, int]]:
    """(optimizer state bytes, persistent buffer bytes, transient buffer bytes) of every
    role: transient regions are released (their pages given back) between uses."""
    plan = parse_plan(_PLAN.replace("PARTITION", partition))
    digits = load_digits()
    protocol = protocol_for(plan)
    out = []
    for role in range(_N):
        state = LearnerState.for_role(learner_setup(plan), digits, role)
        optimizer = sum(a.nbytes for a in state.optimizer_state.arrays.values())
        schedule = project(protocol, role)
        regions = {r.name: r for r in schedule.regions}
        whole = [r for r in schedule.regions if r.of is None]
        buffers = sum(r.nbytes for r in whole if not r.transient)
        buffers += sum(regions[like].nbytes for _, like in schedule.scratch)
        transient = sum(r.nbytes for r in whole if r.transient)
        out.append((optimizer, buffers, transient))
    return out


def run(repeat: int) -> str:
    del repeat  # exact counts: nothing to repeat
    rows = [
        "| partition | optimizer state per role (max) | ratio | persistent buffers per role "
        "(max) | ratio | parameters held between uses | released between uses |",
        "|---|---|---|---|---|---|---|",
    ]
    reference = _per_role("none")
    ref_opt = max(o for o, _, _ in reference)
    ref_buf = max(b for _, b, _ in reference)
    for partition in ("none", "optimizer", "gradients", "parameters"):
        counts = _per_role(partition)
        opt = max(o for o, _, _ in counts)
        buf = max(b for _, b, _ in counts)
        released = max(t for _, _, t in counts)
        held = "a range (1/n)" if partition == "parameters" else "all"
        rows.append(
            f"| {partition} | {opt:,} B | {opt / ref_opt:.3f} | {buf:,} B | {buf / ref_buf:.3f} "
            f"| {held} | {released:,} B |"
        )
    return (
        f"Bytes each of {_N} roles holds for the digits MLP (hidden 64, Adam, float32), the "
        "largest over roles; ratio = against the same plan unpartitioned. Adam's state is two "
        "moments per parameter and two running products: partitioned, a role holds its "
        f"range's moments (1/{_N}, the larger ranges first) and the products. Persistent "
        "buffers are the schedule's regions and combine scratch that stay allocated; with "
        "`parameters` the whole parameter vector is a transient region, gathered for the "
        "contribution and released after (its pages given back with MADV_DONTNEED), and "
        "each role keeps its own range between uses. The local gradient stays whole: every "
        "role computes its contribution over the whole vector.\n\n"
        + "\n".join(rows)
        + f"\n\n1/{_N} = {1 / _N:.3f}; numpy {np.__version__}."
    )
