"""A fresh attempt area (alpha/records/reports.py clear_attempt): before any role starts, and
on every compile, the previous launch's reports (commit.json included), logs, progress
records and traces are swept from the run folder, and nothing else."""

from __future__ import annotations

from pathlib import Path

from alpha.records.folder import (
    COMMIT_NAME,
    HISTORY_CSV,
    LOGS_DIR,
    PROGRESS_DIR,
    REPORTS_DIR,
    RUN_JSON,
    TRACE_DIR,
    artifact_name,
    log_name,
    progress_name,
    report_name,
    trace_name,
)
from alpha.records.reports import ATTEMPT_FILES, clear_attempt


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path


def test_every_file_a_launch_writes_is_swept_and_nothing_else(tmp_path: Path) -> None:
    swept = [
        _touch(tmp_path / REPORTS_DIR / COMMIT_NAME),
        _touch(tmp_path / REPORTS_DIR / report_name(0)),
        _touch(tmp_path / REPORTS_DIR / report_name(7)),
        _touch(tmp_path / REPORTS_DIR / f"{report_name(3)}.staged"),
        _touch(tmp_path / LOGS_DIR / log_name(0)),
        _touch(tmp_path / LOGS_DIR / log_name(7)),
        _touch(tmp_path / LOGS_DIR / "ssh-L-0-1.log"),
        _touch(tmp_path / PROGRESS_DIR / progress_name(0)),
        _touch(tmp_path / TRACE_DIR / trace_name(0)),
        _touch(tmp_path / TRACE_DIR / trace_name(7)),
    ]
    kept = [
        _touch(tmp_path / RUN_JSON),
        _touch(tmp_path / artifact_name(0)),
        _touch(tmp_path / HISTORY_CSV),
        _touch(tmp_path / "checkpoints" / "LATEST"),
        _touch(tmp_path / REPORTS_DIR / "notes.txt"),  # the user's own
        _touch(tmp_path / TRACE_DIR / "trace.json"),  # what alpha observe trace may write
    ]
    (tmp_path / LOGS_DIR / "kept.log").mkdir()  # a folder is never removed
    assert clear_attempt(tmp_path) == len(swept)
    assert [path for path in swept if path.exists()] == []
    assert all(path.exists() for path in kept)
    assert (tmp_path / LOGS_DIR / "kept.log").is_dir()
    assert clear_attempt(tmp_path) == 0  # nothing left to sweep


def test_a_folder_without_an_attempt_has_nothing_to_sweep(tmp_path: Path) -> None:
    assert clear_attempt(tmp_path / "absent") == 0
    assert clear_attempt(tmp_path) == 0


def test_the_swept_folders_are_those_the_map_names() -> None:
    assert [name for name, _ in ATTEMPT_FILES] == [REPORTS_DIR, LOGS_DIR, PROGRESS_DIR, TRACE_DIR]
