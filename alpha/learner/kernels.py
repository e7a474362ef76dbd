"""Compiled folds for contract arithmetic: where a C compiler is at hand, the ordered products
of :mod:`alpha.learner.contract` run as C loops, to the same bits as its numpy reference.

Not built yet: every fold takes the numpy reference (``fold_products`` answers False).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["fold_products"]


def fold_products(
    out: npt.NDArray[np.floating], a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]
) -> bool:
    """``out[i, j] += a[i, k] * b[k, j]`` for ``k`` ascending, in C; False (nothing done) when
    no compiled fold is at hand, and the caller folds with numpy."""
    del out, a, b
    return False
