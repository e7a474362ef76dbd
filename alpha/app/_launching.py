"""Start a compiled folder's roles and report how they ended, for ``alpha launch`` and
``alpha exchange``: a fresh attempt area first (the previous launch's reports, logs and
progress records swept), one status line through the start (``starting: K/N roles up``, one
line a phase off a terminal), the rounds bar of a learner, the warm starter's notes, the role
that failed first and where the logs are, and what the run came to: for a learner the summary
``alpha run`` prints (but for the replicated learner, which only ``alpha run`` compares) and a
fresh ``loss.png`` and ``history.csv``, for a sum check what was checked. With ``--json`` the
outcome is one object on stdout.

The ``--deploy`` preparation (copying artifacts, SSH tunnels) is ``alpha launch``'s alone and
lives in :mod:`alpha.app.launch_command`: this module imports the local launcher only, so
``alpha exchange`` does not stand on the remote launcher.
"""

from __future__ import annotations

import math
import signal
import sys
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from alpha.app._options import print_json
from alpha.app.interrupted import Interrupted
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.records.folder import HISTORY_CSV, LOGS_DIR, LOSS_PNG, REPORTS_DIR, artifact_name
from alpha.records.reports import clear_attempt

if TYPE_CHECKING:
    from alpha.app.display import PhaseStatus
    from alpha.launch.launcher import LaunchResult, LaunchSpec, RouteHook
    from alpha.records.progress import RoundRecord

__all__ = [
    "FolderWork",
    "folder_targets",
    "folder_work",
    "launch_folder",
    "local_interpreters",
    "plan_targets",
]

PARAMETERS: Final = "w"
"""The name of a learner's parameters among a report's digests (``alpha.learner.saving``'s
``PARAMETERS``, which this module does not import: it would load the learner)."""

NOT_COMPARED: Final = "not compared: alpha run PLAN compares the run with it"
"""What ``alpha launch`` says of the replicated learner, which it does not run."""


def local_interpreters(
    targets: Mapping[str, Collection[int]], chosen: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, ...]]:
    """The interpreters a launch on this host starts the roles of ``targets`` (target: its
    roles) with: the ``--interpreter`` ones, and for a target that is not this machine's the
    emulation of it (``docs/emulation.md``), found before any role starts.

    Raises:
        EmulationUnavailable: a role cannot run on this machine and no interpreter was given.
    """
    from alpha.artifact.payload import host_target
    from alpha.launch.emulation import interpreters_for

    return interpreters_for(targets, chosen, host_target())


def plan_targets(
    participants: int, default: str, listed: Sequence[tuple[str, Sequence[int]]]
) -> dict[str, Collection[int]]:
    """The roles of each target of a plan of ``participants`` roles: those ``listed`` per
    target (``Plan.target_roles``), and every other role ``default``'s."""
    found: dict[str, Collection[int]] = {target: roles for target, roles in listed}
    named = {role for _, roles in listed for role in roles}
    rest = participants - len(named)
    if rest:
        found[default] = [
            *found.get(default, ()),
            *(r for r in range(participants) if r not in named),
        ]
    return found


def folder_targets(run: Mapping[str, object]) -> dict[str, list[int]]:
    """The roles of each target a compiled folder's ``run.json`` (read and checked) lists."""
    found: dict[str, list[int]] = {}
    roles = run.get("roles")
    for entry in roles if isinstance(roles, list) else ():
        found.setdefault(str(entry["target"]), []).append(int(entry["role"]))
    return found


@dataclass(frozen=True, slots=True)
class FolderWork:
    """What a compiled folder's roles do, read from its artifacts: ``kind`` (``"learn"``,
    ``"sum-check"``), the rounds the launch runs (``first`` + 1 to ``rounds``, a segment of a
    checkpointed run starting past 0), and for a sum check whether every role checks the
    combined sum (delivery to all) or role 0 alone."""

    kind: str
    rounds: int
    first: int = 0
    every_role_checks: bool = True


def _rounds(body: Iterable[object]) -> int:
    from alpha.schedule.local import Loop

    return sum(ins.count for ins in body if isinstance(ins, Loop))


