"""The compiled ordered fold (docs/kernels.md): the C loop gives the numpy reference's bits for
every shape, layout and value (signed zeros, infinities, subnormals; NaN where the reference
has NaN); wherever it cannot be had (ALPHA_KERNELS=numpy, no compiler, a failing compiler, an
unusable cache, a compiler that fuses) the reference folds, with the same bits, and
``kernel_status`` says why; processes racing to build it into one empty cache each load a
working library; a participant compiles it from the zip of a run's runtime; and the contract
operations give the same bytes compiled on x86-64 as with numpy under qemu-aarch64.

The equality tests need a C compiler (``cc`` or ``$CC``) and skip, saying so, without one; the
AArch64 test skips where qemu-aarch64 or the sysroot (``make aarch64``) is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import alpha.learner.contract as c
from alpha import native as builder
from alpha.artifact import build_runtime
from alpha.learner import kernels
from alpha.learner.kernels import (
    KERNEL_CACHE_ENV,
    KERNELS_ENV,
    fold_products,
    fold_reference,
    kernel_status,
)
from harness.emulation import aarch64_interpreter
from tests.support import ROOT
from tests.support.cli import python_output

Array = npt.NDArray[Any]

DTYPES = (np.float32, np.float64)
UNSIGNED = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
# Past an AVX2 vector of float32 (8) and of float64 (4), unrolled: the vector body, its tail
# and the scalar remainder all run somewhere in these.
EDGE_SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)
MAX_SIZE = 80
RACERS = 4  # processes building into one empty cache at once
LIBRARY = re.compile(r"ordered-[0-9a-f]{64}\.so")


def _compiler_skip() -> str | None:
    """Why the compiled fold cannot be expected here, or None."""
    if os.environ.get(KERNELS_ENV) == "numpy":
        return f"{KERNELS_ENV}=numpy is set: the compiled fold is switched off"
    spelled = os.environ.get("CC", "") or "cc"
    if shutil.which(spelled.split()[0]) is None:
        return f"no C compiler ({spelled!r} is not on PATH): the reference folds everywhere"
    return None


needs_compiler = pytest.mark.skipif(_compiler_skip() is not None, reason=str(_compiler_skip()))


def assert_same_bits(found: Array, expected: Array) -> None:
    """Bit for bit, but for NaN, which is compared as NaN (its sign and payload are the
    CPU's)."""
    assert found.dtype == expected.dtype and found.shape == expected.shape
    found_nan, expected_nan = np.isnan(found), np.isnan(expected)
    assert np.array_equal(found_nan, expected_nan), "NaN in other places"
    unsigned = UNSIGNED[found.dtype]
    found_bits = found.view(unsigned)[~found_nan]
    expected_bits = expected.view(unsigned)[~expected_nan]
    differ = np.flatnonzero(found_bits != expected_bits)
    assert differ.size == 0, (
        f"{differ.size} of {found_bits.size} outputs differ, first: "
        f"{found[~found_nan][differ[0]]!r} against {expected[~expected_nan][differ[0]]!r}"
    )


# --- the fold, compiled, against the reference -------------------------------------------------


def _values(dtype: type[np.floating], shape: tuple[int, int], data: st.DataObject) -> Array:
    """An array of ``shape``: normal values at a drawn scale (so that products can be
    subnormal or overflow), some replaced by values hypothesis picks (zeros of both signs,
    infinities, NaN, subnormals, extremes)."""
    info = np.finfo(dtype)
    scales = {
        "unit": 1.0,
        "tiny": float(np.sqrt(info.smallest_normal)),  # products near and below the normals
        "subnormal": float(info.smallest_subnormal) * 1000,
        "huge": float(np.sqrt(info.max)),  # products overflow
    }
    scale = scales[data.draw(st.sampled_from(sorted(scales)), label="scale")]
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(shape) * scale).astype(dtype)
    width = 32 if dtype is np.float32 else 64
    pool = data.draw(
        st.lists(st.floats(width=width, allow_subnormal=True), min_size=1, max_size=6),
        label="special values",
    )
    share = data.draw(st.sampled_from([0.0, 0.05, 0.5]), label="share of special values")
    chosen = rng.random(shape) < share
    values[chosen] = rng.choice(np.array(pool, dtype=dtype), size=int(chosen.sum()))
    return values


