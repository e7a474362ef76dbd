"""The run folder's one map: the names of what a compiled run's folder holds beside its
artifacts (``docs/artifacts.md``, ``docs/launch.md``).

    FOLDER/run.json          what the build wrote (alpha.artifact.run_json)
    FOLDER/role-NNNNNN.pyz   one artifact per role
    FOLDER/logs/             each role's stderr, role-NNNNNN.log (the launcher writes them)
    FOLDER/reports/          each finished role's report, role-NNNNNN.json, and the commit record
    FOLDER/reports/commit.json   the commit record role 0 publishes (records.commit)
    FOLDER/progress/         the rounds a learner records, role-NNNNNN.jsonl (records.progress)
    FOLDER/checkpoints/      the default checkpoint folder (alpha.checkpoint.store)
    FOLDER/trace/            each traced role's trace, role-NNNNNN.trace (records.trace)
    FOLDER/loss.png, FOLDER/history.csv   what alpha run draws and writes of the rounds

Names only: no module here reads or writes a file, so anything may import it, an artifact's
entry before numpy or trio included.
"""

from __future__ import annotations

from typing import Final

from alpha.files import role_file

__all__ = [
    "ARTIFACT_GLOB",
    "CHECKPOINTS_DIR",
    "COMMIT_NAME",
    "HISTORY_CSV",
    "LOGS_DIR",
    "LOSS_PNG",
    "PROGRESS_DIR",
    "REPORTS_DIR",
    "REPORT_GLOB",
    "RUN_JSON",
    "TRACE_DIR",
    "artifact_name",
    "log_name",
    "progress_name",
    "report_name",
    "trace_name",
]

RUN_JSON: Final = "run.json"
"""The file, beside the artifacts, that lists what a build wrote."""

REPORTS_DIR: Final = "reports"
"""Where, beside its artifact, a finished role writes its report (``docs/roles.md``)."""

LOGS_DIR: Final = "logs"
"""Where the launcher puts each role's stderr, ``role-NNNNNN.log`` (``docs/launch.md``)."""

PROGRESS_DIR: Final = "progress"
"""Where, beside its artifacts, a run's progress files are (``progress/role-000000.jsonl``,
``docs/progress.md``)."""

TRACE_DIR: Final = "trace"
"""Where, beside its artifacts, a traced run's roles write their traces
(``trace/role-NNNNNN.trace``, ``docs/trace.md``)."""

COMMIT_NAME: Final = "commit.json"
"""The commit record's file name, in role 0's report folder (``reports/commit.json``)."""

CHECKPOINTS_DIR: Final = "checkpoints"
"""The checkpoint folder of a plan whose ``checkpoint.folder`` is empty, beside the artifacts
(``runs/NAME/checkpoints``, ``docs/checkpoints.md``)."""

LOSS_PNG: Final = "loss.png"
"""The loss curve ``alpha run`` draws beside the artifacts."""

HISTORY_CSV: Final = "history.csv"
"""Each round's loss and accuracies, as ``alpha run`` writes them beside the artifacts."""

ARTIFACT_GLOB: Final = "role-*.pyz"
"""Every role's artifact in a run folder (a stale one is removed before a build)."""

REPORT_GLOB: Final = "role-*.json"
"""Every role's report in a report folder."""


def artifact_name(role: int) -> str:
    """``role-NNNNNN.pyz``: the role's artifact."""
    return role_file(role, ".pyz")


def report_name(role: int) -> str:
    """``role-NNNNNN.json``: the role's report, in ``reports/``."""
    return role_file(role, ".json")


def log_name(role: int) -> str:
    """``role-NNNNNN.log``: the role's stderr, in ``logs/``."""
    return role_file(role, ".log")


def progress_name(role: int) -> str:
    """``role-NNNNNN.jsonl``: the rounds the role records, in ``progress/``."""
    return role_file(role, ".jsonl")


def trace_name(role: int) -> str:
    """``role-NNNNNN.trace``: the role's trace, in ``trace/``."""
    return role_file(role, ".trace")
