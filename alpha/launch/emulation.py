"""Running a role built for AArch64 on an x86-64 host: a real AArch64 CPython under
``qemu-aarch64`` user-mode emulation, from the sysroot ``alpha emulation build`` (in a checkout,
``make aarch64``) builds; ``docs/emulation.md``.

:func:`aarch64_interpreter` gives the argv prefix that runs a Python script as AArch64; the
launcher starts an aarch64 role's artifact after it (``launcher.launch_specs``), and ``alpha run``
and ``alpha launch`` take it on their own when a run holds aarch64 roles and no
``--interpreter aarch64=...`` is given (:func:`interpreters_for`). qemu is called by name, never
through binfmt_misc, which would change the whole machine.

The build (``alpha/data/aarch64-sysroot.sh``, :data:`BUILD_SCRIPT`) ships in the package, so an
installed alpha builds and finds its sysroot as a checkout does.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Final

from alpha.errors import EmulationUnavailable
from alpha.files import package_data

__all__ = [
    "BUILD_SCRIPT",
    "GUEST_PYTHON",
    "HOME_ENV",
    "QEMU",
    "aarch64_interpreter",
    "default_home",
    "emulated",
    "interpreters_for",
]

HOME_ENV: Final = "ALPHA_AARCH64_HOME"
"""The environment variable that moves the sysroot and site from their default place."""

QEMU: Final = "qemu-aarch64"
"""The user-mode emulator (Debian package qemu-user)."""

GUEST_PYTHON: Final = "usr/bin/python3.11"
"""The guest interpreter, relative to the sysroot (Debian bookworm's CPython)."""

BUILD_SCRIPT: Final = package_data("data/aarch64-sysroot.sh")
"""The build of the sysroot and site (bash; ``alpha emulation build``, ``make aarch64``)."""

# The source checkout this package sits in, if it sits in one: there the build's default place
# is the checkout's .cache/aarch64, where `make aarch64` puts it.
_CHECKOUT: Final = Path(__file__).resolve().parents[2]

# What the guest's environment must and must not hold. It inherits the launcher's (which names
# the launcher's pid, alpha.runtime.parent), and that one may point at x86-64 code:
# PYTHONHOME would move the guest's standard library, PYTHONPATH and the user's site-packages
# would put x86-64 extension modules first. The guest reads its packages from the aarch64 site
# only, and writes no bytecode: the sysroot and the site are precompiled, and several guests
# share them.
_UNSET: Final = ("PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP", "PYTHONEXECUTABLE")
_SET: Final = (("PYTHONNOUSERSITE", "1"), ("PYTHONDONTWRITEBYTECODE", "1"))


def default_home() -> Path:
    """Where the sysroot is built and looked for: ``$ALPHA_AARCH64_HOME``; else, in a source
    checkout, its ``.cache/aarch64`` (``make aarch64``); else the user's cache,
    ``$XDG_CACHE_HOME/alpha/aarch64`` (``~/.cache/alpha/aarch64``)."""
    named = os.environ.get(HOME_ENV)
    if named:
        return Path(named)
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "Makefile").is_file():
        return _CHECKOUT / ".cache" / "aarch64"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "alpha" / "aarch64"


def _build_hint(folder: Path) -> str:
    return f"run `alpha emulation build {shlex.quote(str(folder))}` (in a checkout: `make aarch64`)"


def aarch64_interpreter(home: Path | None = None) -> tuple[str, ...]:
    """The argv prefix that runs a Python script as AArch64: ``qemu-aarch64 -L SYSROOT``, the
    guest's environment (``-E``/``-U``: see ``_SET`` and ``_UNSET``; ``PYTHONPATH`` is the
    aarch64 site), and the guest's ``python3.11``. Append a script (an artifact) and its
    arguments.

    Args:
        home: where the sysroot was built (default :func:`default_home`).

    Raises:
        EmulationUnavailable: qemu-aarch64 is not installed, the sysroot is not built (or its
            build did not finish), or ``home`` holds a comma (qemu's ``-E`` splits on commas).
    """
    folder = (default_home() if home is None else home).resolve()
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise EmulationUnavailable(
            f"{QEMU} is not installed; install it (Debian: `apt-get install qemu-user`; in a "
            "checkout `make aarch64` does)"
        )
    sysroot, site = folder / "sysroot", folder / "site"
    python = sysroot / GUEST_PYTHON
    # The stamp is written after everything else: without it the build did not finish.
    if not (folder / "stamp").is_file() or not python.is_file() or not site.is_dir():
        raise EmulationUnavailable(
            f"the AArch64 sysroot is not built in {folder}; {_build_hint(folder)}"
        )
    if "," in str(site):
        raise EmulationUnavailable(
            f"{folder} contains a comma, which qemu-aarch64 -E cannot pass; set {HOME_ENV} to "
            "a folder without one and build there (`alpha emulation build`)"
        )
    environment: list[str] = ["-E", f"PYTHONPATH={site}"]
    for name, value in _SET:
        environment += ["-E", f"{name}={value}"]
    for name in _UNSET:
        environment += ["-U", name]
    return (qemu, "-L", str(sysroot), *environment, str(python))


def interpreters_for(
    targets: Mapping[str, Collection[int]],
    chosen: Mapping[str, Sequence[str]] | None,
    host: str,
) -> dict[str, tuple[str, ...]]:
    """The interpreters a local run of roles of ``targets`` (target: its roles) starts them
    with: those ``chosen`` (``--interpreter``), and for a target neither chosen nor ``host``'s,
    the emulation of it (aarch64: :func:`aarch64_interpreter`). Found before any role starts,
    so a run that cannot start a role is refused at once, not after the others started.

    Raises:
        EmulationUnavailable: a role's target is not this host's, no interpreter was given
            for it, and this host cannot emulate it (what is missing, the roles named).
    """
    found = {target: tuple(prefix) for target, prefix in (chosen or {}).items()}
    for target, roles in sorted(targets.items()):
        if not roles or target == host or target in found:
            continue
        named = _roles_text(roles)
        if target != "aarch64":
            raise EmulationUnavailable(
                f"{named} built for {target}, and this machine is {host}: give "
                f"--interpreter {target}=COMMAND"
            )
        try:
            found[target] = aarch64_interpreter()
        except EmulationUnavailable as error:
            raise EmulationUnavailable(
                f"{named} built for aarch64 and this machine is {host}, so "
                f"{'it runs' if len(roles) == 1 else 'they run'} under qemu-aarch64, but "
                f"{error} (or give --interpreter aarch64=COMMAND)"
            ) from None
    return found


def _roles_text(roles: Collection[int]) -> str:
    ordered = sorted(roles)
    shown = ", ".join(map(str, ordered[:8])) + (", ..." if len(ordered) > 8 else "")
    return f"role {shown} is" if len(ordered) == 1 else f"roles {shown} are"


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