def _laid_out(values: Array, layout: str) -> Array:
    """``values`` (n, k) as a view of another layout, holding the same elements."""
    rows, columns = values.shape
    if layout == "c":
        return values
    if layout == "transposed":  # as outer_sum's a.T
        return np.ascontiguousarray(values.T).T
    if layout == "sliced":  # row and column strides of 2 and 3 elements
        big = np.zeros((2 * rows + 1, 3 * columns + 2), dtype=values.dtype)
        view = big[1::2, 2::3]
        view[...] = values
        return view
    if layout == "reversed":  # negative strides
        return np.ascontiguousarray(values[::-1, ::-1])[::-1, ::-1]
    if layout == "fortran":
        return np.asfortranarray(values)
    if layout == "wide":  # rows further apart than their length, unit column stride
        big = np.zeros((rows, columns + 3), dtype=values.dtype)
        view = big[:, 1 : columns + 1]
        view[...] = values
        return view
    raise AssertionError(layout)


sizes = st.one_of(st.sampled_from(EDGE_SIZES), st.integers(1, MAX_SIZE))


@needs_compiler
@settings(max_examples=300, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    rows=sizes,
    inner=st.one_of(st.just(0), sizes),
    columns=sizes,
    a_layout=st.sampled_from(["c", "transposed", "sliced", "reversed"]),
    b_layout=st.sampled_from(["c", "transposed", "sliced", "wide"]),
    out_layout=st.sampled_from(["c", "fortran", "sliced", "wide"]),
    start=st.sampled_from(["zeros", "bias"]),
    data=st.data(),
)
def test_the_compiled_fold_gives_the_references_bits(
    dtype: type[np.floating],
    rows: int,
    inner: int,
    columns: int,
    a_layout: str,
    b_layout: str,
    out_layout: str,
    start: str,
    data: st.DataObject,
) -> None:
    a = _laid_out(_values(dtype, (rows, inner), data), a_layout)
    b = _laid_out(_values(dtype, (inner, columns), data), b_layout)
    init = np.zeros((rows, columns), dtype=dtype)
    if start == "bias":  # as affine: every row starts at the bias
        init[...] = _values(dtype, (1, columns), data)
    expected = init.copy()
    with np.errstate(all="ignore"):  # numpy warns of inf * 0 and overflow; C folds silently
        fold_reference(expected, a, b)
    out = _laid_out(init.copy(), out_layout)
    assert fold_products(out, a, b), kernel_status()
    assert_same_bits(out, expected)


@needs_compiler
def test_the_compiled_fold_runs_here_and_in_the_contract() -> None:
    assert kernel_status().startswith("compiled: "), kernel_status()
    path = Path(kernel_status().removeprefix("compiled: "))
    assert LIBRARY.fullmatch(path.name) and path.is_file()
    # The contract's products go through it: the same bits as the reference, from the same
    # inputs, for matmul (from +0), affine (from the bias) and outer_sum (a transposed a).
    rng = np.random.default_rng(28)
    x, w = rng.standard_normal((33, 70)), rng.standard_normal((70, 17))
    bias, d = rng.standard_normal(17), rng.standard_normal((33, 17))
    for dtype in DTYPES:
        x_, w_, bias_, d_ = (v.astype(dtype) for v in (x, w, bias, d))
        expected = np.zeros((33, 17), dtype=dtype)
        fold_reference(expected, x_, w_)
        assert_same_bits(c.matmul(x_, w_), expected)
        expected = np.broadcast_to(bias_, (33, 17)).copy()
        fold_reference(expected, x_, w_)
        assert_same_bits(c.affine(x_, w_, bias_), expected)
        expected = np.zeros((70, 17), dtype=dtype)
        fold_reference(expected, x_.T, d_)
        assert_same_bits(c.outer_sum(x_, d_), expected)


