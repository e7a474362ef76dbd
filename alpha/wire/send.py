"""The sending side of a frame: a send slot's counter, and what a sender checks.

:meth:`SendSlot.prepare` returns the header, a view of the caller's payload and the trailer
(:class:`Outgoing`), so the payload is never copied; :meth:`SendSlot.begin` lets header and
payload leave before the trailer is known (:class:`Unsealed`). What a sender refuses is its own
program's misuse, never a peer's bytes: a payload that does not fit the spec
(``FrameSpecInvalid``) and a spent counter (``VersionOverflow``), both in the ``FrameMisuse``
family of ``alpha.errors``. The layout is :mod:`alpha.wire.frame`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from alpha.errors import FrameSpecInvalid, VersionOverflow
from alpha.wire.frame import (
    MAX_VERSION,
    UNKEYED,
    FrameSpec,
    Sealing,
    _byte_view,
    _check_width,
    sealing_of,
)

if TYPE_CHECKING:
    # collections.abc.Buffer arrives in Python 3.12; the annotation is only for the checker.
    from typing_extensions import Buffer

__all__ = ["Outgoing", "SendSlot", "Unsealed"]


@final
@dataclass(frozen=True, slots=True)
class Outgoing:
    """One frame ready to send, in three pieces so the payload is never copied, and the
    payload's digest, to frame the same bytes again without hashing them."""

    header: bytes
    payload: memoryview
    trailer: bytes
    digest: bytes

    def pieces(self) -> tuple[bytes, memoryview, bytes]:
        return (self.header, self.payload, self.trailer)

    def join(self) -> bytes:
        """The whole frame as one bytes object (a copy: for tests and small frames)."""
        return b"".join(self.pieces())


@final
@dataclass(frozen=True, slots=True)
class Unsealed:
    """A frame whose header and payload may leave before its trailer is known: the payload's
    digest can be computed while they are sent (:meth:`SendSlot.begin`)."""

    header: bytes
    payload: memoryview
    sealing: Sealing = UNKEYED

    def seal(self, digest: bytes) -> Outgoing:
        """The frame, with the trailer for a payload whose digest ``D`` is ``digest``."""
        return Outgoing(
            self.header, self.payload, self.sealing.trailer(self.header, digest), digest
        )


@final
class SendSlot:
    """The sending end of one scheduled transfer: a spec, a version counter, and how its frames
    are sealed."""

    __slots__ = ("_next_version", "sealing", "spec")

    def __init__(
        self,
        spec: FrameSpec,
        *,
        next_version: int = 0,
        key: bytes | None = None,
        digest: str = "sha256",
    ) -> None:
        """
        Args:
            spec: the transfer this slot sends.
            next_version: the version of the first frame it sends.
            key: the key of the slot's edge and direction (``KEY_SIZE`` bytes): its frames are
                then keyed (layout 3, ``alpha.wire.frame.keyed_seal``). None: layout 2.
            digest: the payload digest ``D`` its trailers bind (``PAYLOAD_DIGESTS``).

        Raises:
            FrameSpecInvalid: ``next_version`` is outside ``0..MAX_VERSION``, ``key`` is not
                ``KEY_SIZE`` bytes, or ``digest`` is not a payload digest.
        """
        _check_width("next_version", next_version, MAX_VERSION)
        self.sealing = sealing_of(key, digest)
        self.spec = spec
        self._next_version = next_version

    @property
    def next_version(self) -> int:
        return self._next_version

    def prepare(self, payload: Buffer, *, digest: bytes | None = None) -> Outgoing:
        """Frame ``payload`` at the next version, then advance the counter.

        Hashes the payload once, unless ``digest`` (its ``D``, from an earlier frame of the same
        bytes) is given; the payload is referenced, not copied, so it must not change
        until the frame is sent.

        Raises:
            FrameSpecInvalid: the payload's length differs from the spec's extent.
            VersionOverflow: the counter stands at ``MAX_VERSION``; it never wraps.
        """
        unsealed = self.begin(payload)
        known = self.sealing.payload_digest(unsealed.payload) if digest is None else digest
        return unsealed.seal(known)

    def begin(self, payload: Buffer) -> Unsealed:
        """The header of the next frame and a view of ``payload``, then advance the counter;
        the trailer follows from the payload's digest (:meth:`Unsealed.seal`).

        Raises:
            FrameSpecInvalid: the payload's length differs from the spec's extent.
            VersionOverflow: the counter stands at ``MAX_VERSION``; it never wraps.
        """
        spec = self.spec
        view = _byte_view(payload)
        if view.nbytes != spec.extent:
            raise FrameSpecInvalid(
                f"slot {spec.slot} on edge {spec.sender}->{spec.receiver} carries "
                f"{spec.extent} bytes, but the payload has {view.nbytes}"
            )
        version = self._next_version
        if version >= MAX_VERSION:
            raise VersionOverflow(
                f"the sending counter stands at its maximum {MAX_VERSION}",
                role=spec.sender,
                peer=spec.receiver,
                slot=spec.slot,
                version=version,
                field="version",
                expected=f"< {MAX_VERSION}",
                received=version,
                edge=(spec.sender, spec.receiver),
            )
        self._next_version = version + 1
        return Unsealed(spec.header(version, layout=self.sealing.layout), view, self.sealing)
