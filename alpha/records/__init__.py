"""The run folder's records: the commit record the roles agree on, and the progress records role
0 writes after each round and the launcher reads as they come (``docs/progress.md``).
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.records.commit import (
        COMMIT_FORMAT,
        COMMIT_NAME,
        DIGEST_SIZE,
        CommitRecord,
        check_reports,
        subtree_digest,
    )
    from alpha.records.progress import (
        MAX_RECORD_BYTES,
        MAX_ROUND,
        PROGRESS_DIR,
        RecordReader,
        RecordWriter,
        RoundRecord,
        decode,
        encode,
        progress_path,
    )

__all__ = [
    "COMMIT_FORMAT",
    "COMMIT_NAME",
    "DIGEST_SIZE",
    "MAX_RECORD_BYTES",
    "MAX_ROUND",
    "PROGRESS_DIR",
    "CommitRecord",
    "RecordReader",
    "RecordWriter",
    "RoundRecord",
    "check_reports",
    "decode",
    "encode",
    "progress_path",
    "subtree_digest",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.records.commit": (
            "COMMIT_FORMAT",
            "COMMIT_NAME",
            "DIGEST_SIZE",
            "CommitRecord",
            "check_reports",
            "subtree_digest",
        ),
        "alpha.records.progress": (
            "MAX_RECORD_BYTES",
            "MAX_ROUND",
            "PROGRESS_DIR",
            "RecordReader",
            "RecordWriter",
            "RoundRecord",
            "decode",
            "encode",
            "progress_path",
        ),
    },
)
