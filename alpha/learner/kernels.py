"""The ordered fold of a matrix product, compiled: where a C compiler is at hand, the products
of :mod:`alpha.learner.contract` run as a C loop (``alpha/learner/ordered.c``, package data) to
the same bits as :func:`fold_reference`, their numpy form (``docs/kernels.md``).

The fold: ``out[i, j] = out[i, j] + a[i, k] * b[k, j]`` for ``k`` ascending, each product
rounded, then each add, vectorised across the outputs. The C loop keeps every output's order
(it vectorises across ``j`` only), fuses no multiply and add, and computes in the element type
itself, so it agrees with numpy bit for bit, signed zeros, infinities and subnormals included.

On the first fold of a process the source is compiled with the host's C compiler into the
per-user cache of :mod:`alpha.native` (or found there), loaded with ctypes and checked once
against the reference on a fixed input. Any
failure (no compiler, a compile error, an unusable cache, a failed load or check) leaves the
reference in place for the rest of the process: slower, never different, never an exception.
:func:`kernel_status` says which fold runs and why; :data:`KERNELS_ENV` ``=numpy`` forces the
reference.

It opens no file and runs no program itself: :mod:`alpha.native` builds the library (the
compiler, the cache, the environment), and this module loads it with ctypes.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

import numpy as np
import numpy.typing as npt

from alpha.native import KERNEL_CACHE_ENV, Loaded, Unavailable, declined, library

__all__ = [
    "KERNELS_ENV",
    "KERNEL_CACHE_ENV",
    "KERNEL_FLAGS",
    "fold_products",
    "fold_reference",
    "kernel_status",
]

Array = npt.NDArray[np.floating]

KERNELS_ENV: Final = "ALPHA_KERNELS"
"""``numpy``: every fold of the process takes :func:`fold_reference`. Unset, empty or ``auto``:
the compiled fold, where it builds, loads and passes its check."""

SOURCE: Final = "ordered.c"
"""The C source, package data of ``alpha.learner``: read with importlib.resources, so it is found
inside a zip (a run's shared runtime) as in a folder."""

KERNEL_FLAGS: Final = (
    "-O3",
    "-std=c99",
    # Never a fused multiply-add: GCC ignores the source's FP_CONTRACT pragma, and fuses by
    # default where the target has FMA (AArch64; x86-64 with -march=native).
    "-ffp-contract=off",
    # Spelled out although it is the default: fast-math would let the compiler reorder the adds
    # and link code that flushes subnormals to zero.
    "-fno-fast-math",
    "-fPIC",
    "-shared",
)
"""The compiler's options after ``$CC``'s own words, part of the cache key. No ``-march=native``:
a cache in a shared home must serve every machine; the source picks AVX2 at load time itself."""

_SYMBOLS: Final = {"f": "alpha_fold_float32", "d": "alpha_fold_float64"}  # by dtype.char
_ARGTYPES: Final = (
    [ctypes.c_void_p, ctypes.c_ssize_t]  # out, its row stride
    + [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_ssize_t]  # a, its row and column strides
    + [ctypes.c_void_p, ctypes.c_ssize_t]  # b, its row stride
    + [ctypes.c_ssize_t] * 3  # rows, inner, columns
)

# The self-check's product (rows, inner, columns): odd sizes, columns past two AVX2 vectors of
# float32 with a tail, so the vector body and the scalar tail both run.
_CHECK_SHAPE: Final = (3, 37, 19)


def fold_reference(out: Array, a: Array, b: Array) -> None:
    """``out[i, j] += a[i, k] * b[k, j]`` for ``k`` ascending with numpy: each product rounded
    (``np.multiply``), then added and rounded (``np.add``), vectorised across ``(i, j)``;
    ``out`` is changed in place. The reference the compiled fold is held to."""
    product = np.empty_like(out)
    for k in range(a.shape[1]):
        np.multiply(a[:, k : k + 1], b[k : k + 1, :], out=product)
        np.add(out, product, out=out)


def _element_strides(x: Array) -> tuple[int, int] | None:
    """``x``'s two strides in elements (0 along an axis of extent 1, where no stride is
    taken), or None where C cannot index it as an array of its elements (misaligned, or a
    stride that is not a whole number of elements)."""
    if not x.flags.aligned:
        return None
    found = []
    for extent, stride in zip(x.shape, x.strides, strict=True):
        if extent == 1:
            found.append(0)
        elif stride % x.itemsize:
            return None
        else:
            found.append(stride // x.itemsize)
    return found[0], found[1]


def _rows_unit(x: Array) -> tuple[int, int] | None:
    """As :func:`_element_strides`, for an array whose rows C walks with unit stride."""
    strides = _element_strides(x)
    if strides is None or (x.shape[1] > 1 and strides[1] != 1):
        return None
    return strides


@final
@dataclass(frozen=True)
class _Compiled:
    """The loaded library: where it is, and its fold for each element type (by dtype.char)."""

    path: Path
    functions: Mapping[str, Callable[..., None]]

    def fold(self, out: Array, a: Array, b: Array) -> bool:
        """The fold in C; False (nothing done) where these arrays are not its to fold: other
        types or shapes than a float32 or float64 product (the reference then folds, or
        refuses, as it would anyway), or an ``out`` that overlaps ``a`` or ``b`` (the reference
        reads them while it writes, in its own order)."""
        arrays = (out, a, b)
        if any(type(x) is not np.ndarray or x.ndim != 2 for x in arrays):
            return False
        dtype = out.dtype
        function = self.functions.get(dtype.char)
        if function is None or not dtype.isnative or a.dtype != dtype or b.dtype != dtype:
            return False
        rows, inner = a.shape
        columns = b.shape[1]
        if b.shape[0] != inner or out.shape != (rows, columns) or not out.flags.writeable:
            return False
        if np.may_share_memory(out, a) or np.may_share_memory(out, b):
            return False
        if out.size == 0 or inner == 0:
            return True
        a_strides = _element_strides(a)
        if a_strides is None:
            a = np.ascontiguousarray(a)
            a_strides = _element_strides(a)
        b_strides = _rows_unit(b)
        if b_strides is None:
            b = np.ascontiguousarray(b)
            b_strides = _rows_unit(b)
        target = out
        out_strides = _rows_unit(out)
        if out_strides is None:
            target = np.ascontiguousarray(out)
            out_strides = _rows_unit(target)
        assert a_strides is not None and b_strides is not None and out_strides is not None
        function(
            target.ctypes.data,
            out_strides[0],
            a.ctypes.data,
            a_strides[0],
            a_strides[1],
            b.ctypes.data,
            b_strides[0],
            rows,
            inner,
            columns,
        )
        if target is not out:
            out[...] = target
        return True


def fold_products(out: Array, a: Array, b: Array) -> bool:
    """``out[i, j] += a[i, k] * b[k, j]`` for ``k`` ascending, in C, to the bits of
    :func:`fold_reference`; False (nothing done) when no compiled fold is at hand or these
    arrays are not its to fold, and the caller folds with :func:`fold_reference`.

    The first call of a process compiles or finds the library (:func:`kernel_status`); it never
    raises for want of one."""
    found = _library.get()
    return isinstance(found, _Compiled) and found.fold(out, a, b)


def kernel_status() -> str:
    """Which fold this process runs: ``compiled: PATH`` (the library) or ``numpy: WHY`` (the
    reference, and why: :data:`KERNELS_ENV`, no compiler, a compile error, ...). Loads the
    library first if no fold has yet."""
    found = _library.get()
    return f"compiled: {found.path}" if isinstance(found, _Compiled) else f"numpy: {found}"


def _load(environ: Mapping[str, str]) -> _Compiled | str:
    """The compiled fold as ``environ`` asks for it, or why the reference folds instead."""
    refused = declined(environ, KERNELS_ENV, "numpy")
    if refused is not None:
        return refused
    try:
        return _build_and_load(environ)
    except Unavailable as why:
        return str(why)
    except Exception as error:
        # Whatever else went wrong: the reference gives the same bits, so a run goes on.
        return f"unexpected {type(error).__name__}: {error}"


_library: Final[Loaded[_Compiled]] = Loaded(_load)  # loaded on the first fold of the process


def _build_and_load(environ: Mapping[str, str]) -> _Compiled:
    path = library("alpha.learner", SOURCE, KERNEL_FLAGS, environ, stem="ordered")
    try:
        compiled = _open(path)
    except (OSError, AttributeError):
        # A damaged entry (a full disk, a truncated copy): built again, once.
        path = library("alpha.learner", SOURCE, KERNEL_FLAGS, environ, stem="ordered", again=True)
        compiled = _open_or_explain(path)
    _self_check(compiled)
    return compiled


def _open(path: Path) -> _Compiled:
    library = ctypes.CDLL(str(path))
    functions: dict[str, Callable[..., None]] = {}
    for char, symbol in _SYMBOLS.items():
        function = getattr(library, symbol)
        function.argtypes = _ARGTYPES
        function.restype = None
        functions[char] = function
    return _Compiled(path, functions)


def _open_or_explain(path: Path) -> _Compiled:
    try:
        return _open(path)
    except (OSError, AttributeError) as error:
        raise Unavailable(f"{path} does not load: {error}") from None


def _self_check(compiled: _Compiled) -> None:
    """One fixed product per element type, through a transposed ``a``, against the reference,
    bit for bit: a compiler that fuses or reorders anyway (options it ignores, a fast-math
    default) is caught here, and the reference folds instead."""
    rows, inner, columns = _CHECK_SHAPE
    dtypes: tuple[np.dtype[np.floating], ...] = (np.dtype(np.float32), np.dtype(np.float64))
    for dtype in dtypes:
        # Steps through many residues; /37 makes every value, so every product, inexact.
        a = ((np.arange(inner * rows) * 7919 % 2003 - 1001) / 37).astype(dtype)
        b = ((np.arange(inner * columns) * 104729 % 4001 - 2000) / 37).astype(dtype)
        left, right = a.reshape(inner, rows).T, b.reshape(inner, columns)
        expected = np.zeros((rows, columns), dtype=dtype)
        fold_reference(expected, left, right)
        found = np.zeros((rows, columns), dtype=dtype)
        if not compiled.fold(found, left, right) or found.tobytes() != expected.tobytes():
            raise Unavailable(
                f"{compiled.path} differs from the numpy reference on its {dtype} "
                "self-check (a compiler that fuses or reorders despite the options?)"
            )
