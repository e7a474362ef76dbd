"""Checkpointed runs on real processes: generations published at each segment's commit point,
resume on another owner count, and kills at every step of publication (docs/checkpoints.md).

Each kill leaves the previous generation byte for byte as it was, and both restore and resume
from the checkpoint folder work afterwards."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
from pathlib import Path

import pytest
import trio

from alpha.app.compile import compile_plan
from alpha.app.run import run_plan
from alpha.checkpoint.store import (
    LOCK,
    POINTER,
    REMOVING_PREFIX,
    generation_name,
    open_generation,
    prune,
    published,
)
from alpha.compiler.plan import Plan, Segment, parse_plan
from alpha.compiler.replicate import Start, replicate
from alpha.errors import CheckpointCorrupt
from alpha.failpoints import FAILPOINTS_ENV
from alpha.launch.launcher import launch, launch_specs
from alpha.learner.data import load_digits
from harness.processes import running, state_of
from harness.relay import Fault
from harness.runs import Interrupt, relayed_run
from tests.support import plans, run_alpha

pytestmark = pytest.mark.slow

N = 4


def plan_text(
    folder: Path, *, rounds: int, roles: int = N, every: int | None = 2, may_change: str = ""
) -> str:
    return plans.checkpointed_text(
        "resume",
        roles=roles,
        rounds=rounds,
        checkpoint=None if every is None else {"every": every, "folder": str(folder)},
        # may_change belongs to [checkpoint], the last table (always with one in these tests)
        extra=f"may_change = {may_change}\n" if may_change else "",
    )


def plan_of(folder: Path, **options: int | str | None) -> Plan:
    return parse_plan(plan_text(folder, **options), source="test")  # type: ignore[arg-type]


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final parameters of the 6-round run without checkpoints."""
    base = tmp_path_factory.mktemp("plain")
    summary = run_plan(plan_of(base, rounds=6, every=None), base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return summary.distributed


def test_a_checkpointed_run_publishes_each_segment_and_equals_the_uninterrupted_run(
    tmp_path: Path, uninterrupted: str
) -> None:
    folder = tmp_path / "ckpt"
    out = io.StringIO()
    summary = run_plan(plan_of(folder, rounds=6), tmp_path / "run", out=out)
    assert summary.ok, summary.cause
    assert summary.distributed == uninterrupted
    assert out.getvalue().count("published (round") == 3
    # keep = 2: the generations of rounds 4 and 6 remain, and the pointer names round 6's.
    names = sorted(p.name for p in folder.iterdir() if p.name != LOCK)
    assert names[0] == POINTER and [n[:13] for n in names[1:]] == ["gen-000000004", "gen-000000006"]
    latest = open_generation(folder)
    assert latest.round == 6 and latest.owners == N
    assert latest.verify() > 0
    assert sorted(latest.arrays) == ["m", "p1", "p2", "v", "w"]
    # The checkpoint's parameters are the run's final parameters.
    import hashlib

    assert hashlib.sha256(latest.read("w").tobytes()).hexdigest() == uninterrupted


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint folder after 4 rounds by 4 owners (generations at rounds 2 and 4)."""
    base = tmp_path_factory.mktemp("saved")
    folder = base / "ckpt"
    summary = run_plan(plan_of(folder, rounds=4), base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return folder


@pytest.mark.parametrize("owners", [1, N - 1, N, N + 1, 2 * N])
def test_resume_on_any_owner_count_equals_the_replicated_learner_bit_for_bit(
    owners: int, saved: Path, tmp_path: Path, uninterrupted: str
) -> None:
    # Without logical contributors another role count is another plan: it says so.
    changes = "" if owners == N else '["membership"]'
    plan = plan_of(tmp_path / "ckpt", rounds=6, roles=owners, may_change=changes)
    summary = run_plan(plan, tmp_path / "run", out=io.StringIO(), resume=saved)
    assert summary.ok, summary.cause
    assert sorted(summary.changed) == ([] if owners == N else ["membership"])
    # The reference: the replicated learner from the same state, with the plan now in force.
    arrays = open_generation(saved).load()
    start = Start(4, arrays.pop("w"), arrays)
    assert summary.replicated == replicate(plan, load_digits(), start=start).digest
    if owners == N:
        assert summary.distributed == uninterrupted


def test_a_damaged_generation_is_refused_before_anything_runs(saved: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(saved, copy)
    generation = open_generation(copy)
    shard = generation.shards["m"][0]
    (generation.path / shard.file).write_bytes(b"\0" * shard.bytes)
    with pytest.raises(CheckpointCorrupt) as caught:
        run_plan(plan_of(tmp_path / "ckpt", rounds=6), tmp_path / "run", resume=copy)
    assert caught.value.shard == shard.label
    assert not (tmp_path / "run").exists()


# --- kills at every step of publication ------------------------------------------------------


def _next_segment(folder: Path, work: Path) -> Path:
    """The segment 4 -> 6 after ``folder``'s latest generation, compiled into ``work``; its
    generation records the plan as the latest's does (so its prune counts those as its own)."""
    latest = open_generation(folder)
    about = latest.about
    record = json.dumps({key: about[key] for key in ("run", "plan", "plan_sha256", "changed")})
    plan = dataclasses.replace(
        plan_of(folder, rounds=6),
        segment=Segment(
            first=latest.round,
            resume=str(latest.path),
            resume_sha256=latest.manifest_sha256,
            save=str(folder),
            nonce="deadbeef",
            record=record,
        ),
    )
    compile_plan(plan, work, range(N))
    return work


async def _launch_stopping_at(compiled: Path, point: str, role: int) -> None:
    """Launch ``compiled`` with a failpoint; SIGKILL the role once it stopped there."""
    specs, deadline = launch_specs(compiled)
    artifact = str(specs[role].argv[-1])
    killed: list[int] = []

    async def kill_when_stopped() -> None:
        while True:
            for pid in running(artifact, whole=True):
                if state_of(pid) == "T":
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            await trio.sleep(0.02)

    os.environ[FAILPOINTS_ENV] = f"{point}@{role}"
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill_when_stopped)
            result = await launch(specs, deadline=deadline)
            nursery.cancel_scope.cancel()
    finally:
        del os.environ[FAILPOINTS_ENV]
    assert killed, f"role {role} never stopped at {point}"
    assert not result.ok
    assert running(compiled) == []


