"""``alpha run [PLAN]``: the main job. Compile, launch with live progress, compare with the
replicated learner, and report.

Progress comes as records role 0 appends to ``progress/role-000000.jsonl`` each round
(``docs/progress.md``), read as they come, a few bytes at a time. At the end the run folder
holds the artifacts, every role's log and report, ``history.csv`` (every round's loss and
accuracies) and ``loss.png`` (their plots). A learner whose loss stops being finite has
diverged: the run stops at that round everywhere (``LossNotFinite``), commits nothing, and
still gets its summary, history and plots (exit 1).

With ``--deploy FILE`` the roles run on the deployment's nodes (``alpha.app._remote_run``):
role 0's progress records are brought into the run folder as they are written and the
reports back once the launch is over, so that all of the above reads them unchanged.

With ``--slurm`` the roles run on the nodes of a Slurm allocation (``alpha.app._slurm_run``,
``alpha.launch.slurm``), started by one ``srun`` step per attempt; the run folder is on
storage every node sees, so progress records and reports are read there as on one host.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import secrets
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

import trio

from alpha.app._launching import local_interpreters, plan_targets
from alpha.app._options import TRACE_HERE_ONLY, interpreters
from alpha.app._remote_run import Deployed, RemoteAttempt, pod_ids
from alpha.app._slurm_run import Slurmed
from alpha.app.compile import compile_plan, parse_roles, require_buildable
from alpha.app.display import PhaseStatus, RoundProgress, follow, summary_table
from alpha.app.interrupted import Interrupted, RunTrack, found_in, interrupted_by, run_line
from alpha.app.plans import resolve_plan
from alpha.app.plot import RunPlots, diverged_round, write_run_plots
from alpha.checkpoint.store import (
    POINTER,
    Generation,
    check_room,
    generation_name,
    generation_of_round,
    hold_checkpoint_folder,
    open_generation,
    parse_generation,
    published,
    remove_staged,
)
from alpha.compiler.datasets import dataset_of
from alpha.compiler.plan import Plan, RecoverySpec, Segment, load_plan, overrides_of
from alpha.compiler.plan_membership import roles_group
from alpha.compiler.plan_overrides import override
from alpha.compiler.replicate import Replica, Start, replicate, require_learner
from alpha.compiler.work_learn import learner_setup, plan_identity
from alpha.core.membership import MAX_EPOCH
from alpha.errors import (
    AlphaError,
    CheckpointCorrupt,
    CommitInvalid,
    GenerationForeign,
    LearnerStateInvalid,
    NodeUnreachable,
    PlanInvalid,
    SlurmJobEnded,
    SlurmUnavailable,
    UsageError,
)
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.failpoints import reach
from alpha.files import hold_folder, output_folder, package_data
from alpha.launch.deploy import load_deployment
from alpha.launch.launcher import LaunchResult, launch, launch_specs
from alpha.launch.outcome import RoleOutcome
from alpha.launch.recovery import Classified, classify, classify_error
from alpha.launch.slurm import srun_launch
from alpha.learner.data import Dataset
from alpha.learner.saving import (
    PARAMETERS,
    check_fits,
    identity_changes,
    segment_record,
)
from alpha.learner.state import LearnerState, state_specs
from alpha.records.commit import COMMIT_NAME
from alpha.records.folder import LOGS_DIR, REPORTS_DIR, log_name
from alpha.records.progress import CheckpointRecord, RoundRecord, progress_path
from alpha.records.reports import ATTEMPTS_DIR, clear_attempt, committed_reports, keep_attempt

__all__ = ["DEFAULT_PLAN", "RunSummary", "run_plan"]

DEFAULT_PLAN: Final = package_data("data/plans/digits.toml")
"""The shipped default plan (package data, ``docs/install.md``): 8 roles, a tree of fan-out 2,
30 rounds of the digits learner."""


@dataclass
class RunSummary:
    """What a run came to. ``ok``: every role finished, the run committed, and its final
    parameters (``distributed``) equal the replicated learner's (``replicated``) bit for bit.
    Otherwise ``cause`` says why not (empty when the run ended but the digests differ).

    ``history`` holds every round seen, ``(round from 0, loss, training accuracy, held-out
    accuracy)``; ``diverged_at`` is the round (from 1) whose loss was not finite, where the run
    stopped, and ``replica_diverged_at`` where the replicated learner did (None: it did not);
    ``curve`` and ``csv`` are the plots and the history written beside the run, ``signal`` the
    signal that stopped the launch, if one did; ``changed`` the fields of the plan's identity
    a resume changed from the generation's, as ``checkpoint.may_change`` allowed
    (``(recorded, now)`` each)."""

    ok: bool
    distributed: str
    replicated: str
    holdout_accuracy: float
    wall_s: float
    curve: Path | None
    cause: str = ""
    history: list[tuple[int, float, float, float]] = field(default_factory=list)
    csv: Path | None = None
    diverged_at: int | None = None
    replica_diverged_at: int | None = None
    signal: int | None = None
    changed: dict[str, tuple[object, object]] = field(default_factory=dict)
    resumes: list[int] = field(default_factory=list)
    failure: str = ""
    failure_name: str = ""
    go_on: Path | None = None
    first_round_unix: float | None = None
    attempts: list[dict[str, object]] = field(default_factory=list)
    recomputed_rounds: int = 0


# RunSummary's fields past ``resumes``: ``failure`` is the class of the failure that ended the
# run (docs/recovery.md; "" when none did, or when it ended but the digests differ) and
# ``failure_name`` what it was known by; ``go_on`` the generation (or checkpoint folder) a
# next attempt resumes from (None: from where this one started); ``first_round_unix`` when the
# first round's record was read (seconds since the epoch; None: none was); ``attempts`` one
# record per attempt of ``--restarts`` (docs/recovery.md) and ``recomputed_rounds`` the rounds
# failed attempts did past the generation the next resumed from, done again.


def _generation_rounds(first: int, rounds: int, every: int | None) -> list[int]:
    """The rounds a run of rounds ``first..rounds-1`` publishes a generation of: every
    ``every`` rounds after ``first``, and the last (``docs/checkpoints.md``)."""
    if every is None:
        return [rounds]
    return [*range(first + every, rounds, every), rounds]


def _resume_point(
    plan: Plan,
    digits: Dataset,
    path: Path,
    identity: dict[str, object],
    epochs: tuple[int, int] | None = None,
) -> tuple[Generation, Start, dict[str, tuple[object, object]]]:
    """The generation at ``path``, every shard checked, as the replicated learner's start,
    and the fields of the plan's ``identity`` that differ from the generation's, as
    ``checkpoint.may_change`` allows. ``epochs``, for an attempt of ``--restarts``: the run's
    first epoch and this attempt's; a generation an earlier attempt of the run wrote (the
    same group, an epoch between the two) is this run's own, not a changed membership.

    Raises:
        CheckpointCorrupt: the pointer, a manifest or a shard is missing or damaged.
        GenerationForeign: the generation was written under another plan (each field named).
        LearnerStateInvalid: it is not this plan's learner's state, or nothing is left to run.
    """
    generation = open_generation(path)
    generation.verify()
    recorded = generation.about.get("plan")
    recorded = dict(recorded) if isinstance(recorded, dict) else {}
    if epochs is not None:
        was, now = recorded.get("membership"), identity.get("membership")
        if (
            isinstance(was, dict)
            and isinstance(now, dict)
            and was.get("group") == now.get("group")
            and isinstance(was.get("epoch"), int)
            and epochs[0] <= was["epoch"] <= epochs[1]
        ):
            recorded["membership"] = now  # an earlier attempt's generation: this run's own
    allowed = () if plan.checkpoint is None else plan.checkpoint.may_change
    refused, changed = identity_changes(recorded, identity, allowed)
    if refused:
        raise GenerationForeign(generation.path.name, refused)
    check_fits(generation, LearnerState.for_role(learner_setup(plan), digits, 0))
    if generation.round >= plan.rounds:
        raise LearnerStateInvalid(
            f"checkpoint {generation.path.name} is of round {generation.round}: nothing is left "
            f"of the plan's {plan.rounds} rounds (raise run.rounds to go on)"
        )
    arrays = generation.load()
    parameters = arrays.pop(PARAMETERS)
    return generation, Start(generation.round, parameters, arrays), changed


def resume_generation(path: Path, round: int, run: str, out: TextIO) -> Path:
    """``--resume PATH --round R``: the generation of round ``round`` in the checkpoint folder
    ``path`` (or ``path``, a generation of that round); of several, the run ``run``'s first,
    then the one ``LATEST`` names, then the newest, and a line says which was taken.

    Raises:
        GenerationNotFound: no generation of that round is there (the rounds that are, named).
    """
    chosen, count = generation_of_round(path, round, run)
    if count > 1:
        print(
            f"run: {path} holds {count} generations of round {round}; resuming from "
            f"{chosen.name} (pass a generation's folder to --resume to choose another)",
            file=out,
        )
    return chosen


def resumed_history(
    generation: Generation,
) -> tuple[list[tuple[int, float, float, float]], list[int], str]:
    """What a run resumed from ``generation`` starts its history with: every round's record
    before it and the rounds of the earlier resumes it records, and this resume's round after
    them; and a line to print when the generation records no history (an older one), whose
    history then starts at the resume.

    Raises:
        CheckpointCorrupt: the history it records is malformed.
    """
    recorded = generation.history()
    if recorded is None:
        note = (
            f"run: checkpoint {generation.path.name} records no history (an older generation): "
            f"history.csv and loss.png start at round {generation.round + 1}"
        )
        return [], [generation.round], note
    return list(recorded.rows), [*recorded.resumes, generation.round], ""


@dataclass
class _Launched:
    """The run's launch: its first failure (empty when it committed), its committed
    reports, the rounds role 0 recorded, and the signal that stopped it, if one did."""

    cause: str
    reports: dict[int, dict[str, Any]]
    records: list[RoundRecord]
    signal: int | None
    failure: RoleOutcome | None = None  # the first to fail, by the launcher's rules
    error: AlphaError | None = None  # what failed the launch on its nodes (--deploy), if that


def _launch_segment(
    plan: Plan,
    directory: Path,
    interpreters: Mapping[str, Sequence[str]] | None,
    progress: RoundProgress,
    warm: bool,
    on_checkpoint: Callable[[CheckpointRecord], None] | None = None,
    on_first: Callable[[], None] | None = None,
    remote: RemoteAttempt | None = None,
    slurm: Slurmed | None = None,
    trace: bool = False,
) -> _Launched:
    """Compile ``plan`` into ``directory`` and run it, following role 0's progress records:
    each round's, and each generation it publishes while the run goes on; a status line shows
    the phases before the first round (``PhaseStatus``). With ``remote`` (``--deploy``) the
    roles run on its nodes; a node that cannot be reached, written or read back fails the
    launch (``error``), as a lost role does. With ``slurm`` (``--slurm``) one ``srun`` step
    starts them on the allocation's nodes where ``plan.placement`` puts them, each with the
    nodes' interpreter (``interpreters``, else this one's path). With ``trace`` every role
    writes its trace into the folder's ``trace/`` (``docs/trace.md``)."""
    reach("run.compiling", 0)
    status = PhaseStatus(progress.out, "run")
    roles = parse_roles("all", plan.participants)
    status.compiling(0, len(roles))
    try:
        compile_plan(plan, directory, roles, progress=status.compiling)
    except BaseException:
        status.close()
        raise
    reports = directory / REPORTS_DIR
    clear_attempt(directory)  # a previous segment's or run's reports, logs, progress records
    records_path = progress_path(directory)
    status.checking(0, len(roles))  # every artifact is checked whole: seconds for many roles
    try:
        # On a deployment's nodes, the interpreters are theirs (deploy_specs), not this
        # host's; on Slurm's, the ones given, else this one's path (a shared install).
        specs, deadline = launch_specs(directory, None if remote else interpreters)
    except BaseException:
        status.close()
        raise
    status.checking(len(roles), len(roles))
    records: list[RoundRecord] = []
    if remote is not None:
        status.note(f"run: copying {len(specs)} artifact(s) to their nodes")
        try:
            specs = remote.prepare(specs)
        except NodeUnreachable as error:
            status.close()
            return _Launched(str(error), {}, records, None, error=error)
        except BaseException:
            status.close()
            raise

    def first() -> None:
        status.close()
        if on_first is not None:
            on_first()

    async def main() -> LaunchResult:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    partial(
                        follow,
                        records_path,
                        progress,
                        history=records,
                        on_checkpoint=on_checkpoint,
                        first=first,
                    )
                )
                nursery.start_soon(status.ticking)
                # A role failing after the commit point (role 0's pointer) stops no other
                # role. On the nodes the commit record is role 0's node's, which the launcher
                # does not see: every failure stops the others there.
                committed = None if remote is not None else (reports / COMMIT_NAME).exists
                if slurm is not None and slurm.placed is not None:
                    placed = slurm.placed
                    status.started(
                        f"srun: {len(specs)} roles on {placed.placement.nodes_used} node(s) "
                        f"of job {slurm.allocation.job}"
                    )
                    result = await srun_launch(
                        specs,
                        placed,
                        slurm.allocation,
                        directory,
                        name=plan.name,
                        deadline=deadline,
                        committed=committed,
                    )
                else:
                    status.starting(0, len(specs))
                    if remote is not None:
                        await remote.start()
                    result = await launch(
                        specs,
                        deadline=deadline,
                        warm=warm,
                        committed=committed,
                        on_announce=status.announced,
                        route=None if remote is None else remote.route,
                        shared=remote is None,
                        trace=trace,
                    )
                if remote is not None:
                    # Before the follower's last read: the rounds written just before the end.
                    await remote.finish(ended_well=result.first_to_fail is None)
                nursery.cancel_scope.cancel()
        finally:
            if remote is not None:
                await remote.aclose()
        return result

    try:
        result = trio.run(main)
    except BaseException as error:
        stopped = interrupted_by(error)
        if stopped is None:
            lost = None if remote is None else found_in(error, NodeUnreachable)
            if lost is None:
                raise
            # A forward that did not come up, or reports that could not be read back.
            return _Launched(str(lost), {}, records, None, error=lost)
        raise Interrupted(stopped.signal, records=records) from None
    finally:
        status.close()
    if result.signal is not None:  # the launcher stopped and reaped every role
        raise Interrupted(result.signal, records=records)
    failure = result.first_to_fail
    if failure is not None:
        # A failure of no one role (Slurm ended the job) is named without a role.
        cause = failure.cause if failure.role < 0 else f"role {failure.role}: {failure.cause}"
        return _Launched(cause, {}, records, result.signal, failure)
    try:
        _, found = committed_reports(reports, plan.tree.children)
    except CommitInvalid as error:
        return _Launched(f"the run did not commit: {error}", {}, records, None)
    return _Launched("", found, records, None)


