"""Checkpoints (alpha.checkpoint.store): logical shards, atomic and immutable publication, the
pointer, pruning, and path-only reading that refuses any damaged shard by name."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.app.cli import main
from alpha.checkpoint.store import (
    MANIFEST,
    POINTER,
    generation_name,
    move_pointer,
    open_generation,
    owner_manifest_name,
    owner_ranges,
    parts_of,
    prune,
    publish,
    published,
    staged_folder,
    write_shards,
)
from alpha.errors import CheckpointCorrupt, GenerationExists
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from tests.support import FIXTURES


def state(size: int, dtype: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w": rng.standard_normal(size).astype(dtype),
        "m": rng.standard_normal(size).astype(dtype),
        "p1": np.array([0.9**3], dtype=dtype),
    }


NONCE = "0123abcd"


def gen(folder: Path, round: int, nonce: str = NONCE) -> str:
    """The sealed name of the generation of ``round`` and ``nonce`` published in ``folder``."""
    (found,) = [
        path.name
        for path in published(folder)
        if path.name.startswith(generation_name(round, nonce) + "-")
    ]
    return found


def save(
    folder: Path, round: int, arrays: dict[str, np.ndarray], owners: int, nonce: str = NONCE
) -> str:
    """What a run does: every owner writes its ranges, role 0 publishes, the pointer moves."""
    staged = staged_folder(folder, round, nonce)
    for owner in range(owners):
        ranges = {name: owner_ranges(array.size, owners)[owner] for name, array in arrays.items()}
        write_shards(staged, owner, parts_of(arrays, ranges))
    specs = {name: (tuple(array.shape), str(array.dtype)) for name, array in arrays.items()}
    name, digest = publish(folder, round, nonce, owners=owners, arrays=specs, about={"run": "test"})
    move_pointer(folder, name, digest)
    return digest


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@given(size=st.integers(0, 500), owners=st.integers(1, 40))
def test_owner_ranges_cover_in_order_and_differ_by_at_most_one(size: int, owners: int) -> None:
    ranges = owner_ranges(size, owners)
    assert len(ranges) == owners
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    sizes = [stop - start for start, stop in ranges]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 300),
    saved=st.integers(1, 9),
    now=st.integers(1, 9),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_any_owner_count_restores_what_any_other_saved(
    size: int, saved: int, now: int, dtype: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("ckpt")
    arrays = state(size, dtype)
    save(folder, 5, arrays, saved)
    generation = open_generation(folder)
    assert generation.round == 5 and generation.owners == saved
    loaded = generation.load()
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype
        assert loaded[name].tobytes() == array.tobytes()
    # Each of `now` owners reads its own range: the ranges of another owner count.
    for name, array in arrays.items():
        for start, stop in owner_ranges(array.size, now):
            assert generation.read(name, start, stop).tobytes() == array[start:stop].tobytes()


def test_a_generation_is_published_once_and_never_changes(tmp_path: Path) -> None:
    arrays = state(100, "float32")
    save(tmp_path, 10, arrays, 3)
    before = files_of(tmp_path / gen(tmp_path, 10))
    with pytest.raises(GenerationExists, match="published once"):
        save(tmp_path, 10, state(100, "float32", seed=1), 3)
    assert files_of(tmp_path / gen(tmp_path, 10)) == before
    # The same round from another attempt (another nonce) is another generation.
    save(tmp_path, 10, arrays, 2, nonce="feedbeef")
    assert open_generation(tmp_path).path.name == gen(tmp_path, 10, "feedbeef")
    assert files_of(tmp_path / gen(tmp_path, 10)) == before


def test_publication_needs_every_owner(tmp_path: Path) -> None:
    arrays = state(50, "float64")
    staged = staged_folder(tmp_path, 3, NONCE)
    write_shards(
        staged, 0, parts_of(arrays, {n: owner_ranges(a.size, 2)[0] for n, a in arrays.items()})
    )
    specs = {n: (a.shape, str(a.dtype)) for n, a in arrays.items()}
    with pytest.raises(CheckpointCorrupt, match="owner 1's manifest"):
        publish(tmp_path, 3, NONCE, owners=2, arrays=specs, about={})
    assert published(tmp_path) == []
    # One owner that covers only half of each array is refused too.
    with pytest.raises(CheckpointCorrupt, match="cover"):
        publish(tmp_path, 3, NONCE, owners=1, arrays=specs, about={})


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "extend"])
def test_a_damaged_shard_is_refused_by_name_and_nothing_is_loaded(
    damage: str, tmp_path: Path
) -> None:
    save(tmp_path, 7, state(64, "float32"), 4)
    generation = open_generation(tmp_path)
    victim = generation.shards["m"][2]
    path = generation.path / victim.file
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    elif damage == "truncate":
        path.write_bytes(data[:-3])
    elif damage == "remove":
        path.unlink()
    else:
        path.write_bytes(data + b"\0")
    for attempt in (generation.verify, generation.load, lambda: generation.read("m", 0, 64)):
        with pytest.raises(CheckpointCorrupt) as caught:
            attempt()
        assert caught.value.shard == victim.label
        assert victim.file in str(caught.value)
    # What does not touch the damaged shard still reads.
    assert generation.read("w").size == 64
    assert generation.read("m", 0, victim.start).size == victim.start


def test_damaged_manifests_and_pointer_are_refused(tmp_path: Path) -> None:
    save(tmp_path, 2, state(20, "float32"), 2)
    folder = tmp_path / gen(tmp_path, 2)
    owner = folder / owner_manifest_name(1)
    owner.write_bytes(owner.read_bytes().replace(b'"owner": 1', b'"owner": 1 '))
    with pytest.raises(CheckpointCorrupt, match=r"owner 1.s manifest .* is corrupt"):
        open_generation(tmp_path)
    shutil.rmtree(tmp_path)
    save(tmp_path, 2, state(20, "float32"), 2)
    (folder / MANIFEST).write_bytes((folder / MANIFEST).read_bytes() + b" ")
    with pytest.raises(CheckpointCorrupt, match="is corrupt"):
        open_generation(tmp_path)  # the pointer pins the manifest's digest
    (tmp_path / POINTER).write_text("{")
    with pytest.raises(CheckpointCorrupt, match="not JSON"):
        open_generation(tmp_path)
    with pytest.raises(CheckpointCorrupt, match="neither a checkpoint folder"):
        open_generation(tmp_path / "nowhere")


def test_the_pointer_moves_atomically_and_old_generations_go_only_after_a_newer_one(
    tmp_path: Path,
) -> None:
    for round in (10, 20, 30):
        save(tmp_path, round, state(30, "float32", seed=round), 2)
    assert open_generation(tmp_path).round == 30
    # A staged generation is another writer's work: prune never touches it.
    staged = staged_folder(tmp_path, 25, NONCE)
    write_shards(staged, 0, parts_of(state(30, "float32"), {"w": (0, 30)}))
    kept = [gen(tmp_path, 20), gen(tmp_path, 30)]
    assert prune(tmp_path, keep=2) == []
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted([POINTER, *kept, staged.name])
    # The generation the pointer names is never removed, whatever `keep` says.
    (tmp_path / POINTER).write_text(
        json.dumps(
            {
                "format": "alpha-checkpoint-pointer/1",
                "generation": kept[0],
                "manifest_sha256": open_generation(tmp_path / kept[0]).manifest_sha256,
            }
        )
    )
    assert prune(tmp_path, keep=0) == []
    assert (tmp_path / kept[0]).is_dir()


def test_a_removal_that_fails_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for round in (1, 2):
        save(tmp_path, round, state(8, "float32"), 1)

    def refuse(path: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(shutil, "rmtree", refuse)
    first = gen(tmp_path, 1)
    failures = prune(tmp_path, keep=1)
    assert len(failures) == 1 and first in failures[0]
    assert "Permission denied" in failures[0]


def test_the_checkpoint_commands_need_only_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays = state(40, "float64")
    digest = save(tmp_path, 4, arrays, 3)
    assert main(["checkpoint", "inspect", str(tmp_path), "--json"]) == EXIT_OK
    facts = json.loads(capsys.readouterr().out)
    assert facts["round"] == 4 and facts["owners"] == 3 and facts["manifest_sha256"] == digest
    assert facts["arrays"]["w"] == {"shape": [40], "dtype": "float64", "shards": 3}
    assert main(["checkpoint", "verify", str(tmp_path / gen(tmp_path, 4))]) == EXIT_OK
    out = tmp_path / "state.npz"
    assert main(["checkpoint", "restore", str(tmp_path), "-o", str(out)]) == EXIT_OK
    with np.load(out) as restored:
        # A generation that records no model (not a learner run's): each array as it is.
        assert {n: restored[n].tobytes() for n in restored} == {
            **{n: a.tobytes() for n, a in arrays.items()},
            "round": np.int64(4).tobytes(),
        }
    capsys.readouterr()
    shard = open_generation(tmp_path).shards["w"][1]
    (tmp_path / gen(tmp_path, 4) / shard.file).write_bytes(b"")
    assert main(["checkpoint", "verify", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("alpha: error: ") and shard.file in err and "\n" not in err


PLAN = (FIXTURES / "plans" / "learn-pair.toml").read_text()


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("[checkpoint]\nkeep = 2\n", "checkpoint.every"),
        ("[checkpoint]\nevery = 0\n", "checkpoint.every"),
        ("[checkpoint]\nevery = 7\n", "checkpoint.every"),
        ("[checkpoint]\nevery = 2\nkeep = 0\n", "checkpoint.keep"),
        ("[checkpoint]\nevery = 2\nfolder = 3\n", "checkpoint.folder"),
        ("[checkpoint]\nevery = 2\nsometimes = true\n", "checkpoint.sometimes"),
        ('[checkpoint]\nevery = 2\nmay_change = "rate"\n', "checkpoint.may_change"),
        ('[checkpoint]\nevery = 2\nmay_change = ["rate", "rate"]\n', "checkpoint.may_change"),
        ('[checkpoint]\nevery = 2\nmay_change = ["hidden"]\n', "checkpoint.may_change"),
        ('[checkpoint]\nevery = 2\nmay_change = ["state_layout"]\n', "checkpoint.may_change"),
        ("[checkpoint]\nevery = 2\nmay_change = [1]\n", "checkpoint.may_change"),
    ],
)
def test_a_wrong_checkpoint_table_is_refused_at_its_field(table: str, field: str) -> None:
    from alpha.compiler.plan import parse_plan
    from alpha.errors import PlanInvalid

    with pytest.raises(PlanInvalid) as caught:
        parse_plan(PLAN + table)
    assert type(caught.value) is PlanInvalid and caught.value.field == field


def test_the_checkpoint_table_is_read_and_only_a_learner_has_one() -> None:
    from alpha.compiler.plan import CheckpointSpec, parse_plan
    from alpha.errors import PlanInvalid

    plan = parse_plan(PLAN + '[checkpoint]\nevery = 2\nfolder = "ck"\n')
    assert plan.checkpoint == CheckpointSpec(every=2, folder="ck", keep=2)
    changing = parse_plan(PLAN + '[checkpoint]\nevery = 2\nmay_change = ["seed", "rate"]\n')
    assert changing.checkpoint is not None
    assert changing.checkpoint.may_change == ("rate", "seed")
    assert parse_plan(PLAN).checkpoint is None
    sum_check = PLAN.replace('kind = "learn"', 'kind = "sum-check"').replace(
        "[learner]\nrate = 0.1\n", ""
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(sum_check + "[checkpoint]\nevery = 2\n")
    assert caught.value.field == "checkpoint"
