"""Compact membership: which roles of a universe take part, without listing them.

A participant group selects roles out of a universe ``0..universe-1`` with a
small tree of three forms:

* ``stride(start, step, count)`` selects ``start, start+step, ...`` (``count`` roles);
* ``repeat(count, offset, part)`` selects ``count`` copies of ``part``, copy ``k``
  shifted by ``k*offset``;
* ``join(*parts)`` selects the parts one after another (ascending, disjoint).

``group(selection, universe=...)`` admits a selection into a
:class:`ParticipantGroup`. ``str(group)`` prints the canonical text, e.g.
``(group (repeat 625 320 (repeat 8 40 (repeat 2 20 (stride 0 1 20)))))``, which
selects all 200,000 roles ``0..199999`` with four index nodes; reading that text
back is the grammar's job, in :mod:`alpha.core.membership_text`
(:func:`~alpha.core.membership_text.parse_group`). This module holds the values,
their admission, lookups, printing and digest, and never parses.

Lookups (``in``, :meth:`ParticipantGroup.index`, ``g[i]``) follow one path from
the root to a stride, choosing the copy of a repeat by division and the part
of a join by binary search over precomputed minima and prefix counts. So they
visit at most :attr:`ParticipantGroup.index_nodes` nodes whatever the number of
roles; iteration walks the structure lazily. No list of members is ever built.

Every walk over the structure (text, digest, equality, iteration) is
iterative, so a deep shape admitted under a large index budget never meets
Python's recursion limit.

The grammar, the admission order and the digest encoding are documented byte
by byte in ``docs/membership.md``.
"""

from __future__ import annotations

import hashlib
import operator
import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import InitVar, dataclass, field
from typing import Final, SupportsIndex, TypeAlias, final

from alpha.errors import (
    EmptySelection,
    GroupFieldInvalid,
    IndexBudgetExceeded,
    NotAMember,
    OverlappingParts,
    RoleOutsideUniverse,
)

__all__ = [
    "DEFAULT_INDEX_BUDGET",
    "DIGEST_DOMAIN",
    "MAX_EPOCH",
    "MAX_IDENTITY_BYTES",
    "MAX_ROLE",
    "MAX_ROLES",
    "ROLE_WIDTH",
    "Join",
    "ParticipantGroup",
    "Repeat",
    "Selection",
    "Stride",
    "group",
    "join",
    "repeat",
    "stride",
]

# --- limits -----------------------------------------------------------------

#: Roles travel as unsigned 32-bit integers in frames, so a role is 0..2**32-1.
ROLE_WIDTH: Final = 32
#: How many distinct roles a 32-bit field can name; the largest admissible universe.
MAX_ROLES: Final = 2**ROLE_WIDTH
#: The largest role, and the largest value of any start, step or offset (all are
#: role arithmetic, so a 64-bit implementation never overflows: see docs).
MAX_ROLE: Final = MAX_ROLES - 1

#: Index nodes a group may use unless the caller says otherwise. Real shapes
#: need a handful (the 200,000-role regular shape needs 4); 4096 leaves room for
#: an irregular cluster written as a join of a few thousand blocks while keeping
#: a group's memory, its text and its digest input to tens of KiB.
DEFAULT_INDEX_BUDGET: Final = 4096

#: The epoch is encoded as an unsigned 64-bit field in the digest.
MAX_EPOCH: Final = 2**64 - 1
#: An identity names a job or holds a key fingerprint; 1 KiB holds any of those
#: with room to spare and bounds what a peer hashes before it can compare groups.
MAX_IDENTITY_BYTES: Final = 1024

#: Error messages quote the offending part's text up to this many characters:
#: the head of a part identifies it, and a log line stays readable (the grammar's
#: messages quote a token up to the same length).
MAX_EXCERPT_CHARS: Final = 160

#: Domain tag that starts every digest input (ASCII, no length prefix).
DIGEST_DOMAIN: Final = b"alpha/group/v1"

