"""The run identity as a value and on the wire: :class:`RunIdentity` and its 96-byte form.

Three SHA-256 parts, in the order of :data:`IDENTITY_PARTS`, back to back: the learner, the
contract and the membership digest (computed in :mod:`alpha.core.digests`). Every frame carries
them, so a peer built for another run is refused on its first frame, and
:meth:`RunIdentity.differing_parts` says which part disagrees. ``docs/identity.md`` gives the
layout.

This module imports :mod:`alpha.errors` only: the frame codec (``alpha.wire``) needs the value
and its 96 bytes, not the digests (numpy, the topology and the membership) that make it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from alpha.errors import IdentityPartInvalid

__all__ = ["DIGEST_SIZE", "IDENTITY_PARTS", "IDENTITY_PART_SIZE", "IDENTITY_SIZE", "RunIdentity"]

#: A SHA-256 digest is 32 bytes: the one width of every digest Alpha writes (a participant
#: group's, each identity part, a frame's payload digest, a commit record's subtree digests).
DIGEST_SIZE: Final = 32

# --- the identity on the wire ---------------------------------------------------------------

#: Each part is a SHA-256 digest.
IDENTITY_PART_SIZE: Final = DIGEST_SIZE
#: The names of the parts, in the order they are written on the wire.
IDENTITY_PARTS: Final = ("learner", "contract", "membership")
#: Bytes of an encoded identity: the three parts back to back, nothing else, so a
#: frame codec can slice it at a fixed offset.
IDENTITY_SIZE: Final = IDENTITY_PART_SIZE * len(IDENTITY_PARTS)

#: Hex digits of each part that :meth:`RunIdentity.short` shows: 32 bits per part
#: tell two identities apart in a log line at a glance; the frame compares all 256.
_SHORT_HEX_DIGITS: Final = 8


@final
@dataclass(frozen=True, slots=True)
class RunIdentity:
    """The three digests that bind a run; every frame carries them.

    Construct it from ``learner_digest``, ``contract_digest`` and ``membership_digest``
    (:mod:`alpha.core.digests`), or read it from a frame with :meth:`decode`.
    Equality and hashing are by the three parts.

    Raises:
        TypeError: a part is not ``bytes``.
        IdentityPartInvalid: a part is not exactly ``IDENTITY_PART_SIZE`` (32) bytes; the
            message names the part. Parts are checked in wire order.
    """

    learner: bytes
    contract: bytes
    membership: bytes

    def __post_init__(self) -> None:
        for name in IDENTITY_PARTS:
            part = getattr(self, name)
            # bytes only: a bytearray could change after the identity was checked and hashed.
            if not isinstance(part, bytes):
                raise TypeError(
                    f"the {name} part of a run identity must be bytes, not {type(part).__name__}"
                )
            if len(part) != IDENTITY_PART_SIZE:
                raise IdentityPartInvalid(
                    f"the {name} part of a run identity must be {IDENTITY_PART_SIZE} bytes, "
                    f"got {len(part)}"
                )

    def _parts(self) -> tuple[bytes, bytes, bytes]:
        """The parts in wire order (the order of ``IDENTITY_PARTS``)."""
        return (self.learner, self.contract, self.membership)

    def encode(self) -> bytes:
        """The wire form: learner, contract, membership back to back, ``IDENTITY_SIZE`` bytes.

        Raises:
            Nothing: a constructed identity always encodes.
        """
        return b"".join(self._parts())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> RunIdentity:
        """Read an identity from exactly ``IDENTITY_SIZE`` bytes (the inverse of :meth:`encode`).

        Raises:
            TypeError: ``data`` is not bytes-like.
            IdentityPartInvalid: ``data`` is not exactly ``IDENTITY_SIZE`` (96) bytes long.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"a run identity decodes from bytes, not {type(data).__name__}")
        raw = bytes(data)  # a copy, so the identity does not follow a buffer reused for frames
        if len(raw) != IDENTITY_SIZE:
            raise IdentityPartInvalid(f"a run identity is {IDENTITY_SIZE} bytes, got {len(raw)}")
        size = IDENTITY_PART_SIZE
        return cls(raw[:size], raw[size : 2 * size], raw[2 * size :])

    def differing_parts(self, other: RunIdentity) -> tuple[str, ...]:
        """The names of the parts where ``self`` and ``other`` differ, in wire order.

        Empty exactly when the identities are equal.

        Raises:
            TypeError: ``other`` is not a :class:`RunIdentity`.
        """
        if not isinstance(other, RunIdentity):
            raise TypeError(
                f"a run identity compares with a run identity, not {type(other).__name__}"
            )
        return tuple(
            name
            for name, mine, theirs in zip(
                IDENTITY_PARTS, self._parts(), other._parts(), strict=True
            )
            if mine != theirs
        )

    def short(self) -> str:
        """A log form: each part's name and its first 8 hex digits, in wire order.

        For example ``learner 1a2b3c4d contract 5e6f7a8b membership 9c0d1e2f``.

        Raises:
            Nothing.
        """
        return " ".join(
            f"{name} {part.hex()[:_SHORT_HEX_DIGITS]}"
            for name, part in zip(IDENTITY_PARTS, self._parts(), strict=True)
        )
