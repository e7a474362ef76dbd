"""Where each role runs when a run's roles are spread over the nodes of an allocation
(``alpha run --slurm``, docs/slurm.md), and the port each edge listens on there: compact
rules over a few numbers, never a list of all n roles.

**Nodes.** Roles go to the allocation's nodes in contiguous blocks, in role order: with n
roles on k nodes the block is ``ceil(n / k)`` roles and role ``r`` runs on node
``r // block`` (the last node may hold fewer; a node past ``ceil(n / block)`` holds none).
Roles are numbered in preorder (docs/topology.md), so every subtree is a contiguous range of
roles: a block keeps whole subtrees on one node where it can, and most edges inside a node.

**Addresses.** An edge listens on its lower role's node (the parent's: the lower role of an
edge listens, decision 2), so the edge ``(parent(h), h)`` has that node's address, as Slurm
gives it.

**Ports.** A participant started by ``srun`` has no pipe to the launcher that could relay an
announced port, so every edge's port is fixed at compile time, from a range: the edge to the
higher role ``h`` (1..n-1, one edge per role but the root) listens on
``low + (offset + h - 1) mod span``, where ``span = high - low + 1`` and
``offset = (job + attempt) x (n - 1) mod span`` (:func:`port_offset`). So the n-1 ports of one
launch are distinct (the range must hold n-1 ports), and the next attempt of a job, or the
next job, starts one block of n-1 ports further: a port an earlier launch left in TIME_WAIT,
or another job's live listener on the same node, is not the one it asks for, as long as the
range holds the blocks of the launches that share nodes at once.

Pure: values in, values out.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, final

from alpha.checked import int_in
from alpha.errors import PlanInvalid, RoleOutOfRange

__all__ = [
    "DEFAULT_PORTS",
    "MAX_PORT",
    "MIN_PORT",
    "NodePlacement",
    "PortRange",
    "port_offset",
]

MIN_PORT: Final = 1024
"""The lowest port a range may hold: below it are the privileged ports, which a participant
(an ordinary user's process) cannot bind."""

MAX_PORT: Final = 65535
"""TCP's largest port."""


@final
@dataclass(frozen=True, slots=True)
class PortRange:
    """The ports ``low..high`` (both included) that a run's edges listen on.

    Raises:
        PlanInvalid: ``low`` or ``high`` outside ``MIN_PORT..MAX_PORT``, or ``low > high``
            (field ``addresses.ports``).
    """

    low: int
    high: int

    def __post_init__(self) -> None:
        for value in (self.low, self.high):
            if not int_in(value, MIN_PORT, MAX_PORT):
                raise PlanInvalid(
                    f"a port of the range must be an integer in {MIN_PORT}..{MAX_PORT}, "
                    f"got {value!r}",
                    field="addresses.ports",
                )
        if self.low > self.high:
            raise PlanInvalid(
                f"the range {self.low}-{self.high} is reversed: its low end comes first "
                f"({self.high}-{self.low})",
                field="addresses.ports",
            )

    @property
    def span(self) -> int:
        """How many ports the range holds."""
        return self.high - self.low + 1

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


DEFAULT_PORTS: Final = PortRange(23000, 23999)
"""The range used when a plan names none: below Linux's ephemeral ports (32768-60999), so no
outgoing connection of the host holds one of them, and clear of the well-known services."""


def port_offset(job: int, attempt: int, roles: int, span: int) -> int:
    """Where a launch's block of ports starts in a range of ``span`` ports: one block of
    ``roles - 1`` ports further for each later job id and for each later attempt of a job.

    Raises:
        ValueError: a negative job or attempt, fewer than one role or one port.
    """
    if job < 0 or attempt < 0 or roles < 1 or span < 1:
        raise ValueError(f"no offset for job {job}, attempt {attempt}, {roles} roles, {span}")
    return ((job + attempt) * (roles - 1)) % span


def _ipv4(address: str) -> str:
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        raise PlanInvalid(
            f"a node's address must be an IPv4 address, got {address!r}", field="addresses"
        ) from None


@final
@dataclass(frozen=True, slots=True)
class NodePlacement:
    """``roles`` roles placed on the nodes whose IPv4 ``addresses`` are given in node order,
    in contiguous blocks (the rules are at the top of this module), with their edges' ports
    taken from ``ports`` starting ``offset`` ports in.

    Raises:
        PlanInvalid: no node, an address that is not IPv4 (field ``addresses``), fewer than
            one role, a range that holds fewer ports than the run's ``roles - 1`` edges, or an
            offset outside the range (field ``addresses.ports``).
    """

    addresses: tuple[str, ...]
    roles: int
    ports: PortRange = DEFAULT_PORTS
    offset: int = 0

    def __post_init__(self) -> None:
        if not self.addresses:
            raise PlanInvalid("a placement needs at least one node", field="addresses")
        object.__setattr__(self, "addresses", tuple(_ipv4(each) for each in self.addresses))
        if not int_in(self.roles, 1):
            raise PlanInvalid(f"a run has at least one role, got {self.roles!r}", field="run")
        if self.ports.span < self.roles - 1:
            raise PlanInvalid(
                f"the range {self.ports} holds {self.ports.span} port(s), and a run of "
                f"{self.roles} roles listens on {self.roles - 1} (one per edge): widen it",
                field="addresses.ports",
            )
        if not int_in(self.offset, 0, self.ports.span - 1):
            raise PlanInvalid(
                f"the offset must be in 0..{self.ports.span - 1}, got {self.offset!r}",
                field="addresses.ports",
            )

    @property
    def block(self) -> int:
        """Roles per node: ``ceil(roles / nodes)``."""
        return -(-self.roles // len(self.addresses))

    @property
    def nodes_used(self) -> int:
        """The nodes that hold a role: the first ``ceil(roles / block)``."""
        return -(-self.roles // self.block)

    def node_of(self, role: int) -> int:
        """The node (an index into :attr:`addresses`) that runs ``role``.

        Raises:
            RoleOutOfRange: ``role`` is not in ``0..roles-1``.
        """
        self._check(role, 0)
        return role // self.block

    def roles_of(self, node: int) -> range:
        """The roles node ``node`` runs (empty for a node past :attr:`nodes_used`)."""
        start = min(node * self.block, self.roles)
        return range(start, min(start + self.block, self.roles))

    def address_of(self, role: int) -> str:
        """The address of ``role``'s node: where it listens for its higher peers.

        Raises:
            RoleOutOfRange: ``role`` is not in ``0..roles-1``.
        """
        return self.addresses[self.node_of(role)]

    def port_of(self, high: int) -> int:
        """The port of the edge to the higher role ``high`` (its parent listens on it).

        Raises:
            RoleOutOfRange: ``high`` is not in ``1..roles-1`` (role 0 has no parent).
        """
        self._check(high, 1)
        return self.ports.low + (self.offset + high - 1) % self.ports.span

    def _check(self, role: int, least: int) -> None:
        if not int_in(role, least, self.roles - 1):
            raise RoleOutOfRange(
                f"a role of this {self.roles}-role placement is an int in "
                f"{least}..{self.roles - 1}, got {role!r}"
            )
