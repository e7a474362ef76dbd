"""The checkpoint gates: checkpointed runs under one hostile condition each, and the refusal
each must meet (``docs/gates.md``, ``docs/checkpoints.md``).

They run the ``checkpoint`` scenario: four roles of the digits learner, a generation every
round. Each run is a real ``alpha run`` of real participant processes (``run_plan`` in a
child process of its own, which prints what it came to as one JSON line, the refusal's exact
class included):

- ``checkpoint.enospc``: the checkpoint folder is a small tmpfs with room for one generation:
  round 1's generation is published, round 2's staging runs out of space. The run's first
  failure must be ``CheckpointWriteFailed`` naming "No space left on device", every role that
  failed must name it (as its own cause or its abort's; a role the fail-fast launcher stopped
  first may log nothing), none with a traceback; round 1's generation stays the latest and
  verifies; no staged folder stays; the run names the cause and a ``--resume``. Skipped, with
  the reason, where ``mount`` is not permitted.
- ``checkpoint.concurrent-run``: a second run on the folder a first one holds must be refused
  (``CheckpointFolderHeld``, naming the first one's pid) while the first still runs, having
  run nothing; the first must commit, its generation the latest and whole.
- ``checkpoint.damaged-shard``: a resume from a generation one of whose shards has one byte
  changed (its size kept) must be refused (``CheckpointCorrupt`` naming that shard) before
  anything runs.
- ``checkpoint.foreign-generation``: a resume from the control run's generation by a plan with
  another rate and seed must be refused (``GenerationForeign`` naming both fields) before
  anything runs.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from alpha.records import LOGS_DIR, log_name
from gates.catalogue import Gate, Scenario, scenario_plan
from harness.mounts import MountUnavailable, tmpfs

if TYPE_CHECKING:
    from gates.run import Verdict

__all__ = ["CHECKPOINT", "gates", "run_checkpoint_gate"]

# Its plan is a template: {rounds}, {rate}, {seed} and {folder} are filled in per run.
_PLAN: Final = scenario_plan("checkpoint.toml.template")

CHECKPOINT: Final = Scenario(
    "checkpoint",
    _PLAN,
    roles=4,
    start=30.0,
    receive=10.0,
    edge=(0, 1),
)
"""Four roles of the digits learner, a generation each round (``folder`` and ``rounds`` are
filled in per run)."""

TMPFS_BYTES: Final = 128 * 1024
"""The ENOSPC gate's tmpfs: about 32 pages, room for one generation of the scenario (19 small
files of a page each, and the pointer and the lock) and not for two."""

_CHILD: Final = """
import io, json, sys
from pathlib import Path
from alpha.errors import AlphaError
from alpha.compiler import load_plan
from alpha.app import run_plan
plan = load_plan(sys.argv[1])
resume = Path(sys.argv[3]) if len(sys.argv) > 3 else None
try:
    summary = run_plan(plan, Path(sys.argv[2]), out=io.StringIO(), resume=resume)
    said = {"refused": None, "ok": summary.ok, "cause": summary.cause}
except AlphaError as error:
    said = {"refused": type(error).__name__, "ok": False, "cause": str(error)}
print(json.dumps(said), flush=True)
"""


def gates() -> tuple[Gate, ...]:
    """The checkpoint gates, for ``gates.catalogue.GATES``."""
    every = (0, 1, 2, 3)
    return (
        Gate(
            "checkpoint.enospc",
            "CheckpointWriteFailed",
            every,
            "the checkpoint folder is a 128 KiB tmpfs: round 2's staging runs out of space",
            scenario=CHECKPOINT,
        ),
        Gate(
            "checkpoint.concurrent-run",
            "CheckpointFolderHeld",
            (),
            "a second run (another rate) on the checkpoint folder a first run holds",
            scenario=CHECKPOINT,
        ),
        Gate(
            "checkpoint.damaged-shard",
            "CheckpointCorrupt",
            (),
            "a resume from a generation with one byte of a shard changed, its size kept",
            scenario=CHECKPOINT,
        ),
        Gate(
            "checkpoint.foreign-generation",
            "GenerationForeign",
            (),
            "a resume from the control's generation by a plan with another rate and seed",
            scenario=CHECKPOINT,
        ),
    )


@dataclass
class _Said:
    """What one child run came to."""

    refused: str | None
    ok: bool
    cause: str
    seconds: float


def _plan_file(
    where: Path, folder: Path, *, rounds: int, rate: str = "0.01", seed: int = 5
) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "plan.toml"
    path.write_text(CHECKPOINT.plan.format(rounds=rounds, rate=rate, seed=seed, folder=folder))
    return path


def _start(plan: Path, run: Path, resume: Path | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", _CHILD, str(plan), str(run)]
    if resume is not None:
        argv.append(str(resume))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _said(child: subprocess.Popen[str], started: float) -> _Said:
    out, err = child.communicate()
    seconds = time.monotonic() - started
    try:
        data = json.loads(out.strip().splitlines()[-1])
        return _Said(data["refused"], bool(data["ok"]), str(data["cause"]), seconds)
    except (IndexError, ValueError, KeyError, TypeError):
        last = (err.strip().splitlines() or ["no output"])[-1]
        return _Said(
            None, False, f"the run said nothing readable (exit {child.returncode}): {last}", seconds
        )


def _run(plan: Path, run: Path, resume: Path | None = None) -> _Said:
    started = time.monotonic()
    return _said(_start(plan, run, resume), started)


def _failed_class(cause: str) -> str:
    """The refusal class a failed run's cause names first (``role N: ... failed: CLASS:``)."""
    found = re.search(r"failed: (\w+):", cause)
    return found.group(1) if found else ""


