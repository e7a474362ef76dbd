"""Ordered combine: the numerical contract and the one fold order it declares.

At every node of the contract's tree, the node's own contribution and its children's subtree
totals are folded left to right, the node first and then its children in ascending role order,
whatever order they arrive in. ``fold_order`` is the one definition of that order; projection
(``alpha.compiler.projection``) and ``ordered_sum`` both derive from it. Floating-point
addition is not associative, so this order is part of the result: it is fixed by the contract
(dtype, operation, topology, fan-out, delivery), whose digest is in every frame's run
identity. ``ordered_sum`` computes, in one process, exactly what the distributed combine
computes.

The arithmetic of a fold is written once, here: :func:`fold_into` (the first part copied, each
next part added elementwise) and its step :func:`fold_add`. The interpreter's folds
(``alpha.runtime.interpreter``), ``ordered_sum`` (and through it the learner's logical
contributors and the replicated learner) all call them, so the bits cannot drift apart.
``gates/reference_fold.py`` re-derives the same order on purpose, importing nothing of Alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import final

import numpy as np
import numpy.typing as npt

from alpha.core.digests import contract_digest
from alpha.core.sealing import KEYED_INTEGRITY
from alpha.core.topology import ParticipantTree

__all__ = ["Contract", "fold_add", "fold_into", "fold_order", "ordered_sum"]


@final
@dataclass(frozen=True, slots=True)
class Contract:
    """A numerical contract: what is combined, and in which order."""

    dtype: str
    tree: ParticipantTree
    delivery: str = "all"
    operation: str = "sum"
    topology: str = "tree"
    integrity: str = KEYED_INTEGRITY
    payload_digest: str = "sha256"

    def digest(self) -> bytes:
        return contract_digest(
            dtype=self.dtype,
            operation=self.operation,
            topology=self.topology,
            participants=self.tree.n,
            fanout=self.tree.fanout,
            delivery=self.delivery,
            integrity=self.integrity,
            payload_digest=self.payload_digest,
        )


def fold_order(tree: ParticipantTree, role: int) -> tuple[int, ...]:
    """The order ``role`` folds in: itself (its own contribution), then each child in ascending
    role order (standing for its subtree's total), left to right.

    The one definition of the contract's order: projection's ``Fold`` and ``ordered_sum``
    both read it. The role comes first because the interpreter folds into the role's own
    region in place.
    """
    return (role, *tree.children(role))


Array = npt.NDArray[np.floating]


def fold_add(total: Array, part: Array) -> None:
    """One step of a fold, in place: ``total := total + part``, elementwise, one correctly
    rounded IEEE addition per element in ``total``'s dtype (no BLAS, no pairwise sum).

    Touches nothing but ``total``, so a caller may run it in a worker thread while other
    parts still arrive (numpy releases the GIL for large arrays).
    """
    np.add(total, part, out=total)


def fold_into(out: Array, parts: Iterable[Array]) -> Array:
    """Fold ``parts`` left to right into ``out`` and return it: the first part copied, then each
    next one added with :func:`fold_add`. The caller gives the parts in the contract's order
    (:func:`fold_order`). ``out`` may be the first part itself (a fold in place), never a
    later one.

    Raises:
        ValueError: ``parts`` is empty (a fold has at least the role's own contribution).
    """
    iterator = iter(parts)
    first = next(iterator, None)
    if first is None:
        raise ValueError("a fold needs at least one part")
    if first is not out:
        np.copyto(out, first)
    for part in iterator:
        fold_add(out, part)
    return out


def ordered_sum(tree: ParticipantTree, contribution: Callable[[int], Array]) -> Array:
    """The total of every role's contribution, folded exactly as the distributed combine does.

    Walks the tree in post-order without recursion (a chain of any length is fine); each
    node's total folds its own contribution and its children's totals in ``fold_order``.
    """
    totals: dict[int, Array] = {}
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        role, expanded = stack.pop()
        order = fold_order(tree, role)
        if not expanded:
            stack.append((role, True))
            stack.extend((r, False) for r in reversed(order) if r != role)
            continue
        parts = [contribution(r) if r == role else totals.pop(r) for r in order]
        totals[role] = fold_into(np.empty_like(parts[0]), parts)
    return totals[0]