# Node tags in the digest encoding (one byte each).
_TAG_STRIDE: Final = 0x01
_TAG_REPEAT: Final = 0x02
_TAG_JOIN: Final = 0x03

# Every integer in the digest encoding is an unsigned 64-bit big-endian field.
_U64: Final = struct.Struct(">Q")


def _role_or_none(value: object) -> int | None:
    """Return ``value`` as an int, or None when it is not an integer.

    Bools are not integers here, because ``True`` silently meaning role 1
    hides bugs; other objects with ``__index__`` (numpy integers) are.
    """
    if type(value) is int:  # the common case, without a protocol check
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    try:
        return operator.index(value)
    except TypeError:  # an __index__ that refuses, e.g. numpy's bool
        return None


def _as_int(value: object, what: str) -> int:
    """Return ``value`` as an int.

    Raises:
        TypeError: ``value`` is not an integer (see ``_role_or_none``).
    """
    result = _role_or_none(value)
    if result is None:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    return result


def _width_check(node: Selection, what: str, value: int) -> None:
    """Refuse a start, step or offset outside the 32-bit field range."""
    if not 0 <= value <= MAX_ROLE:
        raise RoleOutsideUniverse(
            f"{_excerpt(node)}: {what} {value} is outside the {ROLE_WIDTH}-bit "
            f"role range 0..{MAX_ROLE}"
        )


def _last_check(node: Selection, last: int) -> None:
    """Refuse a node whose largest role passes the role width."""
    if last > MAX_ROLE:
        raise RoleOutsideUniverse(
            f"{_excerpt(node)}: its last role {last} passes the {ROLE_WIDTH}-bit "
            f"role width (largest role {MAX_ROLE})"
        )


# --- the three forms --------------------------------------------------------


@final
@dataclass(frozen=True, eq=False, slots=True)
class Stride:
    """``count`` roles ``start, start+step, ..., start+(count-1)*step``.

    Admitted at construction, in this order: ``count <= 0`` is
    :class:`EmptySelection`; ``count >= 2`` with ``step < 1`` is
    :class:`OverlappingParts` (the step does not advance); a start or step
    outside ``0..MAX_ROLE``, or a last role past ``MAX_ROLE``, is
    :class:`RoleOutsideUniverse`. The step of a one-role stride is unused but
    still checked, because it is part of the text and the digest.

    Raises:
        TypeError: a field is not an integer (bools are refused).
        EmptySelection: ``count <= 0``.
        OverlappingParts: ``count >= 2`` and ``step < 1``.
        RoleOutsideUniverse: a field or the last role passes the role width.
    """

    start: int
    step: int
    count: int
    #: Smallest selected role.
    first: int = field(init=False)
    #: Largest selected role.
    last: int = field(init=False)
    #: Number of selected roles.
    size: int = field(init=False)
    #: Index nodes of this subtree (a stride is one).
    index_nodes: int = field(init=False)
    _hash: int = field(init=False)

    def __post_init__(self) -> None:
        start = _as_int(self.start, "a stride's start")
        step = _as_int(self.step, "a stride's step")
        count = _as_int(self.count, "a stride's count")
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "count", count)
        if count <= 0:
            raise EmptySelection(f"{_excerpt(self)} selects no role: its count is {count}")
        if count >= 2 and step < 1:
            raise OverlappingParts(
                f"{_excerpt(self)}: step {step} does not advance, so its roles "
                "are not ascending and distinct"
            )
        _width_check(self, "start", start)
        _width_check(self, "step", step)
        last = start + (count - 1) * step
        _last_check(self, last)
        object.__setattr__(self, "first", start)
        object.__setattr__(self, "last", last)
        object.__setattr__(self, "size", count)
        object.__setattr__(self, "index_nodes", 1)
        object.__setattr__(self, "_hash", hash((_TAG_STRIDE, start, step, count)))

    def __eq__(self, other: object) -> bool:
        return _same_shape(self, other)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return "".join(_render(self, python=False))

    def __repr__(self) -> str:
        return "".join(_render(self, python=True))


