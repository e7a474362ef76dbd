"""The one way a test runs ``alpha`` as a real process: this interpreter running the package
the tests import (``python -m alpha``), with its exit code, stdout and stderr kept apart.

A test that needs the command's parsing and exit code alone calls ``alpha.app.cli.main(argv)``
in-process and reads ``capsys``; one that needs a process of its own (an exit status, a
signal, one line on stderr and no traceback, a run of real participants) uses these.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .paths import ROOT

ALPHA: Final = (sys.executable, "-m", "alpha")
"""The command line that starts ``alpha``, for a test that drives the process itself
(``subprocess.Popen([*ALPHA, "launch", folder], ...)``: a signal, a second run, a kill)."""


def run_alpha(
    *argv: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``alpha ARGV`` to its end and return what it said, as text; a non-zero exit is
    the test's to judge (``check=False``), never an exception here."""
    return subprocess.run(
        [*ALPHA, *argv],
        cwd=cwd,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def python_output(code: str, *argv: str, env: Mapping[str, str] | None = None) -> str:
    """What ``python -c CODE ARGV`` prints: this interpreter, in the checkout (so it imports
    the package the tests import), with ``env`` over this process's environment. It must exit
    0 (its stderr is the assertion's message)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
