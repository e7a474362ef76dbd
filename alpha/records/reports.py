"""The reports folder of a run (``reports/`` beside the artifacts, ``docs/roles.md``): cleared
before a launch, and read after it, each role's report checked against role 0's commit record.
Only a committed run's reports count (``docs/failure.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from alpha.errors import CommitInvalid
from alpha.records.commit import COMMIT_NAME, CommitRecord, check_reports

__all__ = ["clear_reports", "committed_reports"]


def clear_reports(folder: Path) -> None:
    """Remove a previous launch's reports and commit record from the reports folder
    ``folder`` (if it exists), so that only this launch's can count as committed."""
    for stale in [*folder.glob("*.json"), *folder.glob("*.staged")]:
        stale.unlink()


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
