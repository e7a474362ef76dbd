"""The names of the learner's regions: the compiler declares them (``alpha.compiler.work_learn``),
the learner's operations read them (``alpha.schedule.operations``), and a role's report and
its checkpoint name the parameters by them. One home, so a name cannot drift between the
schedule a role carries and the code that reads its buffers.

A region's name is part of every frame's derived header (its slot), so renaming one changes
the bytes on the wire but not the learner's arithmetic.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CHECKPOINT", "CONTRIBUTIONS", "GRADIENT", "PARAMETERS", "STORE"]

PARAMETERS: Final = "w"
"""The learner's parameters, whole (with partitioned parameters: while they are used)."""

GRADIENT: Final = "g"
"""The round's contribution, then (combined) the total gradient with its statistics."""

CONTRIBUTIONS: Final = "c"
"""With logical contributors: every contributor's contribution, one row each."""

STORE: Final = "p"
"""With partitioned parameters: the range of the parameters this role owns and keeps."""

CHECKPOINT: Final = "k"
"""At a generation round of a checkpointed run: every owner's owner-manifest SHA-256, 32 bytes
a role, in role order; each role's subtree range travels to its parent, so role 0 holds them
all before it publishes (``docs/checkpoints.md``)."""

DIGEST_BYTES: Final = 32
"""Bytes of one owner's entry in :data:`CHECKPOINT`: a SHA-256."""
