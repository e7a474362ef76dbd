"""A launched participant dies with its launcher.

The launcher names itself in each participant's environment (``ALPHA_LAUNCHER_PID``); the
participant polls its parent pid and stops with :class:`alpha.errors.LauncherLost` as soon as
the parent is no longer that process: a launcher killed with SIGKILL cannot stop its
participants itself, and a run no one watches must not go on.

Linux's ``PR_SET_PDEATHSIG`` would let the kernel do this, but it fires when the *thread* that
forked the child exits, not the process, and trio starts processes from a worker thread that
may exit at any time: participants would be killed while their launcher lives. Polling is the
safe equivalent.

A participant runs in a session of its own (the launcher starts it with ``setsid``, so a
terminal's Ctrl-C reaches the launcher alone); a session changes its process group, not its
parent, so this watch is the same in it: ``tests/system/test_interrupts.py`` kills the launcher
with SIGKILL and finds every role gone.

A participant started by hand (no ``ALPHA_LAUNCHER_PID``) watches nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

import trio

from alpha.errors import LauncherLost, UsageError
from alpha.wire.console import FAILURE_CLOCK  # the failure-clock line: launcher-participant bytes

__all__ = [
    "FAILURE_CLOCK",
    "LAUNCHER_PID_ENV",
    "LAUNCHER_POLL",
    "launcher_pid",
    "watch_for_launcher_loss",
]

LAUNCHER_PID_ENV: Final = "ALPHA_LAUNCHER_PID"
"""The environment variable in which the launcher gives each participant its own pid."""

LAUNCHER_POLL: Final = 0.2
"""Seconds between two looks at the parent pid. A participant outlives its launcher by at most
this much (plus its exit), far less than any budget (seconds); a ``getppid()`` five times a
second costs nothing measurable."""


def launcher_pid(environ: Mapping[str, str]) -> int | None:
    """The launcher's pid named in ``environ``, or None when no launcher started this process.

    Raises:
        UsageError: the variable is set but is not a process id (a decimal number >= 2: pid 1
            is init, which adopts orphans, so a launcher can never be pid 1).
    """
    text = environ.get(LAUNCHER_PID_ENV)
    if text is None:
        return None
    if not (text.isascii() and text.isdecimal() and len(text) <= 10 and int(text) >= 2):
        raise UsageError(
            f"{LAUNCHER_PID_ENV} must be the launcher's process id (a number >= 2), got "
            f"{text[:32]!r}; unset it to run a participant by hand"
        )
    return int(text)


async def watch_for_launcher_loss(environ: Mapping[str, str] | None = None) -> None:
    """Watch this process's parent for the loss of its launcher: return at once when no
    launcher is named in ``environ`` (default ``os.environ``); otherwise look at the parent
    pid every :data:`LAUNCHER_POLL` seconds, forever.

    Raises:
        LauncherLost: the parent is no longer the launcher: it died and this process was
            adopted by another.
        UsageError: the variable is not a process id (see :func:`launcher_pid`).
    """
    launcher = launcher_pid(os.environ if environ is None else environ)
    if launcher is None:
        return
    while True:
        parent = os.getppid()
        if parent != launcher:
            raise LauncherLost(launcher=launcher, parent=parent)
        await trio.sleep(LAUNCHER_POLL)
