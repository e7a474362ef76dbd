"""The key schedule: one run secret per compile, one key per edge and direction.

``alpha compile`` draws a fresh run secret from the operating system
(:func:`draw_run_secret`, never from a seed) and derives from it, with HKDF-SHA256 (RFC 5869,
written here on :mod:`hmac` and :mod:`hashlib`), one key per edge and direction
(:func:`edge_key`), bound to the run identity, the sender and the receiver; a role's artifact
holds only the keys of its own edges (:func:`keys_for_role`), which key its frames (layout 3,
``alpha.wire.frame.keyed_seal``). ``docs/security.md`` gives the layout byte for byte and what
the keys protect.

Pure code over bytes: the secret's one source is :mod:`secrets`, no socket, trio or os import.
"""

from __future__ import annotations

import hmac
import secrets
import struct
from collections.abc import Iterable
from typing import Final, TypeAlias

from alpha.checked import int_in
from alpha.core.identity import DIGEST_SIZE, IDENTITY_SIZE
from alpha.core.membership import MAX_ROLE, ROLE_WIDTH
from alpha.core.sealing import KEY_SIZE
from alpha.errors import KeyScheduleInvalid

__all__ = [
    "EDGE_KEY_DOMAIN",
    "EDGE_KEY_INFO_SIZE",
    "EDGE_KEY_SIZE",
    "HKDF_MAX_LENGTH",
    "RUN_SECRET_SALT",
    "RUN_SECRET_SIZE",
    "EdgeKeys",
    "draw_run_secret",
    "edge_key",
    "edge_key_info",
    "hkdf",
    "hkdf_expand",
    "hkdf_extract",
    "keys_for_role",
]

# --- sizes ------------------------------------------------------------------------------------

#: Bytes of a run secret: 256 bits, SHA-256's own width, so HKDF's extract step loses nothing
#: and guessing the secret is no easier than finding a SHA-256 preimage.
RUN_SECRET_SIZE: Final = 32
#: Bytes of an edge key: one HMAC-SHA256 output (HKDF's first block, ``T(1)``), the key size
#: HMAC-SHA256 is designed for.
EDGE_KEY_SIZE: Final = KEY_SIZE
#: RFC 5869's bound on one expand: at most 255 blocks of the hash's output (``L <= 255*HashLen``),
#: since the block counter is one octet.
HKDF_MAX_LENGTH: Final = 255 * DIGEST_SIZE

# --- domain labels ----------------------------------------------------------------------------

#: HKDF's extract salt (ASCII, fixed): the pseudorandom key of an Alpha run secret can never be
#: the one another protocol extracts from the same bytes with its own salt; ``v1`` names the
#: schedule.
RUN_SECRET_SALT: Final = b"alpha/run-secret/v1"
#: Starts every edge key's ``info`` (ASCII, no length prefix: every field after it has a fixed
#: width, so the info is read by offset): a key for an edge is never one derived for another
#: purpose from the same secret.
EDGE_KEY_DOMAIN: Final = b"alpha/edge-key/v1"

# Sender and receiver are unsigned big-endian integers of the role width (32 bits), as roles
# travel in frames: fixed width, so (1, 23) and (12, 3) never give the same info.
_ROLE: Final = struct.Struct(">I")

#: Bytes of an edge key's info: the domain, the 96-byte identity, the sender, the receiver.
EDGE_KEY_INFO_SIZE: Final = len(EDGE_KEY_DOMAIN) + IDENTITY_SIZE + 2 * _ROLE.size

# HKDF-Expand's block counter is one octet, starting at 1.
_FIRST_BLOCK: Final = b"\x01"

#: A role's keys: ``(sender, receiver)`` to the key of that edge in that direction.
EdgeKeys: TypeAlias = dict[tuple[int, int], bytes]


# --- the secret -------------------------------------------------------------------------------