@final
@dataclass(frozen=True, eq=False, slots=True)
class Repeat:
    """``count`` copies of ``part``, copy ``k`` shifted by ``k*offset``.

    Copies must ascend without interleaving: copy ``k+1``'s smallest role is
    past copy ``k``'s largest, i.e. ``offset > part.last - part.first``.
    Admitted at construction (after ``part``), in this order: ``count <= 0``
    is :class:`EmptySelection`; ``count >= 2`` with overlapping or interleaving
    copies is :class:`OverlappingParts`; an offset outside ``0..MAX_ROLE`` or a
    last role past ``MAX_ROLE`` is :class:`RoleOutsideUniverse`.

    Raises:
        TypeError: a field is not an integer, or ``part`` is not a selection.
        EmptySelection: ``count <= 0``.
        OverlappingParts: ``count >= 2`` and ``offset <= part.last - part.first``.
        RoleOutsideUniverse: the offset or the last role passes the role width.
    """

    count: int
    offset: int
    part: Selection
    #: Smallest selected role.
    first: int = field(init=False)
    #: Largest selected role.
    last: int = field(init=False)
    #: Number of selected roles.
    size: int = field(init=False)
    #: Index nodes of this subtree: one, plus the part's (counted once, not per copy).
    index_nodes: int = field(init=False)
    _hash: int = field(init=False)

    def __post_init__(self) -> None:
        count = _as_int(self.count, "a repeat's count")
        offset = _as_int(self.offset, "a repeat's offset")
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "offset", offset)
        part = self.part
        if not isinstance(part, Stride | Repeat | Join):
            raise TypeError(f"a repeat's part must be a selection, not {type(part).__name__}")
        if count <= 0:
            raise EmptySelection(f"{_excerpt(self)} selects no role: its count is {count}")
        span = part.last - part.first
        if count >= 2 and offset <= span:
            raise OverlappingParts(
                f"{_excerpt(self)}: offset {offset} is not past the part's span {span}, "
                "so copy 1 overlaps or interleaves with copy 0"
            )
        _width_check(self, "offset", offset)
        last = part.last + (count - 1) * offset
        _last_check(self, last)
        object.__setattr__(self, "first", part.first)
        object.__setattr__(self, "last", last)
        object.__setattr__(self, "size", count * part.size)
        object.__setattr__(self, "index_nodes", 1 + part.index_nodes)
        object.__setattr__(self, "_hash", hash((_TAG_REPEAT, count, offset, part._hash)))

    def __eq__(self, other: object) -> bool:
        return _same_shape(self, other)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return "".join(_render(self, python=False))

    def __repr__(self) -> str:
        return "".join(_render(self, python=True))