def _copy_of(saved: Path, tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A copy of the saved checkpoint folder, and the bytes of its latest generation and
    pointer, to compare with after a kill."""
    import shutil

    folder = tmp_path / "ckpt"
    shutil.copytree(saved, folder)
    before: dict[str, object] = {
        "generation": files_of(open_generation(folder).path),
        "pointer": (folder / POINTER).read_bytes(),
    }
    return folder, before


def _assert_restore_and_resume_work(
    folder: Path, before: dict[str, object], tmp_path: Path, uninterrupted: str
) -> None:
    assert files_of(folder / open_generation(folder).path.name) == before["generation"]
    assert (folder / POINTER).read_bytes() == before["pointer"]
    latest = open_generation(folder)
    assert latest.round == 4
    latest.verify()
    # restore needs only the path
    done = run_alpha("checkpoint", "restore", str(folder))
    assert done.returncode == 0, done.stderr
    summary = run_plan(
        plan_of(folder, rounds=6), tmp_path / "resumed", out=io.StringIO(), resume=folder
    )
    assert summary.ok, summary.cause
    assert summary.distributed == uninterrupted


@pytest.mark.parametrize(
    ("point", "role"),
    [
        ("checkpoint.writing", 2),  # while an owner writes its shards
        ("checkpoint.written", 1),  # an owner's shards are written, not yet published
        ("checkpoint.publishing", 0),  # every shard written, before publication
        ("checkpoint.published", 0),  # published and committed, before the pointer moves
    ],
)
def test_a_kill_at_each_step_of_publication_leaves_the_previous_generation(
    point: str, role: int, saved: Path, tmp_path: Path, uninterrupted: str
) -> None:
    folder, before = _copy_of(saved, tmp_path)
    compiled = _next_segment(folder, tmp_path / "segment")
    trio.run(_launch_stopping_at, compiled, point, role)
    base = generation_name(6, "deadbeef")
    published = any(path.name.startswith(f"{base}-") for path in folder.iterdir())
    assert published == (point == "checkpoint.published")
    _assert_restore_and_resume_work(folder, before, tmp_path, uninterrupted)


def test_a_kill_while_a_generation_is_removed_leaves_it_out_of_sight_then_finished(
    saved: Path, tmp_path: Path
) -> None:
    folder, _ = _copy_of(saved, tmp_path)
    oldest = published(folder)[0]  # round 2's: the 4 -> 6 segment (keep = 2) removes it
    compiled = _next_segment(folder, tmp_path / "segment")
    trio.run(_launch_stopping_at, compiled, "checkpoint.removing", 0)
    # Killed between the rename and the deletion: round 2's files are all there, out of sight.
    hidden = folder / f"{REMOVING_PREFIX}{oldest.name}"
    assert not oldest.exists() and hidden.is_dir() and (hidden / "manifest.json").is_file()
    assert [open_generation(p).round for p in published(folder)] == [4, 6]
    latest = open_generation(folder)
    assert latest.round == 6
    latest.verify()
    done = run_alpha("checkpoint", "verify", str(folder))
    assert done.returncode == 0, done.stderr
    # The next prune finishes the removal.
    assert prune(folder, 2, latest.about["plan_sha256"]) == []  # type: ignore[arg-type]
    assert not hidden.exists()
    assert [open_generation(p).round for p in published(folder)] == [4, 6]


def test_a_participant_killed_mid_round_publishes_nothing(
    saved: Path, tmp_path: Path, uninterrupted: str
) -> None:
    folder, before = _copy_of(saved, tmp_path)
    compiled = _next_segment(folder, tmp_path / "segment")
    # Role 2 (role 1's child) is killed as round 5's combined gradient reaches it.
    outcome = trio.run(
        lambda: relayed_run(
            compiled,
            tmp_path / "run",
            (1, 2),
            Fault("call", "down", 2),
            interrupt=Interrupt(2, signal.SIGKILL),
        )
    )
    assert outcome.relay is not None and outcome.interrupted
    assert not outcome.result.ok and not outcome.committed()
    assert outcome.left_running() == []
    assert not any(
        p.name.startswith("gen-000000006") and p.is_dir() and not p.name.endswith(".staged")
        for p in folder.iterdir()
    )
    _assert_restore_and_resume_work(folder, before, tmp_path, uninterrupted)


# --- logical contributors: resume on any owner count equals the uninterrupted run ------------


def logical_text(folder: Path, *, rounds: int, roles: int, every: int | None = 2) -> str:
    """The plan above with 4 logical contributors, whatever the number of roles."""
    return plan_text(folder, rounds=rounds, roles=roles, every=every).replace(
        'optimizer = "adam"', 'optimizer = "adam"\ncontributors = 4'
    )


@pytest.fixture(scope="module")
def logical_uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("logical-plain")
    plan = parse_plan(logical_text(base, rounds=6, roles=N, every=None))
    summary = run_plan(plan, base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return summary.distributed


@pytest.fixture(scope="module")
def logical_saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("logical-saved")
    plan = parse_plan(logical_text(base / "ckpt", rounds=4, roles=N))
    summary = run_plan(plan, base / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    return base / "ckpt"


@pytest.mark.parametrize("owners", [1, N - 1, N + 1, 2 * N])
def test_with_logical_contributors_resume_on_any_owner_count_equals_the_uninterrupted_run(
    owners: int, logical_saved: Path, logical_uninterrupted: str, tmp_path: Path
) -> None:
    plan = parse_plan(logical_text(tmp_path / "ckpt", rounds=6, roles=owners))
    summary = run_plan(plan, tmp_path / "run", out=io.StringIO(), resume=logical_saved)
    assert summary.ok, summary.cause
    assert summary.distributed == logical_uninterrupted
    # The role count changed on purpose-free ground: the report says so all the same.
    assert sorted(summary.changed) == ["membership"]
