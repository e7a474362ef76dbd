"""The reports folder of a run (``reports/`` beside the artifacts, ``docs/roles.md``): cleared
before a launch, and read after it, each role's report checked against role 0's commit record.
Only a committed run's reports count (``docs/failure.md``).

Each launch is a fresh attempt: :func:`clear_attempt` sweeps what an earlier launch left in the
folder (its reports and commit record, its logs, its progress records, its traces) before any
role starts, so nothing of an earlier launch sits beside a failed one (``docs/launch.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from alpha.errors import CommitInvalid
from alpha.files import STAGED_SUFFIX
from alpha.records.commit import COMMIT_NAME, CommitRecord, check_reports
from alpha.records.folder import LOGS_DIR, PROGRESS_DIR, REPORTS_DIR, TRACE_DIR

__all__ = ["ATTEMPTS_DIR", "ATTEMPT_FILES", "clear_attempt", "committed_reports", "keep_attempt"]

ATTEMPT_FILES: Final = (
    (REPORTS_DIR, ("*.json", f"*{STAGED_SUFFIX}")),
    (LOGS_DIR, ("*.log",)),
    (PROGRESS_DIR, ("*.jsonl", f"*{STAGED_SUFFIX}")),
    (TRACE_DIR, ("*.trace",)),
)
"""What one launch writes in its run folder, and the next sweeps: each subfolder with the
patterns of the files a launch puts there (every role's report and the commit record; every
role's log and an SSH forward's; role 0's progress records; a traced launch's traces). Only
these: a file of the user's in those folders, and everything else in the run folder, stays."""


def clear_attempt(directory: Path) -> int:
    """Sweep the previous attempt from the run folder ``directory``: every file
    :data:`ATTEMPT_FILES` names (reports, ``reports/commit.json``, logs, progress records), so
    that a launch starts with none of an earlier launch's results beside it, and a compile
    leaves none of a former build's roles. Called before any role starts (``alpha run``,
    ``alpha launch``, ``alpha exchange``) and by every compile. Returns how many files it
    removed; a folder that does not exist has none.

    Raises:
        OSError: a file cannot be removed (a read-only folder): the launch must not start
            beside it.
    """
    removed = 0
    for name, patterns in ATTEMPT_FILES:
        folder = directory / name
        for pattern in patterns:
            for stale in folder.glob(pattern):
                if stale.is_file() or stale.is_symlink():
                    stale.unlink(missing_ok=True)
                    removed += 1
    return removed


ATTEMPTS_DIR: Final = "attempts"
"""Where ``alpha run --restarts`` keeps each failed attempt's files (``attempts/NNN/``, the
attempt's number from 0 in three digits or more), so that the next attempt's sweep
(:func:`clear_attempt`) loses none of them (docs/recovery.md)."""


def keep_attempt(directory: Path, attempt: int) -> Path:
    """Move the files of the attempt just run in the run folder ``directory`` (what
    :data:`ATTEMPT_FILES` names) into ``directory/attempts/NNN/``, each under the subfolder
    it was in, and return that folder; the next attempt then starts with none of them beside
    it, and none is lost. A file of the user's in those folders stays where it is.

    Raises:
        OSError: a file cannot be moved (a read-only folder).
    """
    kept = directory / ATTEMPTS_DIR / f"{attempt:03d}"
    for name, patterns in ATTEMPT_FILES:
        folder = directory / name
        for pattern in patterns:
            for file in folder.glob(pattern):
                if file.is_file() or file.is_symlink():
                    (kept / name).mkdir(parents=True, exist_ok=True)
                    file.replace(kept / name / file.name)
    return kept


def committed_reports(
    folder: Path, children: Callable[[int], Sequence[int]]
) -> tuple[CommitRecord, dict[int, dict[str, Any]]]:
    """The run's commit record in the reports folder ``folder``, and every role's report
    there, checked against it given each role's children in the tree: a run's results count
    only once role 0 committed them (``docs/failure.md``).

    Raises:
        CommitInvalid: there is no commit record, or the reports are not the committed ones.
    """
    try:
        record = CommitRecord.decode((folder / COMMIT_NAME).read_bytes())
    except FileNotFoundError:
        raise CommitInvalid(
            f"{folder / COMMIT_NAME} does not exist: the run did not commit"
        ) from None
    data: dict[int, bytes] = {}
    for path in folder.glob("role-*.json"):
        data[int(path.stem.removeprefix("role-"))] = path.read_bytes()
    check_reports(record, data, children)
    return record, {role: json.loads(text) for role, text in data.items()}