def _checks(body: Iterable[object]) -> bool:
    from alpha.schedule.local import Choose, Loop, Op

    for ins in body:
        if isinstance(ins, Op) and ins.name.startswith("check"):
            return True
        if isinstance(ins, Loop) and _checks(ins.body):
            return True
        if isinstance(ins, Choose) and (_checks(ins.arm0) or _checks(ins.arm1)):
            return True
    return False


def folder_work(directory: Path, participants: int) -> FolderWork:
    """What the roles of the compiled, checked folder ``directory`` do: read from role 0's
    artifact (its learner payload, its schedule's rounds) and, for a sum check, the last
    role's (whether it checks the sum too).

    Raises:
        ArtifactInvalid: an artifact does not read (the launcher checked them already).
    """
    from alpha.artifact.payload import read_artifact
    from alpha.schedule.local import decode

    payload = read_artifact(directory / artifact_name(0))
    rounds = _rounds(decode(payload["schedule"]).body)
    learner = payload.get("learner")
    if isinstance(learner, dict):
        segment = learner.get("segment")
        first = segment.get("first", 0) if isinstance(segment, dict) else 0
        return FolderWork("learn", first + rounds, first if isinstance(first, int) else 0)
    last = read_artifact(directory / artifact_name(participants - 1))
    return FolderWork("sum-check", rounds, every_role_checks=_checks(decode(last["schedule"]).body))


@dataclass
class _Summary:
    """What the run came to, for the text and the JSON."""

    rows: list[tuple[str, str]]
    learner: dict[str, object] | None = None
    sum_check: dict[str, object] | None = None
    line: str = ""  # a sum check's one line
    failed: str = ""  # committed, but the reports say otherwise


