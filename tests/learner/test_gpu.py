"""GPU contributions (PyCUDA): equal to the host's bit for bit where a GPU exists; skipped,
saying why, where none does. The kernels' source is checked here with nvcc when it is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from alpha.errors import GpuUnavailable
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
    model = Model.shipped(32, dtype)
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


class _HostStandIn:
    """Stands in for a GpuContributor where there is no GPU: the host's arithmetic, and a
    count of the releases that a real one needs before its process exits."""

    def __init__(self, model: Model, fail_at: int | None) -> None:
        self.model = model
        self.fail_at = fail_at
        self.contributions = 0
        self.closed = 0

    def contribute(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        self.contributions += 1
        if self.contributions == self.fail_at:
            raise GpuUnavailable("the device fell off the bus")
        return contribute(self.model, w, x, y)

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("fail_at", [None, 2], ids=["succeeds", "fails-in-round-2"])
def test_a_gpu_role_lets_go_of_its_gpu_when_its_run_ends(
    fail_at: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PyCUDA aborts a process that exits with its context still pushed, after the role's work
    # is done: the participant must release the GPU however its run ends.
    import alpha.artifact.participant
    import alpha.learner.payload
    from alpha.app.compile import compile_plan
    from alpha.artifact import artifact_name, read_artifact
    from alpha.compiler.plan import parse_plan
    from alpha.learner.state import LearnerState

    plan = parse_plan(
        """
[run]
name = "one-gpu-role"
rounds = 3
[membership]
group = "(group (stride 0 1 1))"
[topology]
fanout = 1
[work]
kind = "learn"
[learner]
kind = "mlp"
hidden = 8
rate = 0.1
[gpu]
roles = { "0" = "GPU-5d6c1a2b-0000-1111-2222-333344445555" }
"""
    )
    compile_plan(plan, tmp_path, range(1))
    made: list[_HostStandIn] = []

    def attach(state: LearnerState) -> None:
        assert state.gpu_uuid == "GPU-5d6c1a2b-0000-1111-2222-333344445555"
        made.append(_HostStandIn(state.model, fail_at))
        state.gpu = made[-1]  # type: ignore[assignment]

    # The participant imports it when a learner role starts (sum-check roles never do).
    monkeypatch.setattr(alpha.learner.payload, "attach_gpu", attach)
    payload = read_artifact(tmp_path / artifact_name(0))
    code = alpha.artifact.participant.run_payload(payload, str(tmp_path / "report.json"))
    assert [(m.contributions, m.closed) for m in made] == [(fail_at or 3, 1)]
    assert code == (0 if fail_at is None else 1)
    assert (tmp_path / "report.json").exists() == (fail_at is None)
