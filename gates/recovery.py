"""The recovery gates: ``alpha run --restarts`` under one failure of each class, and what the
run must come to (``docs/gates.md``, ``docs/recovery.md``).

They run the ``recovery`` scenario: four roles of the digits learner, a generation every 2
rounds, 12 rounds, a receive budget of 3 s so that a stopped role is noticed in seconds. Each
run is a real ``alpha run PLAN --json`` of real participant processes, in a child process,
while this process makes the fault (a signal to the role whose stderr is its log,
``harness.processes.role_pids``, once role 0 recorded the fault's round; or one TCP segment
rewritten in the run's own network namespace, ``harness.netns``):

- ``recovery.killed`` (``lost``): role 2 SIGKILLed in round 5, ``--restarts 1``: attempt 0
  fails ``lost`` and is retried; attempt 1 runs as epoch 1 from a generation attempt 0
  published, and the run commits on the fault-free bits (the control run's digest, which is the
  replicated learner's); attempt 0's files are kept; no participant is left.
- ``recovery.stopped`` (``budget`` or ``lost``): role 2 SIGSTOPped in round 5: the same.
- ``recovery.refused`` (``refused``): four payload bytes of one segment of role 0's totals to a
  child rewritten on the wire, in round 3: attempt 0 fails ``refused``, known as ``Forged`` (the
  plan is keyed), then the same. Skipped, with the reason, where a network namespace or
  nftables cannot be used (``harness.netns.unavailable``).
- ``recovery.diverged`` (``divergence``): a learner rate of 1e6, ``--restarts 3``: exactly one
  attempt, never retried, exit 1, no ``attempts/`` folder.
- ``recovery.exhausted`` (``lost``): ``--restarts 1``, role 1 SIGKILLed in round 3 and role 3
  in round 7 (of the attempt then running): two attempts, the second not retried, the run
  fails naming "no restart left".
- ``recovery.unusable`` (``usage``): ``alpha run`` stops itself before each attempt's compile
  (the failpoint ``run.compiling``); role 2 SIGKILLed in round 5, ``--restarts 3``; while
  ``alpha run`` is stopped before attempt 1 (its generation chosen and checked) every
  published generation's shards are damaged: attempt 1's roles refuse the generation
  (``CheckpointCorrupt``), which no restart can end otherwise, so the run ends after two
  attempts, the second not retried.
- ``recovery.failing`` (``error``): the checkpoint folder is a small tmpfs; role 0 stops once
  its first generation is published (the failpoint ``checkpoint.published``), the tmpfs is
  filled, and role 0 goes on: the next generation cannot be written
  (``CheckpointWriteFailed``), which a fresh attempt would meet again, so one attempt, not
  retried. Skipped, with the reason, where ``mount`` is not permitted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import trio

from alpha.checkpoint import published
from alpha.failpoints import FAILPOINTS_ENV
from alpha.records import ATTEMPTS_DIR, LOGS_DIR
from gates.catalogue import Gate, Scenario, scenario_plan
from harness import netns
from harness.mounts import MountUnavailable, fill, tmpfs
from harness.processes import role_pids, running, state_of
from harness.runs import recorded_round

if TYPE_CHECKING:
    from gates.run import Verdict

__all__ = ["RECOVERY", "gates", "run_recovery_gate"]

# Its plan is a template: {rate} and {folder} are filled in per run.
_PLAN: Final = scenario_plan("recovery.toml.template")

RECOVERY: Final = Scenario(
    "recovery",
    _PLAN,
    roles=4,
    start=30.0,
    receive=3.0,
    edge=(0, 1),
)
"""Four roles of the digits learner in a tree of fan-out 2, 12 rounds, a generation every 2."""

ROOT: Final = Path(__file__).resolve().parents[1]
EVERY: Final = 2  # rounds between generations, as the plan's [checkpoint] every
RATE: Final = "0.01"  # the plan's learner rate; DIVERGING makes its loss leave the floats
DIVERGING: Final = "1e6"
RUN_TIMEOUT: Final = 240.0
"""Seconds an ``alpha run`` of the scenario may take: about 4 s without a fault on a 2-core
host, and two attempts with a stopped role's budget, on a loaded host, a few times that."""
TMPFS_BYTES: Final = 512 * 1024
"""The failing gate's tmpfs: room for the scenario's first generations (a few KiB each, each
manifest holding the history), filled once the first is published."""
CORRUPT_WITHIN: Final = 10.0
"""Seconds the corrupting rule may wait for its segment: the run moves several rounds a second."""
# Role 0's totals are DATA frames of several KiB; every other frame is a few hundred bytes.
# Four bytes at offset 140 of such a segment lie in the payload (the header is 133 bytes).
_LONGER: Final = 1024
_OFFSET: Final = 140
# "run: attempt A failed (CLASS, NAME): cause" (alpha/app/run.py _attempts).
_FAILED: Final = re.compile(r"run: attempt (\d+) failed \((\w+), ([^)]*)\)")
_RESUMES: Final = re.compile(r"run: attempt 1 of at most \d+ resumes from (\S+) \(round (\d+)\)")