def launch_folder(
    directory: Path,
    specs: Sequence[LaunchSpec],
    deadline: float | None,
    *,
    route: RouteHook | None = None,
    close: Callable[[], Awaitable[None]] | None = None,
    as_json: bool = False,
    warm: bool = True,
    local: bool = True,
    label: str = "launch",
    out: TextIO | None = None,
    status: PhaseStatus | None = None,
    trace: bool = False,
) -> int:
    """Launch ``specs`` (the roles of ``directory``) and wait for every role; the exit code:
    0 when all finished, else 1, or 128 + the signal that stopped the launch. ``route`` turns
    announced ports into the ports connectors get (SSH tunnels); ``close`` runs once the
    launch is over, however it ended (it ends the tunnels). ``local``: the roles write their
    reports and progress into ``directory`` (not on remote nodes), so the run's result is
    read from there. ``label`` begins each line (``launch``, ``exchange``); ``out`` is where
    progress and lines go (stderr); ``status`` the status line a caller already shows (it
    checked the artifacts), else a new one. ``trace``: every role writes its trace into the
    folder's ``trace/`` (``docs/trace.md``).

    Before any role starts, the folder's previous attempt is swept
    (:func:`alpha.records.reports.clear_attempt`), and for a learner its ``loss.png`` and
    ``history.csv``, which this launch writes again from its own progress records.
    """
    import trio

    from alpha.app.display import PhaseStatus, RoundProgress, follow
    from alpha.launch.launcher import enough_descriptors, launch
    from alpha.records.progress import progress_path

    out = sys.stderr if out is None else out
    # Before anything is cleared or started: a launch the descriptors cannot carry is refused.
    enough_descriptors(len(specs), warm)
    clear_attempt(directory)
    total = len(specs)
    work = folder_work(directory, total) if local and total else None
    learning = work is not None and work.kind == "learn"
    if learning:
        for stale in (directory / LOSS_PNG, directory / HISTORY_CSV):
            stale.unlink(missing_ok=True)  # an earlier run's: this launch writes its own
    if status is None:
        status = PhaseStatus(out, label)
    status.waiting = "waiting for round 1" if learning else "running"
    progress = None
    if learning:
        assert work is not None
        progress = RoundProgress(out, work.rounds, start=work.first)
    records: list[RoundRecord] = []

    async def main() -> LaunchResult:
        try:
            async with trio.open_nursery() as nursery:
                if progress is not None:
                    nursery.start_soon(
                        lambda: follow(
                            progress_path(directory), progress, history=records, first=status.close
                        )
                    )
                nursery.start_soon(status.ticking)
                status.starting(0, total)
                result = await launch(
                    specs,
                    deadline=deadline,
                    on_announce=status.announced,
                    route=route,
                    warm=warm,
                    shared=local,
                    trace=trace,
                )
                nursery.cancel_scope.cancel()
            return result
        finally:
            if close is not None:
                await close()

    try:
        result = trio.run(main)
    finally:
        status.close()
        if progress is not None:
            progress.close()
    failure = result.first_to_fail
    for note in result.notes:  # a warm starter's fault that did not fail the run
        print(f"{label}: note: {note}", file=out)
    summary = None
    if work is not None:
        summary = _summarize(directory, work, total, result, records, failure is None)
    stopped = result.signal is not None  # its one line is the command's (cli.main prints it)
    if failure is not None and not stopped:
        print(f"{label}: role {failure.role} failed first: {failure.cause}", file=out)
        print(f"{label}: logs are in {directory / LOGS_DIR}", file=out)
    elif failure is None:
        print(f"{label}: {total} role(s) finished in {result.elapsed_s:.2f} s", file=out)
    if summary is not None and summary.failed and not stopped:
        print(f"{label}: {summary.failed}", file=out)
    if as_json:
        print_json(
            {
                "ok": result.ok and (summary is None or not summary.failed),
                "directory": str(directory),
                "roles": total,
                "elapsed_s": result.elapsed_s,
                "first_failure": None
                if failure is None
                else {"role": failure.role, "cause": failure.cause},
                "signal": None if result.signal is None else signal.Signals(result.signal).name,
                "logs": str(directory / LOGS_DIR),
                "notes": result.notes,
                "work": None if work is None else work.kind,
                "learner": None if summary is None else summary.learner,
                "sum_check": None if summary is None else summary.sum_check,
            }
        )
    elif summary is not None:
        from alpha.app.display import summary_table

        if summary.line:
            print(f"{label}: {summary.line}")
        if summary.rows:
            summary_table(summary.rows, sys.stdout)
    if result.signal is not None:
        # Every role was stopped and reaped: one line, 128 + the signal (docs/cli.md).
        raise Interrupted(
            result.signal,
            f"stopped all {total} role(s) after {result.elapsed_s:.1f} s; logs are in "
            f"{directory / LOGS_DIR}",
        )
    if failure is not None:
        return EXIT_FAILURE
    return EXIT_FAILURE if summary is not None and summary.failed else EXIT_OK


def _committed(directory: Path) -> dict[int, dict[str, Any]]:
    """Every role's committed report (``docs/failure.md``), checked against role 0's commit
    record given each role's children (its higher peers, as ``run.json`` lists them).

    Raises:
        CommitInvalid: there is no commit record, or the reports are not the committed ones.
    """
    from alpha.artifact.run_json import read_run_json
    from alpha.records.reports import committed_reports

    _, found = committed_reports(directory / REPORTS_DIR, _children_of(read_run_json(directory)))
    return found


def _children_of(run: dict[str, object]) -> Callable[[int], Sequence[int]]:
    """Each role's children in the tree, as ``run.json`` lists each role's higher peers."""
    roles = run["roles"]
    assert isinstance(roles, list)  # checked by read_run_json
    higher = {entry["role"]: tuple(entry["higher"]) for entry in roles}
    return lambda role: higher.get(role, ())


def _summarize(
    directory: Path,
    work: FolderWork,
    total: int,
    result: LaunchResult,
    records: list[RoundRecord],
    finished: bool,
) -> _Summary:
    from alpha.errors import CommitInvalid

    reports: dict[int, dict[str, Any]] = {}
    failed = ""
    if finished:
        try:
            reports = _committed(directory)
        except CommitInvalid as error:
            failed = f"every role finished, but the run did not commit: {error}"
    if work.kind == "learn":
        summary = _learner_summary(directory, work, total, result, records, reports)
    elif reports:
        summary = _sum_check_summary(work, total, reports)
    else:
        summary = _Summary([])
    summary.failed = failed
    return summary


