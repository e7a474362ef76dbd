"""The ``[addresses]``, ``[targets]`` and ``[gpu]`` tables of a plan: where each edge listens,
what machine each role's artifact is built for, and which roles are bound a GPU
(docs/plans.md). Each lists exceptions to a default, so reading costs O(entries listed),
never O(roles).
"""

from __future__ import annotations

import re
from typing import Final

from alpha.checked import int_in
from alpha.compiler._fields import Table, ipv4, one_of, refuse_unknown, shown, table_at
from alpha.core.placement import PortRange
from alpha.core.targets import TARGETS  # the machine targets; the first is the default
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid
from alpha.schedule.role import DEFAULT_ADDRESS, TRANSPORTS

__all__ = [
    "ADDRESSES_KEYS",
    "GPU_KEYS",
    "MAX_GPU_UUID_CHARS",
    "TARGETS",
    "TARGETS_KEYS",
    "EdgeAddress",
    "read_addresses",
    "read_gpu",
    "read_ports",
    "read_targets",
    "read_transport",
]

#: A GPU UUID as nvidia-smi prints it is 40 characters (``GPU-`` and 36 of hex and dashes); 64
#: leaves room for other vendors' forms and keeps a pasted log line from passing as one.
MAX_GPU_UUID_CHARS: Final = 64
_GPU_UUID: Final = re.compile(r"GPU-[0-9a-fA-F][0-9a-fA-F-]*")

#: A role in a key (``"0-1"``, ``"3"``) is canonical decimal: no sign, no leading zero, and at
#: most 10 digits, the width of the largest role (2**32 - 1), so one role has one spelling and
#: int() never meets a huge string.
_ROLE_TEXT: Final = r"(?:0|[1-9][0-9]{0,9})"
_ROLE_KEY: Final = re.compile(_ROLE_TEXT)
_EDGE_KEY: Final = re.compile(f"({_ROLE_TEXT})-({_ROLE_TEXT})")

# The keys the table knows, in documentation order; messages list them in this order.
ADDRESSES_KEYS: Final = ("default", "transport", "ports", "edges")
TARGETS_KEYS: Final = ("default", *TARGETS)

GPU_KEYS: Final = ("roles",)

EdgeAddress = tuple[tuple[int, int], str]


def read_addresses(root: Table, tree: ParticipantTree) -> tuple[str, tuple[EdgeAddress, ...]]:
    """The ``[addresses]`` table: the default and each listed edge's IPv4 address.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "addresses") or {}
    refuse_unknown(table, "addresses", ADDRESSES_KEYS)
    default = ipv4(table.get("default", DEFAULT_ADDRESS), "addresses.default")
    edges = table_at(table, "addresses.edges") or {}
    listed: list[EdgeAddress] = []
    for key, value in edges.items():
        dotted = f"addresses.edges.{key}"
        match = _EDGE_KEY.fullmatch(key)
        if match is None:
            raise PlanInvalid(
                'an edge key is LOW-HIGH in canonical decimal, e.g. "0-1"', field=dotted
            )
        low, high = int(match[1]), int(match[2])
        if not low < high < tree.n or tree.parent(high) != low:
            raise PlanInvalid(
                f"{key} is not an edge of the {tree.n}-role tree: an edge is LOW-HIGH where LOW "
                f"is HIGH's parent and HIGH is a role 1..{tree.n - 1}",
                field=dotted,
            )
        listed.append(((low, high), ipv4(value, dotted)))
    return default, tuple(sorted(listed))


def read_transport(root: Table) -> str:
    """``addresses.transport``: ``"auto"`` (an edge whose two roles the launcher runs on this
    host moves its large payloads through shared memory) or ``"tcp"`` (every frame over TCP).

    Raises:
        PlanInvalid: another value.
    """
    table = table_at(root, "addresses") or {}
    return one_of(table, "addresses.transport", TRANSPORTS, default="auto")


#: ``LOW-HIGH`` in canonical decimal: one range has one spelling.
_PORT_RANGE: Final = re.compile(r"(0|[1-9][0-9]{0,4})-(0|[1-9][0-9]{0,4})")


def read_ports(root: Table, n: int) -> PortRange | None:
    """``addresses.ports``: the range ``"LOW-HIGH"`` every edge's port is fixed from when the
    roles run on nodes that cannot relay announced ports (``alpha run --slurm``,
    docs/slurm.md), or None when the plan names none. The range must hold one port per edge
    of the ``n``-role tree.

    Raises:
        PlanInvalid: not a string ``LOW-HIGH``, a port outside 1024..65535, a reversed range,
            or fewer than ``n - 1`` ports.
    """
    table = table_at(root, "addresses") or {}
    if "ports" not in table:
        return None
    value = table["ports"]
    match = _PORT_RANGE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise PlanInvalid(
            f'must be a range of ports "LOW-HIGH" such as "23000-23999", got {shown(value)}',
            field="addresses.ports",
        )
    ports = PortRange(int(match[1]), int(match[2]))
    if ports.span < n - 1:
        raise PlanInvalid(
            f"the range {ports} holds {ports.span} port(s), and a run of {n} roles listens "
            f"on {n - 1} (one per edge): widen it",
            field="addresses.ports",
        )
    return ports


def read_targets(root: Table, n: int) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """The ``[targets]`` table over ``n`` roles: the default and each listed target's roles.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "targets") or {}
    refuse_unknown(table, "targets", TARGETS_KEYS)
    default = one_of(table, "targets.default", TARGETS, default=TARGETS[0])
    seen: dict[int, str] = {}
    lists: list[tuple[str, tuple[int, ...]]] = []
    for target in TARGETS:
        if target not in table:
            continue
        dotted = f"targets.{target}"
        roles = table[target]
        if not isinstance(roles, list):
            raise PlanInvalid(
                f"must be an array of roles in 0..{n - 1}, got {shown(roles)}", field=dotted
            )
        for role in roles:
            if not int_in(role, 0, n - 1):
                raise PlanInvalid(
                    f"lists roles, each an integer in 0..{n - 1}; got {shown(role)}",
                    field=dotted,
                )
            if role in seen:
                where = "twice" if seen[role] == target else f"here and in targets.{seen[role]}"
                raise PlanInvalid(
                    f"role {role} is listed {where}; a role has one target", field=dotted
                )
            seen[role] = target
        lists.append((target, tuple(sorted(roles))))
    return default, tuple(lists)


def read_gpu(root: Table, n: int) -> tuple[tuple[int, str], ...]:
    """The ``[gpu]`` table over ``n`` roles: ``(role, GPU UUID)`` per bound role, by role.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "gpu")
    if table is None:
        return ()
    refuse_unknown(table, "gpu", GPU_KEYS)
    roles = table_at(table, "gpu.roles") or {}
    bound: list[tuple[int, str]] = []
    for key, value in roles.items():
        dotted = f"gpu.roles.{key}"
        if _ROLE_KEY.fullmatch(key) is None or not int(key) < n:
            raise PlanInvalid(
                f'a key of [gpu.roles] is a role in 0..{n - 1} in canonical decimal, e.g. "3"',
                field=dotted,
            )
        if (
            not isinstance(value, str)
            or len(value) > MAX_GPU_UUID_CHARS
            or _GPU_UUID.fullmatch(value) is None
        ):
            raise PlanInvalid(
                f"must be a GPU UUID: 'GPU-' then hex digits and dashes, at most "
                f"{MAX_GPU_UUID_CHARS} characters, got {shown(value)}",
                field=dotted,
            )
        bound.append((int(key), value))
    return tuple(sorted(bound))