def _row(record: RoundRecord) -> tuple[int, float, float, float]:
    return (record.round - 1, record.loss, record.train_accuracy, record.holdout_accuracy)


def run_plan(
    plan: Plan,
    directory: Path,
    out: TextIO = sys.stderr,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    resume: Path | None = None,
    *,
    warm: bool = True,
    restarts: int | None = None,
    deploy: Deployed | None = None,
    slurm: Slurmed | None = None,
    trace: bool = False,
) -> RunSummary:
    """Compile ``plan`` into ``directory``, run it, and compare with the replicated learner.
    ``interpreters`` starts each target's roles (``launch_specs``); ``warm``
    forks them from the warm starter (:func:`alpha.launch.launcher.launch`). With ``deploy``
    the roles run on its nodes (``docs/deploy.md``), ``interpreters`` naming the nodes' own;
    with ``slurm``, on the nodes of its Slurm allocation (``docs/slurm.md``), the same. With
    ``trace`` every role writes its trace (``alpha run --trace``, ``docs/trace.md``).

    With a ``[checkpoint]`` table the run is still one launch, which publishes a generation
    every ``every`` rounds at a commit step of its own while the rounds go on, and the last at
    the run's commit point; with ``resume`` (a checkpoint folder or a
    generation) it starts from that generation, and the replicated learner it is compared
    with starts from the same state (``docs/checkpoints.md``).

    A signal (SIGINT, SIGTERM, SIGHUP) stops it at any point: the summary then has
    ``signal`` set and ``cause`` its one line (:func:`alpha.app.interrupted.run_line`);
    ``history.csv`` and ``loss.png`` hold the rounds done, and the checkpoint folder its
    published generations only (the segment's staged one removed).

    ``restarts`` (None: the plan's ``[recovery] restarts``, else 0) is how many more attempts
    a failure that may be retried starts (docs/recovery.md): each from the latest published
    generation (or where the run started, when none is), as the run's next epoch, with fresh
    keys, after ``[recovery] backoff`` seconds; each failed attempt's files are kept under
    ``attempts/`` and the summary records every attempt.

    Raises:
        CheckpointCorrupt, LearnerStateInvalid: ``resume`` cannot be resumed from.
        GenerationForeign: ``resume`` was written under another plan; each field is named.
        CheckpointFolderHeld: another run holds the checkpoint folder.
        CheckpointWriteFailed: the checkpoint folder cannot be made, written, or has no room
            for a generation; nothing ran.
    """
    started = time.monotonic()
    require_learner(plan)
    spec = plan.checkpoint
    folder = None if spec is None else Path(spec.folder or directory / "checkpoints").resolve()
    with contextlib.ExitStack() as holding:
        if folder is not None:
            # One run writes a checkpoint folder at a time, for all its rounds; a second is
            # refused here, at once, naming this one (docs/checkpoints.md).
            holding.enter_context(hold_checkpoint_folder(folder, plan.name))
        track = RunTrack(plan.source, plan.rounds, folder=folder, resume=resume)
        track.directory = directory
        track.options = tuple(word for each in plan.overrides for word in each.argv)
        if deploy is not None:
            track.options += deploy.words
        if slurm is not None:
            track.options += slurm.options
        recovery = plan.recovery or RecoverySpec()
        chances = recovery.restarts if restarts is None else restarts
        run = _Run(directory, out, interpreters, folder, warm, started, track, deploy, slurm, trace)
        try:
            return _attempts(run, plan, resume, chances, recovery)
        except BaseException as error:
            stopped = interrupted_by(error)
            if stopped is None:
                raise
            return _interrupted(plan, directory, track, stopped, started, out)


