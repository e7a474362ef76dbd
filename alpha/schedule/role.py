"""Role descriptions: what one participant is built to do, as a documented JSON value.

A role description holds a participant's role, its edges (peers ascending, each with the IPv4
address compiled for it and, in a keyed run, the keys of that edge's two directions), the run
identity, how its frames are sealed (integrity and payload digest) and its budgets. Every
compiled artifact carries one beside its schedule. The format is documented in
``docs/roles.md``. Pure: values in, values out.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, final

from alpha.checked import int_in
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.core.identity import RunIdentity
from alpha.core.sealing import INTEGRITIES, KEY_SIZE, KEYED_INTEGRITY, PAYLOAD_DIGESTS
from alpha.errors import RoleDescriptionInvalid

__all__ = [
    "FORMAT",
    "TRANSPORTS",
    "Edge",
    "RoleDescription",
]

FORMAT: Final = "alpha-role/1"
"""The ``format`` field of every role description this module reads and writes."""

DEFAULT_ADDRESS: Final = "127.0.0.1"

TRANSPORTS: Final = ("auto", "tcp")
"""How a role's edges move payloads: ``auto``, through a shared-memory region where the launcher
runs both ends on this host (``alpha.runtime.shared``), else TCP; ``tcp``, always TCP."""

# A fixed port is one a participant binds as an ordinary user: never a privileged one (and
# never 0, which would ask the kernel for an ephemeral port no one relays).
MIN_FIXED_PORT: Final = 1024
MAX_FIXED_PORT: Final = 65535

# The digits a key's hex may use: lowercase only, so a key has one spelling.
_HEX: Final = frozenset("0123456789abcdef")


@final
@dataclass(frozen=True, slots=True)
class Edge:
    """One incident edge of a role: the peer, the IPv4 address the lower role listens on, in
    a keyed run the keys of the edge's two directions (``send_key``: this role to the peer;
    ``receive_key``: the peer to this role), never shown in a repr, and the port the lower
    role listens on when it was fixed at compile time (``port``; None: an ephemeral port,
    announced on stdout and relayed by the launcher, docs/launch.md)."""

    peer: int
    address: str = DEFAULT_ADDRESS
    send_key: bytes | None = field(default=None, repr=False)
    receive_key: bytes | None = field(default=None, repr=False)
    port: int | None = None

    def __post_init__(self) -> None:
        if self.port is not None and not int_in(self.port, MIN_FIXED_PORT, MAX_FIXED_PORT):
            raise RoleDescriptionInvalid(
                f"edges[peer={self.peer}].port must be an int in "
                f"{MIN_FIXED_PORT}..{MAX_FIXED_PORT} or absent, got {self.port!r}"
            )
        try:
            ipaddress.IPv4Address(self.address)
        except ValueError as error:
            raise RoleDescriptionInvalid(
                f"edges[peer={self.peer}].address must be an IPv4 address, got {self.address!r}"
            ) from error
        if (self.send_key is None) != (self.receive_key is None):
            raise RoleDescriptionInvalid(
                f"edges[peer={self.peer}]: a keyed edge has both keys, send and receive"
            )
        for name, key in (("send", self.send_key), ("receive", self.receive_key)):
            if key is not None and (not isinstance(key, bytes) or len(key) != KEY_SIZE):
                raise RoleDescriptionInvalid(
                    f"edges[peer={self.peer}].keys.{name} must be {KEY_SIZE} bytes"
                )

    @property
    def keyed(self) -> bool:
        return self.send_key is not None


def _int(data: Mapping[str, object], name: str, low: int = 0, label: str = "") -> int:
    value = data.get(name)
    if not int_in(value, low):
        raise RoleDescriptionInvalid(f"{label or name} must be an int >= {low}, got {value!r}")
    return value


@final
@dataclass(frozen=True, slots=True)
class RoleDescription:
    """Everything one participant needs, and nothing it should learn at run time.

    Raises:
        RoleDescriptionInvalid: the role is outside ``0..participants-1``, edges are not
            ascending, repeat a peer, name the role itself or a role outside the run, or name
            more than one lower peer (edges are those of a participant tree); the integrity or
            payload digest is unknown; a keyed description has an edge without keys, or an
            unkeyed one an edge with keys.
    """

    role: int
    participants: int
    identity: RunIdentity
    edges: tuple[Edge, ...]
    budgets: Budgets = DEFAULT_BUDGETS
    report: str | None = None
    integrity: str = "sha256"
    payload_digest: str = "sha256"
    transport: str = "auto"

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise RoleDescriptionInvalid(
                f"transport must be one of {', '.join(TRANSPORTS)}, got {self.transport!r}"
            )
        if self.integrity not in INTEGRITIES:
            raise RoleDescriptionInvalid(
                f"integrity must be one of {', '.join(INTEGRITIES)}, got {self.integrity!r}"
            )
        if self.payload_digest not in PAYLOAD_DIGESTS:
            raise RoleDescriptionInvalid(
                f"payload_digest must be one of {', '.join(PAYLOAD_DIGESTS)}, "
                f"got {self.payload_digest!r}"
            )
        for edge in self.edges:
            if edge.keyed != self.keyed:
                raise RoleDescriptionInvalid(
                    f"edges[peer={edge.peer}]: "
                    + (
                        "a keyed run's edge must carry its keys"
                        if self.keyed
                        else f"an edge of a run with integrity {self.integrity!r} carries no keys"
                    )
                )
        if not 0 <= self.role < self.participants:
            raise RoleDescriptionInvalid(
                f"role must be in 0..{self.participants - 1}, got {self.role}"
            )
        peers = [edge.peer for edge in self.edges]
        if peers != sorted(set(peers)):
            raise RoleDescriptionInvalid(f"edges must name distinct peers ascending, got {peers}")
        for peer in peers:
            if peer == self.role or not 0 <= peer < self.participants:
                raise RoleDescriptionInvalid(
                    f"edges: peer {peer} is not another role of 0..{self.participants - 1}"
                )
        if sum(peer < self.role for peer in peers) > 1:
            raise RoleDescriptionInvalid(
                f"edges: role {self.role} has more than one lower peer; edges are those of a "
                "participant tree, where the parent is the only lower peer"
            )

    @property
    def keyed(self) -> bool:
        """Whether the role's frames are keyed (layout 3): integrity ``"hmac-sha256"``."""
        return self.integrity == KEYED_INTEGRITY

    @property
    def lower(self) -> tuple[Edge, ...]:
        """Edges to lower roles: this role connects to them, in edge order."""
        return tuple(edge for edge in self.edges if edge.peer < self.role)

    @property
    def higher(self) -> tuple[Edge, ...]:
        """Edges to higher roles: this role listens for them, in edge order."""
        return tuple(edge for edge in self.edges if edge.peer > self.role)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def to_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "role": self.role,
            "participants": self.participants,
            "identity": {
                "learner": self.identity.learner.hex(),
                "contract": self.identity.contract.hex(),
                "membership": self.identity.membership.hex(),
            },
            "integrity": self.integrity,
            "payload_digest": self.payload_digest,
            "transport": self.transport,
            "edges": [_edge_dict(e) for e in self.edges],
            "budgets": self.budgets.to_dict(),
            "report": self.report,
        }

    @classmethod
    def from_json(cls, text: str) -> RoleDescription:
        """
        Raises:
            RoleDescriptionInvalid: not JSON, another format, or a field missing or wrong;
                the message names the field.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise RoleDescriptionInvalid(f"not JSON: {error}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> RoleDescription:
        """
        Raises:
            RoleDescriptionInvalid: another format, or a field missing or wrong.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise RoleDescriptionInvalid(f"format must be {FORMAT!r}, got {found!r}")
        identity = data.get("identity")
        if not isinstance(identity, dict):
            raise RoleDescriptionInvalid("identity must be a table of three hex digests")
        try:
            parts = {k: bytes.fromhex(identity[k]) for k in ("learner", "contract", "membership")}
            run = RunIdentity(**parts)
        except (KeyError, TypeError, ValueError) as error:
            raise RoleDescriptionInvalid(f"identity: {error}") from None
        edges = data.get("edges")
        if not isinstance(edges, list):
            raise RoleDescriptionInvalid("edges must be a list of {peer, address}")
        try:
            edge_values = tuple(_edge_from(e) for e in edges)
        except AttributeError as error:
            raise RoleDescriptionInvalid("edges must be a list of {peer, address}") from error
        report = data.get("report")
        if report is not None and not isinstance(report, str):
            raise RoleDescriptionInvalid(f"report must be a path or null, got {report!r}")
        return cls(
            role=_int(data, "role"),
            participants=_int(data, "participants", 1),
            identity=run,
            edges=edge_values,
            budgets=Budgets.from_dict(data.get("budgets", {})),
            report=report,
            integrity=_text(data, "integrity"),
            payload_digest=_text(data, "payload_digest"),
            transport=_text(data, "transport", "auto"),
        )