@needs_compiler
def test_the_compiled_fold_declines_what_is_not_its_to_fold() -> None:
    # Declined (False, nothing written): the caller's reference folds, or refuses, as before.
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    out = np.zeros((3, 5), np.float32)
    assert not fold_products(out, a.astype(np.float64), b)  # mixed dtypes
    assert not fold_products(out.astype(np.int32), a.astype(np.int32), b.astype(np.int32))
    assert not fold_products(out.astype(">f4"), a.astype(">f4"), b.astype(">f4"))  # byte order
    assert not fold_products(np.zeros((3, 6), np.float32), a, b)  # out of another shape
    assert not fold_products(out, a, np.ones((5, 5), np.float32))  # inner sizes differ
    read_only = np.zeros((3, 5), np.float32)
    read_only.flags.writeable = False
    assert not fold_products(read_only, a, b)
    square = np.ones((4, 4), np.float32)
    assert not fold_products(square, square, square)  # out is a: the reference's own order
    assert not fold_products(square[:, :4], np.ones((4, 4), np.float32), square)
    assert not out.any()
    # Nothing to add: done, out unchanged.
    assert fold_products(out, np.ones((3, 0), np.float32), np.ones((0, 5), np.float32))
    assert fold_products(np.zeros((0, 5), np.float32), np.ones((0, 4), np.float32), b)
    assert not out.any()


# --- the fallback ----------------------------------------------------------------------------


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Load the kernel again in this process under the environment given (each keyword an
    environment variable; None removes it), and return ``kernel_status()``. The process's own
    state comes back after the test."""

    def load(**environ: str | None) -> str:
        for name, value in environ.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        monkeypatch.setattr(kernels._library, "_found", None)
        return kernel_status()

    return load


def _reference_bits_through_the_contract() -> None:
    """With whatever fold this process has: the contract's products equal the reference."""
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x, w = rng.standard_normal((9, 21)).astype(dtype), rng.standard_normal((21, 11))
        expected = np.zeros((9, 11), dtype=dtype)
        fold_reference(expected, x, w.astype(dtype))
        assert_same_bits(c.matmul(x, w.astype(dtype)), expected)


def test_alpha_kernels_numpy_forces_the_reference(fresh: Callable[..., str]) -> None:
    assert fresh(ALPHA_KERNELS="numpy") == "numpy: ALPHA_KERNELS=numpy"
    a, b = np.ones((2, 3)), np.ones((3, 4))
    assert not fold_products(np.zeros((2, 4)), a, b)
    _reference_bits_through_the_contract()
    assert fresh(ALPHA_KERNELS="fast").startswith("numpy: ALPHA_KERNELS='fast' is neither")


def test_a_compiler_that_fails_leaves_the_reference(
    fresh: Callable[..., str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    found = fresh(ALPHA_KERNELS=None, CC="/bin/false", ALPHA_KERNEL_CACHE=str(cache))
    assert found.startswith("numpy: `/bin/false -dumpmachine` failed with exit 1"), found
    assert not fold_products(np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1)))
    _reference_bits_through_the_contract()
    found = fresh(CC="no-such-compiler-here")
    assert found == "numpy: no C compiler: 'no-such-compiler-here' is not on PATH (set CC)"
    _reference_bits_through_the_contract()


@needs_compiler
def test_a_compile_error_leaves_the_reference_and_no_trace_in_the_cache(
    fresh: Callable[..., str], tmp_path: Path
) -> None:
    # A compiler that answers its probes but fails every compile.
    script = tmp_path / "failing-cc"
    real = shutil.which((os.environ.get("CC", "") or "cc").split()[0])
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -dumpmachine|--version) exec {real} "$@";; esac\n'
        'echo "ordered.c:1: error: no room" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    cache = tmp_path / "cache"
    found = fresh(ALPHA_KERNELS=None, CC=str(script), ALPHA_KERNEL_CACHE=str(cache))
    assert found.startswith(f"numpy: `{script} -O3 -std=c99 -ffp-contract=off"), found
    assert found.endswith("failed with exit 1: ordered.c:1: error: no room"), found
    # No library, no build folder left (the compiler's answers to its probes are kept).
    assert [path.name[:6] for path in cache.iterdir()] == ["probe-"]
    _reference_bits_through_the_contract()


