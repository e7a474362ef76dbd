"""One participant, as its artifact runs it (``python3 role-NNNNNN.pyz``, see ``alpha.artifact``):
its role description, its compiled schedule and, for a learner, its learner state.

stdout carries the port announcement and nothing else; stdin carries the lower peers' ports.
Logs and errors go to stderr. The last line on stderr of a failed participant is its one-line
cause, which the launcher reports. Exit codes are in ``docs/exit-codes.md``.

An exception that is not one of Alpha's (a bug, an OS error no check turned into a refusal)
is a failure like any other: its class and message on one line, after its failure-clock line,
and exit 1, never a traceback, unless ``ALPHA_TRACEBACK=1`` asks for it (printed before that
line, which stays the last).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from alpha.artifact.environ import FAILURE_CLOCK_ENV, REALTIME, TRACE_ENV, TRACE_ON, TRACEBACK_ENV
from alpha.artifact.payload import trace_bounds
from alpha.errors import (
    AlphaError,
    ArtifactInvalid,
    CheckpointCorrupt,
    GpuUnavailable,
    LearnerStateInvalid,
    RoleDescriptionInvalid,
    error_line,
    one_line,
)
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from alpha.failpoints import reach, requested
from alpha.runtime.cause import failures, first_cause
from alpha.runtime.endpoint import announce_on_stdout
from alpha.runtime.session import run_role
from alpha.schedule.local import LocalSchedule, decode
from alpha.schedule.role import RoleDescription
from alpha.wire.console import FAILURE_CLOCK, clock_line, failed_line, role_line

if TYPE_CHECKING:
    from alpha.learner.saving import Saver
    from alpha.learner.state import LearnerState
    from alpha.records.trace import TraceBounds
    from alpha.runtime.tracing import Tracer

__all__ = ["FAILURE_CLOCK", "TRACEBACK_ENV", "run_description", "run_payload", "unexpected"]


def _log(role: int | str, text: str) -> None:
    print(role_line(role, text), file=sys.stderr, flush=True)


def _log_failed(role: int | str, what: str) -> None:
    """The one-line cause, the last line a failed participant logs (docs/launch.md)."""
    print(failed_line(role, what), file=sys.stderr, flush=True)


def _clock() -> float:
    """Now, on the clock failure-clock lines read: the host's monotonic clock, or the wall
    clock where the launcher asks for it (roles on several hosts, FAILURE_CLOCK_ENV)."""
    return time.time() if os.environ.get(FAILURE_CLOCK_ENV) == REALTIME else time.monotonic()


def _log_clock(role: int | str, clock: float | None = None) -> None:
    """The failure-clock line, just before a failure's one-line cause (docs/launch.md)."""
    line = clock_line(role, _clock() if clock is None else clock)
    print(line, file=sys.stderr, flush=True)


def unexpected(role: int | str, error: BaseException) -> int:
    """Report an exception that is not one of Alpha's as this participant's failure: its
    failure-clock line, then one line with its class and message (the traceback first only
    with ``ALPHA_TRACEBACK=1``); return the exit code, ``EXIT_FAILURE``."""
    clock = _clock()
    if os.environ.get(TRACEBACK_ENV) == "1":
        traceback.print_exception(error, file=sys.stderr)
    leaves = failures(error) or [error]
    first = first_cause(error) or error
    more = f" (and {len(leaves) - 1} more)" if len(leaves) > 1 else ""
    _log_clock(role, clock)
    _log_failed(
        role,
        f"{type(first).__name__}: {one_line(str(first)) or 'no message'}{more} "
        f"(not one of Alpha's refusals: set {TRACEBACK_ENV}=1 for its traceback)",
    )
    return EXIT_FAILURE


async def _announce(role: int, data: bytes) -> None:
    reach("participant.announcing", role)
    await announce_on_stdout(data)


def _open_trace(
    description: RoleDescription, path: str | None, bounds: TraceBounds | None
) -> Tracer | None:
    """The role's trace writer when its environment turns tracing on (``TRACE_ENV``) and it
    has a place for its trace; None otherwise. A trace that cannot be made is said in the log
    and the role runs untraced: a trace only shows the run."""
    if path is None or bounds is None or os.environ.get(TRACE_ENV) != TRACE_ON:
        return None
    from alpha.runtime.tracing import Tracer  # only a traced role loads the writer

    try:
        return Tracer.open(
            Path(path),
            role=description.role,
            participants=description.participants,
            identity=description.identity,
            digest=description.payload_digest,
            bounds=bounds,
        )
    except OSError as error:
        _log(description.role, f"trace: cannot make {path}: {error}; the run goes on untraced")
        return None