@dataclass(frozen=True)
class _Run:
    """What every attempt of one ``run_plan`` shares: the run folder, where lines go, how
    roles start (``interpreters``, ``warm``), the checkpoint folder it holds (None: none), when
    it started (``time.monotonic()``), the track a signal's line is made from, and the
    deployment or the Slurm allocation its roles run on (None: this host), and whether its
    roles write traces."""

    directory: Path
    out: TextIO
    interpreters: Mapping[str, Sequence[str]] | None
    folder: Path | None
    warm: bool
    started: float
    track: RunTrack
    deploy: Deployed | None = None
    slurm: Slurmed | None = None
    trace: bool = False


def _attempts(
    run: _Run, plan: Plan, resume: Path | None, restarts: int, recovery: RecoverySpec
) -> RunSummary:
    """:func:`_run_plan` once, and again after each failure that may be retried, at most
    ``restarts`` more times, ``recovery.backoff`` seconds after it, after a lost role on one
    role fewer when ``recovery.lost_role`` is ``"drop"`` (docs/recovery.md). With
    ``run.deploy``, each attempt is first placed on the nodes that answer (a spare taking a
    gone node's roles, or those roles dropped), and a node gone with no spare left ends the
    run (docs/deploy.md). With ``run.slurm``, each attempt is first placed on the job's
    nodes as Slurm shows them then, and a job Slurm ended ends the run (docs/slurm.md)."""
    directory, out, folder, track = run.directory, run.out, run.folder, run.track
    shutil.rmtree(directory / ATTEMPTS_DIR, ignore_errors=True)  # an earlier run's attempts
    attempts: list[dict[str, object]] = []
    recomputed = 0
    attempt, at, roles = 0, resume, plan.participants
    summary: RunSummary | None = None
    while True:
        began = time.time()
        nodes: list[str] | None = None
        if run.deploy is not None:
            try:
                placed = run.deploy.place(
                    drop=recovery.lost_role == "drop",
                    say=lambda line: print(f"run: {line}", file=out),
                )
            except NodeUnreachable as error:
                unplaced = (attempt, at, roles, began, recomputed)
                return _unstarted(run, plan, summary, attempts, unplaced, error)
            roles, nodes = len(placed.nodes), pod_ids(placed.nodes)
        if run.slurm is not None:
            try:
                run.slurm.place(roles, attempt)
            except (SlurmJobEnded, NodeUnreachable, SlurmUnavailable) as error:
                if summary is None and isinstance(error, SlurmUnavailable):
                    raise  # the first attempt's: nothing ran, the command's own refusal
                unplaced = (attempt, at, roles, began, recomputed)
                return _unstarted(run, plan, summary, attempts, unplaced, error)
            nodes = run.slurm.nodes(roles)
        shrunk = roles != plan.participants
        if attempt:
            track.resume = at
        try:
            each = plan if attempt == 0 and not shrunk else _as_attempt(plan, attempt, roles)
            if run.slurm is not None and run.slurm.placed is not None:
                each = dataclasses.replace(each, placement=run.slurm.placed.placement)
            epochs = None if attempt == 0 else (plan.epoch, each.epoch)
            summary = _run_plan(run, each, at, epochs)
        except AlphaError as error:
            if summary is None:
                raise  # the first attempt's: nothing ran, the command's own refusal
            # A later attempt that could not start (its generation damaged since it was
            # chosen, its checkpoint folder full, the plan file changed): the run ends here,
            # with the attempts so far in its summary.
            unstarted = (attempt, at, roles, began, recomputed)
            return _unstarted(run, plan, summary, attempts, unstarted, error)
        first = track.first
        reached = first + sum(1 for row in summary.history if row[0] >= first)
        record: dict[str, object] = {
            "attempt": attempt,
            "epoch": each.epoch,
            "roles": each.participants,
            "resumed_at": first,
            "reached": reached,
            "started_unix": began,
            "first_round_unix": summary.first_round_unix,
            "ended_unix": time.time(),
            "failure": summary.failure,
            "cause": summary.cause,
            "retried": False,
            "nodes": nodes,
        }
        attempts.append(record)
        summary.attempts = attempts
        retry = Classified(summary.failure, summary.failure_name).retried
        if summary.signal is not None or not retry or attempt >= restarts:
            if retry and attempt >= restarts and restarts:
                summary.cause += f" (no restart left: all {restarts} were used)"
            summary.recomputed_rounds = recomputed
            if attempt:
                _replicate_from_origin(plan, resume, summary, out)
            return _with_plots(plan, directory, summary)
        at = summary.go_on if folder is not None else resume
        resumed_at = _round_of(at)
        recomputed += max(0, reached - resumed_at)
        record["retried"] = True
        kept = keep_attempt(directory, attempt)
        attempt += 1
        fewer = ""
        # On the nodes, the next attempt's probe decides: a role is dropped only with its node.
        dropping = run.deploy is None and recovery.lost_role == "drop"
        if summary.failure == "lost" and dropping and roles > 1:
            roles -= 1
            fewer = f" on {roles} roles (recovery.lost_role = 'drop')"
        where = "the start" if at is None else f"{at} (round {resumed_at})"
        print(
            f"run: attempt {attempt - 1} failed ({summary.failure}, {summary.failure_name}): "
            f"{summary.cause}",
            file=out,
        )
        print(
            f"run: attempt {attempt} of at most {restarts + 1} resumes from {where} as epoch "
            f"{plan.epoch + attempt}{fewer} in {recovery.backoff:g} s; attempt {attempt - 1}'s "
            f"files are in {kept}",
            file=out,
        )
        time.sleep(recovery.backoff)