def _text(data: Mapping[str, object], name: str, default: str = "sha256") -> str:
    value = data.get(name, default)
    if not isinstance(value, str):
        raise RoleDescriptionInvalid(f"{name} must be a string, got {value!r}")
    return value


def _edge_dict(edge: Edge) -> dict[str, object]:
    entry: dict[str, object] = {"peer": edge.peer, "address": edge.address}
    if edge.port is not None:
        entry["port"] = edge.port
    if edge.send_key is not None and edge.receive_key is not None:
        entry["keys"] = {"send": edge.send_key.hex(), "receive": edge.receive_key.hex()}
    return entry


def _edge_from(entry: Mapping[str, object]) -> Edge:
    peer = _int(entry, "peer", label="edges[].peer")
    address = entry.get("address", DEFAULT_ADDRESS)
    port = entry.get("port")
    keys = entry.get("keys")
    if keys is None:
        return Edge(peer, address, port=port)  # type: ignore[arg-type]  # Edge checks it
    if not isinstance(keys, dict) or set(keys) != {"send", "receive"}:
        raise RoleDescriptionInvalid(
            f"edges[peer={peer}].keys must be a table of two hex keys, send and receive"
        )
    found: list[bytes] = []
    for name in ("send", "receive"):
        text = keys[name]
        try:
            # Exactly 64 lowercase hex digits: bytes.fromhex alone takes spaces and newlines.
            if not isinstance(text, str) or len(text) != 2 * KEY_SIZE or not set(text) <= _HEX:
                raise ValueError
            found.append(bytes.fromhex(text))
        except ValueError:
            raise RoleDescriptionInvalid(
                f"edges[peer={peer}].keys.{name} must be {KEY_SIZE} bytes in lowercase hex"
            ) from None
    return Edge(peer, address, found[0], found[1], port)  # type: ignore[arg-type]  # Edge checks it
