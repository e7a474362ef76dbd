"""Running a participant built for AArch64 on this host, for the tests and gates: the
package's own :mod:`alpha.launch.emulation` (a real AArch64 CPython under ``qemu-aarch64``,
from the sysroot ``make aarch64`` builds; ``docs/emulation.md``), and the place the tests find it.

``python -m harness.emulation`` prints the interpreter prefix as one shell word list, for
``alpha run --interpreter aarch64="..."`` (``alpha emulation`` prints the same).
"""

from __future__ import annotations

import shlex
import sys
from typing import Final

from alpha.errors import EmulationUnavailable
from alpha.launch import (
    GUEST_PYTHON,
    HOME_ENV,
    QEMU,
    aarch64_interpreter,
    default_home,
    emulated,
)

__all__ = [
    "AARCH64_HOME",
    "GUEST_PYTHON",
    "HOME_ENV",
    "QEMU",
    "EmulationUnavailable",
    "aarch64_interpreter",
    "emulated",
]

AARCH64_HOME: Final = default_home()
"""Where ``make aarch64`` builds: ``sysroot/``, ``site/`` and ``stamp`` (written last):
``$ALPHA_AARCH64_HOME``, or the checkout's ``.cache/aarch64``."""


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
