"""Chaos (issue 27): a learn run of :data:`ROLES` roles under ``alpha run --json`` with
``[recovery]`` restarts, while this process injects a fault every :data:`FAULT_GAP` seconds
(seeded, the seed printed): a participant SIGKILLed or SIGSTOPped, a live connection between
two roles reset, a frame on one edge corrupted. Every attempt resumes from the latest published
generation, and ``[learner] contributors`` makes any number of attempts equal the
uninterrupted run bit for bit, so the run must still end on the replicated learner's digest.

How each fault is made, for real:

- **kill**, **stop**: SIGKILL or SIGSTOP to a random participant, found by the log its stderr
  goes to (``harness.processes.role_pids``). A stopped role is noticed by its peers' budgets
  (:data:`RECEIVE`), and the launcher names its stopped state.
- **reset**: the whole ``alpha run`` runs in a network namespace this benchmark creates
  (``harness.netns.isolated``: ``unshare --net``, its ``lo`` brought up: every edge is on
  127.0.0.1), and ``harness.netns.reset_connection`` (``nsenter -t PID -n ss -K``) destroys one
  end of an established connection between two participants (found with
  ``harness.netns.connections`` and ``role_pids``), so the peer reads a reset.
- **corrupt**: in that namespace's own ``lo`` (never the host's), an nftables rule
  (``harness.netns.corrupt_segment``) rewrites four payload bytes of exactly one TCP segment of
  one edge's connection (``@ih`` payload mangling, ``limit ... burst 1 packets``), then the
  table is removed, once a segment was changed or after :data:`CORRUPT_BURST` seconds;
  loopback does not verify TCP checksums, so the bytes arrive changed and the frame is
  refused. ``tc qdisc ... netem corrupt`` would be the usual tool, but the kernel of this
  project's machines is built without ``sch_netem`` (``CONFIG_NET_SCH_NETEM`` is not set, and
  ``tc`` answers "Specified qdisc kind is unknown"), while nftables' payload statement works
  there (the ``nftables`` package), and it changes exactly one segment where netem would
  change a share of them.

Each mechanism is tried first in a throwaway namespace on a socket pair (:func:`probes`:
``harness.netns.unavailable``); one that does not work here is left out, and the section says
why.

First a fault-free run of the same plan for :data:`FREE_ROUNDS` rounds measures the rate
(rounds after the first over the time from the first round's record to the commit record);
each chaos run's ``run.rounds`` is sized to last ``--minutes`` at that rate. After each run:
whether its final digest equals the replicated learner's (``ok``, ``equal``), goodput (the
plan's rounds over the run's wall time, from the first attempt's start to the commit record,
over the fault-free rate), the time from each fault to the first round of the attempt after
the one it ended (median and max), and the faults, attempts and recomputed rounds. The
fault-free run is made again after the chaos runs: on a shared host its rate moves.

Run it alone (most of an hour at the defaults): ``python -m bench chaos [--runs N] [--minutes
M] [--seed S] [--faults KINDS]``. Progress goes to stderr as ``bench chaos: ...`` lines; a
run that fails keeps its folder and is reported with what was seen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alpha.records import COMMIT_NAME, REPORTS_DIR
from harness import netns
from harness.processes import role_pids

NAME = "chaos"
ROOT = Path(__file__).resolve().parent.parent
ROLES = 16
FANOUT = 4
HIDDEN = 64
EVERY = 5  # rounds between generations: a fault costs at most EVERY - 1 rounds done again
RESTARTS = 1000  # far more than a run's faults: no run ends for want of a restart
BACKOFF = 0.2  # seconds before each restart: short, so that recovery time is the runtime's
RECEIVE = 2.0  # seconds: a stopped role is noticed by the first peer that waits for it
ACCEPT = 10.0  # seconds: a new attempt's roles come up in about 1 s here; room for load
START = 10.0  # seconds for the first frame of an edge, as for accept
# The fault-free run: about 20 s at this plan's rate here (200 rounds, 1.5 s, moved by 10 %
# from one run to the next).
FREE_ROUNDS = 3000
FAULT_GAP = (15.0, 30.0)  # seconds between two faults, uniform
KINDS = ("kill", "stop", "reset", "corrupt")
CORRUPT_BURST = 1.0  # seconds the rule may stay: dozens of frames pass an edge in that time
CORRUPT_WITHIN = 48  # the four bytes changed start within a segment's first 48 payload bytes
# Packets longer than this (IP and TCP headers, 52 bytes with timestamps, and the payload)
# hold all four bytes whatever the offset.
CORRUPT_LENGTH = 52 + CORRUPT_WITHIN + 4
RUNS = 5
MINUTES = 10.0
POLL = 0.1  # seconds between two looks at the run while waiting for the next fault
GRACE = 600.0  # seconds past four times --minutes before a chaos run is stopped as hung
# Goals (issue 27): every run's final digest equals the fault-free one's, and these.
GOODPUT_GOAL = 0.8
RECOVERY_GOAL = 3.0  # seconds, median, fault to the next attempt's first round

# Off a terminal, alpha run's progress line: "round R/N loss ...".
_ROUND = re.compile(r"^round (\d+)/(\d+) ")
# In an attempt's cause, the class of the original failure: the one a RoundAborted names
# ("aborted by role R: CLASS"), else the failed role's own ("failed: CLASS: ...").
_ORIGIN = re.compile(r"aborted by role \d+(?: \(relayed by role \d+\))?: (\w+)")
_FAILED = re.compile(r"failed: (\w+): ")


def plan_text(name: str, rounds: int, checkpoints: Path) -> str:
    """The learn plan every run of this benchmark runs: :data:`ROLES` roles, as many logical
    contributors (so every attempt computes the uninterrupted run's bits), a generation every
    :data:`EVERY` rounds in ``checkpoints``, restarts for every fault, every edge on TCP."""
    return textwrap.dedent(
        f"""\
        [run]
        name = "{name}"
        rounds = {rounds}
        [membership]
        roles = {ROLES}
        [topology]
        shape = "tree"
        fanout = {FANOUT}
        [contract]
        dtype = "float32"
        [budgets]
        accept = {ACCEPT}
        receive = {RECEIVE}
        start = {START}
        [addresses]
        transport = "tcp"
        [work]
        kind = "learn"
        [learner]
        kind = "mlp"
        hidden = {HIDDEN}
        rate = 0.15
        seed = 7
        batch = 32
        contributors = {ROLES}
        [checkpoint]
        every = {EVERY}
        folder = "{checkpoints}"
        [recovery]
        restarts = {RESTARTS}
        backoff = {BACKOFF}
        """
    )


def _say(line: str) -> None:
    print(f"bench chaos: {line}", file=sys.stderr, flush=True)


# -- what these machines allow ---------------------------------------------------------------


def probes() -> dict[str, str]:
    """Why each network fault cannot be made here ("ok" when it can): one probe each."""
    faults: tuple[netns.WireFault, ...] = ("reset", "corrupt")
    return {what: netns.unavailable(what) or "ok" for what in faults}


def _namespaces() -> bool:
    """Whether ``unshare --net`` works here (the reset and corrupt faults need it; the run goes
    in one whenever it does, so every run has the same loopback)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(netns.isolated(["true"]), capture_output=True)
    return done.returncode == 0


# -- one alpha run ---------------------------------------------------------------------------


def _command(plan: Path, run: Path, rounds: int | None, isolated: bool) -> list[str]:
    """``alpha run PLAN -o RUN --json`` (with ``--rounds``), in a network namespace of its own
    with ``lo`` up when ``isolated``: its pid is then the namespace's."""
    alpha = [sys.executable, "-m", "alpha", "run", str(plan), "-o", str(run), "--json"]
    if rounds is not None:
        alpha += ["--rounds", str(rounds)]
    return netns.isolated(alpha) if isolated else alpha


class _Watched:
    """``alpha run`` started as a subprocess, its stderr read as it comes: the latest round,
    whether training ended (the replicated learner's lines begin), the last lines."""

    def __init__(self, command: list[str]) -> None:
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.began = time.time()
        self.process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.round = 0
        self.trained = False
        self.lines: list[str] = []
        self._stdout = ""
        self._readers = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            line = line.rstrip("\n")
            self.lines = [*self.lines[-199:], line]
            found = _ROUND.match(line)
            if found is not None:
                self.round = int(found.group(1))
            elif line.startswith("replicated"):
                self.trained = True

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        self._stdout = self.process.stdout.read()

    def alive(self) -> bool:
        return self.process.poll() is None

    def finish(self, timeout: float) -> tuple[int, dict[str, Any] | None]:
        """Wait for the command to end (stopping it past ``timeout``); its exit code and its
        JSON summary, or None when it printed none that reads."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _say(f"alpha run did not end in {timeout:.0f} s: stopping it (SIGTERM)")
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for reader in self._readers:
            reader.join(timeout=10)
        try:
            summary = json.loads(self._stdout)
        except ValueError:
            summary = None
        return self.process.returncode, summary if isinstance(summary, dict) else None


def _committed_unix(run: Path) -> float | None:
    """When role 0 wrote the run's commit record (the last attempt's), or None: none."""
    try:
        return (run / REPORTS_DIR / COMMIT_NAME).stat().st_mtime
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class FaultFree:
    rounds: int
    rate: float  # rounds per second, after the first round's record to the commit record
    wall_s: float  # the command's start to the commit record
    ok: bool
    digest: str
    attempts: int  # 1 unless a failure with no fault restarted it


def fault_free(folder: Path, isolated: bool, name: str = "free") -> FaultFree:
    """The plan for :data:`FREE_ROUNDS` rounds with no fault, in ``folder/name``: its steady
    rate."""
    plan = folder / f"{name}.toml"
    plan.write_text(plan_text(f"chaos-{name}", FREE_ROUNDS, folder / f"{name}-checkpoints"))
    run = folder / name
    watched = _Watched(_command(plan, run, None, isolated))
    code, summary = watched.finish(timeout=GRACE)
    committed = _committed_unix(run)
    attempts = (summary or {}).get("attempts") or []
    first = attempts[0].get("first_round_unix") if attempts else None
    if code != 0 or summary is None or committed is None or first is None:
        tail = " | ".join(watched.lines[-3:])
        raise RuntimeError(f"the fault-free run {name} failed (exit {code}): {tail}")
    return FaultFree(
        rounds=FREE_ROUNDS,
        rate=(FREE_ROUNDS - 1) / (committed - float(first)),
        wall_s=committed - watched.began,
        ok=bool(summary.get("ok")),
        digest=str(summary.get("distributed")),
        attempts=len(attempts),
    )


# -- faults ----------------------------------------------------------------------------------


@dataclass
class Fault:
    """One fault injected: when (unix seconds, just before it), what, on whom, and whether it
    was applied (a corrupt rule no segment passed, a reset of a connection already gone, are
    not)."""

    at: float
    kind: str
    target: str
    applied: bool = True
    note: str = ""
    attempt: int | None = None  # the attempt it fell in
    ended: str = ""  # that attempt's failure class, "" when it committed
    recovery_s: float | None = None  # to the first round of the attempt after that one
    failed_s: float | None = None  # to the end of the attempt it failed


def _connections(namespace: int, pids: dict[int, int]) -> list[tuple[netns.Connection, int, int]]:
    """The established TCP connections between two participants, each once (from its end
    with the lower port), with the roles at its two ends; none once the run has ended."""
    try:
        found = netns.connections(namespace, list(pids))
    except ProcessLookupError:
        return []
    return [(c, pids[c.pid], pids[c.peer_pid]) for c in found if c.port < c.peer_port]


def _inject(kind: str, chooser: random.Random, run: Path, namespace: int | None) -> Fault:
    """Make one fault of ``kind`` on the run in ``run`` (its namespace's pid: ``namespace``)."""
    pids = role_pids(run)
    if not pids:
        return Fault(time.time(), kind, "", applied=False, note="no participant running")
    if kind in ("kill", "stop"):
        pid = chooser.choice(sorted(pids))
        at = time.time()
        try:
            os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
        except ProcessLookupError:
            return Fault(at, kind, f"role {pids[pid]}", applied=False, note="it had exited")
        return Fault(at, kind, f"role {pids[pid]} (pid {pid})")
    assert namespace is not None
    pairs = _connections(namespace, pids)
    if not pairs:
        return Fault(time.time(), kind, "", applied=False, note="no connection between roles")
    connection, one, other = chooser.choice(pairs)
    target = f"edge {min(one, other)}-{max(one, other)}"
    if kind == "reset":
        at = time.time()
        try:
            killed = netns.reset_connection(namespace, connection)
        except ProcessLookupError:  # the run ended meanwhile
            killed = False
        return Fault(at, kind, target, applied=killed, note="" if killed else "already gone")
    offset = chooser.randrange(CORRUPT_WITHIN)  # a header field or a payload byte
    target += f", bytes {offset}-{offset + 3} of a segment"
    at = time.time()
    try:
        hit = netns.corrupt_segment(
            namespace, connection, offset=offset, longer=CORRUPT_LENGTH, within=CORRUPT_BURST
        )
    except (ProcessLookupError, RuntimeError) as error:  # the run ended; nft refused the rule
        return Fault(at, kind, target, applied=False, note=str(error)[:200])
    applied = hit is not None
    return Fault(at, kind, target, applied=applied, note="" if applied else "no segment passed")


# -- one chaos run ---------------------------------------------------------------------------


@dataclass
class Chaos:
    """One chaos run and what was seen of it (whatever part of it was)."""

    seed: int
    rounds: int
    code: int | None = None
    ok: bool = False
    equal: bool = False
    distributed: str = ""
    replicated: str = ""
    wall_s: float | None = None  # the first attempt's start to the commit record
    committed_unix: float | None = None  # the commit record's time
    faults: list[Fault] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    recomputed: int | None = None
    cause: str = ""
    kept: str = ""  # the run's folder, kept when it failed
    left: int = 0  # participants still running once alpha run ended (then killed)

    def goodput(self, rate: float) -> float | None:
        return None if not self.wall_s else self.rounds / self.wall_s / rate

    def running_rate(self) -> float | None:
        """Rounds per second while rounds ran: each attempt's rounds after its first, over
        its first round's record to its end (the last attempt's: the commit record)."""
        done, spent = 0, 0.0
        for index, attempt in enumerate(self.attempts):
            first = attempt.get("first_round_unix")
            last = index == len(self.attempts) - 1
            ended = self.committed_unix if last else attempt.get("ended_unix")
            if first is None or ended is None:
                continue
            done += int(attempt["reached"]) - int(attempt["resumed_at"]) - 1
            spent += float(ended) - float(first)
        return done / spent if spent > 0 else None

    def recoveries(self) -> list[float]:
        return [fault.recovery_s for fault in self.faults if fault.recovery_s is not None]


def _attribute(chaos: Chaos) -> None:
    """Each fault's attempt (the one running when it struck), whether that attempt failed,
    and the time from the fault to the first round of the attempt after it: the first fault
    of a failed attempt only (a later one in the same attempt did not end it)."""
    attempts = chaos.attempts
    charged: set[int] = set()
    for fault in chaos.faults:
        for index, attempt in enumerate(attempts):
            began, ended = attempt.get("started_unix"), attempt.get("ended_unix")
            if began is None or ended is None or not began <= fault.at <= ended:
                continue
            fault.attempt = index
            fault.ended = str(attempt.get("failure") or "")
            later = attempts[index + 1] if index + 1 < len(attempts) else None
            first = None if later is None else later.get("first_round_unix")
            if fault.ended and index not in charged:
                fault.failed_s = float(ended) - fault.at
                if first is not None:
                    fault.recovery_s = float(first) - fault.at
                charged.add(index)
            break


def chaos_once(
    folder: Path, seed: int, rounds: int, limit_s: float, isolated: bool, kinds: list[str]
) -> Chaos:
    """One chaos run of ``rounds`` rounds in ``folder``, faults drawn from ``kinds`` with
    ``seed``; stopped as hung past ``limit_s`` seconds."""
    chooser = random.Random(seed)
    chaos = Chaos(seed=seed, rounds=rounds)
    plan = folder / "chaos.toml"
    plan.write_text(plan_text("chaos", rounds, folder / "checkpoints"))
    run = folder / "run"
    watched = _Watched(_command(plan, run, None, isolated))
    namespace = watched.process.pid if isolated else None
    stop_at = watched.began + limit_s
    try:
        upcoming = time.time() + chooser.uniform(*FAULT_GAP)
        while watched.alive() and not watched.trained and time.time() < stop_at:
            if time.time() < upcoming:
                time.sleep(POLL)
                continue
            kind = chooser.choice(kinds)
            fault = _inject(kind, chooser, run, namespace)
            chaos.faults.append(fault)
            said = f"{fault.kind} {fault.target}" + (f" ({fault.note})" if fault.note else "")
            _say(f"seed {seed}: fault {len(chaos.faults)} at round {watched.round}: {said}")
            upcoming = time.time() + chooser.uniform(*FAULT_GAP)
    finally:
        chaos.code, summary = watched.finish(timeout=max(60.0, stop_at - time.time()))
        left = role_pids(run)
        for pid in left:  # a stopped role nothing reaped, say: never left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        chaos.left = len(left)
    committed = _committed_unix(run)
    summary = summary or {}
    chaos.attempts = list(summary.get("attempts") or [])
    chaos.ok = bool(summary.get("ok"))
    chaos.equal = bool(summary.get("equal"))
    chaos.distributed = str(summary.get("distributed") or "")
    chaos.replicated = str(summary.get("replicated") or "")
    chaos.recomputed = summary.get("recomputed_rounds")
    chaos.cause = str(summary.get("cause") or "")
    if not summary:
        chaos.cause = "no summary: " + " | ".join(watched.lines[-3:])
    chaos.committed_unix = committed
    if committed is not None and chaos.attempts:
        chaos.wall_s = committed - float(chaos.attempts[0]["started_unix"])
    _attribute(chaos)
    return chaos


# -- the section -----------------------------------------------------------------------------


def _seconds(values: list[float]) -> str:
    if not values:
        return "none"
    return f"{statistics.median(values):.2f} s / {max(values):.2f} s"


def _row(number: int, chaos: Chaos, rate: float) -> str:
    applied = [fault for fault in chaos.faults if fault.applied]
    kinds = ", ".join(
        f"{sum(fault.kind == kind for fault in applied)} {kind}"
        for kind in KINDS
        if any(fault.kind == kind for fault in applied)
    )
    failed = [str(each.get("failure")) for each in chaos.attempts[:-1]]
    unprovoked = sum(
        1
        for index, each in enumerate(chaos.attempts)
        if each.get("failure") and not any(fault.attempt == index for fault in applied)
    )
    goodput = chaos.goodput(rate)
    running = chaos.running_rate()
    cause = (chaos.cause or "not equal")[:200].replace("|", "/")  # a markdown table cell
    digest = "yes" if chaos.ok and chaos.equal else f"**no** ({cause})"
    return (
        f"| {number} | {chaos.seed} | {chaos.rounds} | {len(applied)} ({kinds or 'none'}) "
        f"| {len(chaos.attempts)} ({', '.join(sorted(set(failed))) or 'none failed'}; "
        f"{unprovoked} with no fault) | {'-' if chaos.recomputed is None else chaos.recomputed} "
        f"| {'-' if chaos.wall_s is None else f'{chaos.wall_s:.0f} s'} "
        f"| {'-' if goodput is None else f'{goodput:.2f}'} "
        f"| {'-' if running is None else f'{running:.2f} ({running / rate:.2f}x)'} "
        f"| {_seconds(chaos.recoveries())} "
        f"| {digest} |"
    )


def _fault_lines(chaos: Chaos) -> list[str]:
    lines = []
    for fault in chaos.faults:
        if not chaos.attempts:
            offset = ""
        else:
            offset = f"+{fault.at - float(chaos.attempts[0]['started_unix']):.1f} s "
        said = f"{fault.kind} {fault.target}".strip()
        if not fault.applied:
            lines.append(f"  - {offset}{said}: not applied ({fault.note})")
            continue
        if fault.attempt is None:
            ended = "in no attempt"
        elif not fault.ended:
            ended = f"attempt {fault.attempt} committed"
        else:
            cause = str(chaos.attempts[fault.attempt].get("cause") or "")
            named = _ORIGIN.search(cause) or _FAILED.search(cause)
            why = fault.ended + ("" if named is None else f", {named.group(1)}")
            ended = f"attempt {fault.attempt} failed ({why})"
            if fault.failed_s is not None:
                ended += f" {fault.failed_s:.2f} s on"
            if fault.recovery_s is not None:
                ended += f", the next attempt's first round {fault.recovery_s:.2f} s on"
        lines.append(f"  - {offset}{said}: {ended}")
    return lines


def report(
    seed: int,
    minutes: float,
    measured: tuple[FaultFree, FaultFree | str],
    runs: list[Chaos],
    left_out: dict[str, str],
    kinds: list[str],
) -> str:
    """The markdown section for ``runs`` (each as far as it got); ``measured``: the fault-free
    run before them and the one after (or why it failed)."""
    free, after = measured
    if isinstance(after, str):
        again = f"The same run after the chaos runs failed: {after}."
    else:
        again = (
            f"The same run after the chaos runs: {after.rate:.2f} rounds/s "
            f"({after.rate / free.rate:.2f}x; the host's other load moves these figures)."
        )
    recoveries = [value for chaos in runs for value in chaos.recoveries()]
    goodputs = [value for chaos in runs if (value := chaos.goodput(free.rate)) is not None]
    equal = sum(chaos.ok and chaos.equal for chaos in runs)
    median = statistics.median(recoveries) if recoveries else None
    lowest = min(goodputs) if goodputs else None

    def met(flag: bool) -> str:
        return "met" if flag else "**missed**"

    lines = [
        f"{ROLES} roles (fan-out {FANOUT}, {ROLES} logical contributors, MLP hidden {HIDDEN}), a "
        f"generation every {EVERY} rounds, `[recovery] restarts = {RESTARTS}`, `backoff = "
        f"{BACKOFF}`, `receive = {RECEIVE}` s, every edge on TCP in a network namespace of "
        f"the benchmark's own; a fault every {FAULT_GAP[0]:g}-{FAULT_GAP[1]:g} s at random "
        f"(seed {seed}, run k uses seed + k) of: {', '.join(kinds)} (docs in bench/chaos.py).",
        "",
        f"Fault-free: {free.rounds} rounds at {free.rate:.2f} rounds/s (after the first round; "
        f"{free.rounds / free.wall_s:.2f} rounds/s from the command's start), equal to the "
        f"replicated learner: {'yes' if free.ok else '**no**'}, in {free.attempts} attempt(s). "
        "Each chaos run: "
        f"{minutes:g} min of rounds at that rate. {again}",
        "",
    ]
    for kind, why in left_out.items():
        lines.append(f"Left out: **{kind}**: {why}.")
    if left_out:
        lines.append("")
    lines += [
        "| run | seed | rounds | faults applied | attempts | recomputed | wall | goodput "
        "| rounds/s while rounds ran | fault to next first round (median / max) "
        "| digest equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(number, chaos, free.rate) for number, chaos in enumerate(runs)),
        "",
        "Wall: the first attempt's start to the commit record (the replicated learner after it "
        "is not counted); goodput: the plan's rounds over that, over the fault-free rate; "
        "rounds/s while rounds ran: every attempt's rounds after its first over its first "
        "round's record to its end; fault to next first round: from the fault to the first "
        "round's record of the attempt after the one it ended (that attempt's compile, start "
        "and first round included).",
        "",
        f"- every final digest equal to the replicated (fault-free) learner's: {equal} of "
        f"{len(runs)}, {met(equal == len(runs) and bool(runs))}",
        f"- goodput at least {GOODPUT_GOAL} (one fault per {sum(FAULT_GAP) / 2:g} s on "
        f"average): lowest {'-' if lowest is None else f'{lowest:.2f}'}, "
        f"{met(lowest is not None and lowest >= GOODPUT_GOAL)}",
        f"- fault to the next attempt's first round, median under {RECOVERY_GOAL:g} s: "
        f"{'-' if median is None else f'{median:.2f} s'} over {len(recoveries)} faults "
        f"(max {'-' if not recoveries else f'{max(recoveries):.2f} s'}), "
        f"{met(median is not None and median < RECOVERY_GOAL)}",
    ]
    for number, chaos in enumerate(runs):
        if chaos.kept:
            lines.append(f"- run {number} failed; its folder is kept: {chaos.kept}")
        if chaos.left:
            lines.append(f"- run {number} left {chaos.left} participant(s) running (killed)")
    lines += ["", "Each fault, by run:", ""]
    for number, chaos in enumerate(runs):
        lines.append(f"- run {number} (seed {chaos.seed}):")
        lines += _fault_lines(chaos) or ["  - none"]
    return "\n".join(lines)


def arguments(args: argparse.Namespace) -> dict[str, Any]:
    """What ``python -m bench`` passes to :func:`run` from its chaos options."""
    return {"runs": args.runs, "minutes": args.minutes, "seed": args.seed, "faults": args.faults}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This benchmark's options on ``python -m bench``."""
    group = parser.add_argument_group("chaos")
    group.add_argument("--runs", type=int, default=RUNS, help=f"chaos runs (default {RUNS})")
    group.add_argument(
        "--minutes",
        type=float,
        default=MINUTES,
        help=f"each chaos run's length at the fault-free rate (default {MINUTES:g})",
    )
    group.add_argument(
        "--seed", type=int, default=None, help="the faults' seed (default: drawn, printed)"
    )
    group.add_argument(
        "--faults",
        type=_kinds,
        default=KINDS,
        help=f"the kinds of fault to draw from, a comma list (default {','.join(KINDS)})",
    )


def _kinds(text: str) -> tuple[str, ...]:
    chosen = tuple(word.strip() for word in text.split(",") if word.strip())
    wrong = [word for word in chosen if word not in KINDS]
    if wrong or not chosen:
        raise argparse.ArgumentTypeError(f"not a kind of fault: {wrong}; known: {KINDS}")
    return chosen


def run(
    repeat: int,
    *,
    runs: int = RUNS,
    minutes: float = MINUTES,
    seed: int | None = None,
    faults: tuple[str, ...] = KINDS,
) -> str:
    """``repeat`` is not used: ``runs`` chaos runs of ``minutes`` each, each fault drawn from
    ``faults``."""
    del repeat
    seed = random.SystemRandom().randrange(1 << 32) if seed is None else seed
    _say(f"seed {seed}; {runs} run(s) of {minutes:g} min")
    isolated = _namespaces()
    left_out: dict[str, str] = {}
    if isolated:
        for kind, why in probes().items():
            if why != "ok":
                left_out[kind] = why
    else:
        why = "no network namespace could be made here (unshare --net), and this benchmark "
        for kind in ("reset", "corrupt"):
            left_out[kind] = why + "never touches the host's own loopback"
    for kind, why in left_out.items():
        _say(f"left out {kind}: {why}")
    kinds = [kind for kind in faults if kind not in left_out]
    if not kinds:
        raise RuntimeError(f"none of the faults {faults} can be made here: {left_out}")
    top = Path(tempfile.mkdtemp(prefix="alpha-bench-chaos-"))
    results: list[Chaos] = []
    try:
        free = fault_free(top, isolated)
    except Exception:
        _say(f"the fault-free run failed; its folder is kept: {top}")
        raise
    try:
        rounds = max(EVERY, round(minutes * 60 * free.rate))
        _say(f"fault-free: {free.rate:.2f} rounds/s; each chaos run is {rounds} rounds")
        for number in range(runs):
            folder = top / f"run-{number}"
            folder.mkdir()
            try:
                limit_s = 4 * minutes * 60 + GRACE
                chaos = chaos_once(folder, seed + number, rounds, limit_s, isolated, kinds)
            except Exception as error:  # report what was seen, then the next run
                chaos = Chaos(seed=seed + number, rounds=rounds, cause=f"{error!r}")
            if not (chaos.ok and chaos.equal):
                chaos.kept = str(folder)
            results.append(chaos)
            goodput = chaos.goodput(free.rate)
            running = chaos.running_rate()
            _say(
                f"run {number}: {'equal' if chaos.ok and chaos.equal else 'NOT equal'}, "
                f"{len(chaos.faults)} faults, {len(chaos.attempts)} attempts, goodput "
                f"{'-' if goodput is None else f'{goodput:.2f}'}, "
                f"{'-' if running is None else f'{running:.2f}'} rounds/s while rounds ran, "
                "fault to first round "
                f"{_seconds(chaos.recoveries())}"
            )
        try:
            after: FaultFree | str = fault_free(top, isolated, "after")
        except RuntimeError as error:
            after = str(error)
        return report(seed, minutes, (free, after), results, left_out, kinds)
    finally:
        keep = [Path(chaos.kept) for chaos in results if chaos.kept]
        for entry in top.iterdir():
            if entry not in keep:
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
        if not keep:
            shutil.rmtree(top, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    add_arguments(parser)
    print(run(0, **arguments(parser.parse_args(argv))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