def _generation_problems(folder: Path, round: int) -> list[str]:
    from alpha.checkpoint import open_generation
    from alpha.errors import CheckpointCorrupt

    try:
        latest = open_generation(folder)
        latest.verify()
    except CheckpointCorrupt as error:
        return [f"the checkpoint does not read: {error}"]
    if latest.round != round:
        return [f"the latest generation is of round {latest.round}, not {round}"]
    return []


def _left_running(folder: Path) -> list[str]:
    from harness.processes import running

    left = running(folder)
    return [f"processes left running: {left}"] if left else []


class _Work:
    """The folders of one gate run, and the control run the resume gates start from."""

    def __init__(self, work: Path, record: Callable[[Verdict], None]) -> None:
        self.work = work
        self.record = record
        self.control: Path | None = None
        self.control_why = ""


_WORKS: dict[Path, _Work] = {}


def _control(state: _Work) -> str:
    """Run the control (a checkpointed run of 2 rounds that must commit) once; return why it
    failed, or ``""``."""
    from gates.run import Verdict

    if state.control is not None or state.control_why:
        return state.control_why
    where = state.work / "checkpoint-control"
    folder = where / "ckpt"
    said = _run(_plan_file(where, folder, rounds=2), where / "run")
    problems = []
    if said.refused is not None or not said.ok:
        problems.append(f"the run without a fault did not commit: {said.refused or said.cause}")
    else:
        problems += _generation_problems(folder, 2)
    problems += _left_running(where)
    state.control_why = "; ".join(problems)
    if not problems:
        state.control = folder
    state.record(
        Verdict(
            "control.checkpoint",
            "none",
            "commit",
            "commit" if not problems else "no commit",
            None,
            said.seconds,
            not problems,
            state.control_why,
        )
    )
    return state.control_why


