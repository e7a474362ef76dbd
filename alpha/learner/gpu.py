"""The learner's contribution on a GPU, through PyCUDA (extra ``gpu``), in contract arithmetic.

The kernels compute exactly what ``alpha.learner.model.contribute`` computes on the host, with
the same IEEE operations in the same order: they are compiled with ``--fmad=false`` so no
multiply and add are fused, every reduction is one thread folding in ascending order (the order
the host's explicit loops declare), the ReLU is the same selection as the host's, ``argmax``
matches numpy's (the first maximum wins ties), and ``dh * (z1 > 0)`` stays a multiplication so
that signed zeros match too. The contribution is staged to the host, a host participant
combines it, and the updated parameters are uploaded again before the next contribution.

Only the MLP has kernels; a plan that binds a GPU to a role learning the linear model is a
compile error naming ``contribute`` (``alpha.compiler.work_learn``).

PyCUDA is imported only when a GPU contributor is made, so the rest of Alpha never needs a CUDA
driver. The device is chosen by UUID through ``CUDA_VISIBLE_DEVICES``, set before CUDA starts
in the participant's process.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from alpha.errors import GpuUnavailable
from alpha.learner.model import CLASSES, FEATURES, Model

__all__ = ["GPU_OPTIONS", "GpuContributor", "GpuUnavailable", "gpu_status", "kernel_source"]

GPU_OPTIONS: Final = ("--fmad=false",)
"""nvcc options of every Alpha kernel: no fused multiply-add, so each product is rounded
before it is added, as on the host."""

_THREADS: Final = 128  # threads per block; every kernel guards its own range


_SOURCE: Final = r"""
typedef REAL real;

extern "C" {

// out[s, n] = bias[n] + x[s, 0] * w[0, n] + x[s, 1] * w[1, n] + ..., left to right.
__global__ void affine(const real *x, const real *w, const real *bias, real *out,
                       int rows, int inner, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    int s = i / cols, n = i % cols;
    real acc = bias[n];
    for (int k = 0; k < inner; ++k) {
        real product = x[s * inner + k] * w[k * cols + n];
        acc = acc + product;
    }
    out[i] = acc;
}

// As the host's np.where(z > 0, z, 0): a selection; -0.0 and NaN give +0.
__global__ void relu(const real *z, real *h, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    real v = z[i];
    h[i] = (v > (real)0) ? v : (real)0;
}

// Per sample: error = scores - onehot, dz2 = error * 2, per_sample = sum_c error^2 (c
// ascending), correct = (first argmax == label).
__global__ void errors(const real *scores, const unsigned char *labels, real *dz2,
                       real *per_sample, real *correct, int rows) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= rows) return;
    real total = (real)0;
    int best = 0;
    real best_value = scores[s * CLASSES];
    for (int c = 0; c < CLASSES; ++c) {
        real v = scores[s * CLASSES + c];
        if (v > best_value || (v != v && best_value == best_value)) { best = c; best_value = v; }
        real target = (c == (int)labels[s]) ? (real)1 : (real)0;
        real e = v - target;
        real square = e * e;
        total = total + square;
        dz2[s * CLASSES + c] = e * (real)2;
    }
    per_sample[s] = total;
    correct[s] = (best == (int)labels[s]) ? (real)1 : (real)0;
}

// out[p, q] = sum_s a[s, p] * b[s, q], s ascending, starting from 0.
__global__ void outer_sum(const real *a, const real *b, real *out, int rows, int p_count,
                          int q_count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p_count * q_count) return;
    int p = i / q_count, q = i % q_count;
    real acc = (real)0;
    for (int s = 0; s < rows; ++s) {
        real product = a[s * p_count + p] * b[s * q_count + q];
        acc = acc + product;
    }
    out[i] = acc;
}

// out[q] = sum_s v[s, q], s ascending, starting from 0.
__global__ void sum_rows(const real *v, real *out, int rows, int cols) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= cols) return;
    real acc = (real)0;
    for (int s = 0; s < rows; ++s) acc = acc + v[s * cols + q];
    out[q] = acc;
}

// dz1[s, j] = (sum_c dz2[s, c] * w2[j, c], c ascending) * (z1[s, j] > 0 ? 1 : 0).
__global__ void backprop(const real *dz2, const real *w2, const real *z1, real *dz1, int rows,
                         int hidden) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * hidden) return;
    int s = i / hidden, j = i % hidden;
    real acc = (real)0;
    for (int c = 0; c < CLASSES; ++c) {
        real product = dz2[s * CLASSES + c] * w2[j * CLASSES + c];
        acc = acc + product;
    }
    real gate = (z1[i] > (real)0) ? (real)1 : (real)0;
    dz1[i] = acc * gate;
}

// The batch's loss and correct count: one thread, samples ascending, from 0.
__global__ void totals(const real *per_sample, const real *correct, real *out, int rows) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    real loss = (real)0;
    real right = (real)0;
    for (int s = 0; s < rows; ++s) { loss = loss + per_sample[s]; right = right + correct[s]; }
    out[0] = loss;
    out[1] = right;
}

}
"""


def kernel_source(dtype: str) -> str:
    """The CUDA source of the learner's kernels for ``dtype`` (``float32`` or ``float64``)."""
    real = {"float32": "float", "float64": "double"}[dtype]
    return _SOURCE.replace("REAL", real).replace("CLASSES", str(CLASSES))


