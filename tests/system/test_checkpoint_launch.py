"""Checkpoints within one launch, on real processes (docs/checkpoints.md): a checkpointed run is
one launch whose generations are published at their own commit steps while the rounds go on;
a run resumed from a generation published mid-run goes on bit for bit; a failure after a
published generation keeps it, and the run resumes from it."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from alpha.app.run import run_plan
from alpha.checkpoint.manifest import HISTORY_FILE
from alpha.checkpoint.store import POINTER, open_generation, parse_generation, published
from alpha.compiler.plan import Plan, parse_plan
from alpha.failpoints import FAILPOINTS_ENV
from alpha.records.progress import CheckpointRecord, RoundRecord, decode, progress_path
from harness.processes import running, state_of
from tests.support import plans, run_alpha

pytestmark = pytest.mark.slow

N = 4


def plan_text(folder: Path, *, rounds: int, every: int | None, keep: int = 10) -> str:
    return plans.checkpointed_text(
        "within",
        roles=N,
        rounds=rounds,
        checkpoint=None if every is None else {"every": every, "folder": str(folder), "keep": keep},
        receive=30.0,
    )


def plan_of(folder: Path, **options: int | None) -> Plan:
    return parse_plan(plan_text(folder, **options), source="test")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final parameters of the 6-round run without checkpoints."""
    base = tmp_path_factory.mktemp("plain")
    summary = run_plan(plan_of(base, rounds=6, every=None), base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return summary.distributed


@pytest.fixture(scope="module")
def every_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """``alpha run`` (a real process) of the 6-round plan with a generation every round."""
    base = tmp_path_factory.mktemp("every")
    source = base / "plan.toml"
    source.write_text(plan_text(base / "ckpt", rounds=6, every=1))
    done = run_alpha("run", str(source), "-o", str(base / "run"))
    assert done.returncode == 0, done.stderr
    return base / "ckpt", base / "run", done.stdout + done.stderr


def test_every_round_publishes_a_generation_in_one_launch_equal_to_the_replicated_learner(
    every_round: tuple[Path, Path, str], uninterrupted: str
) -> None:
    folder, run, said = every_round
    assert "equal bit for bit   yes" in said
    generations = [open_generation(path) for path in published(folder)]
    assert [g.round for g in generations] == [1, 2, 3, 4, 5, 6]
    for generation in generations:
        line = f"run: checkpoint {generation.path.name} published (round {generation.round})"
        assert said.count(line) == 1, said
        generation.verify()
    # The last generation holds the run's final parameters, which are the uninterrupted run's.
    final = hashlib.sha256(generations[-1].read("w").tobytes()).hexdigest()
    assert final == uninterrupted and f"final parameters    {uninterrupted}" in said
    assert open_generation(folder).path == generations[-1].path  # LATEST names it
    # One launch: one compile (every generation carries its nonce), every role started and
    # finished once, and one progress file holding every round, each generation recorded
    # after its round and before the next: published while the run went on.
    nonces = set()
    for path in published(folder):
        parsed = parse_generation(path.name)
        assert parsed is not None
        nonces.add(parsed.nonce)
    assert len(nonces) == 1
    for role in range(N):
        log = (run / "logs" / f"role-{role:06d}.log").read_text()
        assert log.count(f"role {role}: done: ") == 1, log
    records = [decode(line) for line in progress_path(run).read_bytes().splitlines()]
    expected: list[RoundRecord | CheckpointRecord] = []
    for generation in generations:
        expected += [
            next(r for r in records if isinstance(r, RoundRecord) and r.round == generation.round),
            CheckpointRecord(generation.round, generation.path.name),
        ]
    assert records == expected


def test_each_generation_carries_the_history_up_to_its_round(
    every_round: tuple[Path, Path, str],
) -> None:
    folder, run, _ = every_round
    rows = [line.split(",") for line in (run / "history.csv").read_text().splitlines()[1:]]
    inodes = set()
    for path in published(folder):
        generation = open_generation(path)
        recorded = generation.history()
        assert recorded is not None and recorded.resumes == ()
        assert [entry[0] for entry in recorded.rows] == list(range(generation.round))
        for entry, row in zip(recorded.rows, rows, strict=False):
            assert [float(v) for v in entry[1:]] == pytest.approx([float(v) for v in row[1:4]])
        # Its manifest names a prefix of the launch's one history file, linked into each
        # generation: a generation costs its new rows, not every row again.
        about = generation.about["history"]
        assert isinstance(about, dict) and about["rows"] == generation.round
        inodes.add((path / HISTORY_FILE).stat().st_ino)
    assert len(inodes) == 1


def test_a_run_resumed_from_a_mid_run_generation_goes_on_bit_for_bit(
    tmp_path: Path, uninterrupted: str
) -> None:
    folder = tmp_path / "ckpt"
    summary = run_plan(plan_of(folder, rounds=6, every=2), tmp_path / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    two = next(p for p in published(folder) if open_generation(p).round == 2)
    carried = open_generation(two).history()
    again = tmp_path / "again"
    resumed = run_plan(
        plan_of(again, rounds=6, every=2), tmp_path / "r", out=io.StringIO(), resume=two
    )
    assert resumed.ok, resumed.cause
    assert resumed.distributed == uninterrupted == summary.distributed
    # Its generations carry the history from round 0 and the round it was resumed at.
    latest = open_generation(again)
    assert latest.round == 6 and latest.about["resumes"] == [2]
    history = latest.history()
    assert history is not None and carried is not None
    assert [e[0] for e in history.rows] == list(range(6)) and history.resumes == (2,)
    assert history.rows[:2] == carried.rows
    first = open_generation(folder).history()
    assert first is not None and history.rows == first.rows  # the same rounds, bit for bit
    # The resumed launch wrote a history file of its own: the first run's is untouched.
    assert (again / latest.path.name / HISTORY_FILE).stat().st_ino != (
        two / HISTORY_FILE
    ).stat().st_ino


def _stop_twice_then_kill(
    artifact: str, run: Path, killed: list[int], finished: threading.Event
) -> None:
    """Role 2 stops at ``checkpoint.writing`` at each generation: let it go on at the first
    (round 2's); once round 2's generation is recorded published, kill it at the next. Gives
    up once the run has ended (the test then fails on ``killed``)."""
    records = progress_path(run)
    continued = False
    while not finished.is_set():
        for pid in running(artifact, whole=True):
            if state_of(pid) != "T":
                continue
            if not continued:
                os.kill(pid, signal.SIGCONT)
                continued = True
            elif records.exists() and b'"checkpoint"' in records.read_bytes():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        finished.wait(0.02)


def test_a_failure_after_a_published_generation_keeps_it_and_the_run_resumes_from_it(
    tmp_path: Path, uninterrupted: str
) -> None:
    folder = tmp_path / "ckpt"
    run = tmp_path / "run"
    plan = plan_of(folder, rounds=6, every=2)
    killed: list[int] = []
    finished = threading.Event()
    watcher = threading.Thread(
        target=_stop_twice_then_kill,
        args=(str(run / "role-000002.pyz"), run, killed, finished),
        daemon=True,
    )
    os.environ[FAILPOINTS_ENV] = "checkpoint.writing@2"
    try:
        watcher.start()
        summary = run_plan(plan, run, out=io.StringIO(), warm=False)
    finally:
        del os.environ[FAILPOINTS_ENV]
        finished.set()
    watcher.join()
    assert killed
    assert not summary.ok and not (run / "reports" / "commit.json").exists()
    # Round 2's generation stays published and named; round 4's was never published, and
    # nothing staged is left.
    latest = open_generation(folder)
    assert latest.round == 2
    latest.verify()
    assert [open_generation(p).round for p in published(folder)] == [2]
    assert not any(p.name.endswith(".staged") for p in folder.iterdir())
    assert (
        f"nothing of this segment was published; the latest generation is {latest.path.name} "
        "(round 2)" in summary.cause
    )
    assert f"--resume {folder}" in summary.cause
    pointer = json.loads((folder / POINTER).read_text())
    assert pointer["generation"] == latest.path.name
    # Resumed from the folder, the run goes on bit for bit.
    resumed = run_plan(plan, tmp_path / "resumed", out=io.StringIO(), resume=folder)
    assert resumed.ok, resumed.cause
    assert resumed.distributed == uninterrupted
    assert open_generation(folder).about["resumes"] == [2]


def test_a_pointer_that_cannot_move_within_the_run_stops_the_publishing_not_the_rounds(
    tmp_path: Path, uninterrupted: str
) -> None:
    folder = tmp_path / "ckpt"
    (folder / POINTER).mkdir(parents=True)  # a pointer that cannot be replaced
    (folder / POINTER / "x").write_text("x")
    run = tmp_path / "run"
    summary = run_plan(plan_of(folder, rounds=6, every=2), run, out=io.StringIO())
    assert not summary.ok
    assert summary.cause.startswith("role 0: "), summary.cause
    refused = f"CheckpointWriteFailed: cannot point {folder / POINTER}: Is a directory"
    assert refused in summary.cause
    # Round 2's generation was published; nothing after it was, and nothing staged is left.
    (mine,) = published(folder)
    assert open_generation(mine).round == 2
    assert not any(p.name.endswith(".staged") for p in folder.iterdir())
    assert f"this segment's generation {mine.name} was published, but" in summary.cause
    assert summary.cause.endswith(f"go on with this plan and --resume {mine}")
    # The rounds went on and the run committed: every report is final.
    reports = sorted(p.name for p in (run / "reports").glob("role-*.json"))
    assert reports == [f"role-{role:06d}.json" for role in range(N)]
    assert (run / "reports" / "commit.json").is_file()
    assert "nothing more is published" in (run / "logs" / "role-000000.log").read_text()
    final = json.loads((run / "reports" / "role-000001.json").read_text())
    assert final["digests"]["w"] == uninterrupted
