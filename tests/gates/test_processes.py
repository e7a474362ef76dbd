"""Finding a run's participants by their stderr (harness/processes.py ``role_pids``), on real
processes: one whose stderr is a role's log in the run's ``logs/`` is that role; one whose
stderr is any other file, or a role's log in another folder, is no participant of the run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alpha.records import LOGS_DIR, log_name
from harness.processes import role_pids


@contextmanager
def _writing_to(log: Path) -> Iterator[int]:
    """A process whose stderr is ``log``, for as long as the block runs; its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], stderr=stderr
        )
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_a_process_writing_a_roles_log_is_that_role(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with (
        _writing_to(run / LOGS_DIR / log_name(3)) as three,
        _writing_to(run / LOGS_DIR / log_name(12)) as twelve,
        _writing_to(run / LOGS_DIR / "launch.log") as other,
        _writing_to(tmp_path / "elsewhere" / LOGS_DIR / log_name(3)) as stranger,
    ):
        found = role_pids(run)
    assert found == {three: 3, twelve: 12}
    assert other not in found
    assert stranger not in found


def test_a_run_folder_named_through_a_link_finds_the_same_roles(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (tmp_path / "link").symlink_to(run)
    with _writing_to(run / LOGS_DIR / log_name(0)) as zero:
        assert role_pids(tmp_path / "link") == {zero: 0}


def test_a_process_that_ended_is_no_longer_found(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with _writing_to(run / LOGS_DIR / log_name(5)) as five:
        assert role_pids(run) == {five: 5}
    assert role_pids(run) == {}
