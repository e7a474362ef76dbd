"""``alpha emulation [show|build [DEST]]``: what runs a role built for AArch64 on this x86-64
host (``docs/emulation.md``). ``show`` prints the interpreter prefix ``alpha run`` and ``alpha
launch`` start such a role with (or, exit 2, what is missing); ``build`` builds the sysroot
and site it needs, with the build the package ships, pinned to this alpha's own trio and numpy.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from alpha.app._options import print_json
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK

__all__ = ["emulation_command"]


def emulation_command(args: argparse.Namespace) -> int:
    """``alpha emulation``: 0 when the emulation is ready (``show``) or was built (``build``).

    Raises:
        EmulationUnavailable: ``show``, and the emulation is not ready (what is missing named).
    """
    from alpha.launch.emulation import BUILD_SCRIPT, aarch64_interpreter, default_home

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    if args.action == "build":
        return _build(BUILD_SCRIPT, home)
    prefix = aarch64_interpreter(home)
    if args.json:
        print_json({"home": str(home.resolve()), "interpreter": list(prefix)})
    else:
        print(shlex.join(prefix))
    return EXIT_OK


def _build(script: Path, home: Path) -> int:
    """Run the shipped build into ``home``; its progress lines go to stderr as they come."""
    home.mkdir(parents=True, exist_ok=True)
    print(f"emulation: building the AArch64 sysroot in {home}", file=sys.stderr)
    environment = {**os.environ, "ALPHA_VENV_PYTHON": sys.executable}
    built = subprocess.run(["bash", str(script), str(home)], env=environment, check=False)
    if built.returncode != 0:
        print(f"emulation: the build failed (exit {built.returncode}); see above", file=sys.stderr)
        return EXIT_FAILURE
    print(f"emulation: ready: alpha run and alpha launch use {home}", file=sys.stderr)
    return EXIT_OK