@pytest.mark.parametrize("how", ["a file in the way", "writable by others"])
def test_an_unusable_cache_leaves_the_reference(
    how: str, fresh: Callable[..., str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    if how == "a file in the way":
        cache.write_text("not a folder")
        expected = f"numpy: the kernel cache {cache} cannot be made"
    else:
        cache.mkdir()
        cache.chmod(0o777)  # a library there could be anyone's code
        expected = f"numpy: {cache} is another user's or writable by others; not used"
    found = fresh(ALPHA_KERNELS=None, CC=None, ALPHA_KERNEL_CACHE=str(cache))
    if _compiler_skip() is not None:
        pytest.skip(str(_compiler_skip()))
    assert found.startswith(expected), found
    _reference_bits_through_the_contract()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_a_read_only_cache_leaves_the_reference(fresh: Callable[..., str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o500)
    found = fresh(ALPHA_KERNELS=None, CC=None, ALPHA_KERNEL_CACHE=str(cache))
    if _compiler_skip() is not None:
        pytest.skip(str(_compiler_skip()))
    assert found.startswith(f"numpy: the kernel cache {cache} is not writable"), found
    _reference_bits_through_the_contract()


def _fma_here() -> bool:
    if platform.machine() != "x86_64":
        return False
    try:
        return " fma " in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@needs_compiler
@pytest.mark.skipif(not _fma_here(), reason="needs an x86-64 CPU with FMA to build a fusing one")
def test_a_compiler_that_fuses_anyway_is_caught_by_the_self_check(
    fresh: Callable[..., str], tmp_path: Path
) -> None:
    # The last -ffp-contract wins: this compiler fuses whatever the options say.
    script = tmp_path / "fusing-cc"
    real = shutil.which((os.environ.get("CC", "") or "cc").split()[0])
    script.write_text(f'#!/bin/sh\nexec {real} "$@" -mfma -ffp-contract=fast\n')
    script.chmod(0o755)
    found = fresh(ALPHA_KERNELS=None, CC=str(script), ALPHA_KERNEL_CACHE=str(tmp_path / "c"))
    assert found.startswith("numpy: "), found
    assert "differs from the numpy reference on its float32 self-check" in found, found
    _reference_bits_through_the_contract()


@needs_compiler
def test_the_cache_is_private_named_by_what_built_it_and_heals(
    fresh: Callable[..., str], tmp_path: Path
) -> None:
    cache = tmp_path / "deep" / "cache"
    found = fresh(ALPHA_KERNELS=None, CC=None, ALPHA_KERNEL_CACHE=str(cache))
    assert found.startswith("compiled: "), found
    path = Path(found.removeprefix("compiled: "))
    assert path.parent == cache and LIBRARY.fullmatch(path.name)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    # No build folder left: the library, and the compiler's probe answers.
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith("probe-")) == [path.name]
    # Found again, not rebuilt.
    built = path.stat().st_mtime_ns
    assert fresh() == found and path.stat().st_mtime_ns == built
    # Another command line is another library.
    other = fresh(CC=f"{shutil.which('cc') or 'cc'} -DALPHA_UNUSED=1")
    assert other.startswith("compiled: ") and other != found
    # A damaged library (a torn copy) is built again, once, and loads: in another process,
    # since this one's loader holds the library by its name already.
    assert fresh(CC=None) == found
    # The torn copy under the library's name as a new file: this process has the old one
    # mapped, and writing into a mapped library in place ends its process with SIGBUS.
    torn = path.with_name(path.name + ".torn")
    torn.write_bytes(b"\x7fELF torn")
    torn.replace(path)
    code = "from alpha.learner.kernels import kernel_status; print(kernel_status())"
    env = {KERNEL_CACHE_ENV: str(cache), KERNELS_ENV: ""}
    assert python_output(code, env=env).strip() == found
    assert path.stat().st_size > len(b"\x7fELF torn")


def test_the_default_cache_follows_xdg_and_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = builder._cache_folder
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path / "home"))
    assert folder({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg/alpha/kernels"
    assert folder({"XDG_CACHE_HOME": "relative"}) == tmp_path / "home/.cache/alpha/kernels"
    assert folder({}) == tmp_path / "home/.cache/alpha/kernels"
    named = {KERNEL_CACHE_ENV: str(tmp_path / "named"), "XDG_CACHE_HOME": str(tmp_path / "x")}
    assert folder(named) == tmp_path / "named"


# --- other processes ---------------------------------------------------------------------------


_RACER = """
import sys, time
from pathlib import Path
import numpy as np
from alpha.learner.kernels import fold_products, fold_reference, kernel_status
go = Path(sys.argv[1])
while not go.exists():  # all start building at once
    time.sleep(0.001)
rng = np.random.default_rng(3)
a, b = rng.standard_normal((20, 30)), rng.standard_normal((30, 40))
out, expected = np.zeros((20, 40)), np.zeros((20, 40))
fold_reference(expected, a, b)
print(fold_products(out, a, b), out.tobytes() == expected.tobytes(), kernel_status())
"""


@needs_compiler
@pytest.mark.slow
def test_processes_building_at_once_into_an_empty_cache_all_load_a_working_kernel(
    tmp_path: Path,
) -> None:
    cache, go = tmp_path / "cache", tmp_path / "go"
    env = {**os.environ, KERNEL_CACHE_ENV: str(cache)}
    env.pop(KERNELS_ENV, None)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for _ in range(RACERS)
    ]
    go.touch()
    lines = []
    for racer in racers:
        out, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err
        lines.append(out.strip())
    libraries = [p.name for p in cache.iterdir() if not p.name.startswith("probe-")]
    assert len(libraries) == 1 and LIBRARY.fullmatch(libraries[0]), libraries
    assert lines == [f"True True compiled: {cache / libraries[0]}"] * RACERS


@needs_compiler
@pytest.mark.slow
def test_a_participant_compiles_the_fold_from_its_runtime_zip(tmp_path: Path) -> None:
    entry = build_runtime(tmp_path)
    runtime = tmp_path / str(entry["file"])
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import alpha.learner.kernels as k; print(k.__file__); print(k.kernel_status())"
    )
    env = {KERNEL_CACHE_ENV: str(tmp_path / "cache"), KERNELS_ENV: ""}
    where, found = python_output(code, str(runtime), env=env).splitlines()
    assert where.startswith(str(runtime) + os.sep), where  # imported from the zip
    assert found.startswith(f"compiled: {tmp_path / 'cache'}"), found