def _unstarted(
    run: _Run,
    plan: Plan,
    last: RunSummary | None,
    attempts: list[dict[str, object]],
    unstarted: tuple[int, Path | None, int, float, int],
    error: AlphaError,
) -> RunSummary:
    """The end of a run whose next attempt could not start: on a deployment, a node does not
    answer and no spare is left (``error``, a ``NodeUnreachable``, says which, and to add
    one); or ``error`` refused the attempt before any role ran. ``unstarted`` is that
    attempt's number, where it would have resumed from, its roles, when it began
    (``time.time()``) and the rounds recomputed so far. Its failure is ``error``'s class
    (``lost`` for a node), recorded as the attempt's, with no node and no restart after it:
    the run's summary is the last attempt's (its history and plots stand), or a bare one when
    it is the first."""
    attempt, at, roles, began, recomputed = unstarted
    try:
        resumed_at = _round_of(at)
    except AlphaError:  # the generation it would resume from is what refused it
        resumed_at = run.track.first
    kind = classify_error(type(error).__name__)
    attempts.append(
        {
            "attempt": attempt,
            "epoch": plan.epoch + attempt,
            "roles": roles,
            "resumed_at": resumed_at,
            "reached": resumed_at,
            "started_unix": began,
            "first_round_unix": None,
            "ended_unix": time.time(),
            "failure": kind,
            "cause": str(error),
            "retried": False,
            "nodes": None,
        }
    )
    if last is None:
        last = RunSummary(False, "", "", math.nan, 0.0, None)
    last.ok, last.distributed, last.cause = False, "", str(error)
    last.failure, last.failure_name = kind, type(error).__name__
    last.signal, last.attempts, last.recomputed_rounds = None, attempts, recomputed
    last.wall_s = time.monotonic() - run.started
    return _with_plots(plan, run.directory, last)


def _with_plots(plan: Plan, directory: Path, summary: RunSummary) -> RunSummary:
    """``summary``, the run's last, with its ``loss.png`` and ``history.csv`` written where
    its attempt did not write them (a failed one: each failure a restart follows would
    otherwise draw them again, on the way to the next attempt)."""
    if summary.curve is None and summary.history:
        plots = _plots(plan, directory, summary.history, summary.resumes, None)
        summary.curve, summary.csv = plots.png, plots.csv
    return summary


