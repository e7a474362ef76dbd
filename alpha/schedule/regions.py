"""Regions: the named buffers every role holds, and the element types they may have.

Kept apart from the forms (``alpha.compiler.forms``, which re-exports them) because a
participant needs them to read its local schedule, and nothing else of the global protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

__all__ = ["ITEM_SIZES", "Region"]

ITEM_SIZES: Final = {"float32": 4, "float64": 8, "uint8": 1}
"""Region element types and their widths in bytes."""


@final
@dataclass(frozen=True, slots=True)
class Region:
    """A named buffer every role holds: ``count`` elements of ``dtype``; or, with ``of``, a
    view of elements ``[offset, offset + count)`` of the region ``of`` (same dtype, not itself
    a view): transfers and combines of one range of a region move and fold only its bytes.
    A ``transient`` region's memory is given back to the system by the ``release`` operation
    between uses (it reads as zeros after; see ``docs/protocol.md``)."""

    name: str
    dtype: str
    count: int
    of: str | None = None
    offset: int = 0
    transient: bool = False

    @property
    def nbytes(self) -> int:
        return ITEM_SIZES[self.dtype] * self.count
