"""Ordered combine: the numerical contract and the one fold order it declares.

At every node of the contract's tree, the node's own contribution and its children's subtree
totals are folded left to right, the node first and then its children in ascending role order,
whatever order they arrive in. ``fold_order`` is the one definition of that order; projection
(``alpha.compiler.projection``) and ``ordered_sum`` both derive from it. Floating-point
addition is not associative, so this order is part of the result: it is fixed by the contract
(dtype, operation, topology, fan-out, delivery), whose digest is in every frame's run
identity. ``ordered_sum`` computes, in one process, exactly what the distributed combine
computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import final

import numpy as np
import numpy.typing as npt

from alpha.core.identity import OPERATIONS, contract_digest
from alpha.core.topology import ParticipantTree

__all__ = ["OPERATIONS", "Contract", "fold_order", "ordered_sum"]


@final
@dataclass(frozen=True, slots=True)
class Contract:
    """A numerical contract: what is combined, and in which order."""

    dtype: str
    tree: ParticipantTree
    delivery: str = "all"
    operation: str = "sum"
    topology: str = "tree"

    def digest(self) -> bytes:
        return contract_digest(
            dtype=self.dtype,
            operation=self.operation,
            topology=self.topology,
            participants=self.tree.n,
            fanout=self.tree.fanout,
            delivery=self.delivery,
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
        first, *rest = (contribution(r) if r == role else totals.pop(r) for r in order)
        total = np.array(first, copy=True)
        for part in rest:
            np.add(total, part, out=total)
        totals[role] = total
    return totals[0]