def _as_attempt(plan: Plan, attempt: int, roles: int) -> Plan:
    """``plan`` as its attempt ``attempt`` runs it: the run's epoch plus ``attempt``, which
    enters the run identity (the group's digest), so no frame of another attempt is taken;
    on ``roles`` roles (fewer than the plan's: the plan file read again with ``--roles``).

    Raises:
        PlanInvalid: the epoch would pass MAX_EPOCH; or fewer roles are asked of a plan given
            as text, or of a plan file that changed since the run started.
    """
    epoch = plan.epoch + attempt
    if epoch > MAX_EPOCH:
        raise PlanInvalid(
            f"attempt {attempt} would need epoch {epoch}, past {MAX_EPOCH}", field="run.epoch"
        )
    if roles != plan.participants:
        if not Path(plan.source).is_file():
            raise PlanInvalid(
                "'drop' reads the plan file again on fewer roles, and this plan has no file",
                field="recovery.lost_role",
            )
        fewer = (
            override("--roles", str(roles)),
            override("--set", f"membership.group='{roles_group(roles)}'"),
        )
        again = load_plan(plan.source, overrides=(*plan.overrides, *fewer))
        if again.text_sha256 != plan.text_sha256:
            raise PlanInvalid(
                f"the plan file {plan.source} changed since the run started, so attempt "
                f"{attempt} cannot run it on {roles} roles; run it again",
                field="recovery.lost_role",
            )
        plan = again
    group = dataclasses.replace(plan.group, epoch=epoch)
    return dataclasses.replace(plan, epoch=epoch, group=group)


def _round_of(path: Path | None) -> int:
    """The round of the generation ``path`` (a generation or a checkpoint folder); 0 for
    None, the start."""
    return 0 if path is None else open_generation(path).round


def _replicate_from_origin(
    plan: Plan, resume: Path | None, summary: RunSummary, out: TextIO
) -> None:
    """After restarts, compare the final parameters with the replicated learner from where
    the *run* started (round 0, or ``resume``), not from the generation the last attempt
    resumed from: a run that ends on the fault-free bits equals the uninterrupted learner."""
    if not summary.distributed or summary.failure or summary.signal is not None:
        return
    digits = dataset_of(plan)
    start = None
    if resume is not None:
        state = LearnerState.for_role(learner_setup(plan), digits, 0)
        start = _resume_point(plan, digits, resume, plan_identity(plan, digits, state))[1]
    replica = _replicated(plan, digits, start, out)
    summary.replicated = replica.digest
    summary.replica_diverged_at = replica.diverged_at
    summary.ok = summary.ok and summary.distributed == replica.digest


def _interrupted(
    plan: Plan,
    directory: Path,
    track: RunTrack,
    stopped: Interrupted,
    started: float,
    out: TextIO,
) -> RunSummary:
    """A run a signal stopped: the rounds done written (``history.csv``, ``loss.png``), the
    segment's staged generation removed, and its one line (``docs/cli.md``, "Interrupts")."""
    track.stop()
    last = track.done - 1 if track.history else -1
    track.history += [
        _row(record)
        for record in stopped.records
        if isinstance(record, RoundRecord) and record.round - 1 > last
    ]
    if track.folder is not None and track.segment is not None:
        for failure in remove_staged(track.folder, track.segment[2]):
            print(f"run: checkpoint: {failure}", file=out)
    plots = _plots(plan, directory, track.history, track.resumes, None)
    return RunSummary(
        False,
        track.committed,
        "",
        track.history[-1][3] if track.history else math.nan,
        time.monotonic() - started,
        plots.png,
        run_line(track, stopped.signal),
        history=track.history,
        csv=plots.csv,
        signal=stopped.signal,
        resumes=track.resumes,
    )


