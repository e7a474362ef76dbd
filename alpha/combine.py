"""Ordered combine: the numerical contract and the one fold order it declares.

At every node of the contract's tree, the node's own contribution and its children's subtree
totals are folded left to right, the node first and then its children in ascending role order,
whatever order they arrive in. Floating-point addition is not associative, so this order is
part of the result: it is fixed by the contract (dtype, operation, topology, fan-out,
delivery), whose digest is in every frame's run identity. ``ordered_sum`` computes, in one
process, exactly what the distributed combine computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

import numpy as np
import numpy.typing as npt

from alpha.identity import contract_digest
from alpha.topology import ParticipantTree

__all__ = ["OPERATIONS", "Contract", "fold_order", "ordered_sum"]

OPERATIONS: Final = ("sum",)
"""The combine operations a contract may name."""


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
    """The order ``role`` folds in: itself, then each child (standing for its subtree)."""
    return (role, *tree.children(role))


Array = npt.NDArray[np.floating]


def ordered_sum(tree: ParticipantTree, contribution: Callable[[int], Array]) -> Array:
    """The total of every role's contribution, folded exactly as the distributed combine does.

    Walks the tree in post-order without recursion (a chain of any length is fine); each
    node's total is its own contribution plus its children's totals, left to right.
    """
    totals: dict[int, Array] = {}
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        role, expanded = stack.pop()
        children = tree.children(role)
        if not expanded:
            stack.append((role, True))
            stack.extend((child, False) for child in reversed(children))
            continue
        total = np.array(contribution(role), copy=True)
        for child in children:
            np.add(total, totals.pop(child), out=total)
        totals[role] = total
    return totals[0]
