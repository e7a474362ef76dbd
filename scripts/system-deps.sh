#!/usr/bin/env bash
# Install the Debian packages a make target needs, and only those that are missing:
# `system-deps.sh run` what `make run` (the main job) needs, `system-deps.sh` (or `test`)
# what the whole suite needs besides.
#
# Each line of the NEEDS lists below is "a command that succeeds when the need is met" and
# "the Debian package that meets it". Nothing is installed when every check
# passes, so repeated `make test` runs do not touch apt at all.
set -euo pipefail

scope=${1:-test}
case "$scope" in
  run | test) ;;
  *) echo "system-deps: usage: system-deps.sh [run|test], not $scope" >&2; exit 2 ;;
esac

# The main job: a virtual environment for the project.
NEEDS=(
  "python3 -c 'import venv, ensurepip'|python3-venv"
)

# The suite besides.
[ "$scope" = run ] || NEEDS+=(
  # The compiled ordered fold and trace writer (docs/kernels.md, docs/trace.md): a C compiler,
  # and for the trace writer, a CPython extension, the headers of the Python that runs it.
  "command -v cc|gcc"
  "python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()[\"include\"], \"Python.h\")))'|python3-dev"
  # The AArch64 participant runs under user-mode emulation (docs/emulation.md).
  "command -v qemu-aarch64|qemu-user"
  # The ssh-tunnel tests start an sshd of their own (harness/sshd.py) and ssh through it,
  # across network namespaces when they may create them.
  "test -x /usr/sbin/sshd|openssh-server"
  "command -v ssh|openssh-client"
  "command -v ip|iproute2"
  # A frame corrupted on the wire, by a rule in a network namespace of a gate's or the chaos
  # benchmark's own (harness/netns.py, bench/chaos.py): loopback checks no TCP checksum.
  "command -v nft|nftables"
  # alpha run --slurm's tests and benchmark start a Slurm cluster of their own on this host
  # (harness/slurm.py): munged, slurmctld and several slurmd, with Slurm's client commands.
  "test -x /usr/sbin/slurmctld && test -x /usr/sbin/slurmd && command -v srun|slurm-wlm"
  "test -x /usr/sbin/munged && command -v mungekey|munge"
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

# openssh-server's post-install would start a system sshd (slurmctld's, slurmd's and munge's
# their daemons); the tests start their own. A
# policy-rc.d that exits 101 tells invoke-rc.d not to start services, for this install only:
# ours is removed after, and one that was already there is left as it was.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  trap '$sudo rm -f "$policy"' EXIT
  trap 'exit 1' HUP INT TERM # so that EXIT runs when interrupted too
  printf '#!/bin/sh\n# Written by alpha scripts/system-deps.sh while installing.\nexit 101\n' \
    | $sudo tee "$policy" >/dev/null
  $sudo chmod 0755 "$policy"
fi

$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