@final
@dataclass(frozen=True, eq=False, slots=True)
class Join:
    """The parts one after another; each part's roles all come after the previous part's.

    Admitted at construction (after the parts): no parts is
    :class:`EmptySelection`; a part whose first role is not past the previous
    part's last role is :class:`OverlappingParts` (overlap or wrong order).
    Parts are already within the role width, so a join adds no width check.

    Raises:
        TypeError: a part is not a selection.
        EmptySelection: there are no parts.
        OverlappingParts: two consecutive parts overlap or are out of order.
    """

    parts: tuple[Selection, ...]
    #: Smallest selected role.
    first: int = field(init=False)
    #: Largest selected role.
    last: int = field(init=False)
    #: Number of selected roles.
    size: int = field(init=False)
    #: Index nodes of this subtree: one, plus every part's.
    index_nodes: int = field(init=False)
    # First role of each part, for the binary search of `in` and `index`.
    _firsts: tuple[int, ...] = field(init=False)
    # Roles before each part (prefix counts), for the binary search of `g[i]`.
    _starts: tuple[int, ...] = field(init=False)
    _hash: int = field(init=False)

    def __post_init__(self) -> None:
        parts = tuple(self.parts)
        object.__setattr__(self, "parts", parts)
        for part in parts:
            if not isinstance(part, Stride | Repeat | Join):
                raise TypeError(f"a join's part must be a selection, not {type(part).__name__}")
        if not parts:
            raise EmptySelection("(join) selects no role: it has no parts")
        for i in range(1, len(parts)):
            before, after = parts[i - 1], parts[i]
            if after.first <= before.last:
                raise OverlappingParts(
                    f"{_excerpt(self)}: part {i} {_excerpt(after)} starts at {after.first}, "
                    f"not after part {i - 1} {_excerpt(before)} which ends at {before.last}"
                )
        starts: list[int] = []
        total = 0
        for part in parts:
            starts.append(total)
            total += part.size
        object.__setattr__(self, "first", parts[0].first)
        object.__setattr__(self, "last", parts[-1].last)
        object.__setattr__(self, "size", total)
        object.__setattr__(self, "index_nodes", 1 + sum(p.index_nodes for p in parts))
        object.__setattr__(self, "_firsts", tuple(p.first for p in parts))
        object.__setattr__(self, "_starts", tuple(starts))
        object.__setattr__(self, "_hash", hash((_TAG_JOIN, tuple(p._hash for p in parts))))

    def __eq__(self, other: object) -> bool:
        return _same_shape(self, other)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return "".join(_render(self, python=False))

    def __repr__(self) -> str:
        return "".join(_render(self, python=True))


#: A selection: the root of a group, or any part of one.
Selection: TypeAlias = Stride | Repeat | Join


def stride(start: int, step: int, count: int) -> Stride:
    """Select ``count`` roles ``start, start+step, ...``.

    Raises:
        TypeError: a field is not an integer.
        EmptySelection: ``count <= 0``.
        OverlappingParts: ``count >= 2`` and ``step < 1``.
        RoleOutsideUniverse: a field or the last role passes the role width.
    """
    return Stride(start, step, count)


def repeat(count: int, offset: int, part: Selection) -> Repeat:
    """Select ``count`` copies of ``part``, copy ``k`` shifted by ``k*offset``.

    Raises:
        TypeError: a field is not an integer, or ``part`` is not a selection.
        EmptySelection: ``count <= 0``.
        OverlappingParts: copies overlap or interleave (``offset <= part.last - part.first``).
        RoleOutsideUniverse: the offset or the last role passes the role width.
    """
    return Repeat(count, offset, part)


def join(*parts: Selection) -> Join:
    """Select ``parts`` one after another (ascending, disjoint).

    Raises:
        TypeError: a part is not a selection.
        EmptySelection: no parts.
        OverlappingParts: consecutive parts overlap or are out of order.
    """
    return Join(parts)


# --- iterative walks over the structure -------------------------------------


def _render(root: Selection, *, python: bool) -> Iterator[str]:
    """Yield the text of ``root`` piece by piece, without recursion.

    ``python=False`` gives the canonical text ``(stride 0 1 20)``;
    ``python=True`` gives an evaluable ``stride(0, 1, 20)``.
    """
    pending: list[Selection | str] = [root]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Stride):
            if python:
                yield f"stride({item.start}, {item.step}, {item.count})"
            else:
                yield f"(stride {item.start} {item.step} {item.count})"
        elif isinstance(item, Repeat):
            if python:
                yield f"repeat({item.count}, {item.offset}, "
            else:
                yield f"(repeat {item.count} {item.offset} "
            pending.append(")")
            pending.append(item.part)
        else:
            yield "join(" if python else "(join"
            pending.append(")")
            for i in range(len(item.parts) - 1, -1, -1):
                pending.append(item.parts[i])
                # Text puts a space before every part; Python a comma between parts.
                if not python:
                    pending.append(" ")
                elif i > 0:
                    pending.append(", ")


