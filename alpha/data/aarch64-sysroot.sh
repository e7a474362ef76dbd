#!/usr/bin/env bash
# Build what an AArch64 participant runs on under qemu-aarch64 (docs/emulation.md):
#
#   DEST/sysroot  Debian arm64 CPython 3.11 and the libraries it loads, unpacked from .debs
#                 (`qemu-aarch64 -L DEST/sysroot DEST/sysroot/usr/bin/python3.11`), its
#                 standard library precompiled;
#   DEST/site     trio and numpy as aarch64 wheels, at the versions the project's .venv has,
#                 so the emulated side computes with the same numpy as the native one;
#   DEST/stamp    what was built; written last, so its presence means the rest is complete.
#
# Usage: ALPHA_VENV_PYTHON=PYTHON alpha/data/aarch64-sysroot.sh DEST; ships in the package, and
# runs as `alpha emulation build` (PYTHON: alpha's own) or, in a checkout,
# scripts/aarch64-sysroot.sh DEST (`make aarch64`; PYTHON: the checkout's .venv).
#
# When DEST/stamp records what would be built now, it exits 0 at once without touching the
# network. Otherwise it builds in a temporary folder inside DEST and renames the result into
# place: an interrupted build leaves the previous state or nothing, never half of one.
#
# The arm64 packages come from a private apt state that knows only arm64 and reuses this
# host's sources; the host's dpkg is never told about arm64 (`dpkg --add-architecture` would
# try to replace the native python3.11). No binfmt_misc: the launcher calls qemu-aarch64 itself.
#
# Environment: ALPHA_VENV_PYTHON, the interpreter whose trio and numpy are pinned (required).
set -euo pipefail

say() { echo "aarch64-sysroot: $*" >&2; }
die() {
  say "error: $*"
  exit 1
}

[ $# -eq 1 ] || die "usage: aarch64-sysroot.sh DEST (e.g. .cache/aarch64)"

# Bump when the recipe below changes what it builds: a stamp of another recipe is rebuilt.
RECIPE=1
# The smallest set of bookworm arm64 packages that runs python3.11 with trio and numpy
# (docs/emulation.md): the C runtime, the libraries the stdlib's extensions link, the interpreter.
PACKAGES=(
  libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libssl3 libffi8 libbz2-1.0 liblzma5 libuuid1
  libcrypt1 libpython3.11-minimal python3.11-minimal libpython3.11-stdlib
)
# The guest interpreter's version and the wheel tags it accepts; numpy 2.4's aarch64 wheel is
# tagged manylinux_2_28 only, older ones manylinux2014. bookworm's glibc is 2.36.
GUEST_PYTHON=3.11
PLATFORMS=(manylinux_2_28_aarch64 manylinux2014_aarch64)
# What the participant imports; their dependencies are pinned with them.
ROOTS=(trio numpy blake3)

[ -n "${ALPHA_VENV_PYTHON:-}" ] ||
  die "ALPHA_VENV_PYTHON is not set: run this through \`alpha emulation build\` or, in a checkout, scripts/aarch64-sysroot.sh (make aarch64)"
venv_python=$ALPHA_VENV_PYTHON
[ -x "$venv_python" ] ||
  die "$venv_python is not an interpreter this user can run; run \`make venv\` first (its trio and numpy are pinned)"

# The pins: every distribution ROOTS need on linux/aarch64 CPython 3.11, at the version the
# venv has installed. Markers are evaluated for the guest (platform_machine aarch64).
pins=$(
  "$venv_python" - "${ROOTS[@]}" <<'EOF'
import importlib.metadata as metadata
import re
import sys

try:
    from packaging.markers import Marker
except ImportError:
    from pip._vendor.packaging.markers import Marker

guest = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "platform_machine": "aarch64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
    "extra": "",
}
wanted, seen = list(sys.argv[1:]), {}
while wanted:
    name = re.sub(r"[-_.]+", "-", wanted.pop()).lower()
    if name in seen:
        continue
    try:
        seen[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(f"{sys.executable} has no {name} installed, which the participant needs")
    for requirement in metadata.requires(name) or []:
        spec, _, marker = requirement.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(guest):
            continue
        wanted.append(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))
print(" ".join(f"{name}=={version}" for name, version in sorted(seen.items())))
EOF
) || die "cannot read the trio and numpy versions from $venv_python; run \`make venv\` first"

stamp_text="recipe $RECIPE
python $GUEST_PYTHON
platforms ${PLATFORMS[*]}
packages ${PACKAGES[*]}
pins $pins"

