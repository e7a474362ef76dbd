"""Generations listed and chosen by round (alpha.checkpoint.store): ``list_generations`` shows
every published generation with its round, run, time, size and the pointer's mark, a damaged
one included; ``generation_of_round`` picks the one of a round, or refuses naming the rounds
there are."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from alpha.checkpoint.store import (
    MANIFEST,
    POINTER,
    generation_of_round,
    list_generations,
    move_pointer,
    open_generation,
    owner_ranges,
    parts_of,
    publish,
    published,
    staged_folder,
    write_shards,
)
from alpha.errors import GenerationNotFound
from tests.support import raises_exactly


def save(folder: Path, round: int, nonce: str, run: str = "test", point: bool = True) -> Path:
    arrays = {"w": np.arange(10, dtype="float32") + round}
    staged = staged_folder(folder, round, nonce)
    for owner in range(2):
        ranges = {name: owner_ranges(a.size, 2)[owner] for name, a in arrays.items()}
        write_shards(staged, owner, parts_of(arrays, ranges))
    specs = {name: (tuple(a.shape), str(a.dtype)) for name, a in arrays.items()}
    about = {"run": run, "plan_sha256": "ab" * 32}
    name, digest = publish(folder, round, nonce, owners=2, arrays=specs, about=about)
    if point:
        move_pointer(folder, name, digest)
    return folder / name


def files_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_every_generation_is_listed_by_round_with_the_pointers_mark(tmp_path: Path) -> None:
    four = save(tmp_path, 4, "0000000a")
    two = save(tmp_path, 2, "0000000b", run="other", point=False)
    listed, pointer, problem = list_generations(tmp_path)
    assert (pointer, problem) == (four.name, "")
    assert [(each.path, each.round, each.run, each.latest) for each in listed] == [
        (two, 2, "other", False),
        (four, 4, "test", True),
    ]
    for each in listed:
        assert each.bytes == files_bytes(each.path) and each.bytes > 0
        assert each.written == (each.path / MANIFEST).stat().st_mtime
        assert each.plan_sha256 == "ab" * 32 and each.problem == ""


def test_a_damaged_generation_is_listed_with_why_and_a_damaged_pointer_said(tmp_path: Path) -> None:
    four = save(tmp_path, 4, "0000000a")
    (four / MANIFEST).write_text("{}")
    (tmp_path / POINTER).write_text("not json")
    listed, pointer, problem = list_generations(tmp_path)
    assert pointer == "" and "not JSON" in problem
    (only,) = listed
    assert only.path == four and only.run is None and "not the one" in only.problem


def test_an_empty_folder_lists_nothing(tmp_path: Path) -> None:
    assert list_generations(tmp_path) == ([], "", "")


def test_a_round_picks_its_generation(tmp_path: Path) -> None:
    two = save(tmp_path, 2, "0000000a")
    save(tmp_path, 4, "0000000b")
    assert generation_of_round(tmp_path, 2) == (two, 1)
    assert open_generation(generation_of_round(tmp_path, 2)[0]).round == 2
    # A generation folder is its own round's.
    assert generation_of_round(two, 2) == (two, 1)


def test_a_round_no_generation_has_is_refused_naming_the_rounds_there_are(tmp_path: Path) -> None:
    two = save(tmp_path, 2, "0000000a")
    save(tmp_path, 6, "0000000b")
    save(tmp_path, 4, "0000000c")
    error = raises_exactly(GenerationNotFound, generation_of_round, tmp_path, 10)
    assert (error.round, error.available) == (10, (2, 4, 6))
    assert "no generation of round 10; its generations are of rounds 2, 4, 6" in str(error)
    error = raises_exactly(GenerationNotFound, generation_of_round, two, 4)
    assert error.available == (2,)
    empty = tmp_path / "empty"
    empty.mkdir()
    error = raises_exactly(GenerationNotFound, generation_of_round, empty, 1)
    assert error.available == () and "holds no published generation" in str(error)


def test_of_several_of_a_round_the_runs_own_then_the_pointers_then_the_newest(
    tmp_path: Path,
) -> None:
    mine = save(tmp_path, 3, "0000000a", run="mine", point=False)
    pointed = save(tmp_path, 3, "0000000b", run="other")
    newest = save(tmp_path, 3, "0000000c", run="other", point=False)
    assert published(tmp_path)[-1] == newest
    assert generation_of_round(tmp_path, 3, "mine") == (mine, 3)
    assert generation_of_round(tmp_path, 3, "nobody") == (pointed, 3)
    (tmp_path / POINTER).unlink()
    assert generation_of_round(tmp_path, 3) == (newest, 3)
