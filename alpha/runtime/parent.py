"""A launched participant dies with its launcher.

The launcher names itself in each participant's environment (``ALPHA_LAUNCHER_PID``); the
participant polls its parent pid and stops with :class:`alpha.errors.LauncherLost` as soon as
the parent is no longer that process: a launcher killed with SIGKILL cannot stop its
participants itself, and a run no one watches must not go on.

Linux's ``PR_SET_PDEATHSIG`` would let the kernel do this, but it fires when the *thread* that
forked the child exits, not the process, and trio starts processes from a worker thread that
may exit at any time: participants would be killed while their launcher lives. A pidfd of the
parent, opened while the parent is still the launcher, is the safe equivalent: it becomes
readable when that process ends, and the watch sleeps on it, waking for nothing else (a
thousand roles that each polled five times a second would spend a core's fifth on it while
they wait for one another to start). Where pidfds are not available (Linux before 5.3), the
watch polls the parent pid every :data:`LAUNCHER_POLL` seconds instead.

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
"""Seconds between two looks at the parent pid where no pidfd of it can be opened. A
participant outlives its launcher by at most this much (plus its exit), far less than any
budget (seconds)."""


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


def _launcher_pidfd(launcher: int) -> int | None:
    """A pidfd of ``launcher`` while it is still this process's parent (so the pidfd is of that
    very process, not of another that took its pid); None when the parent is another already,
    or no pidfd can be opened here."""
    try:
        pidfd = os.pidfd_open(launcher)
    except (AttributeError, OSError):  # gone already, or no pidfds (not Linux, before 5.3)
        return None
    if os.getppid() != launcher:
        os.close(pidfd)
        return None
    return pidfd


async def watch_for_launcher_loss(environ: Mapping[str, str] | None = None) -> None:
    """Watch this process's parent for the loss of its launcher: return at once when no
    launcher is named in ``environ`` (default ``os.environ``); otherwise wait, forever, for
    the launcher to end, on a pidfd of it, or where none can be opened by looking at the parent
    pid every :data:`LAUNCHER_POLL` seconds.

    Raises:
        LauncherLost: the parent is no longer the launcher: it died and this process was
            adopted by another.
        UsageError: the variable is not a process id (see :func:`launcher_pid`).
    """
    launcher = launcher_pid(os.environ if environ is None else environ)
    if launcher is None:
        return
    pidfd = _launcher_pidfd(launcher)
    if pidfd is not None:
        try:
            await trio.lowlevel.wait_readable(pidfd)  # readable once the launcher has ended
        finally:
            os.close(pidfd)
    # Ended (this process was adopted by then), or no pidfd: look at the parent.
    while True:
        parent = os.getppid()
        if parent != launcher:
            raise LauncherLost(launcher=launcher, parent=parent)
        await trio.sleep(LAUNCHER_POLL)
