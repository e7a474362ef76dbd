"""The run identity the tests' frames and channels carry.

Any three 32-byte parts do: nothing pins bytes that depend on these values, only that both ends
of a frame or a channel carry the same identity.
"""

from __future__ import annotations

from alpha.core.identity import RunIdentity

IDENTITY = RunIdentity(learner=b"l" * 32, contract=b"c" * 32, membership=b"m" * 32)

SECRET = bytes(range(32))
"""A run secret for tests that describe the roles of one keyed build themselves
(``describe_role(plan, role, secret=SECRET)``): every role of a build shares its secret, and a
test's fixed one keeps its descriptions reproducible. ``alpha compile`` draws a fresh one."""