def draw_run_secret() -> bytes:
    """A fresh run secret of ``RUN_SECRET_SIZE`` bytes from the operating system's CSPRNG.

    Never from a seed: two compiles of one plan get different secrets, so a participant of one
    is a stranger to the other. The secret is written to no ``run.json``, log or artifact.

    Raises:
        Nothing.
    """
    return secrets.token_bytes(RUN_SECRET_SIZE)


# --- HKDF-SHA256 (RFC 5869) -------------------------------------------------------------------


def _bytes(value: object, what: str) -> bytes:
    # bytes only: a bytearray could change after it was checked; a str is no key material.
    if not isinstance(value, bytes):
        raise KeyScheduleInvalid(f"{what} must be bytes, not {type(value).__name__}")
    return value


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    """RFC 5869 HKDF-Extract with SHA-256: ``PRK = HMAC-SHA256(salt, IKM)``, 32 bytes.

    An empty ``salt`` is RFC 5869's "not provided": HMAC pads a key with zeros to its block, so
    it is the same as ``HashLen`` zero octets.

    Raises:
        KeyScheduleInvalid: ``salt`` or ``ikm`` is not ``bytes``.
    """
    return hmac.digest(
        _bytes(salt, "an HKDF salt"), _bytes(ikm, "HKDF input keying material"), "sha256"
    )


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-Expand with SHA-256: the first ``length`` bytes of ``T(1) ‖ T(2) ‖ …``,
    where ``T(i) = HMAC-SHA256(PRK, T(i-1) ‖ info ‖ i)`` and ``T(0)`` is empty.

    Raises:
        KeyScheduleInvalid: ``prk`` or ``info`` is not ``bytes``; ``prk`` is shorter than
            ``DIGEST_SIZE`` (32, RFC 5869's "at least HashLen octets"); ``length`` is not an
            int in ``0..HKDF_MAX_LENGTH`` (8160).
    """
    key = _bytes(prk, "an HKDF pseudorandom key")
    tail = _bytes(info, "an HKDF info")
    if len(key) < DIGEST_SIZE:
        raise KeyScheduleInvalid(
            f"an HKDF pseudorandom key must be at least {DIGEST_SIZE} bytes, got {len(key)}"
        )
    if not int_in(length, 0, HKDF_MAX_LENGTH):
        raise KeyScheduleInvalid(
            f"an HKDF output length must be an int in 0..{HKDF_MAX_LENGTH}, got {length!r}"
        )
    blocks: list[bytes] = []
    previous = b""
    for counter in range(1, -(-length // DIGEST_SIZE) + 1):
        previous = hmac.digest(key, previous + tail + bytes((counter,)), "sha256")
        blocks.append(previous)
    return b"".join(blocks)[:length]


def hkdf(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF with SHA-256: extract, then expand to ``length`` bytes.

    Raises:
        KeyScheduleInvalid: as :func:`hkdf_extract` and :func:`hkdf_expand`.
    """
    return hkdf_expand(hkdf_extract(salt, ikm), info, length)


# --- edge keys --------------------------------------------------------------------------------


def _role(value: object, what: str) -> int:
    if not int_in(value, 0, MAX_ROLE):
        raise KeyScheduleInvalid(
            f"{what} must be an int in 0..{MAX_ROLE} (a {ROLE_WIDTH}-bit role), got {value!r}"
        )
    return value


def _prk(secret: bytes) -> bytes:
    """The run secret's pseudorandom key, after checking the secret."""
    checked = _bytes(secret, "a run secret")
    if len(checked) != RUN_SECRET_SIZE:
        raise KeyScheduleInvalid(
            f"a run secret must be {RUN_SECRET_SIZE} bytes, got {len(checked)}"
        )
    return hkdf_extract(RUN_SECRET_SALT, checked)


def _identity(identity: bytes) -> bytes:
    checked = _bytes(identity, "a run identity")
    if len(checked) != IDENTITY_SIZE:
        raise KeyScheduleInvalid(
            f"a run identity must be its {IDENTITY_SIZE}-byte wire form "
            f"(RunIdentity.encode()), got {len(checked)} bytes"
        )
    return checked


def edge_key_info(identity: bytes, sender: int, receiver: int) -> bytes:
    """The HKDF info of the key from ``sender`` to ``receiver``: ``EDGE_KEY_DOMAIN``, the
    identity's 96 bytes, the sender and the receiver as 32-bit big-endian integers,
    ``EDGE_KEY_INFO_SIZE`` (121) bytes in all.

    Raises:
        KeyScheduleInvalid: ``identity`` is not 96 bytes; a role is not an int in
            ``0..2**32-1``; ``sender == receiver`` (no role has an edge to itself).
    """
    checked = _identity(identity)
    source = _role(sender, "a sender")
    target = _role(receiver, "a receiver")
    if source == target:
        raise KeyScheduleInvalid(f"an edge joins two roles; role {source} has none to itself")
    return EDGE_KEY_DOMAIN + checked + _ROLE.pack(source) + _ROLE.pack(target)


def _derive(prk: bytes, info: bytes) -> bytes:
    # HKDF-Expand to one block: T(1) = HMAC-SHA256(PRK, info ‖ 0x01), inlined (hkdf_expand
    # computes the same, checked by the tests) since a role derives a key per edge end.
    return hmac.digest(prk, info + _FIRST_BLOCK, "sha256")


def edge_key(secret: bytes, identity: bytes, sender: int, receiver: int) -> bytes:
    """The key of the edge from ``sender`` to ``receiver`` in that direction, 32 bytes:
    ``HKDF-SHA256(IKM = secret, salt = RUN_SECRET_SALT, info = edge_key_info(identity,
    sender, receiver), L = 32)``.

    ``identity`` is the run identity's wire form (``RunIdentity.encode()``, 96 bytes). The key
    from 1 to 2 is not the key from 2 to 1, and neither is any other edge's, any other
    identity's or any other secret's (but with the odds of a SHA-256 collision).

    Raises:
        KeyScheduleInvalid: ``secret`` is not exactly ``RUN_SECRET_SIZE`` (32) bytes; as
            :func:`edge_key_info`.
    """
    prk = _prk(secret)
    return _derive(prk, edge_key_info(identity, sender, receiver))


def keys_for_role(
    secret: bytes, identity: bytes, role: int, lower: Iterable[int], higher: Iterable[int]
) -> EdgeKeys:
    """The keys of ``role``'s own edges, both directions, and no other: for each peer of
    ``lower`` (below the role: its parent in a tree) and of ``higher`` (above it: its
    children), ``(role, peer)`` and ``(peer, role)``, each mapped to its :func:`edge_key`.

    Ordered by peer, lower first, sending key before receiving key. A role with no edge (a
    one-role run) has no key.

    Raises:
        KeyScheduleInvalid: ``secret`` is not 32 bytes, ``identity`` not 96; ``role`` or a peer
            is not an int in ``0..2**32-1`` (a negative one included); a peer of ``lower`` is
            not below ``role`` or one of ``higher`` not above it; a peer is named twice.
    """
    prk = _prk(secret)
    checked = _identity(identity)
    own = _role(role, "a role")
    below = tuple(_role(peer, "a lower peer") for peer in lower)
    above = tuple(_role(peer, "a higher peer") for peer in higher)
    for peer in below:
        if peer >= own:
            raise KeyScheduleInvalid(f"lower peer {peer} of role {own} is not below it")
    for peer in above:
        if peer <= own:
            raise KeyScheduleInvalid(f"higher peer {peer} of role {own} is not above it")
    peers = sorted(below + above)
    if len(set(peers)) != len(peers):
        raise KeyScheduleInvalid(f"role {own} names a peer twice: {peers}")
    keys: EdgeKeys = {}
    for peer in peers:
        for sender, receiver in ((own, peer), (peer, own)):
            keys[sender, receiver] = _derive(prk, edge_key_info(checked, sender, receiver))
    return keys
