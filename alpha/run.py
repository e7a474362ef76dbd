"""``alpha run [PLAN]``: the main job. Compile, launch with live progress, compare with the
replicated learner, and report.

Progress comes from role 0's log (one line per round: loss, training and held-out accuracy),
read while the participants run. At the end the run folder holds the artifacts, every role's
log and report, and ``loss.png``, the loss and held-out accuracy per round.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import trio

from alpha._files import output_folder, package_data
from alpha.artifact import REPORTS_DIR
from alpha.checkpoint import Generation, open_generation
from alpha.commit import COMMIT_NAME, CommitRecord, check_reports
from alpha.compile import compile_plan, parse_roles
from alpha.errors import CommitInvalid, LearnerStateInvalid
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.launch import launch, launch_specs
from alpha.learner.data import Digits, load_digits
from alpha.learner.program import LearnerState
from alpha.learner.replicate import Start, replicate, require_learner
from alpha.learner.saving import PARAMETERS, check_fits
from alpha.plan import Plan, Segment, load_plan
from alpha.plot import write_loss_curve

__all__ = ["DEFAULT_PLAN", "RunSummary", "run_plan"]

DEFAULT_PLAN: Final = package_data("data/plans/digits.toml")
"""The shipped default plan (package data, ``docs/install.md``): 8 roles, a tree of fan-out 2,
30 rounds of the digits learner."""

_ROUND_LINE: Final = re.compile(
    r"round (\d+) loss (\S+) train-accuracy (\S+) holdout-accuracy (\S+)"
)
_POLL_SECONDS: Final = 0.2  # how often the progress display reads role 0's log
_BAR_WIDTH: Final = 30
_LINE_SECONDS: Final = 1.0  # off a terminal: at most one progress line a second


@dataclass
class RunSummary:
    ok: bool
    distributed: str
    replicated: str
    holdout_accuracy: float
    wall_s: float
    curve: Path | None
    cause: str = ""


class _Progress:
    """A progress bar of rounds with loss and held-out accuracy.

    On a terminal it is redrawn in place at every update; elsewhere (a log, a pipe) it writes
    a line at most every ``_LINE_SECONDS`` and at the last round, so long runs stay readable.
    """

    def __init__(
        self,
        out: TextIO,
        total: int,
        label: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.clock = clock
        self.total = total
        self.label = label
        self.live = out.isatty()
        self.last_line = -float("inf")
        self.drawn = False

    def update(self, done: int, loss: float, accuracy: float) -> None:
        now = self.clock()
        if not self.live and done < self.total and now - self.last_line < _LINE_SECONDS:
            return
        self.last_line = now
        filled = _BAR_WIDTH * done // max(1, self.total)
        text = (
            f"{self.label}[{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] round {done}/{self.total} "
            f"loss {loss:.4f} held-out accuracy {100 * accuracy:5.1f}%"
        )
        self.out.write(f"\r{text}" if self.live else f"{text}\n")
        self.out.flush()
        self.drawn = True

    def close(self) -> None:
        """End a bar drawn in place, so what follows starts on a line of its own."""
        if self.live and self.drawn:
            self.out.write("\n")
            self.out.flush()


async def _follow(log: Path, progress: _Progress) -> None:
    seen = 0
    while True:
        try:
            text = log.read_text(errors="replace")
        except OSError:
            text = ""
        rounds = _ROUND_LINE.findall(text)
        if len(rounds) > seen:
            seen = len(rounds)
            number, loss, _, accuracy = rounds[-1]
            progress.update(int(number), float(loss), float(accuracy))
        await trio.sleep(_POLL_SECONDS)


@dataclass(frozen=True)
class _Segment:
    """One launch of a checkpointed or resumed run: its rounds and where it starts."""

    first: int
    end: int


def _segments(first: int, rounds: int, every: int | None) -> list[_Segment]:
    """The launches that run rounds ``first..rounds-1``, a generation every ``every``."""
    if every is None:
        return [_Segment(first, rounds)]
    ends = [*range(first + every, rounds, every), rounds]
    starts = [first, *ends[:-1]]
    return [_Segment(a, b) for a, b in zip(starts, ends, strict=True)]


def _resume_point(plan: Plan, digits: Digits, path: Path) -> tuple[Generation, Start]:
    """The generation at ``path``, every shard checked, as the replicated learner's start.

    Raises:
        CheckpointCorrupt: the pointer, a manifest or a shard is missing or damaged.
        LearnerStateInvalid: it is not this plan's learner's state, or nothing is left to run.
    """
    generation = open_generation(path)
    generation.verify()
    check_fits(generation, LearnerState.for_role(plan, digits, 0))
    if generation.round >= plan.rounds:
        raise LearnerStateInvalid(
            f"checkpoint {generation.path.name} is of round {generation.round}: nothing is left "
            f"of the plan's {plan.rounds} rounds (raise run.rounds to go on)"
        )
    arrays = generation.load()
    parameters = arrays.pop(PARAMETERS)
    return generation, Start(generation.round, parameters, arrays)


def _launch_segment(
    plan: Plan,
    directory: Path,
    interpreters: Mapping[str, Sequence[str]] | None,
    progress: _Progress,
) -> tuple[str, dict[int, dict[str, Any]]]:
    """Compile ``plan`` into ``directory`` and run it; return ("", its committed reports), or
    (the first failure, {})."""
    compile_plan(plan, directory, parse_roles("all", plan.participants))
    reports = directory / REPORTS_DIR
    if reports.exists():
        for stale in [*reports.glob("*.json"), *reports.glob("*.staged")]:
            stale.unlink()
    specs, deadline = launch_specs(directory, interpreters)

    async def main() -> object:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_follow, directory / "logs" / "role-000000.log", progress)
            result = await launch(specs, deadline=deadline)
            nursery.cancel_scope.cancel()
        return result

    result = trio.run(main)
    failure = getattr(result, "first_failure", None)
    if failure is not None:
        return f"role {failure.role}: {failure.cause}", {}
    try:
        _, found = committed_reports(reports, plan.tree.children)
    except CommitInvalid as error:
        return f"the run did not commit: {error}", {}
    return "", found


def run_plan(
    plan: Plan,
    directory: Path,
    out: TextIO = sys.stderr,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    resume: Path | None = None,
) -> RunSummary:
    """Compile ``plan`` into ``directory``, run it, and compare with the replicated learner.
    ``interpreters`` starts each target's roles (:func:`alpha.launch.launch_specs`).

    With a ``[checkpoint]`` table the run is a chain of segments, each a whole run that
    publishes a generation at its commit point; with ``resume`` (a checkpoint folder or a
    generation) it starts from that generation, and the replicated learner it is compared
    with starts from the same state (``docs/checkpoints.md``).

    Raises:
        CheckpointCorrupt, LearnerStateInvalid: ``resume`` cannot be resumed from.
    """
    started = time.monotonic()
    require_learner(plan)
    digits = load_digits()
    first, previous, start = 0, None, None
    if resume is not None:
        previous, start = _resume_point(plan, digits, resume)
        first = previous.round
    output_folder(directory)  # a folder that cannot be made is refused before anything runs
    spec = plan.checkpoint
    folder = None
    if spec is not None:
        folder = Path(spec.folder or directory / "checkpoints").resolve()
        folder.mkdir(parents=True, exist_ok=True)
    segments = _segments(first, plan.rounds, None if spec is None else spec.every)
    resumed = "" if previous is None else f", resumed at round {first} from {previous.path}"
    print(
        f"run: {plan.name}: {plan.participants} participants on a tree of fan-out "
        f"{plan.tree.fanout}, {plan.rounds} rounds, {plan.dtype}{resumed}",
        file=out,
    )
    progress = _Progress(out, plan.rounds)
    history: list[list[float]] = []
    found: dict[int, dict[str, Any]] = {}
    for segment in segments:
        each = plan
        if folder is not None or previous is not None:
            nonce = secrets.token_hex(4)
            each = dataclasses.replace(
                plan,
                rounds=segment.end,
                segment=Segment(
                    first=segment.first,
                    resume=None if previous is None else str(previous.path.resolve()),
                    resume_sha256=None if previous is None else previous.manifest_sha256,
                    save=None if folder is None else str(folder),
                    nonce=None if folder is None else nonce,
                    keep=2 if spec is None else spec.keep,
                ),
            )
        cause, found = _launch_segment(each, directory, interpreters, progress)
        if cause:
            progress.close()
            if folder is not None:
                latest = "none yet" if previous is None else str(previous.path)
                cause += (
                    f"; nothing of this segment was published; the latest generation is "
                    f"{latest}: go on with alpha run PLAN --resume {folder}"
                )
            return RunSummary(False, "", "", 0.0, time.monotonic() - started, None, cause)
        history += found[0]["history"]
        if folder is not None:
            previous = open_generation(folder)
            if previous.round != segment.end:
                progress.close()
                cause = (
                    f"the checkpoint pointer names {previous.path.name}, not round {segment.end}"
                )
                return RunSummary(False, "", "", 0.0, time.monotonic() - started, None, cause)
            if segment.end < plan.rounds or progress.live:
                progress.close()
            print(f"run: checkpoint {previous.path.name} published (round {segment.end})", file=out)
            # Old generations go once a newer one is published; a removal that failed is
            # reported on role 0's log, and here.
            log = (directory / "logs" / "role-000000.log").read_text(errors="replace")
            for line in log.splitlines():
                if ": checkpoint: cannot " in line:
                    print(f"run: {line.split(': ', 1)[1]}", file=out)
    progress.close()
    digests = {data["digests"]["w"] for data in found.values()}
    replaying = _Progress(out, plan.rounds, label="replicated ")
    replica = replicate(plan, digits, on_round=replaying.update, start=start)
    replaying.close()
    losses = [entry[1] for entry in history]
    accuracies = [entry[3] for entry in history]
    curve = write_loss_curve(
        directory / "loss.png", losses, accuracies, title=f"{plan.name} loss per round"
    )
    distributed = digests.pop() if len(digests) == 1 else "differs between roles"
    return RunSummary(
        ok=distributed == replica.digest and len(found) == plan.participants,
        distributed=distributed,
        replicated=replica.digest,
        holdout_accuracy=accuracies[-1],
        wall_s=time.monotonic() - started,
        curve=curve,
    )


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


def main_run(
    plan_path: str | None,
    directory: str | None,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    resume: str | None = None,
) -> int:
    plan = load_plan(plan_path or DEFAULT_PLAN)
    folder = Path(directory or f"runs/{plan.name}")
    summary = run_plan(
        plan, folder, interpreters=interpreters, resume=None if resume is None else Path(resume)
    )
    if summary.cause:
        print(f"run: failed: {summary.cause}", file=sys.stderr)
        print(f"run: logs are in {folder / 'logs'}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"final parameters    {summary.distributed}")
    print(f"replicated learner  {summary.replicated}")
    print(f"equal bit for bit   {'yes' if summary.ok else 'NO'}")
    print(f"held-out accuracy   {100 * summary.holdout_accuracy:.1f}%")
    print(f"wall time           {summary.wall_s:.1f} s")
    print(f"loss curve          {summary.curve}")
    return EXIT_OK if summary.ok else EXIT_FAILURE


def main_replicate(plan_path: str) -> int:
    plan = load_plan(plan_path)
    progress = _Progress(sys.stderr, plan.rounds)
    replica = replicate(plan, load_digits(), on_round=progress.update)
    progress.close()
    print(replica.digest)
    return EXIT_OK
