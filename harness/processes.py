"""Finding participant processes by what their command line names, for tests and gates."""

from __future__ import annotations

from pathlib import Path

__all__ = ["running"]


def running(needle: str | Path, *, whole: bool = False) -> list[int]:
    """The pids of processes whose command line contains ``needle`` (an artifact, a role
    description, a run folder): as one argument with ``whole``, else anywhere in it.

    A process that exits meanwhile is skipped. A process just started may not show its
    command line yet: the kernel sets it at the end of exec.
    """
    text = str(needle).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it exited meanwhile
        if (text in cmdline.split(b"\0")) if whole else (text in cmdline):
            found.append(int(entry.name))
    return found
