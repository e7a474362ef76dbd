"""Generations by round on real processes (docs/checkpoints.md): a checkpointed ``alpha run``,
``alpha checkpoint list`` of its folder, ``alpha run --resume FOLDER --round R`` from an earlier
generation (bit for bit with the replicated learner), a history that goes from round 1 through
the resume with the resume marked, a round no generation has refused naming the rounds there
are, ``restore`` to an ``.npz`` numpy loads, and a generation that records no history (an older
one) that still resumes, its history starting at the resume."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from alpha.checkpoint.manifest import HISTORY, RESUMES, owner_manifest_name
from alpha.checkpoint.store import MANIFEST, SHARDS, move_pointer, open_generation, publish
from alpha.learner.model import Model
from tests.support import plans, run_alpha

pytestmark = pytest.mark.slow


def plan_file(tmp_path: Path, rounds: int, folder: Path, name: str = "gens") -> Path:
    path = tmp_path / f"{name}-{rounds}.toml"
    path.write_text(
        plans.checkpointed_text(
            name, roles=4, rounds=rounds, checkpoint={"every": 2, "folder": str(folder), "keep": 5}
        )
    )
    return path


def rows_of(path: Path) -> list[list[str]]:
    with path.open(newline="") as data:
        return list(csv.reader(data))


def test_generations_are_listed_resumed_by_round_and_the_history_spans_the_resume(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    first = run_alpha(
        "run", str(plan_file(tmp_path, 6, folder)), "-o", str(tmp_path / "a"), "--json"
    )
    assert first.returncode == 0, first.stderr
    whole = rows_of(tmp_path / "a" / "history.csv")
    assert [row[4] for row in whole[1:]] == ["0"] * 6  # never resumed

    listed = run_alpha("checkpoint", "list", str(folder), "--json")
    assert listed.returncode == 0, listed.stderr
    facts = json.loads(listed.stdout)
    assert [(g["round"], g["run"], g["latest"]) for g in facts["generations"]] == [
        (2, "gens", False),
        (4, "gens", False),
        (6, "gens", True),
    ]
    text = run_alpha("checkpoint", "list", str(folder)).stdout.splitlines()
    assert text[0].split() == ["round", "generation", "run", "written", "size"]
    assert [line.split()[0] for line in text[1:]] == ["2", "4", "6"]
    assert text[-1].endswith("LATEST")

    # Each generation carries every round before it, as the run recorded them.
    latest = open_generation(folder)
    recorded = latest.history()
    assert recorded is not None and recorded.resumes == ()
    assert [row[0] for row in recorded.rows] == [0, 1, 2, 3, 4, 5]
    assert [row[1] for row in recorded.rows] == [float(row[1]) for row in whole[1:]]
    assert latest.about[RESUMES] == []

    # A round no generation has: refused at once, naming the rounds there are.
    plan8 = plan_file(tmp_path, 8, folder)
    missing = run_alpha(
        "run", str(plan8), "-o", str(tmp_path / "b"), "--resume", str(folder), "--round", "3"
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"alpha: error: checkpoint folder {folder} has no generation of round 3; its "
        "generations are of rounds 2, 4, 6: pass one of them to --round"
    )
    assert not (tmp_path / "b").exists()

    # Resume from round 2, not the latest (6): bit for bit with the replicated learner.
    done = run_alpha(
        "run",
        str(plan8),
        "-o",
        str(tmp_path / "b"),
        "--resume",
        str(folder),
        "--round",
        "2",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] and result["resumes"] == [2] and result["rounds_done"] == 8
    assert "resumed at round 2 from" in done.stderr
    rows = rows_of(tmp_path / "b" / "history.csv")
    assert rows[0] == ["round", "loss", "train_accuracy", "holdout_accuracy", "resumed"]
    assert [int(row[0]) for row in rows[1:]] == list(range(1, 9))
    assert [row[4] for row in rows[1:]] == ["0", "0", "1", "0", "0", "0", "0", "0"]
    assert rows[1:3] == whole[1:3]  # rounds 1 and 2 are the first run's, from the generation
    # The same plan from the same state: the same rounds again, marked as resumed.
    assert [row[:4] for row in rows[3:7]] == [row[:4] for row in whole[3:7]]
    # The generations it published carry the whole history and the resume.
    now = open_generation(folder)
    assert now.round == 8 and now.about[RESUMES] == [2]
    carried = now.history()
    assert carried is not None and [row[0] for row in carried.rows] == list(range(8))

    # restore: named, shaped tensors numpy loads, equal to the flat parameters reshaped.
    out = tmp_path / "state.npz"
    restored = run_alpha("checkpoint", "restore", str(folder), str(out))
    assert restored.returncode == 0, restored.stderr
    flat = now.read("w")
    model = Model.shipped(8, "float32")
    with np.load(out) as arrays:
        assert int(arrays["round"]) == 8
        at = 0
        for name, shape in model.layout:
            count = math.prod(shape)
            assert np.array_equal(arrays[name], flat[at : at + count].reshape(shape))
            at += count
        assert np.array_equal(arrays["m.b2"], now.read("m")[at - 10 : at])


def test_an_older_generation_without_history_still_resumes_its_history_from_the_resume(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    first = run_alpha("run", str(plan_file(tmp_path, 4, folder)), "-o", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    # The generation as one written before generations carried a history: the same shards
    # and owners, its about without history and resumes, published and pointed to.
    latest = open_generation(folder)
    staged = folder / "gen-000000004-0000000a.staged"
    (staged / SHARDS).mkdir(parents=True)
    for owner in range(latest.owners):
        name = owner_manifest_name(owner)
        shutil.copy(latest.path / name, staged / name)
    for path in (latest.path / SHARDS).iterdir():
        shutil.copy(path, staged / SHARDS / path.name)
    about = {k: v for k, v in latest.about.items() if k not in (HISTORY, RESUMES)}
    name, digest = publish(
        folder, 4, "0000000a", owners=latest.owners, arrays=latest.arrays, about=about
    )
    move_pointer(folder, name, digest)
    assert HISTORY not in json.loads((folder / name / MANIFEST).read_text())["about"]

    done = run_alpha(
        "run",
        str(plan_file(tmp_path, 6, folder)),
        "-o",
        str(tmp_path / "b"),
        "--resume",
        str(folder / name),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"run: checkpoint {name} records no history (an older generation): history.csv and "
        "loss.png start at round 5"
    ) in done.stderr
    rows = rows_of(tmp_path / "b" / "history.csv")
    assert [(int(row[0]), row[4]) for row in rows[1:]] == [(5, "1"), (6, "0")]
    assert json.loads(done.stdout)["resumes"] == [4]
    # What it publishes records what it knows: the rounds from the resume, and the resume.
    now = open_generation(folder)
    known = now.history()
    assert known is not None and [row[0] for row in known.rows] == [4, 5]
    assert now.about[RESUMES] == [4]
