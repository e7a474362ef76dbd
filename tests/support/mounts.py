"""A tmpfs of the test's own, for checkpoints on a small or read-only disk."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mount_tmpfs(where: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs with ``options`` (``size=64k``, ``ro,size=128k``) at ``where``, yield it,
    and unmount it after; the test is skipped where ``mount`` is not permitted (it needs
    root). A generator, for a fixture to ``yield from``."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
