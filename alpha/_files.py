"""Writing files so that a reader sees the old file or the whole new one, never half."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from alpha.errors import UsageError

__all__ = ["output_folder", "write_atomically", "write_bytes_atomically"]


def output_folder(path: Path) -> Path:
    """Make ``path`` (and its parents) as a command's output folder, and return it.

    Raises:
        UsageError: it cannot be made (a file stands there, no permission, a read-only place):
            the command line names a folder that cannot be used, and nothing was started.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or str(error)
        raise UsageError(f"cannot use {path} as the output folder: {reason}") from None
    return path


def write_atomically(path: Path, write: Callable[[IO[bytes]], None], mode: int = 0o644) -> None:
    """Write ``path`` through a temporary file in its folder, fsync it, give it ``mode``,
    rename it into place, and fsync the folder so the rename is durable too.

    Raises:
        OSError: the file cannot be written; no temporary file is left behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w+b") as out:
            write(out)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def write_bytes_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """:func:`write_atomically` for bytes already in memory."""

    def write(out: IO[bytes]) -> None:
        out.write(data)

    write_atomically(path, write, mode)