def _enospc(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    with contextlib.ExitStack() as stack:
        try:
            small = stack.enter_context(tmpfs(where / "tmpfs", f"size={TMPFS_BYTES}"))
        except MountUnavailable as reason:
            return "skipped", None, [], f"skipped: mount -t tmpfs is not permitted here ({reason})"
        folder = small / "ckpt"
        run = where / "run"
        said = _run(_plan_file(where, folder, rounds=3), run)
        problems = []
        observed = said.refused or _failed_class(said.cause) or "none"
        if observed != gate.expected:
            problems.append(f"the run's first failure is {observed}, not {gate.expected}")
        if said.refused is not None or said.ok:
            problems.append(
                f"the run was not failed by its checkpoint: {said.refused or 'it committed'}"
            )
        if "No space left on device" not in said.cause:
            problems.append(f"the run's cause does not say 'No space left on device': {said.cause}")
        if "--resume " not in said.cause:
            problems.append("the run's cause gives no --resume to go on with")
        for role in gate.at:
            log = run / LOGS_DIR / log_name(role)
            text = log.read_text(errors="replace") if log.exists() else ""
            if "Traceback" in text or "+----" in text:
                problems.append(f"role {role} died with a traceback")
            elif "failed: " in text and gate.expected not in text:
                # A role that failed names the cause, as its own or as the abort's; one the
                # launcher stopped first (its run is fail-fast) may have logged nothing.
                problems.append(f"role {role} failed with another cause than {gate.expected}")
        problems += _generation_problems(folder, 1)
        if any(p.name.endswith(".staged") for p in folder.iterdir()):
            problems.append("a staged generation was left behind")
        problems += _left_running(where)
        return observed, said.seconds, problems, ""


def _concurrent(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    from alpha.checkpoint import LOCK

    folder = where / "ckpt"
    first_plan = _plan_file(where / "first", folder, rounds=4)
    second_plan = _plan_file(where / "second", folder, rounds=4, rate="0.02")
    first = _start(first_plan, where / "first" / "run")
    started = time.monotonic()
    problems: list[str] = []
    try:
        while True:  # until the first run holds the folder, within its start budget
            try:
                if json.loads((folder / LOCK).read_text())["pid"] == first.pid:
                    break
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if first.poll() is not None or time.monotonic() - started > CHECKPOINT.start:
                return "none", None, ["the first run never held the folder"], ""
            time.sleep(0.02)
        second = _run(second_plan, where / "second" / "run")
        still = first.poll() is None
        observed = second.refused or "none"
        if observed != gate.expected:
            problems.append(f"the second run was not refused with {gate.expected}: {second.cause}")
        elif f"pid {first.pid}" not in second.cause:
            problems.append(
                f"the refusal does not name the holder (pid {first.pid}): {second.cause}"
            )
        if not still:
            problems.append("the second run was not refused while the first still ran")
        if (where / "second" / "run").exists():
            problems.append("the second run made its run folder: something of it ran")
        done = _said(first, started)
        if done.refused is not None or not done.ok:
            problems.append(f"the first run did not commit: {done.refused or done.cause}")
        problems += _generation_problems(folder, 4)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    problems += _left_running(where)
    return observed, second.seconds, problems, ""


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _resume_refused(
    gate: Gate, where: Path, folder: Path, plan: Path, words: list[str]
) -> tuple[str, float | None, list[str], str]:
    before = _files(folder)
    run = where / "run"
    said = _run(plan, run, folder)
    observed = said.refused or _failed_class(said.cause) or ("commit" if said.ok else "none")
    problems = []
    if observed != gate.expected:
        problems.append(f"the resume was not refused with {gate.expected}: {said.cause}")
    problems += [
        f"the refusal does not name {word!r}: {said.cause}"
        for word in words
        if word not in said.cause
    ]
    if run.exists():
        problems.append("the resume made its run folder: something of it ran")
    if _files(folder) != before:
        problems.append("the checkpoint folder changed")
    problems += _left_running(where)
    return observed, said.seconds, problems, ""


def _damaged(gate: Gate, where: Path, control: Path) -> tuple[str, float | None, list[str], str]:
    from alpha.checkpoint import open_generation

    folder = where / "ckpt"
    shutil.copytree(control, folder)
    generation = open_generation(folder)
    shard = generation.shards["w"][1]
    path = generation.path / shard.file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    plan = _plan_file(where, where / "new-ckpt", rounds=4)
    return _resume_refused(gate, where, folder, plan, [shard.file])


def _foreign(gate: Gate, where: Path, control: Path) -> tuple[str, float | None, list[str], str]:
    folder = where / "ckpt"
    shutil.copytree(control, folder)
    plan = _plan_file(where, where / "new-ckpt", rounds=4, rate="0.02", seed=6)
    return _resume_refused(gate, where, folder, plan, ["rate", "seed"])


async def run_checkpoint_gate(
    gate: Gate, work: Path, folder: Path, record: Callable[[Verdict], None]
) -> Verdict:
    """Run the checkpoint gate ``gate`` in ``folder`` (the control run first, once per
    ``work``, reported through ``record``), and judge it."""
    from gates.run import Verdict

    state = _WORKS.setdefault(work, _Work(work, record))
    why = await trio.to_thread.run_sync(_control, state)
    if why or state.control is None:
        return Verdict(
            gate.name, gate.meaning, gate.expected, "none", None, None, False,
            f"its scenario's control run failed: {why}",
        )  # fmt: skip
    control = state.control
    name = gate.name.removeprefix("checkpoint.")
    runners: dict[str, Callable[[], tuple[str, float | None, list[str], str]]] = {
        "enospc": lambda: _enospc(gate, folder),
        "concurrent-run": lambda: _concurrent(gate, folder),
        "damaged-shard": lambda: _damaged(gate, folder, control),
        "foreign-generation": lambda: _foreign(gate, folder, control),
    }
    folder.mkdir(parents=True, exist_ok=True)
    observed, seconds, problems, skipped = await trio.to_thread.run_sync(runners[name])
    return Verdict(
        gate=gate.name,
        fault=gate.meaning,
        expected=gate.expected,
        observed=observed,
        role=None,
        seconds=seconds,
        passed=not problems,
        why=skipped or "; ".join(problems),
    )