def gpu_status() -> tuple[bool, str]:
    """Whether a GPU can be used here, and if not, why (for skipped tests and errors)."""
    if importlib.util.find_spec("pycuda") is None:
        return False, "PyCUDA is not installed; install it with pip install '.[gpu]' (docs/gpu.md)"
    try:
        with warnings.catch_warnings():
            # PyCUDA warns (a guess about header versions) before the error that says why.
            warnings.simplefilter("ignore")
            import pycuda.driver as cuda  # type: ignore[import-not-found]
    except (ImportError, OSError) as error:
        if "libcuda" in str(error):
            return False, f"no CUDA driver: {error}"
        return False, f"PyCUDA is installed but does not import: {error}"
    try:
        cuda.init()
        count = cuda.Device.count()
    except Exception as error:
        return False, f"CUDA did not start ({error})"
    if count == 0:
        return False, "CUDA started but sees no device"
    return True, f"{count} device(s)"


class GpuContributor:
    """Computes contributions on one GPU: the one with ``uuid``, or the first device."""

    def __init__(self, model: Model, *, uuid: str | None = None) -> None:
        if model.hidden is None:
            raise GpuUnavailable("the linear model has no GPU kernels; bind no GPU to it")
        if uuid is not None:
            # Before CUDA starts in this process: the bound GPU becomes device 0.
            os.environ["CUDA_VISIBLE_DEVICES"] = uuid
        ok, why = gpu_status()
        if not ok:
            raise GpuUnavailable(f"cannot use a GPU here: {why}")
        import pycuda.driver as cuda
        from pycuda.compiler import SourceModule  # type: ignore[import-not-found]

        self.model = model
        self._cuda: Any = cuda
        self._context: Any = cuda.Device(0).make_context()
        try:
            module = SourceModule(kernel_source(model.dtype), options=list(GPU_OPTIONS))
            self._kernels: dict[str, Any] = {
                name: module.get_function(name)
                for name in (
                    "affine",
                    "relu",
                    "errors",
                    "outer_sum",
                    "sum_rows",
                    "backprop",
                    "totals",
                )
            }
        except BaseException:
            self._context.pop()
            raise

    def close(self) -> None:
        """Pop this contributor's CUDA context; again is a no-op. A process must do this before
        it exits: PyCUDA aborts the process when a context is still pushed at its cleanup."""
        if self._context is not None:
            self._context.pop()
            self._context = None

    def _launch(self, name: str, count: int, *args: Any) -> None:
        blocks = max(1, (count + _THREADS - 1) // _THREADS)
        self._kernels[name](*args, block=(_THREADS, 1, 1), grid=(blocks, 1))

    def contribute(
        self,
        parameters: npt.NDArray[np.floating],
        x: npt.NDArray[np.floating],
        labels: npt.NDArray[np.uint8],
    ) -> npt.NDArray[np.floating]:
        """The same vector as ``model.contribute(parameters, x, labels)``, computed on the GPU
        and staged back to the host."""
        cuda = self._cuda
        model = self.model
        dtype = np.dtype(model.dtype)
        hidden = model.hidden
        assert hidden is not None
        rows = int(x.shape[0])
        i32 = np.int32
        parts = model.unpack(np.ascontiguousarray(parameters, dtype=dtype))
        alloc = cuda.mem_alloc

        def upload(array: npt.NDArray[Any]) -> Any:
            return cuda.to_device(np.ascontiguousarray(array))

        def empty(count: int, kind: np.dtype[Any] = dtype) -> Any:
            return alloc(max(1, count) * kind.itemsize)

        x_d, labels_d = upload(x.astype(dtype)), upload(labels.astype(np.uint8))
        w1, b1, w2, b2 = (upload(parts[name]) for name in ("W1", "b1", "W2", "b2"))
        z1, h, scores = empty(rows * hidden), empty(rows * hidden), empty(rows * CLASSES)
        self._launch(
            "affine", rows * hidden, x_d, w1, b1, z1, i32(rows), i32(FEATURES), i32(hidden)
        )
        self._launch("relu", rows * hidden, z1, h, i32(rows * hidden))
        self._launch(
            "affine", rows * CLASSES, h, w2, b2, scores, i32(rows), i32(hidden), i32(CLASSES)
        )
        dz2, per_sample, correct = empty(rows * CLASSES), empty(rows), empty(rows)
        self._launch("errors", rows, scores, labels_d, dz2, per_sample, correct, i32(rows))
        out = np.zeros(model.contribution_size, dtype=dtype)
        grads = model.unpack(out[: model.size])
        g_w2, g_b2 = empty(hidden * CLASSES), empty(CLASSES)
        self._launch(
            "outer_sum", hidden * CLASSES, h, dz2, g_w2, i32(rows), i32(hidden), i32(CLASSES)
        )
        self._launch("sum_rows", CLASSES, dz2, g_b2, i32(rows), i32(CLASSES))
        dz1 = empty(rows * hidden)
        self._launch("backprop", rows * hidden, dz2, w2, z1, dz1, i32(rows), i32(hidden))
        g_w1, g_b1 = empty(FEATURES * hidden), empty(hidden)
        self._launch(
            "outer_sum", FEATURES * hidden, x_d, dz1, g_w1, i32(rows), i32(FEATURES), i32(hidden)
        )
        self._launch("sum_rows", hidden, dz1, g_b1, i32(rows), i32(hidden))
        stats = empty(2)
        self._launch("totals", 1, per_sample, correct, stats, i32(rows))
        # Stage everything to the host: the host participant combines.
        for name, device in (("W1", g_w1), ("b1", g_b1), ("W2", g_w2), ("b2", g_b2)):
            staged = np.empty_like(grads[name])
            cuda.memcpy_dtoh(staged, device)
            grads[name][...] = staged
        tail = np.empty(2, dtype=dtype)
        cuda.memcpy_dtoh(tail, stats)
        out[model.size :] = tail
        return out
