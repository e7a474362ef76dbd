"""Writing files so that a reader sees the old file or the whole new one, never half; reading
a file a user named without letting it be endless or block; finding the files that ship inside
the package."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from alpha.errors import UsageError

__all__ = [
    "fsync_folder",
    "output_folder",
    "package_data",
    "read_regular_file",
    "role_file",
    "write_atomically",
    "write_bytes_atomically",
]


def role_file(role: int, suffix: str) -> str:
    """The name of one of a role's files: ``role-NNNNNN`` (six digits, the role) and ``suffix``
    (``.pyz`` artifact, ``.json`` description or report, ``.log`` log). The one spelling, so
    that files sort in role order and every reader finds what every writer wrote."""
    return f"role-{role:06d}{suffix}"


def package_data(relative: str) -> Path:
    """The file or folder ``relative`` (``/``-separated, e.g. ``"data/plans/digits.toml"``)
    among the package data of ``alpha`` (``docs/install.md``).

    Found with :func:`importlib.resources.files`, so it is the same file in a source checkout,
    an editable install and an installed wheel; whether it exists is the reader's to find out.

    Raises:
        FileNotFoundError: ``alpha`` was imported from something other than a folder (a zip
            archive, as inside a role's artifact), where its package data has no path.
    """
    # Imported here, not at the top: a participant imports this module but never its data.
    from importlib.resources import files

    found = files("alpha").joinpath(*relative.split("/"))
    if not isinstance(found, Path):
        raise FileNotFoundError(
            f"alpha's {relative} has no path: alpha was imported from {found!s}, not from a "
            "folder; install alpha with pip (docs/install.md)"
        )
    return found


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
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` durable: fsync the folder itself."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def write_bytes_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """:func:`write_atomically` for bytes already in memory."""

    def write(out: IO[bytes]) -> None:
        out.write(data)

    write_atomically(path, write, mode)


# What a path names, when it is not a regular file: for the refusal's message.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path``, which holds at most ``limit`` of them.

    For a file a user named: it is opened non-blocking, so that a FIFO is refused at once
    instead of waiting for a writer; anything but a regular file (a device such as /dev/zero,
    a FIFO, a socket, a directory) is refused before a byte is read; and at most ``limit + 1``
    bytes are ever read.

    Raises:
        OSError: it cannot be opened or read; it is not a regular file (``EINVAL``, the
            ``strerror`` names what it is); or it holds more than ``limit`` bytes (``EFBIG``).
    """
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a special file")
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(handle, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise OSError(errno.EFBIG, f"it holds more than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(handle)
