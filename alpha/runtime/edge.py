"""One role's end of one edge: the one place that makes the specs of the edge's frames.

An edge joins two roles of the participant tree and each of them holds one end. The lower
role listens and is the parent; the higher connects and is the child (``docs/failure.md``).
An :class:`EdgeEnd` knows the peer, the run identity and that direction, and makes every
frame spec of the edge, each the mirror of the spec the peer's end makes for it:

- the scheduled transfers (``DATA``, ``CHOICE``): one slot per kind, slot number and
  direction, made on first use and kept for the life of the edge, so that its version
  counter counts every frame of that transfer;
- the hello, the first frame each way on a connection: a new slot for every connection, since
  a connection refused on its hello (a stranger's) must leave the next one a fresh start;
- the completion: ``END`` and ``COMMIT`` from parent to child, ``DONE`` from child to parent,
  one slot each;
- the ``ABORT``: a new slot each time (version 0; an edge carries at most one each way).

Every slot of an end seals its frames alike: the end's :class:`~alpha.wire.frame.Sealing` for
its direction, that is the run's payload digest and, in a keyed run, the key of this role to
the peer (``sending``) or the peer to this role (``receiving``).

Asking for a frame the edge does not carry that way is a bug of this role, never a peer's
fault, and is refused with :class:`~alpha.errors.FrameSpecInvalid` before anything is made.
Pure: no trio, no socket; :mod:`alpha.runtime.channel` moves the bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from alpha.core.identity import RunIdentity
from alpha.errors import FrameSpecInvalid
from alpha.schedule.role import Edge, RoleDescription
from alpha.wire.frame import (
    COMPLETION_SLOT,
    KINDS,
    UNKEYED,
    FrameKind,
    FrameSpec,
    Sealing,
    abort_spec,
    control_spec,
)
from alpha.wire.receive import ReceiveSlot
from alpha.wire.send import SendSlot

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "SCHEDULED",
    "EdgeEnd",
    "edge_end",
    "hello_spec",
]

SCHEDULED: Final = frozenset(kind for kind, rule in KINDS.items() if rule.slot is None)
"""The kinds a role's schedule moves, each transfer in a slot of its own (``KINDS``: DATA and
CHOICE); every other kind is a control frame of the edge, with the slot ``KINDS`` fixes."""

# A completion frame's payload, from the one table: nothing (END), or a digest (DONE: the
# subtree's reports; COMMIT: the commit record).
_COMPLETION_EXTENT: Final = {
    kind: KINDS[kind].extent for kind in (FrameKind.END, FrameKind.DONE, FrameKind.COMMIT)
}

# Who sends each completion frame: END and COMMIT travel down the tree, DONE up.
_FROM_PARENT: Final = frozenset({FrameKind.END, FrameKind.COMMIT})


def hello_spec(identity: RunIdentity, sender: int, receiver: int) -> FrameSpec:
    """The hello frame from ``sender`` to ``receiver``: no payload, everything in the header."""
    return control_spec(identity, FrameKind.HELLO, sender, receiver)


def edge_end(description: RoleDescription, edge: Edge) -> EdgeEnd:
    """``description``'s end of its edge ``edge``, sealed as the description says: its payload
    digest and, in a keyed run, the edge's keys (this role to the peer, the peer to this
    role).

    Raises:
        FrameSpecInvalid: as :class:`EdgeEnd`.
    """
    digest = description.payload_digest
    return EdgeEnd(
        description.role,
        edge.peer,
        description.identity,
        outgoing=Sealing(edge.send_key, digest),
        incoming=Sealing(edge.receive_key, digest),
    )


@final
class EdgeEnd:
    """This role's end of its edge to ``peer``: the specs and slots of every frame on it.

    ``outgoing`` seals the frames this role sends the peer and ``incoming`` the frames it
    accepts from the peer (:class:`~alpha.wire.frame.Sealing`: in a keyed run each holds the
    key of its direction; both name the run's payload digest).

    Raises:
        FrameSpecInvalid: ``role`` or ``peer`` is not a role, they are the same role,
            ``identity`` is not a run identity, or the two sealings differ in layout or
            payload digest.
    """

    __slots__ = ("_receiving", "_sending", "identity", "incoming", "outgoing", "peer", "role")

    def __init__(
        self,
        role: int,
        peer: int,
        identity: RunIdentity,
        *,
        outgoing: Sealing = UNKEYED,
        incoming: Sealing = UNKEYED,
    ) -> None:
        hello_spec(identity, role, peer)  # checks every field before anything is kept
        if (outgoing.layout, outgoing.digest) != (incoming.layout, incoming.digest):
            raise FrameSpecInvalid(
                f"role {role}, edge to {peer}: both directions of an edge are sealed alike, "
                f"not {outgoing!r} one way and {incoming!r} the other"
            )
        self.role = role
        self.peer = peer
        self.identity = identity
        self.outgoing = outgoing
        self.incoming = incoming
        self._sending: dict[tuple[FrameKind, int], SendSlot] = {}
        self._receiving: dict[tuple[FrameKind, int], ReceiveSlot] = {}

    def __repr__(self) -> str:
        return f"EdgeEnd(role={self.role}, peer={self.peer})"

    @property
    def digest(self) -> str:
        """The payload digest ``D`` the edge's trailers bind (``"sha256"``, ``"blake3"``)."""
        return self.outgoing.digest

    @property
    def layout(self) -> int:
        """The frame layout of the edge's frames: 3 keyed, 2 not."""
        return self.outgoing.layout

    def _out(self, spec: FrameSpec) -> SendSlot:
        sealing = self.outgoing
        return SendSlot(spec, key=sealing.key, digest=sealing.digest)

    def _in(self, spec: FrameSpec, buffer: Buffer | None = None) -> ReceiveSlot:
        sealing = self.incoming
        return ReceiveSlot(spec, buffer=buffer, key=sealing.key, digest=sealing.digest)

    @property
    def listens(self) -> bool:
        """Whether this role listens for the peer's connection: it is the lower role."""
        return self.role < self.peer

    @property
    def peer_is_parent(self) -> bool:
        """Whether the peer is this role's parent in the participant tree (the lower role)."""
        return self.peer < self.role

    @property
    def slots(self) -> int:
        """How many slots this end has made and keeps (scheduled and completion, both ways)."""
        return len(self._sending) + len(self._receiving)

    # --- scheduled transfers ----------------------------------------------------------------

    def sending(self, kind: FrameKind, slot: int, extent: int) -> SendSlot:
        """The slot that sends this transfer's frames to the peer: made the first time, the
        same object after.

        Raises:
            FrameSpecInvalid: ``kind`` is not a scheduled kind, a field is out of range, or
                the slot was made before with another extent.
        """
        self._check_scheduled(kind, outgoing=True)
        return self._send_slot(kind, slot, extent)

    def receiving(
        self, kind: FrameKind, slot: int, extent: int, buffer: Buffer | None = None
    ) -> ReceiveSlot:
        """The slot that receives this transfer's frames from the peer, into ``buffer`` (lent
        when the slot is made; allocated by the slot when None): made the first time, the same
        object after.

        Raises:
            FrameSpecInvalid: ``kind`` is not a scheduled kind, a field is out of range, the
                buffer does not fit, or the slot was made before with another extent.
        """
        self._check_scheduled(kind, outgoing=False)
        return self._receive_slot(kind, slot, extent, buffer)

    def _send_slot(self, kind: FrameKind, slot: int, extent: int) -> SendSlot:
        found = self._sending.get((kind, slot))
        if found is None:
            found = self._out(FrameSpec(self.identity, kind, self.role, self.peer, slot, extent))
            self._sending[(kind, slot)] = found
        else:
            self._check_extent(found.spec, extent, outgoing=True)
        return found

    def _receive_slot(
        self, kind: FrameKind, slot: int, extent: int, buffer: Buffer | None
    ) -> ReceiveSlot:
        found = self._receiving.get((kind, slot))
        if found is None:
            spec = FrameSpec(self.identity, kind, self.peer, self.role, slot, extent)
            found = self._in(spec, buffer)
            self._receiving[(kind, slot)] = found
        else:
            self._check_extent(found.spec, extent, outgoing=False)
        return found

    # --- control frames ---------------------------------------------------------------------

    def hello_out(self) -> SendSlot:
        """A new slot for this role's hello to the peer, for one connection."""
        return self._out(hello_spec(self.identity, self.role, self.peer))

    def hello_in(self) -> ReceiveSlot:
        """A new slot for the peer's hello to this role, for one connection."""
        return self._in(hello_spec(self.identity, self.peer, self.role))

    def completion_out(self, kind: FrameKind) -> SendSlot:
        """The slot of this role's END or COMMIT to its child, or DONE to its parent.

        Raises:
            FrameSpecInvalid: ``kind`` is not a completion frame this role sends the peer.
        """
        self._check_completion(kind, outgoing=True)
        extent = _COMPLETION_EXTENT[kind]
        assert extent is not None  # KINDS fixes every completion frame's extent
        return self._send_slot(kind, COMPLETION_SLOT, extent)

    def completion_in(self, kind: FrameKind) -> ReceiveSlot:
        """The slot of the parent's END or COMMIT to this role, or a child's DONE.

        Raises:
            FrameSpecInvalid: ``kind`` is not a completion frame the peer sends this role.
        """
        self._check_completion(kind, outgoing=False)
        extent = _COMPLETION_EXTENT[kind]
        assert extent is not None  # KINDS fixes every completion frame's extent
        return self._receive_slot(kind, COMPLETION_SLOT, extent, None)

    def abort_out(self) -> SendSlot:
        """A new slot for an ABORT from this role to the peer."""
        return self._out(abort_spec(self.identity, self.role, self.peer))

    def abort_in(self) -> ReceiveSlot:
        """A new slot for an ABORT from the peer to this role."""
        return self._in(abort_spec(self.identity, self.peer, self.role))

    # --- refusals ---------------------------------------------------------------------------

    def _check_scheduled(self, kind: FrameKind, *, outgoing: bool) -> None:
        if kind not in SCHEDULED:
            raise FrameSpecInvalid(
                f"{self._edge(outgoing)}: {_name(kind)} is a control frame of the edge, not a "
                "scheduled transfer; its own method makes it"
            )

    def _check_extent(self, spec: FrameSpec, extent: int, *, outgoing: bool) -> None:
        if spec.extent != extent:
            raise FrameSpecInvalid(
                f"{self._edge(outgoing)}: slot {spec.slot} ({spec.kind.name}) carries "
                f"{spec.extent} bytes, asked again for {extent!r}"
            )

    def _check_completion(self, kind: FrameKind, *, outgoing: bool) -> None:
        if kind not in _COMPLETION_EXTENT:
            raise FrameSpecInvalid(
                f"{self._edge(outgoing)}: {_name(kind)} is not a completion frame "
                "(END, DONE or COMMIT)"
            )
        # The parent sends END and COMMIT; the child sends DONE.
        sender_is_parent = self.peer_is_parent != outgoing
        if (kind in _FROM_PARENT) != sender_is_parent:
            sender, receiver = (self.role, self.peer) if outgoing else (self.peer, self.role)
            down, what = (
                ("parent to child", "parent")
                if kind in _FROM_PARENT
                else ("child to parent", "child")
            )
            raise FrameSpecInvalid(
                f"{self._edge(outgoing)}: {_name(kind)} travels from {down}, and role {sender} "
                f"is not the {what} of role {receiver}"
            )

    def _edge(self, outgoing: bool) -> str:
        sender, receiver = (self.role, self.peer) if outgoing else (self.peer, self.role)
        return f"role {self.role}, edge {sender}->{receiver}"


def _name(kind: object) -> str:
    return kind.name if isinstance(kind, FrameKind) else repr(kind)