def _run_plan(
    run: _Run, plan: Plan, resume: Path | None, epochs: tuple[int, int] | None = None
) -> RunSummary:
    """One attempt of :func:`run_plan`, its checkpoint folder (if any) held; ``run.track``
    follows it (for the line of a signal that stops it); ``epochs`` as
    :func:`_resume_point`'s, for an attempt after the first."""
    directory, out, folder, track, started = (
        run.directory,
        run.out,
        run.folder,
        run.track,
        run.started,
    )
    digits = dataset_of(plan)
    spec = plan.checkpoint
    state = LearnerState.for_role(learner_setup(plan), digits, 0)
    identity = plan_identity(plan, digits, state)
    if epochs is not None:
        # An attempt's generations record the run's first epoch: they are the run's, one plan
        # identity for every attempt, so `keep` counts them together (docs/recovery.md).
        identity["membership"] = {"group": str(plan.group), "epoch": epochs[0]}
    first, previous, start = 0, None, None
    changed: dict[str, tuple[object, object]] = {}
    history: list[tuple[int, float, float, float]] = []
    resumes: list[int] = []
    unrecorded = ""
    if resume is not None:
        previous, start, changed = _resume_point(plan, digits, resume, identity, epochs)
        first = previous.round
        # The rounds before the generation, as it records them: history.csv and loss.png go
        # from round 1, each resume marked (docs/checkpoints.md).
        history, resumes, unrecorded = resumed_history(previous)
    track.first = first
    if folder is not None:
        # A read-only or full folder is found before the first round, not at a generation.
        check_room(folder, state_specs(state), plan.participants)
    output_folder(directory)  # a folder that cannot be made is refused before anything runs
    record = segment_record(identity, changed)
    every = None if spec is None else spec.every
    rounds = _generation_rounds(first, plan.rounds, every) if folder is not None else []
    resumed = "" if previous is None else f", resumed at round {first} from {previous.path}"
    print(
        f"run: {plan.name}: {plan.participants} participants on a tree of fan-out "
        f"{plan.tree.fanout}, {plan.rounds} rounds, {plan.dtype}{resumed}",
        file=out,
    )
    for name, (was, now) in sorted(changed.items()):
        print(
            f"run: resumed with {name} changed: {was!r} in the generation, {now!r} now "
            "(checkpoint.may_change)",
            file=out,
        )
    if unrecorded:
        print(unrecorded, file=out)
    progress = RoundProgress(out, plan.rounds, start=first)
    # One launch for the whole run: its generations are published within it, each at its own
    # commit step, and the last at the run's commit point (docs/checkpoints.md).
    nonce = secrets.token_hex(4)
    track.stop = progress.close
    track.history, track.resumes = history, resumes  # the same lists: what a signal finds
    track.segment = (first, plan.rounds, nonce)
    each = plan
    if folder is not None or previous is not None:
        each = dataclasses.replace(
            plan,
            segment=Segment(
                first=first,
                resume=None if previous is None else str(previous.path.resolve()),
                resume_sha256=None if previous is None else previous.manifest_sha256,
                save=None if folder is None else str(folder),
                nonce=None if folder is None else nonce,
                keep=2 if spec is None else spec.keep,
                record=record if folder is not None else "",
                every=every if folder is not None else None,
            ),
        )
    announced: set[int] = set()

    def on_checkpoint(published: CheckpointRecord) -> None:
        announced.add(published.round)
        progress.note(f"run: checkpoint {published.generation} published (round {published.round})")

    first_round: list[float] = []
    launched = _launch_segment(
        each,
        directory,
        run.interpreters,
        progress,
        run.warm,
        on_checkpoint,
        on_first=lambda: first_round.append(time.time()),
        remote=None if run.deploy is None else run.deploy.attempt(directory, run.interpreters),
        slurm=run.slurm,
        trace=run.trace,
    )
    cause, found = launched.cause, launched.reports
    if cause:
        progress.close()
        history += [_row(entry) for entry in launched.records]
        diverged = diverged_round(history)
        classified = classify(launched.failure, cause)
        if launched.error is not None:  # a node of the deployment, not a role, failed it
            name = type(launched.error).__name__
            classified = Classified(classify_error(name), name)
        go_on = resume
        if folder is not None:
            for failure in remove_staged(folder, nonce):
                print(f"run: checkpoint: {failure}", file=out)
            base = _failed_generation(folder, nonce, rounds)
            said, go_on = _published_after_failure(folder, base, previous, resume)
            also = () if run.deploy is None else run.deploy.words
            if run.slurm is not None:
                also = run.slurm.options
            cause += "; " + _go_on_line(plan, said, go_on, also)
        if diverged is not None:
            summary = _diverged(
                plan, directory, digits, start, history, resumes, diverged, started, out
            )
            summary.failure, summary.failure_name = "divergence", "LossNotFinite"
            return summary
        # No plots yet: the run's caller writes them once it ends (_with_plots), not at each
        # attempt that fails and is retried, where they would hold up the next attempt.
        return RunSummary(
            False,
            "",
            "",
            history[-1][3] if history else math.nan,
            time.monotonic() - started,
            None,
            cause,
            history=history,
            csv=None,
            signal=launched.signal,
            changed=changed,
            resumes=resumes,
            failure="" if launched.signal is not None else classified.kind,
            failure_name=classified.name,
            go_on=go_on,
            first_round_unix=first_round[0] if first_round else None,
        )
    history += [tuple(entry) for entry in found[0]["history"]]
    if folder is not None:
        base = generation_name(plan.rounds, nonce)
        try:
            latest = open_generation(folder)
        except CheckpointCorrupt as error:
            progress.close()
            cause = f"the run committed, but its checkpoint does not read: {error}"
            return RunSummary(False, "", "", 0.0, time.monotonic() - started, None, cause)
        if latest.name.base != base:
            progress.close()
            cause = (
                f"the checkpoint pointer names {latest.path.name}, not this run's last "
                f"generation {base} of round {plan.rounds}"
            )
            return RunSummary(False, "", "", 0.0, time.monotonic() - started, None, cause)
        if plan.rounds not in announced:  # its record was not read before the run ended
            progress.note(f"run: checkpoint {latest.path.name} published (round {plan.rounds})")
        # Old generations go once a newer one is published; a removal that failed is
        # reported on role 0's log, and here.
        log = (directory / LOGS_DIR / log_name(0)).read_text(errors="replace")
        for line in log.splitlines():
            if ": checkpoint: " in line:
                print(f"run: {line.split(': ', 1)[1]}", file=out)
    progress.close()
    digests = {data["digests"][PARAMETERS] for data in found.values()}
    track.segment, track.committed = None, "/".join(sorted(digests))
    reach("run.replicating", 0)
    plots = _plots(plan, directory, history, resumes, None)
    distributed = digests.pop() if len(digests) == 1 else "differs between roles"
    whole = len(found) == plan.participants
    # An attempt after the first: its caller compares with the replicated learner from where
    # the run started (_replicate_from_origin), not from this attempt's start.
    replica = None if epochs is not None else _replicated(plan, digits, start, out)
    return RunSummary(
        ok=whole and (replica is None or distributed == replica.digest),
        distributed=distributed,
        replicated="" if replica is None else replica.digest,
        holdout_accuracy=history[-1][3],
        wall_s=time.monotonic() - started,
        curve=plots.png,
        history=history,
        csv=plots.csv,
        replica_diverged_at=None if replica is None else replica.diverged_at,
        changed=changed,
        resumes=resumes,
        first_round_unix=first_round[0] if first_round else None,
    )


def _failed_generation(folder: Path, nonce: str, rounds: Sequence[int]) -> str:
    """The base name of the generation a failed run was working on, read from ``folder``: the
    last one of its own (``nonce``) that is published but that ``LATEST`` does not name (its
    pointer could not move), else the one after the last it published and pointed at."""
    mine = sorted(
        (parsed.round, parsed.base)
        for parsed in (parse_generation(path.name) for path in published(folder))
        if parsed is not None and parsed.nonce == nonce
    )
    try:
        pointed = open_generation(folder).name.base
    except CheckpointCorrupt:
        pointed = None
    if mine and mine[-1][1] != pointed:
        return mine[-1][1]
    done = mine[-1][0] if mine else -1
    later = [end for end in rounds if end > done]
    return generation_name(later[0] if later else rounds[-1], nonce)


def _after_failure(
    plan: Plan, folder: Path, base: str, previous: Generation | None, resume: Path | None
) -> str:
    """What a failed segment (the rounds since the run's last generation, whose own is
    ``base``) left published, read again from ``folder`` (never assumed), and
    the ``--resume`` command that goes on from it, given only when it will work: the
    generation it names opens and every shard of it checks."""
    said, go_on = _published_after_failure(folder, base, previous, resume)
    return _go_on_line(plan, said, go_on)


def _published_after_failure(
    folder: Path, base: str, previous: Generation | None, resume: Path | None
) -> tuple[str, Path | None]:
    """What a failed segment left published (as :func:`_after_failure` says it), and where a
    run goes on from: the checkpoint folder (its latest generation), a generation its pointer
    does not name, the generation the run started from, or None (from the start), each only
    when it opens and every shard of it checks."""
    latest: Generation | None
    try:
        latest = open_generation(folder)
        latest.verify()
    except CheckpointCorrupt:
        latest = None
    mine = [path for path in published(folder) if _base_of(path) == base]
    go_on: Path | None = folder
    if latest is not None and latest.name.base == base:
        said = (
            f"this segment's generation {latest.path.name} (round {latest.round}) was "
            f"published and {POINTER} names it"
        )
    elif mine:
        named = "nothing" if latest is None else latest.path.name
        said = (
            f"this segment's generation {mine[0].name} was published, but {folder / POINTER} "
            f"still names {named}"
        )
        go_on = mine[0]
        try:
            open_generation(go_on).verify()
        except CheckpointCorrupt:
            go_on = None
    elif latest is not None:
        said = (
            f"nothing of this segment was published; the latest generation is "
            f"{latest.path.name} (round {latest.round})"
        )
    else:
        said = f"nothing of this segment was published, and {folder} has nothing to go on from"
        go_on = None
        if previous is not None and resume is not None:
            with contextlib.suppress(CheckpointCorrupt):
                open_generation(resume).verify()
                said += f"; the run started from {previous.path.name}"
                go_on = resume
    return said, go_on


