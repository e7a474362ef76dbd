#!/usr/bin/env bash
# Install the Debian packages the suite needs, and only those that are missing.
#
# Each line of NEEDS below is "a command that succeeds when the need is met" and
# "the Debian package that meets it". Nothing is installed when every check
# passes, so repeated `make test` runs do not touch apt at all.
set -euo pipefail

NEEDS=(
  "python3 -c 'import venv, ensurepip'|python3-venv"
  # The AArch64 participant runs under user-mode emulation (docs/emulation.md).
  "command -v qemu-aarch64|qemu-user"
)

missing=()
for need in "${NEEDS[@]}"; do
  check=${need%|*}
  package=${need##*|}
  if ! bash -c "$check" >/dev/null 2>&1; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: missing ${missing[*]} and apt-get is not available; install them by hand" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "system-deps: missing ${missing[*]}; run as root or install them by hand" >&2
    exit 1
  fi
fi
echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
