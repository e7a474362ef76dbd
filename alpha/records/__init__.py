"""The run folder's records: the folder's one map of names (``folder``), the commit record the
roles agree on (``commit``), the reports folder read against it (``reports``), and the progress
records role 0 writes after each round and the launcher reads as they come (``progress``,
``docs/progress.md``).
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.records.commit import (
        COMMIT_FORMAT,
        CommitRecord,
        check_reports,
        subtree_digest,
    )
    from alpha.records.folder import (
        ARTIFACT_GLOB,
        CHECKPOINTS_DIR,
        COMMIT_NAME,
        HISTORY_CSV,
        LOGS_DIR,
        LOSS_PNG,
        PROGRESS_DIR,
        REPORT_GLOB,
        REPORTS_DIR,
        RUN_JSON,
        artifact_name,
        log_name,
        progress_name,
        report_name,
    )
    from alpha.records.progress import (
        MAX_GENERATION_CHARS,
        MAX_RECORD_BYTES,
        MAX_ROUND,
        CheckpointRecord,
        RecordReader,
        RecordWriter,
        RoundRecord,
        decode,
        encode,
        progress_path,
    )
    from alpha.records.reports import (
        ATTEMPT_FILES,
        ATTEMPTS_DIR,
        clear_attempt,
        committed_reports,
        keep_attempt,
    )

__all__ = [
    "ARTIFACT_GLOB",
    "ATTEMPTS_DIR",
    "ATTEMPT_FILES",
    "CHECKPOINTS_DIR",
    "COMMIT_FORMAT",
    "COMMIT_NAME",
    "HISTORY_CSV",
    "LOGS_DIR",
    "LOSS_PNG",
    "MAX_GENERATION_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_ROUND",
    "PROGRESS_DIR",
    "REPORTS_DIR",
    "REPORT_GLOB",
    "RUN_JSON",
    "CheckpointRecord",
    "CommitRecord",
    "RecordReader",
    "RecordWriter",
    "RoundRecord",
    "artifact_name",
    "check_reports",
    "clear_attempt",
    "committed_reports",
    "decode",
    "encode",
    "keep_attempt",
    "log_name",
    "progress_name",
    "progress_path",
    "report_name",
    "subtree_digest",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.records.commit": (
            "COMMIT_FORMAT",
            "CommitRecord",
            "check_reports",
            "subtree_digest",
        ),
        "alpha.records.folder": (
            "COMMIT_NAME",
            "ARTIFACT_GLOB",
            "CHECKPOINTS_DIR",
            "HISTORY_CSV",
            "LOGS_DIR",
            "LOSS_PNG",
            "PROGRESS_DIR",
            "REPORTS_DIR",
            "REPORT_GLOB",
            "RUN_JSON",
            "artifact_name",
            "log_name",
            "progress_name",
            "report_name",
        ),
        "alpha.records.progress": (
            "MAX_GENERATION_CHARS",
            "MAX_RECORD_BYTES",
            "MAX_ROUND",
            "CheckpointRecord",
            "RecordReader",
            "RecordWriter",
            "RoundRecord",
            "decode",
            "encode",
            "progress_path",
        ),
        "alpha.records.reports": (
            "ATTEMPTS_DIR",
            "ATTEMPT_FILES",
            "clear_attempt",
            "committed_reports",
            "keep_attempt",
        ),
    },
)
