"""Writing files so that a reader sees the old file or the whole new one, never half; reading
a file a user named without letting it be endless or block; finding the files that ship inside
the package."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Final

from alpha.errors import FolderInUse, UsageError

__all__ = [
    "LOCK_NAME",
    "STAGED_SUFFIX",
    "TEMPORARY_SUFFIX",
    "fsync_folder",
    "hold_folder",
    "output_folder",
    "package_data",
    "read_regular_file",
    "role_file",
    "temporaries_of",
    "write_atomically",
    "write_bytes_atomically",
]

STAGED_SUFFIX: Final = ".staged"
"""The end of the name of a file or folder written but not yet published, that a commit
renames into place: a role's report waiting for the run's commit
(``role-NNNNNN.json.staged``), a checkpoint generation waiting for its publication."""


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


LOCK_NAME: Final = ".alpha.lock"
"""The file an Alpha command holds locked (``flock``) in a folder it writes: its content names
the holder, for the message a second command gets."""


@contextlib.contextmanager
def hold_folder(path: Path, command: str) -> Iterator[Path]:
    """Make ``path`` as an output folder (:func:`output_folder`) and hold it for ``command``
    (e.g. ``alpha run``) until the block ends: a second command told to write there is refused
    at once instead of overwriting the first one's files. The lock is the kernel's (``flock``
    on :data:`LOCK_NAME`): it goes with the holding process, however that ends, so a crashed
    command never leaves a folder locked. The lock file stays, empty of meaning once released.

    Raises:
        FolderInUse: another process holds the folder; it names that process.
        UsageError: the folder cannot be made.
    """
    created = not path.exists()
    output_folder(path)
    lock = path / LOCK_NAME
    try:
        handle = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise UsageError(f"cannot use {path} as the output folder: {error.strerror}") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(handle, 200, 0).decode("utf-8", "replace").strip()
            raise FolderInUse(str(path), holder or "another alpha command") from None
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{command} (pid {os.getpid()})\n".encode(), 0)
        yield path
    finally:
        if created and _holds_only_the_lock(path):
            # A folder this call made and nothing was written into (the command was refused
            # or interrupted first) goes again: no empty folder is left behind.
            lock.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.rmdir()
        os.close(handle)  # releases the lock


def _holds_only_the_lock(path: Path) -> bool:
    try:
        return [entry.name for entry in path.iterdir()] == [LOCK_NAME]
    except OSError:
        return False


TEMPORARY_SUFFIX: Final = ".tmp"
"""The suffix of :func:`write_atomically`'s temporary files, ``.NAME.RANDOM.tmp``."""


def write_atomically(path: Path, write: Callable[[IO[bytes]], None], mode: int = 0o644) -> None:
    """Write ``path`` through a temporary file in its folder, fsync it, give it ``mode``,
    rename it into place, and fsync the folder so the rename is durable too.

    Raises:
        OSError: the file cannot be written; no temporary file is left behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX
        )
        with os.fdopen(handle, "w+b") as out:
            write(out)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def temporaries_of(folder: Path, pattern: str) -> list[Path]:
    """The temporary files :func:`write_atomically` makes for the files of ``folder`` whose
    names match ``pattern`` (``role-*.pyz``): what an interrupted writer may leave when a signal
    lands between the temporary's making and its guard."""
    return sorted(folder.glob(f".{pattern}.*{TEMPORARY_SUFFIX}"))


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