def _excerpt(node: Selection) -> str:
    """The canonical text of ``node``, cut to ``MAX_EXCERPT_CHARS`` for messages."""
    out: list[str] = []
    used = 0
    for piece in _render(node, python=False):
        out.append(piece)
        used += len(piece)
        if used > MAX_EXCERPT_CHARS:
            return "".join(out)[:MAX_EXCERPT_CHARS] + "..."
    return "".join(out)


def _same_shape(a: Selection, other: object) -> bool:
    """Structural equality of two selections, iteratively."""
    if not isinstance(other, Stride | Repeat | Join):
        return False
    pairs: list[tuple[Selection, Selection]] = [(a, other)]
    while pairs:
        x, y = pairs.pop()
        if x is y:
            continue
        if type(x) is not type(y) or x._hash != y._hash:
            return False
        if isinstance(x, Stride) and isinstance(y, Stride):
            if (x.start, x.step, x.count) != (y.start, y.step, y.count):
                return False
        elif isinstance(x, Repeat) and isinstance(y, Repeat):
            if (x.count, x.offset) != (y.count, y.offset):
                return False
            pairs.append((x.part, y.part))
        elif isinstance(x, Join) and isinstance(y, Join):
            if len(x.parts) != len(y.parts):
                return False
            pairs.extend(zip(x.parts, y.parts, strict=True))
    return True


def _encode(root: Selection) -> Iterator[bytes]:
    """Yield the canonical pre-order encoding of ``root`` (see docs/membership.md)."""
    pending: list[Selection] = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, Stride):
            yield bytes([_TAG_STRIDE])
            yield _U64.pack(node.start) + _U64.pack(node.step) + _U64.pack(node.count)
        elif isinstance(node, Repeat):
            yield bytes([_TAG_REPEAT])
            yield _U64.pack(node.count) + _U64.pack(node.offset)
            pending.append(node.part)
        else:
            yield bytes([_TAG_JOIN])
            yield _U64.pack(len(node.parts))
            pending.extend(reversed(node.parts))


def _iter_roles(root: Selection) -> Iterator[int]:
    """Yield the roles of ``root`` in ascending order, walking the structure lazily."""
    # Each frame is (node, shift, next copy or part to visit).
    frames: list[tuple[Selection, int, int]] = [(root, 0, 0)]
    while frames:
        node, shift, k = frames[-1]
        if isinstance(node, Stride):
            frames.pop()
            base = shift + node.start
            if node.count == 1:
                yield base
            else:
                yield from range(base, base + node.count * node.step, node.step)
        elif isinstance(node, Repeat):
            if k < node.count:
                frames[-1] = (node, shift, k + 1)
                frames.append((node.part, shift + k * node.offset, 0))
            else:
                frames.pop()
        elif k < len(node.parts):
            frames[-1] = (node, shift, k + 1)
            frames.append((node.parts[k], shift, 0))
        else:
            frames.pop()


@final
@dataclass(frozen=True, slots=True)
class _Walk:
    """One lookup's path from the root and what it found.

    ``found`` is the position of a role (for a role lookup) or the role at a
    position (for a position lookup); None when the role is not selected.
    """

    path: tuple[Selection, ...]
    found: int | None


def _walk_role(root: Selection, role: int) -> _Walk:
    """Follow the one path that could hold ``role``; return it and the role's position."""
    path: list[Selection] = []
    node = root
    position = 0
    while True:
        path.append(node)
        if role < node.first or role > node.last:
            return _Walk(tuple(path), None)
        if isinstance(node, Stride):
            delta = role - node.start
            # first <= role <= last, so a one-role stride holds exactly `start`
            # and a longer one holds role iff it lands on a step.
            if node.count == 1:
                return _Walk(tuple(path), position if delta == 0 else None)
            quotient, remainder = divmod(delta, node.step)
            return _Walk(tuple(path), position + quotient if remainder == 0 else None)
        if isinstance(node, Repeat):
            # Copies ascend without interleaving, so only copy k can hold role;
            # a role in the gap after copy k is caught by the part's bounds check.
            k = (role - node.part.first) // node.offset if node.count > 1 else 0
            role -= k * node.offset
            position += k * node.part.size
            node = node.part
        else:
            j = bisect_right(node._firsts, role) - 1
            position += node._starts[j]
            node = node.parts[j]


