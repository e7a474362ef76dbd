"""The fold order is written once (``alpha.core.combine.fold_order``): projection and the
replicated learner's ``ordered_sum`` both follow it, for every role of every tree."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler import Combine, Protocol, Region, project
from alpha.compiler.program import SUM_CHECK_OPERATIONS
from alpha.compiler.projection import scratch_name
from alpha.core.combine import fold_order, ordered_sum
from alpha.core.topology import ParticipantTree
from alpha.schedule.local import Fold, Instruction, Recv, Send

REGION = "x"

trees = st.builds(ParticipantTree, st.integers(1, 300), st.integers(1, 8))


def combine_protocol(tree: ParticipantTree) -> Protocol:
    return Protocol(
        participants=tree.n,
        tree=tree,
        regions={REGION: Region(REGION, "float32", 3)},
        operations=SUM_CHECK_OPERATIONS,
        body=Combine(REGION, "all"),
    )


def scratch_roles(tree: ParticipantTree) -> dict[str, int]:
    """Each role's scratch buffer name (``scratch_name``), mapped back to the role."""
    return {scratch_name(REGION, r): r for r in range(tree.n)}


def source_roles(role: int, sources: tuple[str, ...], scratch: dict[str, int]) -> tuple[int, ...]:
    """The roles a fold's sources stand for: the region is the role's own contribution, a
    scratch buffer the subtree total of the role it is named for."""
    return tuple(role if name == REGION else scratch[name] for name in sources)


def folds(body: tuple[Instruction, ...]) -> list[Fold]:
    return [ins for ins in body if isinstance(ins, Fold)]


@settings(max_examples=60, deadline=None)
@given(trees)
def test_projection_folds_every_role_in_fold_order(tree: ParticipantTree) -> None:
    protocol = combine_protocol(tree)
    scratch = scratch_roles(tree)
    for role in range(tree.n):
        schedule = project(protocol, role)
        order = fold_order(tree, role)
        found = folds(schedule.body)
        if len(order) == 1:
            assert found == []  # a leaf sends its own contribution as it is
            continue
        (fold,) = found
        assert fold.region == REGION
        assert source_roles(role, fold.sources, scratch) == order
        # Each child's scratch buffer is filled from that child, before the fold.
        receives = {ins.region: ins.peer for ins in schedule.body if isinstance(ins, Recv)}
        for child in order[1:]:
            assert receives[scratch_name(REGION, child)] == child


@settings(max_examples=40, deadline=None)
@given(trees, st.integers(0, 2**32 - 1))
def test_the_projected_combine_equals_ordered_sum_bit_for_bit(
    tree: ParticipantTree, seed: int
) -> None:
    # Run every role's projected combine by hand, deepest roles first (a child's role is
    # always above its parent's), folding as the interpreter does: in place, in source order.
    rng = np.random.default_rng(seed)
    values = {
        r: rng.standard_normal(3).astype(np.float32) * 10.0 ** rng.integers(-6, 6)
        for r in range(tree.n)
    }
    protocol = combine_protocol(tree)
    sent: dict[int, np.ndarray] = {}
    for role in reversed(range(tree.n)):
        buffers = {REGION: values[role].copy()}
        for ins in project(protocol, role).body:
            if isinstance(ins, Recv) and ins.region != REGION:
                buffers[ins.region] = sent[ins.peer]
            elif isinstance(ins, Fold):
                out = buffers[ins.region]
                first, *rest = (buffers[name] for name in ins.sources)
                if first is not out:
                    np.copyto(out, first)
                for source in rest:
                    np.add(out, source, out=out)
            elif isinstance(ins, Send) and ins.peer == tree.parent(role):
                sent[role] = buffers[REGION]
        if role == 0:
            expected = ordered_sum(tree, values.__getitem__)
            assert buffers[REGION].tobytes() == expected.tobytes()
