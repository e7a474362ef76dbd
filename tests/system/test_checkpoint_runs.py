"""Checkpointed runs on real processes under hostile conditions (docs/checkpoints.md): a full
disk while a segment stages, a read-only folder, a second run on a held folder, a generation
of another plan, a pointer that cannot move after the commit, and the message after each
failure read from what is on disk."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from alpha.app.run import _after_failure, run_plan
from alpha.checkpoint.store import LOCK, POINTER, generation_name, open_generation, published
from alpha.compiler.plan import Plan, parse_plan
from alpha.errors import CheckpointFolderHeld, CheckpointWriteFailed, GenerationForeign
from tests.support import mount_tmpfs, plans

N = 4


def plan_text(
    folder: Path,
    *,
    rounds: int = 2,
    every: int = 1,
    rate: str = "0.01",
    seed: int = 5,
    keep: int = 2,
    may_change: str = "",
) -> str:
    return plans.plan_text(
        "hostile",
        roles=N,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        budgets={"accept": 30.0, "receive": 10.0, "start": 30.0},
        work={"kind": "learn"},
        learner={
            "kind": "mlp",
            "hidden": 8,
            "rate": float(rate),
            "seed": seed,
            "batch": 8,
            "optimizer": "adam",
        },
        checkpoint={"every": every, "folder": str(folder), "keep": keep},
        extra=f"may_change = {may_change}\n" if may_change else "",
    )


def plan_of(folder: Path, **options: int | str) -> Plan:
    return parse_plan(plan_text(folder, **options), source="test")  # type: ignore[arg-type]


@pytest.fixture
def tight_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """128 KiB: room for one generation of the plan above (about 19 pages), not two."""
    yield from mount_tmpfs(tmp_path / "tight", "size=128k")


@pytest.fixture
def read_only_tmpfs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_tmpfs(tmp_path / "ro", "ro,size=128k")


def logs_of(run: Path) -> str:
    return "".join(path.read_text() for path in sorted((run / "logs").glob("*.log")))


@pytest.mark.slow
def test_a_full_disk_while_staging_fails_the_round_everywhere_with_its_cause(
    tight_tmpfs: Path, tmp_path: Path
) -> None:
    folder = tight_tmpfs / "ckpt"
    run = tmp_path / "run"
    summary = run_plan(plan_of(folder, rounds=3), run, out=io.StringIO())
    assert not summary.ok
    assert "CheckpointWriteFailed" in summary.cause
    assert "No space left on device" in summary.cause
    # Round 1's generation was published; round 2's segment staged nothing that stays.
    latest = open_generation(folder)
    assert latest.round == 1
    latest.verify()
    assert [p.round for p in map(lambda p: open_generation(p), published(folder))] == [1]
    assert not any(p.name.endswith(".staged") for p in folder.iterdir())
    assert (
        f"nothing of this segment was published; the latest generation is {latest.path.name}"
        in summary.cause
    )
    assert f"--resume {folder}" in summary.cause
    # Every role that failed names the cause (its own or the abort's), none with a traceback;
    # a role the fail-fast launcher stopped first may have logged nothing.
    logs = logs_of(run)
    assert "Traceback" not in logs and "+----" not in logs
    failed = 0
    for role in range(N):
        text = (run / "logs" / f"role-{role:06d}.log").read_text()
        if "failed: " in text:
            failed += 1
            assert "CheckpointWriteFailed" in text and "No space left on device" in text, text
    assert failed >= 1


@pytest.mark.slow
def test_a_read_only_folder_is_refused_before_any_round(
    read_only_tmpfs: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with pytest.raises(CheckpointWriteFailed, match="Read-only file system") as caught:
        run_plan(plan_of(read_only_tmpfs), run, out=io.StringIO())
    assert caught.value.path.startswith(str(read_only_tmpfs))
    assert not (run / "logs").exists()  # nothing was launched


HOLDING_RUN = """
import io, sys
from pathlib import Path
from alpha.compiler.plan import parse_plan
from alpha.app.run import run_plan
summary = run_plan(parse_plan(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), out=io.StringIO())
print("ok" if summary.ok else f"failed: {summary.cause}", flush=True)
"""


@pytest.mark.slow
def test_a_second_run_on_a_held_folder_is_refused_at_once_and_the_first_commits(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text(folder, rounds=4))
    first = subprocess.Popen(
        [sys.executable, "-c", HOLDING_RUN, str(plan), str(tmp_path / "first")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        while True:  # until the first run holds the folder
            try:
                holder = json.loads((folder / LOCK).read_text())
                if holder["pid"] == first.pid:
                    break
            except (FileNotFoundError, ValueError):
                pass
            assert first.poll() is None, "the first run ended before it held the folder"
            time.sleep(0.02)
        with pytest.raises(CheckpointFolderHeld) as caught:
            run_plan(plan_of(folder, rounds=4, rate="0.02"), tmp_path / "second")
        assert f"pid {first.pid}" in str(caught.value) and "'hostile'" in str(caught.value)
        assert first.poll() is None  # refused while the first still ran
        assert not (tmp_path / "second").exists()
        out, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert out.strip() == "ok"
    latest = open_generation(folder)
    assert latest.round == 4
    latest.verify()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("saved")
    summary = run_plan(plan_of(base / "ckpt", rounds=2, every=2), base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return base / "ckpt"


@pytest.mark.slow
def test_a_generation_of_another_plan_is_refused_naming_each_field(
    saved: Path, tmp_path: Path
) -> None:
    plan = plan_of(tmp_path / "ckpt", rounds=4, every=2, rate="0.02", seed=6)
    with pytest.raises(GenerationForeign) as caught:
        run_plan(plan, tmp_path / "run", out=io.StringIO(), resume=saved)
    assert sorted(caught.value.fields) == ["rate", "seed"]
    assert caught.value.fields["rate"] == (0.01, 0.02)
    assert "rate" in str(caught.value) and "seed" in str(caught.value)
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "ckpt").exists()  # made for the run, and nothing went into it


@pytest.mark.slow
def test_a_field_the_plan_lets_change_is_recorded_as_changed(saved: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    plan = plan_of(folder, rounds=4, every=2, rate="0.02", may_change='["rate"]')
    out = io.StringIO()
    summary = run_plan(plan, tmp_path / "run", out=out, resume=saved)
    assert summary.ok, summary.cause
    assert summary.changed == {"rate": (0.01, 0.02)}
    assert "resumed with rate changed: 0.01 in the generation, 0.02 now" in out.getvalue()
    about = open_generation(folder).about
    assert about["changed"] == [{"field": "rate", "was": 0.01, "now": 0.02}]
    assert about["plan"]["rate"] == 0.02 and about["run"] == "hostile"  # type: ignore[index]


@pytest.mark.slow
def test_a_pointer_that_cannot_move_after_the_commit_is_reported_with_what_was_published(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    (folder / POINTER).mkdir(parents=True)  # a pointer that cannot be replaced
    (folder / POINTER / "x").write_text("x")
    plan = plan_of(folder, rounds=4, every=2)
    run = tmp_path / "run"
    summary = run_plan(plan, run, out=io.StringIO())
    assert not summary.ok
    assert summary.cause.startswith("role 0: "), summary.cause
    assert (
        f"CheckpointWriteFailed: cannot point {folder / POINTER}: Is a directory" in summary.cause
    )
    (mine,) = published(folder)
    assert mine.name.startswith("gen-000000002-")
    said = f"this segment's generation {mine.name} was published, but {folder / POINTER}"
    assert said in summary.cause
    assert summary.cause.endswith(f"go on with this plan and --resume {mine}")
    # The run committed before the pointer: every other role committed, none failed.
    reports = sorted(p.name for p in (run / "reports").glob("role-*.json"))
    assert reports == [f"role-{role:06d}.json" for role in range(N)]
    assert "Traceback" not in logs_of(run)
    # The advice works.
    shutil.rmtree(folder / POINTER)
    resumed = run_plan(plan, tmp_path / "resumed", out=io.StringIO(), resume=mine)
    assert resumed.ok, resumed.cause


# --- the message after a failure, from what is on disk --------------------------------------


@pytest.mark.slow  # its fixture is a real run
def test_the_message_after_a_failure_says_what_is_published_and_how_to_go_on(
    saved: Path, tmp_path: Path
) -> None:
    source = tmp_path / "plan.toml"
    folder = tmp_path / "ckpt"
    source.write_text(plan_text(folder, rounds=4, every=2))
    plan = parse_plan(source.read_text(), source=str(source))
    empty = tmp_path / "empty"
    empty.mkdir()
    said = _after_failure(plan, empty, generation_name(2, "aaaaaaaa"), None, None)
    assert "nothing of this segment was published" in said and "--resume" not in said
    shutil.copytree(saved, folder)
    latest = open_generation(folder)
    said = _after_failure(plan, folder, generation_name(4, "aaaaaaaa"), latest, None)
    assert f"the latest generation is {latest.path.name} (round 2)" in said
    assert said.endswith(f"go on with alpha run {source} --resume {folder}")
    # The generation the pointer names is the failed segment's own: it says so.
    said = _after_failure(plan, folder, latest.name.base, None, None)
    assert f"this segment's generation {latest.path.name} (round 2) was published" in said
    # A pointer that does not read: no --resume of the folder is advised.
    (folder / POINTER).write_text("{")
    said = _after_failure(plan, folder, generation_name(4, "aaaaaaaa"), None, None)
    assert "--resume" not in said and "has nothing to go on from" in said
    assert os.path.exists(latest.path)