def gates() -> tuple[Gate, ...]:
    """The recovery gates, for ``gates.catalogue.GATES``."""
    return (
        Gate(
            "recovery.killed",
            "lost",
            (2,),
            "role 2 SIGKILLed in round 5, --restarts 1: attempt 1 resumes as the next epoch "
            "from a published generation and ends on the fault-free bits",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.stopped",
            "budget or lost",
            (2,),
            "role 2 SIGSTOPped in round 5, --restarts 1: noticed on a 3 s budget; attempt 1 "
            "resumes and ends on the fault-free bits",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.refused",
            "refused",
            (0,),
            "four payload bytes of one TCP segment of role 0's totals rewritten on the wire "
            "(nftables, in the run's own network namespace) in round 3, --restarts 1: Forged; "
            "attempt 1 resumes and ends on the fault-free bits",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.diverged",
            "divergence",
            (),
            "a learner rate of 1e6, --restarts 3: the loss leaves the floats; never retried",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.unusable",
            "usage",
            (),
            "role 2 SIGKILLed in round 5, --restarts 3; the generations damaged while alpha "
            "run waits before attempt 1: its roles refuse the generation; never retried",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.failing",
            "error",
            (0,),
            "the checkpoint folder's tmpfs filled after the first generation, --restarts 3: "
            "the next generation cannot be written; never retried",
            scenario=RECOVERY,
        ),
        Gate(
            "recovery.exhausted",
            "lost",
            (1, 3),
            "--restarts 1, role 1 SIGKILLed in round 3 and role 3 in round 7: the second "
            "attempt is not retried and the run names no restart left",
            scenario=RECOVERY,
        ),
    )


@dataclass
class _Ran:
    """What one ``alpha run`` came to, and the faults this process made in it."""

    code: int
    summary: dict[str, Any]
    err: str
    run: Path
    faults: list[float] = field(default_factory=list)  # time.time() of each fault made
    problems: list[str] = field(default_factory=list)  # faults that could not be made
    left: list[int] = field(default_factory=list)  # participants running after the run

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return list(self.summary.get("attempts") or [])

    def failed(self, attempt: int) -> tuple[str, str]:
        """(class, name) attempt ``attempt`` failed with, as ``alpha run`` said it."""
        for found in _FAILED.finditer(self.err):
            if int(found.group(1)) == attempt:
                return found.group(2), found.group(3)
        attempts = self.attempts
        if attempt < len(attempts):
            return str(attempts[attempt].get("failure") or ""), ""
        return "", ""


