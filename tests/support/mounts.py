"""A tmpfs of the test's own, for checkpoints on a small or read-only disk."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.mounts import MountUnavailable, tmpfs


def mount_tmpfs(where: Path, options: str) -> Iterator[Path]:
    """Mount a tmpfs with ``options`` (``size=64k``, ``ro,size=128k``) at ``where``, yield it,
    and unmount it after; the test is skipped where ``mount`` is not permitted (it needs
    root). A generator, for a fixture to ``yield from``."""
    with contextlib.ExitStack() as stack:
        try:
            folder = stack.enter_context(tmpfs(where, options))
        except MountUnavailable as error:
            pytest.skip(f"cannot mount a tmpfs here: {error}")
        yield folder