# --- the same bytes on AArch64 -----------------------------------------------------------------

# The contract's operations and the MLP's whole contribution on fixed seeded inputs (signed
# zeros and subnormals among them), for both dtypes: a SHA-256 of each result's dtype, shape
# and bytes, and which fold ran. argv: the checkout to import alpha from. No NaN arises: its
# sign is the CPU's (x86-64 makes -NaN of inf * 0, AArch64 +NaN).
_PROBE = """
import hashlib, json, platform, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import alpha.learner.contract as c
from alpha.learner.kernels import kernel_status
from alpha.learner.programs import mlp
found = {}
def put(name, *values):
    digest = hashlib.sha256()
    for value in values:
        array = np.ascontiguousarray(np.asarray(value))
        digest.update(f"{array.dtype.str}{array.shape}".encode() + array.tobytes())
    found[name] = digest.hexdigest()
for dtype in (np.float32, np.float64):
    t = np.dtype(dtype).name
    random = c.Random(2028)
    def draw(*shape):
        return ((random.uniform(shape) - 0.5) * 4).astype(dtype)
    x, w, bias, d = draw(16, 64), draw(64, 32), draw(32), draw(16, 32)
    w2, b2 = draw(32, 10), draw(10)
    info = np.finfo(dtype)
    x[0, :4] = [-0.0, 0.0, info.smallest_subnormal, -info.smallest_normal]
    w[:3, 0] = [-0.0, info.smallest_subnormal * 3, info.tiny]
    labels = (np.arange(16) * 7) % 10
    z = c.affine(x, w, bias)
    put(t + " matmul", c.matmul(x, w))
    put(t + " matmul a.T", c.matmul(x.T, d))
    put(t + " affine", z)
    put(t + " outer_sum", c.outer_sum(x, d))
    put(t + " sum_rows", c.sum_rows(d))
    put(t + " relu", c.relu(z), c.relu_backward(d, z))
    put(t + " leaky_relu", c.leaky_relu(z, 0.01), c.leaky_relu_backward(d, z, 0.01))
    put(t + " hard_tanh", c.hard_tanh(z), c.hard_tanh_backward(d, z))
    scores = c.affine(c.relu(z), w2, b2)
    put(t + " squared_error", *c.squared_error(scores, labels))
    put(t + " hinge", *c.hinge(scores, labels))
    put(t + " correct", c.correct(scores, labels))
    p = {n: np.zeros(s, dtype=dtype) for n, s in mlp.layout(64, 10, {"hidden": 32})}
    mlp.initialize(p, c.Random(7))
    g = {n: np.empty_like(v) for n, v in p.items()}
    loss, right = mlp.contribute(p, g, x, labels)
    put(t + " mlp", loss, right, *(g[n] for n in sorted(g)))
print(json.dumps({"machine": platform.machine(), "fold": kernel_status(), "digests": found}))
"""