def _plan_file(where: Path, rate: str = RATE, folder: Path | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "plan.toml"
    path.write_text(RECOVERY.plan.format(rate=rate, folder=folder or where / "ckpt"))
    return path


# (round, role, what): "SIGKILL", "SIGSTOP" or "corrupt" a role's; "continue" (alpha run
# itself, stopped at a failpoint, goes on), "damage" (the same, once every published
# generation's shards are damaged) and "fill" (role 0, stopped at a failpoint, goes on once
# the checkpoint folder's file system is full) wait for their process to stop first.
Fault = tuple[int, int, str]
ITSELF: Final = -1  # a fault's role that is alpha run itself
_AT_FAILPOINT: Final = ("continue", "damage", "fill")


def _damage(folder: Path) -> None:
    """Flip one byte of every shard of every published generation in ``folder``."""
    for generation in published(folder):
        for shard in sorted((generation / "shards").iterdir()):
            data = bytearray(shard.read_bytes())
            data[len(data) // 2] ^= 0xFF
            shard.write_bytes(bytes(data))


def _make(
    fault: Fault, run: Path, namespace: int | None, itself: int, folder: Path
) -> tuple[bool, str]:
    """Make ``fault`` once its role runs (``itself``: alpha run's pid; ``folder``: the
    checkpoint folder); (made, why not). False with no reason: not yet."""
    _, role, kind = fault
    pids = {r: pid for pid, r in role_pids(run).items()}
    if kind in _AT_FAILPOINT:
        pid = itself if role == ITSELF else pids.get(role)
        if pid is None or state_of(pid) != "T":
            return False, ""
        if kind == "damage":
            _damage(folder)
        elif kind == "fill":
            fill(folder.parent)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:  # the launcher stopped the run meanwhile
            who = "alpha run" if role == ITSELF else f"role {role}"
            return (
                True,
                f"{who} ended at its failpoint",
            )
        return True, ""
    if role not in pids:
        return False, ""
    if kind != "corrupt":
        try:
            os.kill(pids[role], signal.Signals[kind])
        except ProcessLookupError:  # it ended between the look and the signal: not yet
            return False, ""
        return True, ""
    assert namespace is not None
    ours = [c for c in netns.connections(namespace, list(pids.values())) if c.pid == pids[role]]
    if not ours:
        return False, ""
    hit = netns.corrupt_segment(
        namespace, ours[0], offset=_OFFSET, longer=_LONGER, within=CORRUPT_WITHIN
    )
    return True, "" if hit is not None else "no segment passed the corrupting rule"


def _alpha_run(
    plan: Path,
    run: Path,
    faults: list[Fault],
    *argv: str,
    wire: bool = False,
    failpoints: str = "",
    checkpoints: Path | None = None,
) -> _Ran:
    """``alpha run PLAN -o RUN --json ARGV`` (in a network namespace of its own when
    ``wire``; with ``failpoints`` as ``ALPHA_FAILPOINTS``), making each fault of ``faults``
    in turn once role 0 recorded its round in the attempt then running (a signal after
    another, once the attempt it ended is set aside). Once every fault is made, alpha run
    stopped at a failpoint again goes on (a later attempt's ``run.compiling``): only a fault
    stops it.
    ``checkpoints`` is the plan's checkpoint folder (None: ``_plan_file``'s default)."""
    folder = checkpoints or run.parent / "ckpt"
    command = [sys.executable, "-m", "alpha", "run", str(plan), "-o", str(run), "--json", *argv]
    if wire:
        command = netns.isolated(command)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), FAILPOINTS_ENV: failpoints}
    child = subprocess.Popen(
        command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    said: dict[str, str] = {}

    def read(name: str, stream: IO[str] | None) -> None:
        said[name] = stream.read() if stream is not None else ""

    readers = [
        threading.Thread(target=read, args=("out", child.stdout)),
        threading.Thread(target=read, args=("err", child.stderr)),
    ]
    for reader in readers:
        reader.start()
    made: list[float] = []
    problems: list[str] = []
    pending = list(faults)
    ends = time.monotonic() + RUN_TIMEOUT
    struck = -1  # attempts set aside when the last signal was sent (-1: none was)
    try:
        while pending and child.poll() is None and time.monotonic() < ends:
            # A signal after another strikes the next attempt: until the attempt the first
            # ended is set aside (attempts/NNN), its progress is still the run's, and a role
            # found then is one of its own, already ending.
            signal_after = pending[0][2] in _SIGNALS and struck >= 0
            if signal_after and _set_aside(run) <= struck:
                time.sleep(0.01)
                continue
            if recorded_round(run) >= pending[0][0]:
                at = time.time()
                done, why = _make(pending[0], run, child.pid if wire else None, child.pid, folder)
                if done:
                    made.append(at)
                    if pending[0][2] in _SIGNALS:
                        struck = _set_aside(run)
                    pending.pop(0)
                if why:
                    problems.append(why)
            time.sleep(0.01)
        while failpoints and child.poll() is None and time.monotonic() < ends:
            if state_of(child.pid) == "T":
                os.kill(child.pid, signal.SIGCONT)
            time.sleep(0.01)
        child.wait(timeout=max(1.0, ends - time.monotonic()))
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        problems.append(f"the run did not end in {RUN_TIMEOUT:g} s")
    for reader in readers:
        reader.join(timeout=10)
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()
    problems += [f"the run ended before the fault {fault}" for fault in pending]
    left = sorted(set(role_pids(run)) | set(running(run)))
    for pid in left:  # stop what the run left, so that the next gate starts clean
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        summary = json.loads(said.get("out", ""))
    except ValueError:
        summary = {}
    if not isinstance(summary, dict) or not summary:
        tail = (said.get("err", "").strip().splitlines() or ["nothing"])[-1]
        problems.append(f"alpha run printed no summary (exit {child.returncode}): {tail}")
        summary = {}
    return _Ran(child.returncode, summary, said.get("err", ""), run, made, problems, left)


_SIGNALS: Final = ("SIGKILL", "SIGSTOP")


def _set_aside(run: Path) -> int:
    """How many failed attempts' files ``alpha run`` has set aside in ``run`` so far."""
    try:
        return sum(1 for path in (run / ATTEMPTS_DIR).iterdir() if path.name.isdigit())
    except OSError:
        return 0


def _common(ran: _Ran) -> list[str]:
    problems = list(ran.problems)
    if ran.left:
        problems.append(f"processes left running: {ran.left}")
    return problems


def _restarted(gate: Gate, ran: _Ran, digest: str, classes: tuple[str, ...]) -> list[str]:
    """Attempt 0 failed with one of ``classes`` and was retried; attempt 1 ran as the next
    epoch from a generation attempt 0 published and committed on ``digest``."""
    problems = _common(ran)
    attempts = ran.attempts
    if len(attempts) != 2:
        return [*problems, f"{len(attempts)} attempts ran, not 2"]
    first, second = attempts
    if first["failure"] not in classes or first["retried"] is not True:
        problems.append(
            f"attempt 0 failed {first['failure'] or 'with nothing'} (retried "
            f"{first['retried']}), not {gate.expected} retried"
        )
    if second["failure"] or second["retried"] is not False:
        problems.append(f"attempt 1 failed {second['failure']} (retried {second['retried']})")
    if (first["epoch"], second["epoch"]) != (0, 1):
        problems.append(
            f"the attempts ran as epochs {first['epoch']} and {second['epoch']}, not 0 and 1"
        )
    resumed = second["resumed_at"]
    if not (EVERY <= resumed <= first["reached"] and resumed % EVERY == 0):
        problems.append(
            f"attempt 1 resumed at round {resumed}, not at a generation attempt 0 published "
            f"(every {EVERY} rounds, up to round {first['reached']})"
        )
    said = _RESUMES.search(ran.err)
    if said is None or int(said.group(2)) != resumed:
        problems.append("alpha run did not say which generation attempt 1 resumes from")
    if ran.summary.get("recomputed_rounds") != first["reached"] - resumed:
        problems.append(
            f"{ran.summary.get('recomputed_rounds')} rounds recomputed, not "
            f"{first['reached'] - resumed}"
        )
    if ran.code != 0 or ran.summary.get("ok") is not True:
        problems.append(f"the run did not commit (exit {ran.code}): {ran.summary.get('cause')}")
    if ran.summary.get("distributed") != digest or ran.summary.get("equal") is not True:
        problems.append(
            f"the run ended on {str(ran.summary.get('distributed'))[:16]}..., not the "
            f"fault-free {digest[:16]}..."
        )
    if not (ran.run / ATTEMPTS_DIR / "000" / LOGS_DIR).is_dir():
        problems.append("attempt 0's files were not kept under attempts/000")
    return problems


def _seconds(ran: _Ran) -> float | None:
    """From the first fault to the end of the attempt it failed."""
    if not ran.faults or not ran.attempts:
        return None
    return float(ran.attempts[0]["ended_unix"]) - ran.faults[0]


class _Work:
    """The gates' folder and the control run's digest (the fault-free bits)."""

    def __init__(self, work: Path, record: Callable[[Verdict], None]) -> None:
        self.work = work
        self.record = record
        self.digest = ""
        self.why = ""


_WORKS: dict[Path, _Work] = {}


def _control(state: _Work) -> str:
    """Run the scenario once without a fault (it must commit in one attempt on the
    replicated learner's bits); return why it failed, or ``""``."""
    from gates.run import Verdict

    if state.digest or state.why:
        return state.why
    where = state.work / "recovery-control"
    started = time.monotonic()
    ran = _alpha_run(_plan_file(where), where / "run", [])
    problems = _common(ran)
    digest = str(ran.summary.get("distributed") or "")
    if ran.code != 0 or ran.summary.get("ok") is not True or len(ran.attempts) != 1:
        problems.append(
            f"the run without a fault did not commit in one attempt (exit {ran.code}): "
            f"{ran.summary.get('cause')}"
        )
    elif not digest or digest != ran.summary.get("replicated"):
        problems.append("its digest is not the replicated learner's")
    state.why = "; ".join(problems)
    state.digest = "" if problems else digest
    state.record(
        Verdict(
            "control.recovery", "none", "commit", "commit" if not problems else "no commit",
            None, time.monotonic() - started, not problems, state.why,
        )
    )  # fmt: skip
    return state.why


def _signalled(
    gate: Gate, where: Path, digest: str, kind: str
) -> tuple[str, float | None, list[str], str]:
    ran = _alpha_run(_plan_file(where), where / "run", [(5, 2, kind)], "--restarts", "1")
    classes = ("budget", "lost") if kind == "SIGSTOP" else ("lost",)
    failure, name = ran.failed(0)
    return f"{failure} ({name})", _seconds(ran), _restarted(gate, ran, digest, classes), ""


def _refused(gate: Gate, where: Path, digest: str) -> tuple[str, float | None, list[str], str]:
    why = netns.unavailable()
    if why:
        return "skipped", None, [], f"skipped: a segment cannot be rewritten here ({why})"
    ran = _alpha_run(
        _plan_file(where), where / "run", [(3, 0, "corrupt")], "--restarts", "1", wire=True
    )
    failure, name = ran.failed(0)
    problems = _restarted(gate, ran, digest, ("refused",))
    if name != "Forged":
        problems.append(f"attempt 0's failure is known as {name or 'nothing'}, not Forged")
    return f"{failure} ({name})", _seconds(ran), problems, ""


def _diverged(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    started = time.monotonic()
    ran = _alpha_run(_plan_file(where, DIVERGING), where / "run", [], "--restarts", "3")
    problems = _common(ran)
    attempts = ran.attempts
    failures = [(each["failure"], each["retried"]) for each in attempts]
    if failures != [("divergence", False)]:
        problems.append(f"the attempts were {failures}, not one that diverged, not retried")
    if ran.summary.get("failure") != "divergence":
        problems.append(f"the run's failure is {ran.summary.get('failure')}, not divergence")
    if ran.code != 1:
        problems.append(f"alpha run exited {ran.code}, not 1")
    if (ran.run / ATTEMPTS_DIR).exists():
        problems.append("an attempts/ folder was made")
    observed = ",".join(str(each["failure"]) for each in attempts) or "none"
    return observed, time.monotonic() - started, problems, ""


def _not_retried(ran: _Ran, expected: list[tuple[str, bool]], kind: str, name: str) -> list[str]:
    """The attempts failed as ``expected`` (class, retried), the run's failure is ``kind``
    and its cause names ``name``, it exited 1 with ``ok`` false, and nothing was left."""
    problems = _common(ran)
    failures = [(each["failure"], each["retried"]) for each in ran.attempts]
    if failures != expected:
        problems.append(f"the attempts were {failures}, not {expected}")
    if ran.summary.get("failure") != kind:
        problems.append(f"the run's failure is {ran.summary.get('failure')}, not {kind}")
    cause = str(ran.summary.get("cause") or "")
    if name not in cause:
        problems.append(f"the run's cause does not name {name}: {cause[:200]}")
    if ran.code != 1 or ran.summary.get("ok") is not False:
        problems.append(f"alpha run exited {ran.code}, not 1 with the run failed")
    return problems


def _unusable(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    # The damage waits for alpha run's stop before attempt 1, whose progress starts empty.
    faults: list[Fault] = [(0, ITSELF, "continue"), (5, 2, "SIGKILL"), (0, ITSELF, "damage")]
    ran = _alpha_run(
        _plan_file(where), where / "run", faults, "--restarts", "3", failpoints="run.compiling@0"
    )
    problems = _not_retried(ran, [("lost", True), ("usage", False)], "usage", "CheckpointCorrupt")
    # The run's own failure first (attempt 0's lost was only the way to attempt 1).
    attempts = ",".join(str(each["failure"]) for each in ran.attempts) or "none"
    observed = f"{ran.summary.get('failure') or 'none'} (attempts {attempts})"
    return observed, _seconds(ran), problems, ""


def _failing(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    with contextlib.ExitStack() as stack:
        try:
            small = stack.enter_context(tmpfs(where / "tmpfs", f"size={TMPFS_BYTES}"))
        except MountUnavailable as reason:
            return "skipped", None, [], f"skipped: mount -t tmpfs is not permitted here ({reason})"
        folder = small / "ckpt"
        run = where / "run"
        ran = _alpha_run(
            _plan_file(where, folder=folder),
            run,
            [(0, 0, "fill")],
            "--restarts",
            "3",
            failpoints="checkpoint.published@0",
            checkpoints=folder,
        )
        problems = _not_retried(ran, [("error", False)], "error", "CheckpointWriteFailed")
        if "No space left on device" not in str(ran.summary.get("cause") or ""):
            problems.append("the run's cause does not say 'No space left on device'")
        if (run / ATTEMPTS_DIR).exists():
            problems.append("an attempts/ folder was made")
        observed = ",".join(str(each["failure"]) for each in ran.attempts) or "none"
        return observed, _seconds(ran), problems, ""


def _exhausted(gate: Gate, where: Path) -> tuple[str, float | None, list[str], str]:
    faults: list[Fault] = [(3, 1, "SIGKILL"), (7, 3, "SIGKILL")]
    ran = _alpha_run(_plan_file(where), where / "run", faults, "--restarts", "1")
    problems = _common(ran)
    failures = [(each["failure"], each["retried"]) for each in ran.attempts]
    if failures != [("lost", True), ("lost", False)]:
        problems.append(
            f"the attempts were {failures}, not two lost, the first retried, the second not"
        )
    cause = str(ran.summary.get("cause") or "")
    if "no restart left" not in cause:
        problems.append(f"the run's cause does not name no restart left: {cause}")
    if ran.code != 1 or ran.summary.get("ok") is not False:
        problems.append(f"alpha run exited {ran.code}, not 1 with the run failed")
    observed = ",".join(str(each["failure"]) for each in ran.attempts) or "none"
    return observed, _seconds(ran), problems, ""


async def run_recovery_gate(
    gate: Gate, work: Path, folder: Path, record: Callable[[Verdict], None]
) -> Verdict:
    """Run the recovery gate ``gate`` in ``folder`` (the control run first, once per ``work``,
    reported through ``record``), and judge it."""
    from gates.run import Verdict

    state = _WORKS.setdefault(work, _Work(work, record))
    why = await trio.to_thread.run_sync(_control, state)
    if why:
        return Verdict(
            gate.name, gate.meaning, gate.expected, "none", None, None, False,
            f"its scenario's control run failed: {why}",
        )  # fmt: skip
    digest = state.digest
    runners: dict[str, Callable[[], tuple[str, float | None, list[str], str]]] = {
        "killed": lambda: _signalled(gate, folder, digest, "SIGKILL"),
        "stopped": lambda: _signalled(gate, folder, digest, "SIGSTOP"),
        "refused": lambda: _refused(gate, folder, digest),
        "diverged": lambda: _diverged(gate, folder),
        "exhausted": lambda: _exhausted(gate, folder),
        "unusable": lambda: _unusable(gate, folder),
        "failing": lambda: _failing(gate, folder),
    }
    folder.mkdir(parents=True, exist_ok=True)
    name = gate.name.removeprefix("recovery.")
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
