"""A tmpfs of the harness's own: a small (or read-only) file system for a checkpoint folder
that fills up, for the gates and the tests (``mount`` needs root; where it is not permitted,
:class:`MountUnavailable` says why, and the caller skips with that reason)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["FILL_LIMIT", "MountUnavailable", "fill", "tmpfs"]


class MountUnavailable(RuntimeError):
    """``mount -t tmpfs`` is not permitted here; the message is ``mount``'s reason."""


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs with ``options`` (``size=64k``, ``ro,size=128k``) at ``where`` (made if
    missing), yield it, and unmount it after (lazily: a process still in it does not keep it).

    Raises:
        MountUnavailable: the mount was refused (not root, no permission in this sandbox).
    """
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise MountUnavailable(done.stderr.strip() or f"mount exited {done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


FILL_LIMIT: Final = 64 * 1024 * 1024
"""The largest file system :func:`fill` fills: a small tmpfs of the harness's own, never a
real disk by mistake."""


def fill(folder: Path) -> None:
    """Write into ``folder`` until its file system has not one byte left (ENOSPC).

    Raises:
        ValueError: ``folder``'s file system is larger than :data:`FILL_LIMIT`.
    """
    found = os.statvfs(folder)
    if found.f_blocks * found.f_frsize > FILL_LIMIT:
        raise ValueError(
            f"{folder} is on a file system of {found.f_blocks * found.f_frsize} bytes: fill only "
            f"fills a small tmpfs (at most {FILL_LIMIT} bytes)"
        )
    for name, size in (("filler", 4096), ("filler-tail", 1)):
        try:
            with (folder / name).open("ab", buffering=0) as file:
                while True:
                    file.write(bytes(size))
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