mkdir -p "$1"
dest=$(cd "$1" && pwd)
stamp=$dest/stamp
built() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] &&
    [ -x "$dest/sysroot/usr/bin/python$GUEST_PYTHON" ] && [ -d "$dest/site" ]
}
if built; then
  exit 0
fi

# One build at a time; a second waits, then finds the first one's stamp.
exec 9>"$dest/.lock"
flock 9
if built; then
  exit 0
fi

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool is missing; the sysroot is built from Debian packages (a Debian or Ubuntu host)"
done
# The standard library is precompiled on the host: bytecode does not depend on the machine,
# only on the Python version, and the .debs ship none.
compiler=""
for candidate in "$venv_python" python$GUEST_PYTHON /usr/bin/python$GUEST_PYTHON; do
  if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))" 2>/dev/null; then
    compiler=$candidate
    break
  fi
done
[ -n "$compiler" ] ||
  die "no host python$GUEST_PYTHON to precompile the guest's stdlib; apt-get install python3.11"

started=$SECONDS
# What a build killed outright (SIGKILL, a power cut) left: never part of a finished one.
rm -rf "$dest"/.build.*
work=$(mktemp -d "$dest/.build.XXXXXX")
# Interrupted (Ctrl-C, SIGTERM from make or CI): stop the step running, then remove the
# temporary folder, so that nothing keeps writing into it.
child=""
cleanup() {
  if [ -n "$child" ]; then kill "$child" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# Run one step in the background and wait for it: a signal interrupts the wait at once.
step() {
  "$@" &
  child=$!
  local code=0
  wait "$child" || code=$?
  child=""
  return "$code"
}

say "building in $dest (pins: $pins)"

# A private apt state that knows only arm64; the host's sources and apt.conf.d still apply.
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs"
: >"$work/apt/status"
cat >"$work/apt/apt.conf" <<EOF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
Dir::State::Lists "$work/apt/lists/";
Dir::State::status "$work/apt/status";
Dir::Cache "$work/apt/cache/";
APT::Sandbox::User "$(id -un)";
EOF
export APT_CONFIG=$work/apt/apt.conf

say "reading the arm64 package lists"
step apt-get update -qq >"$work/apt.log" 2>&1 ||
  die "apt-get update for arm64 failed (no network or no Debian mirror?); see the output: $(tail -n 1 "$work/apt.log")"
say "downloading ${#PACKAGES[@]} arm64 packages"
step env -C "$work/debs" apt-get download -qq "${PACKAGES[@]}" >>"$work/apt.log" 2>&1 ||
  die "apt-get download of the arm64 packages failed: $(tail -n 1 "$work/apt.log")"

say "unpacking into the sysroot"
mkdir -p "$work/sysroot"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/sysroot"
  dpkg-deb -W --showformat '${Package} ${Version}\n' "$deb" >>"$work/sysroot/.debs"
done
python=$work/sysroot/usr/bin/python$GUEST_PYTHON
[ -x "$python" ] || die "the packages did not provide usr/bin/python$GUEST_PYTHON (a bookworm mirror is needed)"

say "precompiling the guest's standard library with $compiler"
step "$compiler" -m compileall -q "$work/sysroot/usr/lib/python$GUEST_PYTHON" >/dev/null ||
  die "compileall failed on the guest's standard library"

say "installing aarch64 wheels of ${ROOTS[*]}"
platform_flags=()
for platform in "${PLATFORMS[@]}"; do platform_flags+=(--platform "$platform"); done
# shellcheck disable=SC2086  # $pins is a list of words
step "$venv_python" -m pip install -q --disable-pip-version-check --no-compile \
  --target "$work/site" --only-binary=:all: --implementation cp \
  --python-version $GUEST_PYTHON --abi cp311 "${platform_flags[@]}" $pins >"$work/pip.log" 2>&1 ||
  die "pip could not install aarch64 wheels of $pins: $(tail -n 1 "$work/pip.log")"
step "$compiler" -m compileall -q "$work/site" >/dev/null ||
  die "compileall failed on the aarch64 site-packages"

# Into place: the old stamp goes first and the new one comes last, so a build interrupted in
# between leaves no stamp, and the next run builds again.
rm -f "$stamp"
for part in sysroot site; do
  if [ -e "$dest/$part" ]; then mv "$dest/$part" "$work/old-$part"; fi
  mv "$work/$part" "$dest/$part"
done
printf '%s\n' "$stamp_text" >"$work/stamp"
mv "$work/stamp" "$stamp"
say "built in $((SECONDS - started)) s: sysroot $(du -sh "$dest/sysroot" | cut -f1), site $(du -sh "$dest/site" | cut -f1)"
