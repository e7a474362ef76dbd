"""Deployment files: which machine runs which role, and how the deployment host reaches it
(``docs/deploy.md``).

A deployment is JSON::

    {"transport": "ssh-tunnel",
     "remote_root": "/tmp/alpha-hybrid-your-unique-run",
     "nodes": [{"pod_id": "coordinator", "host": "root@10.0.0.1", "port": 22,
                "ssh_key": "/keys/id_ed25519", "minor": 0}, ...],
     "spares": [{"pod_id": "spare-0", ...}]}

``nodes`` are in logical role order: node ``r`` runs role ``r``, so reversing the list swaps
which machine runs which role. ``spares`` (optional) are nodes of the same form that run no
role until ``alpha run --deploy`` finds a node gone before an attempt: the next spare then
takes every role of that node (:func:`replace_gone`, ``docs/deploy.md``). Every field is
checked when the file is read, and the first wrong one is named (``nodes[1].port``,
``spares[0].pod_id``) in a :class:`DeployInvalid`. A host is refused if it could be read as an
ssh option (it starts with ``-``) or holds anything but the characters of a user, a host name
or an address.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

from alpha.errors import DeployInvalid, NodeUnreachable
from alpha.files import read_regular_file

if TYPE_CHECKING:
    from os import PathLike

__all__ = [
    "MAX_DEPLOY_BYTES",
    "TRANSPORTS",
    "Deployment",
    "Node",
    "Placement",
    "Replaced",
    "load_deployment",
    "parse_deployment",
    "replace_gone",
]

TRANSPORTS: Final = ("ssh-tunnel",)
MAX_DEPLOY_BYTES: Final = 1 << 20
"""A deployment lists nodes, a line each: 1 MiB is thousands of them."""
MAX_PATH_CHARS: Final = 4096
MAX_MINOR: Final = 2**31 - 1
_KEYS: Final = ("transport", "remote_root", "nodes")
_OPTIONAL_KEYS: Final = ("spares",)
_NODE_KEYS: Final = ("pod_id", "host", "port", "ssh_key", "minor")
_POD_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
# [user@]host: a POSIX user name, then a host name, an IPv4 address or a bracketed IPv6 one.
_HOST: Final = re.compile(
    r"(?:[a-z_][a-z0-9_-]{0,31}@)?"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"
)


@dataclass(frozen=True, slots=True)
class Node:
    """One machine of a deployment: how to reach it and which GPU minor it offers."""

    pod_id: str
    host: str
    port: int
    ssh_key: str
    minor: int


@dataclass(frozen=True, slots=True)
class Deployment:
    """A deployment file, read and checked: node ``r`` runs role ``r``."""

    transport: str
    remote_root: str
    nodes: tuple[Node, ...]
    source: str
    spares: tuple[Node, ...] = ()  # in the file's order: the first free one is taken first

    def node(self, role: int) -> Node:
        return self.nodes[role]

    def placed(self, nodes: tuple[Node, ...]) -> Deployment:
        """This deployment with ``nodes`` running its roles (node ``r`` role ``r``): what
        one attempt of ``alpha run --deploy`` stages, starts and routes through."""
        return replace(self, nodes=nodes)

    def require_roles(self, participants: int) -> None:
        """
        Raises:
            DeployInvalid: the deployment does not list exactly one node per role.
        """
        if len(self.nodes) != participants:
            raise DeployInvalid(
                f"{self.source} lists {len(self.nodes)} node(s), but the run has "
                f"{participants} role(s): list one node per role, in role order",
                field="nodes",
            )


def _path(value: object, field: str) -> str:
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or len(value) > MAX_PATH_CHARS
        or "\0" in value
        or ".." in PurePosixPath(value).parts
    ):
        raise DeployInvalid(
            f"must be an absolute path without '..', at most {MAX_PATH_CHARS} characters, "
            f"got {value!r}",
            field=field,
        )
    return value


def _int(value: object, field: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise DeployInvalid(f"must be an integer in {low}..{high}, got {value!r}", field=field)
    return value


def _refuse_unknown(
    table: dict[str, object], where: str, known: tuple[str, ...], optional: tuple[str, ...] = ()
) -> None:
    for key in table:
        if key not in known and key not in optional:
            field = f"{where}.{key}" if where else key
            fields = ", ".join((*known, *optional))
            raise DeployInvalid(f"is not a field; the fields are {fields}", field=field)
    for key in known:
        if key not in table:
            field = f"{where}.{key}" if where else key
            raise DeployInvalid("is required", field=field)


def _node(value: object, index: int, array: str = "nodes") -> Node:
    where = f"{array}[{index}]"
    if not isinstance(value, dict):
        raise DeployInvalid(f"must be an object, got {type(value).__name__}", field=where)
    _refuse_unknown(value, where, _NODE_KEYS)
    pod_id, host = value["pod_id"], value["host"]
    if not isinstance(pod_id, str) or _POD_ID.fullmatch(pod_id) is None:
        raise DeployInvalid(
            f"must be 1 to 253 letters, digits, '.', '_' or '-', not starting with a sign, "
            f"got {pod_id!r}",
            field=f"{where}.pod_id",
        )
    if not isinstance(host, str) or _HOST.fullmatch(host) is None:
        raise DeployInvalid(
            f"must be HOST or USER@HOST (a host name, an IPv4 address or a bracketed IPv6 one), "
            f"got {host!r}",
            field=f"{where}.host",
        )
    return Node(
        pod_id=pod_id,
        host=host,
        port=_int(value["port"], f"{where}.port", 1, 65535),
        ssh_key=_path(value["ssh_key"], f"{where}.ssh_key"),
        minor=_int(value["minor"], f"{where}.minor", 0, MAX_MINOR),
    )


def parse_deployment(text: str, *, source: str = "<deployment>") -> Deployment:
    """Read and check a deployment from its JSON text.

    Raises:
        DeployInvalid: not JSON, or a field missing, unknown or wrong (``field`` names it).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DeployInvalid(f"{source} is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise DeployInvalid(f"{source} must hold a JSON object")
    _refuse_unknown(data, "", _KEYS, _OPTIONAL_KEYS)
    transport = data["transport"]
    if transport not in TRANSPORTS:
        raise DeployInvalid(
            f"must be one of {', '.join(TRANSPORTS)}, got {transport!r}", field="transport"
        )
    remote_root = _path(data["remote_root"], "remote_root")
    if remote_root == "/":
        raise DeployInvalid("must be a folder of the run's own, not /", field="remote_root")
    nodes = data["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise DeployInvalid("must be a non-empty list, one node per role", field="nodes")
    placed = tuple(_node(node, index) for index, node in enumerate(nodes))
    return Deployment(
        transport=transport,
        remote_root=remote_root,
        nodes=placed,
        source=source,
        spares=_spares(data.get("spares", []), placed),
    )


def _spares(value: object, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """The ``spares`` array: nodes as strict as ``nodes``' own, each named apart from every
    node and other spare (the lines that say which spare took a role, and each attempt's
    ``nodes`` in ``alpha run --json``, name them by ``pod_id`` alone)."""
    if not isinstance(value, list):
        raise DeployInvalid(
            f"must be a list of nodes (possibly empty), got {type(value).__name__}",
            field="spares",
        )
    spares = tuple(_node(spare, index, "spares") for index, spare in enumerate(value))
    named = {node.pod_id for node in nodes}
    for index, spare in enumerate(spares):
        if spare.pod_id in named:
            raise DeployInvalid(
                f"{spare.pod_id!r} already names a node or an earlier spare: a spare's pod_id "
                "is its own",
                field=f"spares[{index}].pod_id",
            )
        named.add(spare.pod_id)
    return spares


def load_deployment(path: str | PathLike[str]) -> Deployment:
    """Read the deployment file at ``path`` (a regular file of at most 1 MiB, UTF-8).

    Raises:
        DeployInvalid: it cannot be read, is not UTF-8, or :func:`parse_deployment` refuses it.
    """
    source = str(path)
    try:
        data = read_regular_file(source, MAX_DEPLOY_BYTES)
    except OSError as error:
        raise DeployInvalid(f"{source} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DeployInvalid(f"{source} is not UTF-8: {error}") from None
    return parse_deployment(text, source=source)


@dataclass(frozen=True, slots=True)
class Placement:
    """Which node runs each role of one attempt of ``alpha run --deploy``, and the spares still
    free: ``nodes[r]`` runs role ``r`` (the deployment's ``nodes`` at first), ``spares`` in the
    file's order, the first taken first."""

    nodes: tuple[Node, ...]
    spares: tuple[Node, ...]

    @classmethod
    def of(cls, deployment: Deployment) -> Placement:
        return cls(deployment.nodes, deployment.spares)

    def in_use(self) -> tuple[Node, ...]:
        """Each node that runs a role, once, in the order of its first role."""
        return tuple(dict.fromkeys(self.nodes))

    def roles_of(self, node: Node) -> tuple[int, ...]:
        return tuple(role for role, each in enumerate(self.nodes) if each == node)


@dataclass(frozen=True, slots=True)
class Replaced:
    """What :func:`replace_gone` did about one gone node: the placement after it, the spare
    that took the node's roles (None: they were dropped) and those roles (numbered as they
    were before)."""

    placement: Placement
    spare: Node | None
    roles: tuple[int, ...]


def replace_gone(
    placement: Placement, gone: Node, why: str, *, drop: bool, source: str = "<deployment>"
) -> Replaced:
    """``placement`` without the node ``gone`` (it does not answer; ``why`` quotes ssh): every
    role it ran moves to the first free spare; with none left and ``drop`` (``[recovery]
    lost_role = "drop"``, which needs ``learner.contributors``) those roles are dropped, the
    remaining roles keeping their nodes in order (role ``r`` of the smaller run on the ``r``-th
    placement left), one role fewer for each role the gone node ran. ``source`` names the
    deployment file in the message that asks for a spare.

    Raises:
        NodeUnreachable: no spare is left and the roles may not be dropped, or dropping them
            would leave no role; the message names the node, quotes ``why`` and says to add a
            spare.
    """
    roles = placement.roles_of(gone)
    named = ", ".join(str(role) for role in roles)
    which = f"role{'s' if len(roles) > 1 else ''} {named}"
    where = f"node {gone.pod_id} ({gone.host} port {gone.port}) does not answer ({why})"
    if placement.spares:
        spare, *rest = placement.spares
        nodes = tuple(spare if node == gone else node for node in placement.nodes)
        return Replaced(Placement(nodes, tuple(rest)), spare, roles)
    if drop:
        nodes = tuple(node for node in placement.nodes if node != gone)
        if not nodes:
            raise NodeUnreachable(f"{where}, and no other node is left to run a role")
        return Replaced(Placement(nodes, ()), None, roles)
    raise NodeUnreachable(
        f'{where} and no spare is left to take {which}: add a node to "spares" in {source} '
        '(docs/deploy.md), or run on fewer roles with [recovery] lost_role = "drop" and '
        "learner.contributors"
    )
