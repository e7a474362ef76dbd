"""The participant tree: who talks to whom, computed from ``(n, fanout)`` alone.

Roles ``0..n-1`` are numbered in preorder with the root at 0, so every subtree is one
contiguous range of roles. A node whose subtree holds ``d`` descendants has ``k = min(F, d)``
children; its descendants are split into ``k`` contiguous chunks whose sizes differ by at most
one, larger chunks first: with ``q, r = divmod(d, k)`` the first ``r`` chunks hold ``q + 1``
roles and the other ``k - r`` hold ``q``.

Nothing is ever materialised. Any role's parent, children, edges and subtree come from one walk
down from the root that, at every level, finds the child chunk holding the role with O(1)
arithmetic; the walk visits at most ``depth + 1`` nodes, and ``children`` builds at most ``F``
items. A tree of two billion roles therefore answers at once. See ``docs/topology.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, final

from alpha.checked import int_in
from alpha.core.membership import MAX_ROLES
from alpha.errors import CoverageBroken, FanoutInvalid, RoleOutOfRange, TreeSizeInvalid

__all__ = [
    "MAX_ROLES",
    "ParticipantTree",
    "certify_cover",
    "pair",
    "star",
]

# The most roles a tree may have: the membership's limit (alpha.core.membership, the one home of
# the role limits), since roles travel as 32-bit unsigned integers.

# A node during a walk: (first role of its subtree, i.e. the node itself; subtree size).
_Node = tuple[int, int]


def _check_size(n: object) -> int:
    # bool is an int subclass, but True/False as a size is always a caller's mistake.
    if not int_in(n, 1, MAX_ROLES):
        raise TreeSizeInvalid(
            f"a participant tree needs n roles with 1 <= n <= {MAX_ROLES} (MAX_ROLES), got n={n!r}"
        )
    return n


def _check_fanout(fanout: object) -> int:
    if not int_in(fanout, 1):
        raise FanoutInvalid(
            f"a participant tree needs a fan-out F that is an int >= 1, got fanout={fanout!r}"
        )
    return fanout


def _split(descendants: int, fanout: int) -> tuple[int, int, int]:
    """Return ``(k, q, r)``: k chunks, the first r of q + 1 roles, the rest of q roles."""
    k = min(fanout, descendants)
    q, r = divmod(descendants, k)
    return k, q, r


def _descend(start: int, size: int, fanout: int, role: int) -> _Node:
    """Return the child of node ``(start, size)`` whose subtree holds ``role``.

    ``role`` must lie strictly inside the node's subtree. O(1): the big chunks occupy the first
    ``r * (q + 1)`` offsets, so one division finds the chunk on either side of that boundary.
    """
    _, q, r = _split(size - 1, fanout)
    offset = role - start - 1
    big_span = r * (q + 1)
    if offset < big_span:
        index = offset // (q + 1)
        return start + 1 + index * (q + 1), q + 1
    index = (offset - big_span) // q
    return start + 1 + big_span + index * q, q


def _chunks(start: int, size: int, fanout: int) -> tuple[range, ...]:
    """The subtree ranges of the children of node ``(start, size)``, in order. O(k)."""
    descendants = size - 1
    if descendants == 0:
        return ()
    k, q, r = _split(descendants, fanout)
    out: list[range] = []
    first = start + 1
    for index in range(k):
        length = q + 1 if index < r else q
        out.append(range(first, first + length))
        first += length
    return tuple(out)


def certify_cover(parent: range, children: Sequence[range], fanout: int) -> Literal[True]:
    """Check that ``children`` exactly cover ``parent`` minus its first role, by the chunk rule.

    ``parent`` is a node's claimed subtree (the node is ``parent.start``); ``children`` are its
    children's claimed subtrees. The cover holds when there are exactly ``min(fanout, d)`` of
    them (``d = len(parent) - 1``, so never more than ``fanout``), they are non-empty and
    contiguous with step 1, the first starts at ``parent.start + 1``, each starts where the
    previous one stopped, the last stops at ``parent.stop``, sizes never grow, and no size is
    more than one below the first. Those conditions single out the one chunking the tree uses.
    O(len(children)); no role is visited.

    Returns:
        ``True`` when the cover holds.

    Raises:
        FanoutInvalid: ``fanout`` is not an int of at least 1.
        CoverageBroken: the cover is violated; the message names the first violation (an empty
            or strided range, too many or too few chunks, a gap, an overlap, a chunk larger than
            the one before it, sizes differing by more than one, or an end short of or past the
            subtree's end).
    """
    _check_fanout(fanout)
    if parent.step != 1 or len(parent) < 1:
        raise CoverageBroken(f"the claimed subtree {parent!r} is not a non-empty step-1 range")
    descendants = len(parent) - 1
    if len(children) > fanout:
        raise CoverageBroken(
            f"node {parent.start} claims {len(children)} child chunks; at most F={fanout} allowed"
        )
    expected = min(fanout, descendants)
    if len(children) != expected:
        raise CoverageBroken(
            f"node {parent.start} has {descendants} descendants and claims {len(children)} child "
            f"chunks; min(F={fanout}, {descendants}) = {expected} required"
        )
    next_start = parent.start + 1
    largest = 0
    previous = 0
    for index, chunk in enumerate(children):
        if chunk.step != 1 or len(chunk) < 1:
            raise CoverageBroken(
                f"child chunk {index} of node {parent.start} is {chunk!r}; "
                "a non-empty step-1 range is required"
            )
        if chunk.start != next_start:
            kind = "a gap before" if chunk.start > next_start else "an overlap at"
            raise CoverageBroken(
                f"child chunk {index} of node {parent.start} starts at {chunk.start}: {kind} "
                f"role {next_start}, where it must start"
            )
        size = len(chunk)
        if index == 0:
            largest = size
        elif size > previous:
            raise CoverageBroken(
                f"child chunk {index} of node {parent.start} holds {size} roles, more than the "
                f"{previous} of the chunk before it; larger chunks must come first"
            )
        elif largest - size > 1:
            raise CoverageBroken(
                f"child chunk {index} of node {parent.start} holds {size} roles and chunk 0 holds "
                f"{largest}; sizes may differ by at most one"
            )
        previous = size
        next_start = chunk.stop
    if next_start != parent.stop:
        raise CoverageBroken(
            f"the child chunks of node {parent.start} end at role {next_start - 1}, "
            f"but its subtree ends at role {parent.stop - 1}"
        )
    return True


@final
@dataclass(frozen=True, slots=True)
class ParticipantTree:
    """The preorder participant tree of ``n`` roles and fan-out ``fanout``.

    A frozen value: equal and hashing alike exactly when ``(n, fanout)`` are equal. Every query
    costs O(depth) arithmetic steps plus O(F) for the children it returns; the tree is never
    built.

    Attributes:
        n: number of roles, ``1 <= n <= MAX_ROLES``.
        fanout: the most children a node may have, ``>= 1``.
        depth: number of edge levels (0 for a single role).

    Raises:
        TreeSizeInvalid: ``n`` is not an int in ``1..MAX_ROLES`` (bools are refused).
        FanoutInvalid: ``fanout`` is not an int of at least 1 (bools are refused).
    """

    n: int
    fanout: int
    # Derived from (n, fanout), so it takes no part in equality, hashing or repr.
    depth: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_size(self.n)
        _check_fanout(self.fanout)
        object.__setattr__(self, "depth", self._first_child_chain_depth())

    def _first_child_chain_depth(self) -> int:
        # The first child always has the largest subtree, and a larger subtree is never
        # shallower, so the deepest node hangs below the first-child chain: follow only it.
        if self.fanout == 1:
            return self.n - 1  # a chain; skip the n-step walk
        depth = 0
        size = self.n
        while size > 1:
            _, q, r = _split(size - 1, self.fanout)
            size = q + 1 if r else q
            depth += 1
        return depth

    # --- the walk -------------------------------------------------------------------------

    def _check_role(self, role: object) -> int:
        # Bools are ints to Python, but never roles; refusing them catches swapped arguments.
        if not int_in(role, 0, self.n - 1):
            raise RoleOutOfRange(
                f"a role of this {self.n}-role tree is an int in 0..{self.n - 1}, got {role!r}"
            )
        return role

    def _locate(self, role: int) -> list[_Node]:
        """The nodes ``(start, size)`` from the root down to ``role``, one per level.

        At most ``depth + 1`` entries, each found by one O(1) ``_descend`` step.
        """
        start, size = 0, self.n
        path: list[_Node] = [(start, size)]
        while start != role:
            start, size = _descend(start, size, self.fanout, role)
            path.append((start, size))
        return path

    def _frame(self, role: int) -> tuple[int | None, int, int]:
        """``(parent, subtree size, level)`` of a checked role."""
        if self.fanout == 1:
            # A chain: role r is at level r with parent r - 1. Walking would cost r steps,
            # which is within the depth bound but needlessly slow for a long chain.
            return (role - 1 if role else None), self.n - role, role
        path = self._locate(role)
        parent = path[-2][0] if len(path) > 1 else None
        return parent, path[-1][1], len(path) - 1

    # --- queries --------------------------------------------------------------------------

    def parent(self, role: int) -> int | None:
        """The parent of ``role``, or ``None`` at the root. O(depth).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        return self._frame(self._check_role(role))[0]

    def children(self, role: int) -> tuple[int, ...]:
        """The children of ``role``, ascending; at most ``fanout`` of them. O(depth + F).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        return tuple(chunk.start for chunk in self.child_ranges(role))

    def child_ranges(self, role: int) -> tuple[range, ...]:
        """The subtrees of the children of ``role``, in order. O(depth + F).

        Together they cover ``subtree(role)`` without ``role`` itself.

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        checked = self._check_role(role)
        _, size, _ = self._frame(checked)
        return _chunks(checked, size, self.fanout)

    def subtree(self, role: int) -> range:
        """The roles of the subtree rooted at ``role`` (itself included). O(depth).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        checked = self._check_role(role)
        return range(checked, checked + self._frame(checked)[1])

    def edges(self, role: int) -> tuple[int, ...]:
        """The peers of ``role``, ascending: its parent (if any), then its children.

        At most ``fanout + 1`` peers. O(depth + F). Preorder puts the parent below the role and
        every child above it, so concatenation is already ascending.

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        checked = self._check_role(role)
        parent, size, _ = self._frame(checked)
        kids = tuple(chunk.start for chunk in _chunks(checked, size, self.fanout))
        return kids if parent is None else (parent, *kids)

    def path(self, role: int) -> tuple[int, ...]:
        """The roles from the root down to ``role``, both included. O(depth).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        checked = self._check_role(role)
        if self.fanout == 1:
            return tuple(range(checked + 1))
        return tuple(start for start, _ in self._locate(checked))

    def level(self, role: int) -> int:
        """The depth of ``role``: number of edges between it and the root. O(depth).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        return self._frame(self._check_role(role))[2]

    def is_leaf(self, role: int) -> bool:
        """Whether ``role`` has no children. O(depth).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
        """
        return self._frame(self._check_role(role))[1] == 1

    def level_sizes(self) -> tuple[int, ...]:
        """The number of roles at each level, root level first; ``depth + 1`` entries.

        Counted by subtree size, not by node: the nodes of one level have only a few distinct
        subtree sizes (chunk sizes differ by at most one), so each level is a small
        ``{size: count}`` map. O(depth) for F >= 2; a chain (F = 1) has ``n`` levels of one.

        Raises:
            Nothing: every tree has a well-defined level profile.
        """
        if self.fanout == 1:
            return (1,) * self.n
        sizes: list[int] = []
        level: dict[int, int] = {self.n: 1}
        while level:
            sizes.append(sum(level.values()))
            below: dict[int, int] = {}
            for size, count in level.items():
                if size == 1:
                    continue  # leaves contribute nothing below
                k, q, r = _split(size - 1, self.fanout)
                if r:
                    below[q + 1] = below.get(q + 1, 0) + count * r
                below[q] = below.get(q, 0) + count * (k - r)
            level = below
        return tuple(sizes)

    def certify(self, role: int) -> Literal[True]:
        """Check that the children of ``role`` exactly cover its subtree. O(depth + F).

        Recomputes the children's ranges and hands them to :func:`certify_cover`, so a node
        whose chunking broke the rule would be caught rather than trusted.

        Returns:
            ``True`` when the cover holds.

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..n-1``.
            CoverageBroken: the children do not cover the subtree by the chunk rule.
        """
        checked = self._check_role(role)
        _, size, _ = self._frame(checked)
        children = _chunks(checked, size, self.fanout)
        return certify_cover(range(checked, checked + size), children, self.fanout)


def star(n: int) -> ParticipantTree:
    """The one-level tree: role 0 is the parent of every other role.

    The same :class:`ParticipantTree` with fan-out ``max(1, n - 1)`` (so ``star(1)`` is the
    single root), not separate code.

    Raises:
        TreeSizeInvalid: ``n`` is not an int in ``1..MAX_ROLES``.
    """
    checked = _check_size(n)
    return ParticipantTree(checked, max(1, checked - 1))


def pair() -> ParticipantTree:
    """The two-role tree: role 0 and its only child, role 1.

    Raises:
        Nothing: the pair is always valid.
    """
    return ParticipantTree(2, 1)