def _learner_summary(
    directory: Path,
    work: FolderWork,
    total: int,
    result: LaunchResult,
    records: list[RoundRecord],
    reports: dict[int, dict[str, Any]],
) -> _Summary:
    """The summary ``alpha run`` prints, from this launch's reports and progress records, and
    this launch's ``history.csv`` and ``loss.png`` written fresh (when a round was seen)."""
    from alpha.app.plot import diverged_round, write_run_plots
    from alpha.artifact.run_json import read_run_json

    history = [
        (record.round - 1, record.loss, record.train_accuracy, record.holdout_accuracy)
        for record in records
    ]
    plots = None
    if history:
        name = read_run_json(directory)["name"]
        assert isinstance(name, str)  # checked by read_run_json
        plots = write_run_plots(directory, history, title=name, diverged_at=diverged_round(history))
    digests = {report["digests"].get(PARAMETERS) for report in reports.values()}
    agree = bool(reports) and len(digests) == 1 and None not in digests
    final = next(iter(digests)) if agree else None
    finite = [row for row in history if math.isfinite(row[3])]
    holdout = finite[-1][3] if finite else None
    rows: list[tuple[str, str]] = []
    done = records[-1].round if records else work.first
    if reports:
        rows.append(("final parameters", final if final is not None else "differs between roles"))
        rows.append(
            (
                "all roles agree",
                f"yes ({total} of {total})" if agree else f"NO ({len(digests)} digests)",
            )
        )
    else:
        rows.append(("rounds", f"{done} of {work.rounds} recorded before the run stopped"))
    rows.append(("replicated learner", NOT_COMPARED))
    if holdout is not None:
        rows.append(("held-out accuracy", f"{100 * holdout:.1f}%"))
    rows.append(("wall time", f"{result.elapsed_s:.1f} s"))
    if plots is not None:
        rows.append(("loss curve", str(plots.png)))
        rows.append(("history", str(plots.csv)))
    learner: dict[str, object] = {
        "rounds": work.rounds,
        "rounds_done": done,
        "final_parameters": final,
        "agree": agree,
        "holdout_accuracy": holdout,
        "replicated": None,  # not compared: alpha run does that
        "loss_png": None if plots is None else str(plots.png),
        "history_csv": None if plots is None else str(plots.csv),
    }
    return _Summary(rows, learner=learner)


def _sum_check_summary(
    work: FolderWork, total: int, reports: dict[int, dict[str, Any]]
) -> _Summary:
    """What a committed sum check checked: each role ran every round, filled its region,
    combined it with the tree and checked the total against the closed form (a wrong one
    fails the role, ``CheckFailed``, so a committed run is one where every check passed);
    each edge was established once and carried frames both ways."""
    rounds = {int(report["rounds"]) for report in reports.values()}
    done = rounds.pop() if len(rounds) == 1 else min(rounds, default=0)
    arms = [int(n) for n in reports[0].get("arms", [done, 0])]
    edges = sum(len(report["edges"]) for report in reports.values()) // 2
    both = (
        sum(
            1
            for report in reports.values()
            for edge in report["edges"]
            if edge["sent_bytes"] > 0 and edge["received_bytes"] > 0
        )
        // 2
    )
    who = "every role" if work.every_role_checks else "role 0"
    line = (
        f"sum check: {total} role{'s' if total != 1 else ''}, {done} round"
        f"{'s' if done != 1 else ''}, every combined sum equal to the expected one "
        f"(checked by {who})"
    )
    if arms[1]:
        line += f"; arm 1 (negated) in {arms[1]} of {done} rounds"
    line += f"; {both} of {edges} edge(s) carried frames both ways"
    sum_check: dict[str, object] = {
        "roles": total,
        "rounds": done,
        "checked_by": who,
        "arms": arms,
        "edges": edges,
        "edges_both_ways": both,
    }
    return _Summary([], sum_check=sum_check, line=line)
