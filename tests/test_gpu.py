"""GPU contributions (PyCUDA): equal to the host's bit for bit where a GPU exists; skipped,
saying why, where none does. The kernels' source is checked here with nvcc when it is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from alpha.learner.gpu import GPU_OPTIONS, GpuContributor, gpu_status, kernel_source
from alpha.learner.model import Model, contribute, initial_parameters

AVAILABLE, WHY = gpu_status()
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)


@pytest.mark.skipif(NVCC is None, reason="nvcc (a CUDA toolkit) is not installed here")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_kernels_compile_without_fused_multiply_add(dtype: str, tmp_path: Path) -> None:
    assert NVCC is not None
    source = tmp_path / "kernels.cu"
    source.write_text(kernel_source(dtype))
    ptx = tmp_path / "kernels.ptx"
    subprocess.run([NVCC, *GPU_OPTIONS, "-ptx", "-o", str(ptx), str(source)], check=True)
    text = ptx.read_text()
    for kernel in ("affine", "relu", "errors", "outer_sum", "sum_rows", "backprop", "totals"):
        assert f".entry {kernel}" in text
    assert "fma." not in text, "a multiply and an add were fused"


@pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_gpu_contribution_equals_the_host_one_bit_for_bit(dtype: str) -> None:
    model = Model(32, dtype)
    gpu = GpuContributor(model)
    try:
        rng = np.random.default_rng(11)
        for round in range(3):
            w = initial_parameters(model, round)
            x = (rng.integers(0, 17, (32, 64)) / 16).astype(dtype)
            y = rng.integers(0, 10, 32).astype(np.uint8)
            host = contribute(model, w, x, y)
            device = gpu.contribute(w, x, y)
            assert host.tobytes() == device.tobytes()
    finally:
        gpu.close()