def run_description(
    description: RoleDescription,
    schedule: LocalSchedule,
    report_path: str | None = None,
    learner: LearnerState | None = None,
    saver: Saver | None = None,
    trace_path: str | None = None,
    bounds: TraceBounds | None = None,
) -> int:
    """Run one participant in this process: its schedule over its edges; return its exit
    code. Traced (``TRACE_ENV``), it writes its trace at ``trace_path`` within ``bounds``."""
    role = description.role
    reported: list[AlphaError] = []
    trace = _open_trace(description, trace_path, bounds)

    def report_failure(error: AlphaError) -> None:
        # Logged the moment the session fails, before its connections close: see run_role.
        # The clock line lets the launcher tell which role failed first; CLOCK_MONOTONIC is
        # one clock for every process of a host.
        reported.append(error)
        _log_clock(role)
        _log_failed(role, error_line(error))

    async def session() -> None:
        # A private copy of stdin: trio sets it non-blocking, which must not leak to the
        # shared file description beyond this process's life.
        ports_in = trio.lowlevel.FdStream(os.dup(0))
        async with ports_in:
            report = await run_role(
                description,
                announce=lambda data: _announce(role, data),
                ports_in=ports_in,
                on_failure=report_failure,
                schedule=schedule,
                report_path=report_path,
                learner=learner,
                saver=saver,
                trace=trace,
            )
        moved = sum(e.sent_bytes + e.received_bytes for e in report.edges)
        _log(
            role,
            f"done: {len(report.edges)} edge(s) in {report.established_s:.2f} s, "
            f"{report.rounds} round(s), "
            f"{moved} bytes framed, finished at {report.finished_s:.2f} s",
        )

    try:
        trio.run(session)
    except AlphaError as error:
        if not reported:  # failed outside the session (e.g. opening stdin)
            report_failure(error)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _log_failed(role, "interrupted")
        return EXIT_FAILURE
    except Exception as error:  # not one of Alpha's: a bug or an unchecked OS error
        return unexpected(role, error)
    finally:
        if trace is not None:
            trace.close()
    return EXIT_OK


def run_payload(
    payload: Mapping[str, object],
    report_path: str | None = None,
    progress_path: str | None = None,
    trace_path: str | None = None,
) -> int:
    """Run the participant an artifact carries (see ``alpha.artifact``); return its exit code.
    An exception that is not one of Alpha's is reported in one line (:func:`unexpected`).

    ``payload["description"]`` is the role description (``docs/roles.md``) and
    ``payload["schedule"]`` the role's projected local schedule (``docs/protocol.md``). A
    learner that records rounds (role 0) appends them to ``progress_path``
    (``docs/progress.md``). A traced participant (``TRACE_ENV``) writes its trace at
    ``trace_path`` within the bounds ``payload["trace"]`` gives, or the defaults
    (``docs/trace.md``).
    """
    try:
        return _run_payload(payload, report_path, progress_path, trace_path)
    except Exception as error:  # not one of Alpha's, outside the session
        role = payload.get("role", "?")
        return unexpected(role if isinstance(role, int) else "?", error)


def _run_payload(
    payload: Mapping[str, object],
    report_path: str | None,
    progress_path: str | None,
    trace_path: str | None,
) -> int:
    try:
        description = RoleDescription.from_dict(payload.get("description"))
        bounds = trace_bounds(payload, "the artifact's payload")
        raw = payload.get("schedule")
        if raw is None:
            raise ArtifactInvalid("it has no schedule; build artifacts with alpha compile")
        schedule = decode(raw)
        data = payload.get("learner")
        if data is None:
            # A role without a learner (a sum check) does not load the learner's data, model,
            # optimizer and checkpoint code: every role's start pays for what it imports.
            learner = segment = None
        else:
            from alpha.learner.payload import learner_from_payload, segment_from_payload

            learner = learner_from_payload(data)
            learner.progress_path = progress_path
            segment = segment_from_payload(data)
        requested()  # a misspelt failpoint is refused before anything runs
    except (RoleDescriptionInvalid, ArtifactInvalid, ValueError) as error:
        _log_failed("?", f"{type(error).__name__}: the artifact's payload: {error}")
        return EXIT_USAGE
    if learner is None:
        return run_description(description, schedule, report_path, None, None, trace_path, bounds)
    from alpha.learner.payload import attach_gpu
    from alpha.learner.saving import Saver, carried_history, load_start

    saver = None
    if segment is not None:
        try:
            start = load_start(learner, segment)
        except (CheckpointCorrupt, LearnerStateInvalid) as error:
            # Nothing ran: the state it would start from is not there (docs/checkpoints.md).
            _log_clock(description.role)
            _log_failed(description.role, error_line(error))
            return EXIT_USAGE
        if segment.save is not None:
            # Only role 0 writes a generation's history: the others need not read it (tens
            # of thousands of rows each, at every restart of a long run).
            carried = carried_history(start, segment.first) if description.role == 0 else ([], [])
            # The learner's own: its schedule's generation steps within the run call it.
            saver = learner.saver = Saver(learner, segment, description.role, carried)
    try:
        attach_gpu(learner)
    except GpuUnavailable as error:
        _log_clock(description.role)
        _log_failed(description.role, f"GpuUnavailable: {error}")
        return EXIT_FAILURE
    try:
        return run_description(
            description, schedule, report_path, learner, saver, trace_path, bounds
        )
    finally:
        learner.release()  # before the interpreter's cleanup, where PyCUDA would abort
