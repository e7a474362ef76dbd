"""One interrupt path, on real processes (docs/cli.md, "Interrupts").

``alpha run`` of a checkpointed plan is started in a session of its own, as a shell starts a
job, and each of SIGINT, SIGTERM and SIGHUP is sent to its process *group*, as a terminal does
(Ctrl-C, ``kill -TERM -PGID``, the terminal closing), at many points of the run: before it
compiles, while a role starts, mid-round, with a generation staged, right as a generation is
published (a segment boundary), and while the replicated learner runs. Each time: exit 128 +
the signal, exactly one ``interrupted`` line, no traceback, no process left, a checkpoint
pointer (if any) naming a generation that verifies, the rounds done in ``history.csv``, and no
staged generation left. Where a go-on command is printed, it is run, once or twice, and must
reach "equal bit for bit: yes".

Participants run in sessions of their own, so the group signal reaches ``alpha`` alone; a
launcher killed with SIGKILL still leaves no role running (``alpha.runtime.parent``). And
SIGTERM during ``alpha compile`` of 200 roles leaves no artifact and no ``run.json``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from alpha.app.interrupted import RunTrack, run_line
from alpha.checkpoint.store import POINTER, open_generation, published
from alpha.failpoints import FAILPOINTS_ENV
from alpha.launch import read_stat
from harness.processes import descendants_of, running
from tests.support import ALPHA, ROOT, plans, run_alpha

pytestmark = pytest.mark.slow

# Long enough that a signal sent as the first generation is announced lands well before the
# run's end (the rounds go on within one launch while it travels).
ROUNDS = 200
EVERY = 50
GIVE_UP = 180.0  # seconds a wait for a run's own progress may take before the test says so

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def learner_plan(path: Path, *, roles: int = 4) -> Path:
    path.write_text(
        plans.plan_text(
            "interrupts",
            roles=roles,
            rounds=ROUNDS,
            topology={"shape": "tree", "fanout": 2},
            budgets={"accept": 30.0, "receive": 30.0, "start": 60.0},
            work={"kind": "learn"},
            learner={"kind": "mlp", "hidden": 8, "rate": 0.01, "seed": 5, "batch": 8},
            checkpoint={"every": EVERY, "keep": 2},
        )
    )
    return path


@dataclass
class Job:
    """``alpha ARGV`` started as a shell starts a job: a session (and group) of its own."""

    process: subprocess.Popen[str]
    err: list[str] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # every descendant seen while it ran
    _readers: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, *argv: str, env: dict[str, str] | None = None) -> Job:
        process = subprocess.Popen(
            [*ALPHA, *argv],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # As from a terminal, whatever this test's own parent ignores.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        job = cls(process)
        assert process.stdout is not None and process.stderr is not None
        for stream, lines in ((process.stdout, job.out), (process.stderr, job.err)):
            reader = threading.Thread(target=_read, args=(stream, lines), daemon=True)
            reader.start()
            job._readers.append(reader)
        return job

    def note_descendants(self) -> None:
        self.seen.update(descendants_of(self.process.pid))

    def wait_for(self, what: str, ready: Callable[[], bool]) -> None:
        give_up = time.monotonic() + GIVE_UP
        while not ready():
            self.note_descendants()
            assert self.process.poll() is None, f"ended before {what}: {self.err[-5:]}"
            assert time.monotonic() < give_up, f"no {what}: {self.err[-5:]}"
            time.sleep(0.005)
        self.note_descendants()

    def stopped(self) -> bool:
        stat = read_stat(self.process.pid)
        return stat is not None and stat.state == "T"

    def signal_group(self, number: int) -> None:
        os.killpg(self.process.pid, number)  # the job's group: its pid, as it leads it
        os.killpg(self.process.pid, signal.SIGCONT)  # a stopped alpha (a failpoint) goes on

    def finish(self) -> tuple[int, str, str]:
        try:
            self.process.wait(timeout=GIVE_UP)
        finally:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode, "\n".join(self.out), "\n".join(self.err)


def _read(stream: IO[str], lines: list[str]) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))


def alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.state != "Z"


def assert_nothing_left(job: Job, folder: Path) -> None:
    assert [pid for pid in job.seen if alive(pid)] == [], "a process outlived alpha"
    assert running(folder) == []


def assert_checkpoint_whole(folder: Path) -> None:
    """The pointer, if any, names a generation that verifies; nothing staged is left."""
    if not folder.is_dir():
        return  # no generation was begun
    if (folder / POINTER).exists():
        open_generation(folder).verify()
    names = {path.name for path in published(folder)}
    leftovers = [
        path.name
        for path in folder.iterdir()
        if path.name.startswith("gen-") and path.name not in names
    ]
    assert leftovers == [], f"staged generations left: {leftovers}"


def history_rounds(run: Path) -> list[int]:
    csv = run / "history.csv"
    assert csv.exists(), "history.csv is written on interrupt"
    lines = csv.read_text().splitlines()[1:]
    return [int(line.split(",")[0]) for line in lines]


def go_on_command(line: str) -> list[str] | None:
    match = re.search(r"go on with: (.*)$", line)
    if match is None:
        return None
    words = shlex.split(match.group(1))
    assert words[:2] == ["alpha", "run"], words
    return [*ALPHA, *words[1:]]


# Where a signal is sent, and how the test finds that moment from outside.
def at_compile(job: Job, run: Path) -> None:
    job.wait_for("alpha stopped before its first compile", job.stopped)


def _role_stopped(job: Job, run: Path, role: int, what: str) -> None:
    def stopped() -> bool:
        stats = [read_stat(pid) for pid in running(run / f"role-{role:06d}.pyz")]
        return any(stat is not None and stat.state == "T" for stat in stats)

    job.wait_for(what, stopped)


def at_role_start(job: Job, run: Path) -> None:
    # Role 0 stops itself with its listeners up, before it announces (a failpoint).
    _role_stopped(job, run, 0, "role 0 starting")


def at_staging(job: Job, run: Path) -> None:
    # Role 1 stops itself with its shards of the first generation written, staged, not
    # published: the interrupted run must remove what will never be published.
    _role_stopped(job, run, 1, "role 1 with its shards staged")


def at_mid_round(job: Job, run: Path) -> None:
    records = run / "progress" / "role-000000.jsonl"
    job.wait_for("a round recorded", lambda: records.exists() and records.stat().st_size > 0)


def at_boundary(job: Job, run: Path) -> None:
    job.wait_for(
        "a generation published",
        lambda: any(re.match(r"run: checkpoint \S+ published", line) for line in job.err),
    )


def at_replicated(job: Job, run: Path) -> None:
    job.wait_for("alpha stopped before the replicated learner", job.stopped)


POINTS: dict[str, tuple[Callable[[Job, Path], None], str]] = {
    "compile": (at_compile, "run.compiling@0"),
    "role-start": (at_role_start, "participant.announcing@0"),
    "mid-round": (at_mid_round, ""),
    "staging": (at_staging, "checkpoint.written@1"),
    "boundary": (at_boundary, ""),
    "replicated": (at_replicated, "run.replicating@0"),
}


@dataclass
class Interrupted:
    code: int
    out: str
    err: str
    line: str
    run: Path
    plan: Path


def interrupt_run(tmp_path: Path, point: str, number: int) -> Interrupted:
    plan = learner_plan(tmp_path / "plan.toml")
    run = tmp_path / "run"
    wait, failpoint = POINTS[point]
    env = {**os.environ, FAILPOINTS_ENV: failpoint} if failpoint else None
    job = Job.start("run", str(plan), "-o", str(run), env=env)
    try:
        wait(job, run)
        job.signal_group(number)
    finally:
        code, out, err = job.finish()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1, err
    assert code == 128 + number, err
    assert lines[0].startswith(f"run: interrupted ({signal.Signals(number).name})"), lines
    assert_nothing_left(job, run)
    assert_checkpoint_whole(run / "checkpoints")
    # The roles that said anything said nothing of an interrupt: the launcher alone decides.
    for log in (run / "logs").glob("*.log") if (run / "logs").exists() else ():
        assert "interrupted" not in log.read_text(errors="replace"), log
    return Interrupted(code, out, err, lines[0], run, plan)


@pytest.mark.parametrize("number", INTERRUPTS, ids=lambda n: signal.Signals(n).name)
@pytest.mark.parametrize("point", list(POINTS))
def test_a_signal_anywhere_in_a_checkpointed_run_is_one_line_and_128_plus_it(
    tmp_path: Path, point: str, number: int
) -> None:
    stopped = interrupt_run(tmp_path, point, number)
    line = stopped.line
    done = history_rounds(stopped.run)
    assert done == list(range(1, len(done) + 1)) or done == [], done
    if point == "compile":
        assert "no checkpoint to go on from: run it again from the start" in line, line
        assert not list(stopped.run.glob("role-*.pyz"))
    if point == "staging":
        assert "no checkpoint to go on from" in line, line
    if point == "replicated":
        assert "while the replicated learner ran: the run committed" in line, line
        assert done == list(range(1, ROUNDS + 1))
        # Its last generation is the commit point: read from the folder alone (a signal just
        # before the launch ended), the line says so and offers no resume at the last round.
        track = RunTrack(str(stopped.plan), ROUNDS, folder=stopped.run / "checkpoints")
        late = run_line(track, number)
        assert f"after the run committed its {ROUNDS} rounds" in late and "go on" not in late
    if point == "boundary":
        # A generation the run said it published is named (the latest, read from the folder),
        # and the go-on command given.
        said = [x.split()[2] for x in stopped.err.splitlines() if " published (round " in x]
        named = re.search(r"nothing committed after checkpoint (\S+) \(round", line)
        assert named is not None and named.group(1) in said, line
        assert go_on_command(line) is not None, line
    if go_on_command(line) is None:
        assert "run it again from the start" in line or point == "replicated", line


def test_a_go_on_command_is_given_only_for_a_generation_that_verifies(tmp_path: Path) -> None:
    stopped = interrupt_run(tmp_path, "boundary", signal.SIGTERM)
    folder = stopped.run / "checkpoints"
    track = RunTrack(str(stopped.plan), ROUNDS, folder=folder, directory=stopped.run)
    # The same generation and go-on as the run's own line (which knew the rounds done too).
    assert run_line(track, signal.SIGTERM).split("; ", 1)[1] == stopped.line.split("; ", 1)[1]
    # One shard damaged: the line, read again from the folder, names no go-on.
    shard = next((open_generation(folder).path / "shards").iterdir())
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    line = run_line(track, signal.SIGTERM)
    assert "go on with" not in line and "run it again from the start" in line, line


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_the_go_on_command_of_an_interrupted_run_finishes_it_bit_for_bit(
    tmp_path: Path, number: int
) -> None:
    stopped = interrupt_run(tmp_path, "boundary", number)
    command = go_on_command(stopped.line)
    assert command is not None, stopped.line
    assert str(stopped.plan) in command and "--resume" in command
    went_on = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert went_on.returncode == 0, went_on.stderr
    assert re.search(r"equal bit for bit\s+yes", went_on.stdout), went_on.stdout
    # The history goes on from the rounds of the generation it resumed from.
    assert history_rounds(stopped.run)[-1] == ROUNDS


@pytest.mark.parametrize("cold", [True, False], ids=["cold", "warm"])
def test_a_launcher_killed_outright_leaves_no_role_running(tmp_path: Path, cold: bool) -> None:
    # SIGKILL: alpha can stop nothing; its roles, in sessions of their own (no group signal
    # reaches them), find their parent gone and end by themselves (alpha.runtime.parent); a
    # warm role's parent is the warm starter, which ends when alpha's end of its socket closes.
    plan = learner_plan(tmp_path / "plan.toml")
    run = tmp_path / "run"
    job = Job.start("run", str(plan), "-o", str(run), *(["--cold"] if cold else []))
    try:
        at_mid_round(job, run)
        roles = running(run / "role-000000.pyz") + running(run / "role-000003.pyz")
        assert roles, "roles are running"
        for pid in roles:
            stat = read_stat(pid)
            assert stat is not None, pid
            session = int(stat.field(6))
            assert session != job.process.pid, "a role is outside alpha's session"
            if cold:
                assert session == pid, "a cold role leads a session of its own"
        os.kill(job.process.pid, signal.SIGKILL)
    finally:
        job.finish()
    give_up = time.monotonic() + GIVE_UP
    while [pid for pid in job.seen if alive(pid)]:
        assert time.monotonic() < give_up, "a role outlived its killed launcher"
        time.sleep(0.05)
    assert running(run) == []


def _compiled(run: Path) -> Iterator[Path]:
    yield from run.glob("role-*.pyz")
    yield from run.glob(".role-*")


def test_sigterm_during_a_compile_of_200_roles_leaves_no_artifact_and_no_run_json(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "wide.toml"
    plan.write_text(
        plans.plan_text(
            "wide",
            roles=200,
            rounds=1,
            topology={"shape": "tree", "fanout": 8},
            work={"kind": "sum-check"},
        )
    )
    run = tmp_path / "run"
    job = Job.start("compile", str(plan), "-o", str(run))
    try:
        job.wait_for(
            "64 artifacts written", lambda: any("compile: 64/200" in line for line in job.err)
        )
        job.signal_group(signal.SIGTERM)
    finally:
        code, _, err = job.finish()
    assert code == 128 + signal.SIGTERM, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.fullmatch(
        r"compile: interrupted \(SIGTERM\); removed the \d+ file\(s\) this build wrote "
        r"\(artifacts and runtime\); no run\.json",
        lines[0],
    ), lines
    assert list(_compiled(run)) == [] and not (run / "run.json").exists()
    # The folder was made by this compile and holds nothing else: it is gone, or holds the lock.
    assert not run.exists() or {p.name for p in run.iterdir()} <= {".alpha.lock"}
    # And a launch of it says there is nothing to launch.
    assert run_alpha("launch", str(run)).returncode == 2
