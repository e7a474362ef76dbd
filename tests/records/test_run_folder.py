"""records/folder.py: the run folder's one map, and the records that follow it."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from alpha.records import commit, progress
from alpha.records.folder import (
    ARTIFACT_GLOB,
    COMMIT_NAME,
    PROGRESS_DIR,
    REPORT_GLOB,
    artifact_name,
    log_name,
    progress_name,
    report_name,
)


def test_each_role_file_has_one_spelling_in_role_order() -> None:
    names = [artifact_name(role) for role in (0, 7, 10, 999_999)]
    assert names == ["role-000000.pyz", "role-000007.pyz", "role-000010.pyz", "role-999999.pyz"]
    assert names == sorted(names)
    assert all(fnmatch(name, ARTIFACT_GLOB) for name in names)
    assert fnmatch(report_name(3), REPORT_GLOB) and not fnmatch(report_name(3), ARTIFACT_GLOB)
    assert (log_name(3), progress_name(3)) == ("role-000003.log", "role-000003.jsonl")


def test_the_records_write_where_the_map_says(tmp_path: Path) -> None:
    assert progress.progress_path(tmp_path, 2) == tmp_path / PROGRESS_DIR / progress_name(2)
    # The records' modules still name what they write, from the map.
    assert (progress.PROGRESS_DIR, commit.COMMIT_NAME) == (PROGRESS_DIR, COMMIT_NAME)
