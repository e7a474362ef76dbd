"""The run identity the tests' frames and channels carry.

Any three 32-byte parts do: nothing pins bytes that depend on these values, only that both ends
of a frame or a channel carry the same identity.
"""

from __future__ import annotations

from alpha.core.identity import RunIdentity

IDENTITY = RunIdentity(learner=b"l" * 32, contract=b"c" * 32, membership=b"m" * 32)
