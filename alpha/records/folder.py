"""The run folder's one map: the names of what a compiled run's folder holds beside its
artifacts (``docs/artifacts.md``, ``docs/launch.md``).

    FOLDER/run.json          what the build wrote (alpha.artifact.run_json)
    FOLDER/role-NNNNNN.pyz   one artifact per role
    FOLDER/logs/             each role's stderr, role-NNNNNN.log (the launcher writes them)
    FOLDER/reports/          each finished role's report, role-NNNNNN.json, and the commit record
    FOLDER/progress/         the rounds a learner records (alpha.records.progress.PROGRESS_DIR)

Names only: no module here reads or writes a file, so anything may import it, an artifact's
entry before numpy or trio included.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LOGS_DIR", "REPORTS_DIR", "RUN_JSON"]

RUN_JSON: Final = "run.json"
"""The file, beside the artifacts, that lists what a build wrote."""

REPORTS_DIR: Final = "reports"
"""Where, beside its artifact, a finished role writes its report (``docs/roles.md``)."""

LOGS_DIR: Final = "logs"
"""Where the launcher puts each role's stderr, ``role-NNNNNN.log`` (``docs/launch.md``)."""
