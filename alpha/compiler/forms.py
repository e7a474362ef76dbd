"""The global forms of a protocol: communication written once, for every role.

A protocol is a tree of forms over the roles ``0..n-1`` of one run. Roles may be written
structurally (``Everyone``, every member of a ``ParticipantGroup``), so a plan of 200,000 roles
is a handful of forms. ``Combine`` is a derived form: its projection gives each role its
receives from its children, a fold in contract order, its send to its parent and the delivery
back down. Pure values: checking is in ``checks``, projection in ``projection``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, final

from alpha.core.membership import ParticipantGroup
from alpha.core.topology import ParticipantTree
from alpha.schedule.regions import ITEM_SIZES, Region

__all__ = [
    "ITEM_SIZES",
    "MAX_ITERATIONS",
    "Children",
    "Choice",
    "Combine",
    "Dissemination",
    "Everyone",
    "Form",
    "GroupRoles",
    "Local",
    "Operation",
    "Protocol",
    "Region",
    "Repeat",
    "RoleSet",
    "Roles",
    "Seq",
    "Targets",
    "Transfer",
    "walk",
]

MAX_ITERATIONS: Final = 2**64 - 1
"""The most iterations nested repeats may multiply to: a slot's version counter is 64 bits
and advances once per iteration, so more could never run."""


# --- role sets ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Roles:
    """An explicit, small set of roles."""

    roles: tuple[int, ...]

    def contains(self, role: int) -> bool:
        return role in self.roles

    def describe(self) -> str:
        return "roles " + ",".join(str(r) for r in self.roles)


@final
@dataclass(frozen=True, slots=True)
class Everyone:
    """Every role of the run."""

    def contains(self, role: int) -> bool:
        return True

    def describe(self) -> str:
        return "every role"


@final
@dataclass(frozen=True, slots=True)
class GroupRoles:
    """Every member of a participant group: looked up along one path, never listed."""

    group: ParticipantGroup

    def contains(self, role: int) -> bool:
        return role in self.group

    def describe(self) -> str:
        return f"members of {self.group}"


@final
@dataclass(frozen=True, slots=True)
class Children:
    """Every child of ``node`` in ``tree``: found from the role's parent, never listed."""

    tree: ParticipantTree
    node: int

    def contains(self, role: int) -> bool:
        return 0 <= role < self.tree.n and self.tree.parent(role) == self.node

    def describe(self) -> str:
        return f"children of role {self.node}"


RoleSet = Roles | Everyone | GroupRoles | Children


# --- forms --------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Transfer:
    """``src`` sends its copy of ``region`` to ``dst``, which receives it into its own."""

    src: int
    dst: int
    region: str


@final
@dataclass(frozen=True, slots=True)
class Local:
    """Every role of ``roles`` applies operation ``op`` to its ``region``."""

    roles: RoleSet
    op: str
    region: str


@final
@dataclass(frozen=True, slots=True)
class Seq:
    forms: tuple[Form, ...]


@final
@dataclass(frozen=True, slots=True)
class Repeat:
    """``body`` ``count`` times; ``bound`` is the declared most it may run."""

    count: int
    bound: int
    body: Form


@final
@dataclass(frozen=True, slots=True)
class Dissemination:
    """How a choice's word travels from its authority: an ordered list of (from, to) edges,
    each receiver introduced once, or (``along_tree``) down the run's tree from its root."""

    edges: tuple[tuple[int, int], ...] = ()
    along_tree: bool = False

    @classmethod
    def tree(cls) -> Dissemination:
        return cls(along_tree=True)


@final
@dataclass(frozen=True, slots=True)
class Choice:
    """The ``authority`` evaluates ``selector`` (0 or 1), sends the word along
    ``dissemination``; every informed role then runs ``arm0`` or ``arm1``."""

    authority: int
    selector: str
    dissemination: Dissemination
    arm0: Form
    arm1: Form


@final
@dataclass(frozen=True, slots=True)
class Combine:
    """Sum ``region`` over every role along ``tree`` in contract order, and deliver the
    result to every role (``all``) or to the root only (``one``). ``tree`` defaults to the
    run's tree; the contract fixes it, so any other tree is refused by the checks."""

    region: str
    delivery: Literal["all", "one"] = "all"
    tree: ParticipantTree | None = None


Form = Transfer | Local | Seq | Repeat | Choice | Combine


@final
@dataclass(frozen=True, slots=True)
class Operation:
    """A local operation's declaration: its kind and the targets that provide it."""

    name: str
    kind: Literal["local", "selector"]
    targets: frozenset[str]


@final
@dataclass(frozen=True, slots=True)
class Targets:
    """Which target each role runs on: a default and a few listed exceptions, so that a
    role's target is found without a list of ``n`` roles."""

    default: str = "x86_64"
    listed: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def of(self, role: int) -> str:
        for target, roles in self.listed:
            if role in roles:
                return target
        return self.default

    def present(self, roles: RoleSet, participants: int) -> frozenset[str]:
        """The targets of the roles in ``roles``, without visiting each role."""
        found = set()
        listed_in = 0
        for target, members in self.listed:
            inside = [r for r in members if r < participants and roles.contains(r)]
            if inside:
                found.add(target)
                listed_in += len(inside)
        if _size(roles, participants) > listed_in:
            found.add(self.default)
        return frozenset(found)


def _size(roles: RoleSet, participants: int) -> int:
    if isinstance(roles, Roles):
        return len([r for r in set(roles.roles) if 0 <= r < participants])
    if isinstance(roles, GroupRoles):
        return len(roles.group)
    if isinstance(roles, Children):
        return len(roles.tree.children(roles.node)) if 0 <= roles.node < roles.tree.n else 0
    return participants


@final
@dataclass(frozen=True, slots=True)
class Protocol:
    """One global protocol: the run's roles and tree, its regions, operations and body."""

    participants: int
    tree: ParticipantTree
    regions: Mapping[str, Region]
    operations: Mapping[str, Operation]
    body: Form
    targets: Targets = field(default_factory=Targets)
    max_iterations: int = MAX_ITERATIONS


def walk(form: Form, path: str = "body") -> Iterator[tuple[str, Form]]:
    """Every form below ``form`` (itself included) in preorder, with its path."""
    stack: list[tuple[str, Form]] = [(path, form)]
    while stack:
        where, current = stack.pop()
        yield where, current
        children: list[tuple[str, Form]] = []
        if isinstance(current, Seq):
            children = [(f"{where}.{i}", f) for i, f in enumerate(current.forms)]
        elif isinstance(current, Repeat):
            children = [(f"{where}.repeat", current.body)]
        elif isinstance(current, Choice):
            children = [(f"{where}.arm0", current.arm0), (f"{where}.arm1", current.arm1)]
        stack.extend(reversed(children))