def _walk_index(root: Selection, index: int) -> _Walk:
    """Follow the path to position ``index`` (``0 <= index < root.size``); return the role."""
    path: list[Selection] = []
    node = root
    shift = 0
    while True:
        path.append(node)
        if isinstance(node, Stride):
            return _Walk(tuple(path), shift + node.start + index * node.step)
        if isinstance(node, Repeat):
            k, index = divmod(index, node.part.size)
            shift += k * node.offset
            node = node.part
        else:
            j = bisect_right(node._starts, index) - 1
            index -= node._starts[j]
            node = node.parts[j]


# --- the admitted group -----------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class ParticipantGroup:
    """An admitted selection of roles out of ``0..universe-1``, with an epoch and identity.

    Equality and hashing are by (selection, universe, epoch, identity); the
    index budget used at admission is not part of the value. Construction
    admits: the selection was already checked when its nodes were built, then
    (in this order) the universe, the index budget, the epoch and the identity.

    Raises:
        TypeError: a field has the wrong type.
        RoleOutsideUniverse: the universe is above ``MAX_ROLES``, or the last
            selected role is at or past the universe (so a universe <= 0 never fits).
        IndexBudgetExceeded: the selection has more index nodes than ``index_budget``.
        GroupFieldInvalid: the epoch is outside ``0..MAX_EPOCH`` or the identity is
            longer than ``MAX_IDENTITY_BYTES`` (raised as the family class itself).
    """

    selection: Selection
    universe: int = field(kw_only=True)
    epoch: int = field(default=0, kw_only=True)
    identity: bytes = field(default=b"", kw_only=True)
    index_budget: InitVar[int] = field(default=DEFAULT_INDEX_BUDGET, kw_only=True)

    def __post_init__(self, index_budget: int) -> None:
        selection = self.selection
        if not isinstance(selection, Stride | Repeat | Join):
            raise TypeError(
                f"a group's selection must be a selection, not {type(selection).__name__}"
            )
        universe = _as_int(self.universe, "the universe")
        epoch = _as_int(self.epoch, "the epoch")
        budget = _as_int(index_budget, "the index budget")
        if not isinstance(self.identity, bytes):
            raise TypeError(f"the identity must be bytes, not {type(self.identity).__name__}")
        object.__setattr__(self, "universe", universe)
        object.__setattr__(self, "epoch", epoch)
        if universe > MAX_ROLES:
            raise RoleOutsideUniverse(
                f"universe {universe} passes the {ROLE_WIDTH}-bit role width "
                f"(at most {MAX_ROLES} roles) for {_excerpt(selection)}"
            )
        if selection.last >= universe:
            raise RoleOutsideUniverse(
                f"{_excerpt(selection)}: role {selection.last} is at or past "
                f"the universe {universe} (roles 0..{universe - 1})"
            )
        if selection.index_nodes > budget:
            raise IndexBudgetExceeded(
                f"{_excerpt(selection)} needs {selection.index_nodes} index nodes, "
                f"over the budget of {budget}"
            )
        if not 0 <= epoch <= MAX_EPOCH:
            raise GroupFieldInvalid(f"epoch {epoch} is outside 0..{MAX_EPOCH}")
        if len(self.identity) > MAX_IDENTITY_BYTES:
            raise GroupFieldInvalid(
                f"identity of {len(self.identity)} bytes is longer than {MAX_IDENTITY_BYTES}"
            )

    # -- facts ---------------------------------------------------------------

    @property
    def index_nodes(self) -> int:
        """Form nodes in the selection (stride, repeat, join count one each; the group none)."""
        return self.selection.index_nodes

    @property
    def first(self) -> int:
        """The smallest selected role."""
        return self.selection.first

    @property
    def last(self) -> int:
        """The largest selected role."""
        return self.selection.last

    def __len__(self) -> int:
        """The number of selected roles (at most ``MAX_ROLES``)."""
        return self.selection.size

    # -- lookups -------------------------------------------------------------

    def __contains__(self, role: object) -> bool:
        """Whether ``role`` is selected; a non-integer (or a bool) is never a member."""
        value = _role_or_none(role)
        if value is None:
            return False
        return _walk_role(self.selection, value).found is not None

    def index(self, role: SupportsIndex) -> int:
        """The position of ``role`` among the selected roles (ascending).

        Visits at most :attr:`index_nodes` nodes.

        Raises:
            NotAMember: ``role`` is not selected (or is not an integer), i.e.
                exactly when ``role in self`` is False.
        """
        value = _role_or_none(role)
        found = None if value is None else _walk_role(self.selection, value).found
        if found is None:
            raise NotAMember(f"role {role!r} is not selected by (group {_excerpt(self.selection)})")
        return found

    def __getitem__(self, index: SupportsIndex) -> int:
        """The role at position ``index``; negative indices count from the end.

        Visits at most :attr:`index_nodes` nodes. Slices are not supported.

        Raises:
            TypeError: ``index`` is not an integer (bools and slices included).
            IndexError: ``index`` is outside ``-len(self)..len(self)-1``.
        """
        position = _as_int(index, "a group index")
        size = self.selection.size
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError(f"group index {index!r} is out of range for {size} roles")
        found = _walk_index(self.selection, position).found
        assert found is not None  # a position walk always ends on a stride
        return found

    def __iter__(self) -> Iterator[int]:
        """Yield the selected roles in ascending order, lazily."""
        return _iter_roles(self.selection)

    # -- text and digest -----------------------------------------------------

    def __str__(self) -> str:
        """The canonical text, ``(group <selection>)``; universe, epoch and identity excluded."""
        return "(group " + "".join(_render(self.selection, python=False)) + ")"

    def __repr__(self) -> str:
        return (
            f"parse_group({str(self)!r}, universe={self.universe}, epoch={self.epoch}, "
            f"identity={self.identity!r})"
        )

    def digest(self) -> bytes:
        """SHA-256 (32 bytes) of the canonical encoding of universe, epoch, identity, selection.

        The encoding is of the structure, not the member set: two shapes that
        select the same roles differently have different digests. See
        docs/membership.md for the encoding byte by byte.

        Raises:
            Nothing: an admitted group always encodes.
        """
        h = hashlib.sha256(DIGEST_DOMAIN)
        h.update(_U64.pack(self.universe))
        h.update(_U64.pack(self.epoch))
        h.update(_U64.pack(len(self.identity)))
        h.update(self.identity)
        for piece in _encode(self.selection):
            h.update(piece)
        return h.digest()


def group(
    selection: Selection,
    *,
    universe: int,
    epoch: int = 0,
    identity: bytes = b"",
    index_budget: int = DEFAULT_INDEX_BUDGET,
) -> ParticipantGroup:
    """Admit ``selection`` as a group of the universe ``0..universe-1``.

    Raises:
        TypeError: an argument has the wrong type.
        RoleOutsideUniverse: ``universe > MAX_ROLES`` or a selected role is at
            or past the universe.
        IndexBudgetExceeded: more index nodes than ``index_budget``.
        GroupFieldInvalid: epoch outside ``0..MAX_EPOCH`` or identity longer than
            ``MAX_IDENTITY_BYTES``.
    """
    return ParticipantGroup(
        selection, universe=universe, epoch=epoch, identity=identity, index_budget=index_budget
    )
