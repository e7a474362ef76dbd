"""The entry inside an artifact: what its loader calls once every member is checked.

Imported by a participant before numpy or trio: it checks the target first, and imports the
participant (and so numpy and trio) only then, in :func:`run_embedded`.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Final

from alpha.artifact.environ import BLAS_THREADS, TRACEBACK_ENV
from alpha.artifact.payload import check_target, read_artifact
from alpha.errors import AlphaError, TargetMismatch, one_line
from alpha.exitcodes import EXIT_USAGE
from alpha.files import role_file
from alpha.records.folder import REPORTS_DIR, TRACE_DIR, trace_name
from alpha.records.progress import progress_path
from alpha.wire.console import failed_line

__all__ = ["BLAS_THREADS", "REPORTS_DIR", "TRACEBACK_ENV", "run_embedded"]

# The exit code of an artifact that cannot start: a wrong target, a damaged archive, an
# interpreter without numpy or trio. Nothing ran, as for any other usage error.
EXIT_CANNOT_START: Final = EXIT_USAGE


def _fail(role: object, what: str) -> None:
    print(failed_line(role, what), file=sys.stderr, flush=True)


def run_embedded(archive: Path | None = None) -> int:
    """Run the participant the artifact ``archive`` carries (the running one, ``sys.argv[0]``,
    by default); return its exit code. This is what an artifact's loader calls once it has
    checked every member against the manifest (``alpha/artifact/loader.py``); it does not check them
    again.

    A wrong target, a damaged artifact or an interpreter without numpy or trio prints one line
    on stderr and returns ``EXIT_USAGE`` (2) before anything starts; otherwise the code is the
    participant's (``alpha.artifact.participant.run_payload``).
    """
    path = Path(sys.argv[0]) if archive is None else archive
    role: object = "?"
    try:
        payload = read_artifact(path)
        check_target(payload)
        role = payload["role"]
        os.environ.setdefault(*BLAS_THREADS)
        try:
            from alpha.artifact.participant import run_payload
        except ModuleNotFoundError as error:
            missing = (error.name or "").partition(".")[0]
            if missing in ("", "alpha"):
                raise  # a module of Alpha itself is missing from the artifact: a bug in the build
            _fail(
                role,
                f"{sys.executable} cannot import {missing}; an artifact needs an "
                "interpreter with numpy and trio installed (they are not bundled)",
            )
            return EXIT_CANNOT_START
        # A finished role leaves its report (docs/roles.md) in reports/ beside its artifact,
        # a role that records rounds its progress in progress/ (docs/progress.md), and a
        # traced role its trace in trace/ (docs/trace.md).
        folder = path.resolve().parent
        reports = folder / REPORTS_DIR
        reports.mkdir(exist_ok=True)
    except TargetMismatch as error:
        print(error, file=sys.stderr, flush=True)
        return EXIT_CANNOT_START
    except AlphaError as error:
        _fail(role, f"{type(error).__name__}: {error}")
        return EXIT_CANNOT_START
    except Exception as error:  # not one of Alpha's, before anything ran: one line
        if os.environ.get(TRACEBACK_ENV) == "1":
            traceback.print_exception(error, file=sys.stderr)
        text = one_line(str(error)) or "no message"
        _fail(
            role,
            f"{type(error).__name__}: {text} (not one of Alpha's refusals: set "
            f"{TRACEBACK_ENV}=1 for its traceback)",
        )
        return EXIT_CANNOT_START
    assert isinstance(role, int), "read_artifact checked the payload's role"
    return run_payload(
        payload,
        report_path=str(reports / role_file(role, ".json")),
        progress_path=str(progress_path(folder, role)),
        trace_path=str(folder / TRACE_DIR / trace_name(role)),
    )