def _go_on_line(plan: Plan, said: str, go_on: Path | None, also: Sequence[str] = ()) -> str:
    """``said``, and the command that goes on from ``go_on`` (None: run it again), with the
    words ``also`` after the overrides (``--deploy FILE``)."""
    if go_on is None:
        return f"{said}: run it again from the start"
    source = Path(plan.source)
    if not source.is_file():  # a plan given as text: there is no path to name
        return f"{said}: go on with this plan and --resume {shlex.quote(str(go_on))}"
    command = f"alpha run {shlex.quote(str(source))} --resume {shlex.quote(str(go_on))}"
    command += "".join(f" {shlex.join(each.argv)}" for each in plan.overrides)
    if also:
        command += f" {shlex.join(also)}"
    return f"{said}: go on with {command}"


def _base_of(path: Path) -> str | None:
    parsed = parse_generation(path.name)
    return None if parsed is None else parsed.base


def _replicated(plan: Plan, digits: Dataset, start: Start | None, out: TextIO) -> Replica:
    """The replicated learner from ``start``, with its own progress display."""
    replaying = RoundProgress(
        out, plan.rounds, label="replicated ", start=0 if start is None else start.round
    )
    try:
        return replicate(plan, digits, on_round=replaying.update, start=start)
    finally:
        replaying.close()


def _plots(
    plan: Plan,
    directory: Path,
    history: Sequence[tuple[int, float, float, float]],
    resumes: Sequence[int],
    diverged: int | None,
) -> RunPlots:
    return write_run_plots(
        directory, history, title=plan.name, diverged_at=diverged, resumes=resumes
    )


def _diverged(
    plan: Plan,
    directory: Path,
    digits: Dataset,
    start: Start | None,
    history: list[tuple[int, float, float, float]],
    resumes: list[int],
    diverged: int,
    started: float,
    out: TextIO,
) -> RunSummary:
    """A run whose loss stopped being finite at round ``diverged``: it stopped there and
    committed nothing. The replicated learner runs to where it diverges too, as a check that
    the distributed run diverged where the plan does."""
    replica = _replicated(plan, digits, start, out)
    plots = _plots(plan, directory, history, resumes, diverged)
    finite = [entry for entry in history if math.isfinite(entry[1])]
    return RunSummary(
        ok=False,
        distributed="",
        replicated=replica.digest,
        holdout_accuracy=finite[-1][3] if finite else math.nan,
        wall_s=time.monotonic() - started,
        curve=plots.png,
        cause=(
            f"the training loss of round {diverged} is "
            f"{history[-1][1]}, so the run stopped there and committed nothing "
            f"(learner.rate is {plan.learner.rate if plan.learner else '?'}; a lower one "
            "usually helps)"
        ),
        history=history,
        csv=plots.csv,
        diverged_at=diverged,
        replica_diverged_at=replica.diverged_at,
        resumes=resumes,
    )


def run_command(args: argparse.Namespace) -> int:
    """``alpha run``'s options as :func:`main_run`'s arguments.

    Raises:
        UsageError: ``--interpreter`` names a target twice.
    """
    return main_run(
        args.plan,
        args.output,
        interpreters("run", args.interpreter),
        args.resume,
        as_json=args.json,
        warm=not args.cold,
        resume_round=args.round,
        overrides=args.overrides,
        restarts=args.restarts,
        deploy=args.deploy,
        ssh_options=args.ssh_option or (),
        slurm=args.slurm,
        slurm_options=args.slurm_option or (),
        trace=args.trace,
    )


def main_run(
    plan_path: str | None,
    directory: str | None,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    resume: str | None = None,
    *,
    as_json: bool = False,
    warm: bool = True,
    resume_round: int | None = None,
    overrides: Sequence[tuple[str, str]] | None = None,
    restarts: int | None = None,
    deploy: str | None = None,
    ssh_options: Sequence[str] = (),
    slurm: bool = False,
    slurm_options: Sequence[str] = (),
    trace: bool = False,
) -> int:
    """``alpha run``: the exit code, 0 only when the run committed and equals the replicated
    learner; 128 + the signal when one stopped it (130: Ctrl-C). ``resume_round`` picks the
    generation of that round in the checkpoint folder ``resume``; ``overrides`` are the
    ``(option, text)`` pairs of ``--roles``, ``--fanout``, ``--rounds`` and ``--set``;
    ``restarts`` (``--restarts K``) overrides the plan's ``[recovery] restarts``; ``deploy``
    (``--deploy FILE``) runs the roles on a deployment's nodes, each ssh call given
    ``ssh_options`` first (``docs/deploy.md``); ``slurm`` (``--slurm``) on the nodes of a
    Slurm allocation, the caller's or one asked for with ``slurm_options``
    (``--slurm-option``, ``docs/slurm.md``), which is cancelled when the run is over.
    ``trace`` (``--trace``) has every role write its trace into the run folder's ``trace/``
    (``docs/trace.md``): on this host only.

    Raises:
        UsageError: ``--ssh-option`` without ``--deploy``, ``--slurm-option`` without
            ``--slurm``, ``--slurm`` with ``--deploy``, or ``--trace`` with either.
        DeployInvalid: the deployment file is wrong, or does not list one node per role.
        PlanInvalid: ``--slurm`` with a plan that lists edge addresses.
        SlurmUnavailable: ``--slurm`` where no allocation is or can be made.
    """
    if ssh_options and deploy is None:
        raise UsageError("run: --ssh-option is for ssh calls, which only --deploy makes")
    if slurm_options and not slurm:
        raise UsageError("run: --slurm-option is for the Slurm allocation, which --slurm uses")
    if slurm and deploy is not None:
        raise UsageError("run: --slurm and --deploy each place the roles: give one of them")
    if trace and (slurm or deploy is not None):
        raise UsageError(TRACE_HERE_ONLY.format(command="run"))
    plan = load_plan(
        resolve_plan(plan_path) if plan_path else DEFAULT_PLAN, overrides=overrides_of(overrides)
    )
    require_learner(plan)  # a sum check is refused before any folder is made
    require_buildable(plan.participants, "run")
    if slurm and plan.edge_addresses:
        # On Slurm every edge listens on its listener's node: an address the plan lists would
        # be silently replaced.
        raise PlanInvalid(
            "with --slurm every edge listens on its listener's node, as Slurm gives its "
            "address: remove [addresses.edges]",
            field="addresses.edges",
        )
    deployed = None
    if deploy is not None:
        # A wrong file, or one that does not place every role, is refused before anything.
        deployment = load_deployment(deploy)
        deployment.require_roles(plan.participants)
        deployed = Deployed(deployment, deploy, tuple(ssh_options))
    elif not slurm:
        # An AArch64 role on this x86-64 host runs under qemu: found now, not after the
        # compile.
        interpreters = local_interpreters(
            plan_targets(plan.participants, plan.default_target, plan.target_roles), interpreters
        )
    if resume is not None and resume_round is not None:
        # A round no generation has is refused here, before any folder is made.
        resume = str(resume_generation(Path(resume), resume_round, plan.name, sys.stderr))
    folder = Path(directory or f"runs/{plan.name}")
    with hold_folder(folder, "alpha run"), contextlib.ExitStack() as held:
        slurmed = None
        if slurm:
            # Last before the run: an allocation this run makes is cancelled when it ends.
            slurmed = Slurmed.allocate(tuple(slurm_options), plan.name, plan.ports, folder)
            held.callback(slurmed.release)
        summary = run_plan(
            plan,
            folder.resolve() if slurm else folder,  # the nodes see it at the same path
            interpreters=interpreters,
            resume=None if resume is None else Path(resume),
            warm=warm,
            restarts=restarts,
            deploy=deployed,
            slurm=slurmed,
            trace=trace,
        )
    if summary.signal is not None:
        print(f"run: {summary.cause}", file=sys.stderr)  # its one line
    elif summary.cause:
        if summary.diverged_at is not None:
            print(f"run: diverged: {summary.cause}", file=sys.stderr)
        else:
            print(f"run: failed: {summary.cause}", file=sys.stderr)
            print(f"run: logs are in {_last_logs(folder)}", file=sys.stderr)
    if as_json:
        print(json.dumps(_summary_json(plan, folder, summary), indent=2, sort_keys=True))
    else:
        summary_table(_summary_rows(plan, summary), sys.stdout)
    if summary.signal is not None:
        return 128 + summary.signal
    return EXIT_OK if summary.ok else EXIT_FAILURE


