"""The ``[membership]`` and ``[topology]`` tables of a plan: the admitted group of roles and
the participant tree over them (docs/plans.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, final

from alpha.compiler._fields import (
    Table,
    one_of,
    optional_int_at,
    refuse_unknown,
    required_table,
    shown,
    str_at,
    table_at,
)
from alpha.core.digests import TOPOLOGIES
from alpha.core.membership import MAX_IDENTITY_BYTES, MAX_ROLES, ParticipantGroup, group
from alpha.core.membership_text import parse_group
from alpha.core.topology import ParticipantTree, pair, star
from alpha.errors import AdmissionError, GroupSyntaxError, PlanInvalid, TopologyError

__all__ = [
    "MEMBERSHIP_KEYS",
    "SHAPES",
    "TOPOLOGY_KEYS",
    "MembershipTable",
    "read_membership",
    "read_topology",
    "roles_group",
]

#: The topology shapes: star and pair are trees of a fixed fan-out, named for the reader.
SHAPES: Final = TOPOLOGIES

# The keys the table knows, in documentation order; messages list them in this order.
MEMBERSHIP_KEYS: Final = ("group", "roles", "universe", "identity")
# The group identity as the plan writes it: hex digits, two per byte, either case.
_HEX_BYTES: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")
TOPOLOGY_KEYS: Final = ("shape", "fanout")


@final
@dataclass(frozen=True, slots=True)
class MembershipTable:
    group: ParticipantGroup
    text: str


def read_membership(root: Table, epoch: int) -> MembershipTable:
    """The ``[membership]`` table: the admitted group (roles ``0..n-1``) and its text.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = required_table(root, "membership")
    refuse_unknown(table, "membership", MEMBERSHIP_KEYS)
    roles = optional_int_at(table, "membership.roles", low=1, high=MAX_ROLES)
    if roles is not None and "group" not in table:
        text = roles_group(roles)
    elif roles is None and "group" not in table:
        raise PlanInvalid(
            "is required: a participant group such as '(group (stride 0 1 8))', or give "
            "membership.roles = N for the roles 0..N-1",
            field="membership.group",
        )
    else:
        text = str_at(table, "membership.group")
    try:
        admitted = parse_group(text, epoch=epoch)
    except (GroupSyntaxError, AdmissionError) as error:
        raise PlanInvalid(str(error), field="membership.group") from None
    n = len(admitted)
    if roles is not None and str(admitted) != str(parse_group(roles_group(roles), epoch=epoch)):
        raise PlanInvalid(
            f"membership.roles = {roles} and membership.group = {text!r} disagree: roles = "
            f"{roles} is the group {roles_group(roles)!r}, and this group has {n} member(s); "
            "give one of them",
            field="membership.roles",
        )
    if admitted.first != 0 or admitted.last != n - 1:
        raise PlanInvalid(
            f"the run's roles are the group's members and must be exactly 0..n-1; this group "
            f"selects {n} role(s) from {admitted.first} to {admitted.last}, not 0..{n - 1}",
            field="membership.group",
        )
    universe = optional_int_at(table, "membership.universe", low=n, high=MAX_ROLES)
    identity = _group_identity(table)
    if (universe is not None and universe != admitted.universe) or identity:
        # In range by the checks above, so admission cannot refuse it.
        admitted = group(
            admitted.selection,
            universe=admitted.universe if universe is None else universe,
            epoch=epoch,
            identity=identity,
        )
    return MembershipTable(admitted, text)


def roles_group(roles: int) -> str:
    """The group ``membership.roles = N`` stands for: the roles ``0..N-1``."""
    return f"(group (stride 0 1 {roles}))"


def _group_identity(table: Table) -> bytes:
    """The bytes of ``membership.identity`` (empty when absent): the group's identity, which
    enters the membership digest, so two runs of the same group can be kept apart.

    Raises:
        PlanInvalid: not a string of hex digits, two per byte, at most
            ``MAX_IDENTITY_BYTES`` bytes.
    """
    value = table.get("identity", "")
    if (
        not isinstance(value, str)
        or not _HEX_BYTES.fullmatch(value)
        or len(value) > 2 * MAX_IDENTITY_BYTES
    ):
        raise PlanInvalid(
            f"must be a string of hex digits, two per byte, at most {MAX_IDENTITY_BYTES} bytes "
            f"(MAX_IDENTITY_BYTES), got {shown(value)}",
            field="membership.identity",
        )
    return bytes.fromhex(value)


def read_topology(root: Table, n: int) -> tuple[str, ParticipantTree]:
    """The ``[topology]`` table over ``n`` roles: the shape's name and its tree.

    Raises:
        PlanInvalid: the first field of the table that is unknown, missing or out of range
            (``field`` names it; the messages are docs/plans.md's).
    """
    table = table_at(root, "topology") or {}
    refuse_unknown(table, "topology", TOPOLOGY_KEYS)
    shape = one_of(table, "topology.shape", SHAPES, default="tree")
    fanout = optional_int_at(table, "topology.fanout", low=1, high=MAX_ROLES)
    try:
        if shape == "tree":
            if fanout is None:
                raise PlanInvalid(
                    "is required for shape 'tree': an integer of at least 1",
                    field="topology.fanout",
                )
            return shape, ParticipantTree(n, fanout)
        if shape == "star":
            spokes = max(1, n - 1)  # star(1) is the lone root, fan-out 1
            if fanout is not None and fanout != spokes:
                raise PlanInvalid(
                    f"a star of {n} role(s) has fan-out {spokes} (n - 1); leave it out or set "
                    f"it to {spokes}, got {fanout}",
                    field="topology.fanout",
                )
            return shape, star(n)
        if n != 2:
            raise PlanInvalid(
                f"shape 'pair' needs exactly 2 roles; membership.group selects {n}",
                field="topology.shape",
            )
        if fanout is not None and fanout != 1:
            raise PlanInvalid(
                f"a pair has fan-out 1; leave it out or set it to 1, got {fanout}",
                field="topology.fanout",
            )
        return shape, pair()
    except TopologyError as error:
        raise PlanInvalid(str(error), field="topology.fanout") from None
