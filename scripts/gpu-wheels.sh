#!/usr/bin/env bash
# Wheels for running scripts/gpu_check.py on a GPU machine that cannot reach a package index.
#
#   scripts/gpu-wheels.sh [OUT]       (OUT defaults to .whl)
#
# Builds PyCUDA from its source distribution against a CUDA toolkit (CUDA_ROOT, default
# /usr/local/cuda) for the Python named by PYTHON (default python3.12, the GPU machine's), and
# downloads the other packages Alpha and PyCUDA need (all but numpy). The
# machine that builds needs no GPU and no driver: a link-time stub stands in for libcuda.so,
# and the real libcuda.so.1 comes with the driver where the wheel runs. Takes about 4 minutes
# on 2 cores, nearly all of it compiling PyCUDA. See docs/gpu.md.
set -euo pipefail

out=$(realpath -m "${1:-.whl}")
python=${PYTHON:-python3.12}
cuda=${CUDA_ROOT:-/usr/local/cuda}

say() { printf 'gpu-wheels: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

command -v "$python" >/dev/null || die "no $python: set PYTHON to the interpreter the GPU machine runs"
[ -x "$cuda/bin/nvcc" ] || die "no CUDA toolkit at $cuda (no bin/nvcc): set CUDA_ROOT"
command -v gcc >/dev/null || die "no gcc: PyCUDA's extension needs a C++ compiler"

tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

say "a build environment for $tag (numpy is needed to compile PyCUDA)"
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install numpy setuptools wheel

say "PyCUDA's source distribution"
"${pip[@]}" download --no-deps --no-binary pycuda --dest "$work" 'pycuda>=2024.1'
tar -xzf "$work"/pycuda-*.tar.gz -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'pycuda-*' | head -n 1)

say "configuring against $cuda, with a link-time stub for libcuda.so"
mkdir -p "$work/stubs"
gcc -shared -o "$work/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 -x c /dev/null
(
    cd "$src"
    "$work/venv/bin/python" configure.py --cuda-root="$cuda" --no-cuda-enable-curand >/dev/null
    sed -i "s|^CUDADRV_LIB_DIR = .*|CUDADRV_LIB_DIR = ['$work/stubs']|" siteconf.py
    say "compiling PyCUDA (a few minutes)"
    # The stub defines no symbols, so the linker's default --as-needed would drop it and leave
    # the module with no NEEDED libcuda.so.1: it would then fail to import even beside a driver
    # (undefined symbol cuArrayCreate_v2). LDFLAGS from the environment come before -lcuda.
    LDFLAGS="-Wl,--no-as-needed ${LDFLAGS:-}" \
        "${pip[@]}" wheel --no-deps --no-build-isolation --wheel-dir "$work/wheel" .
)
wheel=$(find "$work/wheel" -name 'pycuda-*.whl' | head -n 1)
unzip -q -o "$wheel" 'pycuda/_driver*.so' -d "$work/check"
readelf -d "$work"/check/pycuda/_driver*.so | grep -q 'NEEDED.*\[libcuda\.so\.1\]' ||
    die "the PyCUDA wheel does not link libcuda.so.1 (readelf -d shows no NEEDED entry)"
cp "$wheel" "$out/"

say "the pure-Python packages beside it"
"${pip[@]}" download --no-deps --dest "$out" trio outcome sniffio attrs sortedcontainers idna \
    pytools platformdirs typing_extensions mako
# Two have compiled wheels: take the ones for the target's Python.
"${pip[@]}" download --no-deps --only-binary :all: --python-version "${tag#cp}" \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --dest "$out" siphash24 markupsafe

say "done: $(find "$out" -name '*.whl' | wc -l) wheels in $out"
ls -1 "$out" >&2
