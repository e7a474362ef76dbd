#!/usr/bin/env bash
# Build the AArch64 sysroot and site into DEST (`make aarch64`; docs/emulation.md), pinned to
# this checkout's .venv. The build itself ships in the package, alpha/data/aarch64-sysroot.sh,
# so that an installed alpha runs the same one (`alpha emulation build`).
# Usage: scripts/aarch64-sysroot.sh DEST
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ALPHA_VENV_PYTHON=${ALPHA_VENV_PYTHON:-$repo/.venv/bin/python}
exec bash "$repo/alpha/data/aarch64-sysroot.sh" "$@"
