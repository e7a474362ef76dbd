"""How a run's frames are sealed: the choices a plan makes in ``[contract]`` (docs/security.md).

Names only, with no import of Alpha's: the contract digest binds them (``alpha.core.digests``),
the frame layout applies them (``alpha.wire.frame``), and a role description carries them
(``alpha.schedule.role``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["INTEGRITIES", "KEYED_INTEGRITY", "KEY_SIZE", "PAYLOAD_DIGESTS"]

#: How a frame's trailer is made: ``"hmac-sha256"``, an HMAC-SHA256 under the key of the
#: frame's edge and direction (frame layout 3, the default), or ``"sha256"``, a plain SHA-256
#: that detects corruption but that anyone on the path can recompute (layout 2).
INTEGRITIES: Final = ("hmac-sha256", "sha256")

#: The keyed integrity, the default: every frame authenticates its sender.
KEYED_INTEGRITY: Final = "hmac-sha256"

#: The digest ``D`` of a frame's payload that its trailer binds: SHA-256 (the default), or
#: BLAKE3 (the ``blake3`` package), faster on large payloads. Both are 32 bytes.
PAYLOAD_DIGESTS: Final = ("sha256", "blake3")

#: Bytes of one edge and direction's key: one HKDF-SHA256 output block, the key size
#: HMAC-SHA256 is designed for.
KEY_SIZE: Final = 32