def _last_logs(folder: Path) -> Path:
    """Where the logs of the last attempt that ran are: the run folder's, or, when a later
    attempt could not start (its files were moved away first), that attempt's under
    ``attempts/``."""
    logs = folder / LOGS_DIR
    if any(logs.glob("*.log")):
        return logs
    kept = sorted((folder / ATTEMPTS_DIR).glob(f"*/{LOGS_DIR}"))
    return kept[-1] if kept else logs


def _rounds_done(summary: RunSummary) -> int:
    """The rounds the history reaches (from round 1, through any resume)."""
    return summary.history[-1][0] + 1 if summary.history else 0


def _summary_rows(plan: Plan, summary: RunSummary) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    done = _rounds_done(summary)
    if summary.diverged_at is not None:
        rows.append(("rounds", f"{done} of {plan.rounds}: diverged at round {summary.diverged_at}"))
        same = summary.replica_diverged_at == summary.diverged_at
        where = (
            "does not diverge"
            if summary.replica_diverged_at is None
            else f"diverges at round {summary.replica_diverged_at}"
        )
        rows.append(("replicated learner", f"{where}{' too' if same else ''}"))
    elif summary.distributed:
        rows += [
            ("final parameters", summary.distributed),
            ("replicated learner", summary.replicated),
            ("equal bit for bit", "yes" if summary.ok else "NO"),
        ]
    else:
        rows.append(("rounds", f"{done} of {plan.rounds} recorded before the run stopped"))
    if math.isfinite(summary.holdout_accuracy):
        rows.append(("held-out accuracy", f"{100 * summary.holdout_accuracy:.1f}%"))
    if len(summary.attempts) > 1:
        failed = [str(each["failure"]) for each in summary.attempts[:-1]]
        causes = ", ".join(f"{failed.count(kind)} {kind}" for kind in sorted(set(failed)))
        rows.append(("attempts", f"{len(summary.attempts)} ({len(failed)} failed: {causes})"))
        rows.append(("rounds recomputed", str(summary.recomputed_rounds)))
    placed = [each for each in summary.attempts if isinstance(each.get("nodes"), list)]
    for each in placed:  # --deploy, --slurm: the node of each role, in role order
        nodes = each["nodes"]
        assert isinstance(nodes, list)
        name = "nodes" if len(summary.attempts) == 1 else f"nodes of attempt {each['attempt']}"
        rows.append((name, " ".join(str(node) for node in nodes)))
    rows.append(("wall time", f"{summary.wall_s:.1f} s"))
    if summary.curve is not None:
        rows.append(("loss curve", str(summary.curve)))
    if summary.csv is not None:
        rows.append(("history", str(summary.csv)))
    return rows


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _summary_json(plan: Plan, folder: Path, summary: RunSummary) -> dict[str, object]:
    """``alpha run --json``: docs/cli.md lists the keys."""
    return {
        "plan": plan.name,
        "folder": str(folder),
        "ok": summary.ok,
        "equal": bool(summary.distributed) and summary.distributed == summary.replicated,
        "distributed": summary.distributed or None,
        "replicated": summary.replicated or None,
        "rounds": plan.rounds,
        "rounds_done": _rounds_done(summary),
        "resumes": summary.resumes,
        "diverged_at": summary.diverged_at,
        "replicated_diverged_at": summary.replica_diverged_at,
        "holdout_accuracy": _finite_or_none(summary.holdout_accuracy),
        "wall_s": summary.wall_s,
        "cause": summary.cause or None,
        "changed": {
            name: {"was": was, "now": now} for name, (was, now) in sorted(summary.changed.items())
        },
        "signal": None if summary.signal is None else signal.Signals(summary.signal).name,
        "loss_png": None if summary.curve is None else str(summary.curve),
        "history_csv": None if summary.csv is None else str(summary.csv),
        "logs": str(folder / LOGS_DIR),
        "failure": summary.failure or None,
        "attempts": summary.attempts,
        "recomputed_rounds": summary.recomputed_rounds,
    }


def replicate_command(args: argparse.Namespace) -> int:
    """``alpha replicate``'s options as :func:`main_replicate`'s arguments."""
    return main_replicate(args.plan, as_json=args.json, overrides=args.overrides)


def main_replicate(
    plan_path: str, *, as_json: bool = False, overrides: Sequence[tuple[str, str]] | None = None
) -> int:
    """``alpha replicate``: the final digest on stdout (with ``as_json``, an object with the
    rounds and where it diverged, if it did); exit 1 when the learner diverged. ``overrides``
    as for :func:`main_run`."""
    plan = load_plan(resolve_plan(plan_path), overrides=overrides_of(overrides))
    require_learner(plan)  # a sum check is named as such before its data set is asked for
    replica = _replicated(plan, dataset_of(plan), None, sys.stderr)
    if as_json:
        print(
            json.dumps(
                {
                    "plan": plan.name,
                    "digest": replica.digest,
                    "rounds": replica.rounds,
                    "diverged_at": replica.diverged_at,
                },
                indent=2,
                sort_keys=True,
            )
        )
    else:
        print(replica.digest)
    if replica.diverged_at is not None:
        print(
            f"replicate: the learner diverged: the training loss of round "
            f"{replica.diverged_at} is {replica.history[-1][1]}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return EXIT_OK