@pytest.fixture(scope="module")
def native_probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cache = tmp_path_factory.mktemp("kernels")
    found: dict[str, Any] = json.loads(
        python_output(_PROBE, str(ROOT), env={KERNEL_CACHE_ENV: str(cache), KERNELS_ENV: ""})
    )
    return found


@needs_compiler
@pytest.mark.slow
def test_the_contract_operations_give_the_same_bytes_compiled_and_with_numpy(
    native_probe: dict[str, Any],
) -> None:
    assert native_probe["fold"].startswith("compiled: "), native_probe["fold"]
    reference = json.loads(python_output(_PROBE, str(ROOT), env={KERNELS_ENV: "numpy"}))
    assert reference["fold"] == "numpy: ALPHA_KERNELS=numpy"
    assert reference["digests"] == native_probe["digests"]


@needs_compiler
@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="compares an x86-64 host with AArch64")
def test_the_contract_operations_give_the_same_bytes_under_qemu_aarch64(
    native_probe: dict[str, Any], tmp_path: Path
) -> None:
    # Fails, as the other emulated tests do, where the sysroot is missing: `make test` builds
    # it (`make aarch64`), so a missing one is a broken set-up, not a machine without QEMU.
    prefix = aarch64_interpreter()
    guest = subprocess.run(
        [*prefix, "-c", _PROBE, str(ROOT)],
        capture_output=True,
        text=True,
        env={**os.environ, KERNEL_CACHE_ENV: str(tmp_path / "cache")},
        check=False,
    )
    assert guest.returncode == 0, guest.stderr
    found = json.loads(guest.stdout)
    assert found["machine"] == "aarch64"
    # The guest folds with numpy: the sysroot has no compiler, and the host's builds for x86-64.
    assert found["fold"].startswith("numpy: "), found["fold"]
    assert native_probe["fold"].startswith("compiled: "), native_probe["fold"]
    guest, native = found["digests"], native_probe["digests"]
    assert guest.keys() == native.keys()
    assert sorted(name for name in guest if guest[name] != native[name]) == []


def test_the_key_follows_every_part() -> None:
    key = builder._key
    base = key(b"source", "cc 12", "/usr/bin/cc -O3", "x86_64")
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    others = {
        key(b"source!", "cc 12", "/usr/bin/cc -O3", "x86_64"),
        key(b"source", "cc 13", "/usr/bin/cc -O3", "x86_64"),
        key(b"source", "cc 12", "/usr/bin/cc -O3 -m32", "x86_64"),
        key(b"source", "cc 12", "/usr/bin/cc -O3", "aarch64"),
        key(b"source", "cc 12", "/usr/bin/cc -O3", "x86_64", ".cpython-311-x86_64-linux-gnu.so"),
        # No part can lend bytes to the next one and give the same name.
        key(b"sourc", "ecc 12", "/usr/bin/cc -O3", "x86_64"),
        key(b"source", "cc 12", "/usr/bin/cc -O3", "x86_6", "4"),
    }
    assert base not in others and len(others) == 7


def test_the_source_is_package_data_read_as_a_resource() -> None:
    source = builder._source("alpha.learner", "ordered.c")
    assert source == (ROOT / "alpha" / "learner" / "ordered.c").read_bytes()
    assert b"#pragma STDC FP_CONTRACT OFF" in source
    assert "-ffp-contract=off" in kernels.KERNEL_FLAGS
    assert not any("fast-math" in f and not f.startswith("-fno-") for f in kernels.KERNEL_FLAGS)
    assert not any(f.startswith("-march") for f in kernels.KERNEL_FLAGS)
    assert hashlib.sha256(source).hexdigest()  # read whole, as bytes
