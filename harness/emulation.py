"""Running a participant built for AArch64 on this host: a real AArch64 CPython under
``qemu-aarch64`` user-mode emulation, from the sysroot ``scripts/aarch64-sysroot.sh`` builds
(``make aarch64``; ``docs/emulation.md``).

:func:`aarch64_interpreter` gives the argv prefix that runs a Python script as AArch64; the
launcher starts an aarch64 role's artifact after it (``launcher.launch_specs``). qemu is
called by name, never through binfmt_misc, which would change the whole machine.

``python -m harness.emulation`` prints that prefix as one shell word list, for
``alpha run --interpreter aarch64="..."``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Final

__all__ = [
    "AARCH64_HOME",
    "GUEST_PYTHON",
    "HOME_ENV",
    "QEMU",
    "EmulationUnavailable",
    "aarch64_interpreter",
    "emulated",
]

HOME_ENV: Final = "ALPHA_AARCH64_HOME"
"""The environment variable that moves the sysroot and site from their default place."""

AARCH64_HOME: Final = Path(
    os.environ.get(HOME_ENV) or Path(__file__).resolve().parents[1] / ".cache" / "aarch64"
)
"""Where ``make aarch64`` builds: ``sysroot/``, ``site/`` and ``stamp`` (written last)."""

QEMU: Final = "qemu-aarch64"
"""The user-mode emulator (Debian package qemu-user)."""

GUEST_PYTHON: Final = "usr/bin/python3.11"
"""The guest interpreter, relative to the sysroot (Debian bookworm's CPython)."""

# What the guest's environment must and must not hold. It inherits the launcher's (which names
# the launcher's pid, alpha.runtime.parent), and that one may point at x86-64 code:
# PYTHONHOME would move the guest's standard library, PYTHONPATH and the user's site-packages
# would put x86-64 extension modules first. The guest reads its packages from the aarch64 site
# only, and writes no bytecode: the sysroot and the site are precompiled, and several guests
# share them.
_UNSET: Final = ("PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP", "PYTHONEXECUTABLE")
_SET: Final = (("PYTHONNOUSERSITE", "1"), ("PYTHONDONTWRITEBYTECODE", "1"))


class EmulationUnavailable(RuntimeError):
    """This host cannot run an AArch64 participant yet; the message says what is missing and
    the command that provides it."""


def aarch64_interpreter(home: Path | None = None) -> tuple[str, ...]:
    """The argv prefix that runs a Python script as AArch64: ``qemu-aarch64 -L SYSROOT``, the
    guest's environment (``-E``/``-U``: see ``_SET`` and ``_UNSET``; ``PYTHONPATH`` is the
    aarch64 site), and the guest's ``python3.11``. Append a script (an artifact) and its
    arguments.

    Args:
        home: where ``make aarch64`` built (default :data:`AARCH64_HOME`, itself
            ``$ALPHA_AARCH64_HOME`` or ``.cache/aarch64`` in the repository).

    Raises:
        EmulationUnavailable: qemu-aarch64 is not installed, the sysroot is not built (or its
            build did not finish), or ``home`` holds a comma (qemu's ``-E`` splits on commas).
    """
    folder = (AARCH64_HOME if home is None else home).resolve()
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise EmulationUnavailable(
            f"{QEMU} is not installed; run `make aarch64` (or `apt-get install qemu-user`)"
        )
    sysroot, site = folder / "sysroot", folder / "site"
    python = sysroot / GUEST_PYTHON
    # The stamp is written after everything else: without it the build did not finish.
    if not (folder / "stamp").is_file() or not python.is_file() or not site.is_dir():
        raise EmulationUnavailable(
            f"the AArch64 sysroot is not built in {folder}; run `make aarch64` "
            f"(scripts/aarch64-sysroot.sh {folder})"
        )
    if "," in str(site):
        raise EmulationUnavailable(
            f"{folder} contains a comma, which qemu-aarch64 -E cannot pass; set {HOME_ENV} to "
            "a folder without one and run `make aarch64` there"
        )
    environment: list[str] = ["-E", f"PYTHONPATH={site}"]
    for name, value in _SET:
        environment += ["-E", f"{name}={value}"]
    for name in _UNSET:
        environment += ["-U", name]
    return (qemu, "-L", str(sysroot), *environment, str(python))


def emulated(pid: int) -> bool:
    """Whether the process ``pid`` runs under qemu-aarch64 (its executable is the emulator),
    as a participant started with :func:`aarch64_interpreter` does.

    Raises:
        ProcessLookupError: there is no such process (or it exited).
    """
    try:
        executable = os.readlink(f"/proc/{pid}/exe")
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    return Path(executable).name.startswith(QEMU)


def main() -> int:
    """Print :func:`aarch64_interpreter`'s prefix as shell words; exit 1 with the reason when
    the emulation is unavailable."""
    try:
        print(shlex.join(aarch64_interpreter()))
    except EmulationUnavailable as error:
        print(f"harness.emulation: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
