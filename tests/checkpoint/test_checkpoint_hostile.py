"""Checkpoints under hostile conditions (docs/checkpoints.md): names that are not a
generation's, edited manifests, links, shapes past any bound, a second writer, the system
refusing writes, and removals that die half way. Each refusal is one exact class."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.checkpoint.manifest import sha256_hex
from alpha.checkpoint.store import (
    LOCK,
    MANIFEST,
    MAX_ELEMENTS,
    POINTER,
    REMOVING_PREFIX,
    Shard,
    check_room,
    generation_name,
    hold_checkpoint_folder,
    move_pointer,
    open_generation,
    owner_ranges,
    parse_generation,
    parts_of,
    prune,
    publish,
    published,
    remove_staged,
    sealed_name,
    shard_file,
    staged_folder,
    write_shards,
)
from alpha.errors import CheckpointCorrupt, CheckpointFolderHeld, CheckpointWriteFailed
from alpha.files import STAGED_SUFFIX
from alpha.learner.saving import FREE_WITH_CONTRIBUTORS, identity_changes, segment_record
from tests.support import mount_tmpfs

NONCE = "0123abcd"


def state(size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal(size).astype("float32"), "p1": np.array([0.5], "float32")}


def save(
    folder: Path,
    round: int,
    *,
    owners: int = 2,
    size: int = 40,
    nonce: str = NONCE,
    about: dict[str, object] | None = None,
) -> Path:
    """What a run does: every owner writes its ranges, role 0 publishes, the pointer moves."""
    arrays = state(size, round)
    staged = staged_folder(folder, round, nonce)
    for owner in range(owners):
        ranges = {name: owner_ranges(a.size, owners)[owner] for name, a in arrays.items()}
        write_shards(staged, owner, parts_of(arrays, ranges))
    specs = {name: (tuple(a.shape), str(a.dtype)) for name, a in arrays.items()}
    name, digest = publish(
        folder, round, nonce, owners=owners, arrays=specs, about=about or {"run": "t"}
    )
    move_pointer(folder, name, digest)
    return folder / name


def reseal(generation: Path, edit: dict[str, object]) -> Path:
    """Edit the root manifest of ``generation`` and seal it again as a writer would (its
    folder renamed to the new digest, the pointer moved): only the checks past the seal
    stand between the edit and a load."""
    manifest = json.loads((generation / MANIFEST).read_bytes())
    manifest.update(edit)
    data = (json.dumps(manifest, sort_keys=True, indent=1) + "\n").encode()
    (generation / MANIFEST).write_bytes(data)
    digest = sha256_hex(data)
    parsed = parse_generation(generation.name)
    assert parsed is not None
    moved = generation.parent / sealed_name(parsed.base, digest)
    generation.rename(moved)
    move_pointer(generation.parent, moved.name, digest)
    return moved


# --- the name grammar ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    round=st.integers(0, 2**32 - 1),
    nonce=st.text("0123456789abcdef", min_size=8, max_size=8),
    digest=st.text("0123456789abcdef", min_size=64, max_size=64),
)
def test_a_sealed_name_reads_back_as_written(round: int, nonce: str, digest: str) -> None:
    name = sealed_name(generation_name(round, nonce), digest)
    parsed = parse_generation(name)
    assert parsed is not None
    assert (parsed.round, parsed.nonce, str(parsed)) == (round, nonce, name)
    assert digest.startswith(parsed.seal)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec="utf-8"), max_size=60))
def test_any_other_name_is_no_generation(text: str) -> None:
    """A name reads as a generation only in its one spelling: nothing with a NUL, a slash,
    ``..``, a staged or removed name, or another spelling of a round."""
    parsed = parse_generation(text)
    if parsed is not None:
        assert str(parsed) == text
        assert "\0" not in text and "/" not in text


@pytest.mark.parametrize(
    "name",
    [
        "gen-000000001-0123abcd-0123456789abcdef\0",
        "gen-000000001-0123abcd-0123456789abcdef/..",
        "gen-0000000001-0123abcd-0123456789abcdef",  # another spelling of round 1
        "gen-000000001-0123abcd.staged",
        f"{REMOVING_PREFIX}gen-000000001-0123abcd-0123456789abcdef",
        "gen-000000001-0123ABCD-0123456789abcdef",
        "../gen-000000001-0123abcd-0123456789abcdef",
    ],
)
def test_a_pointer_naming_what_is_no_generation_is_corrupt(name: str, tmp_path: Path) -> None:
    generation = save(tmp_path, 1)
    digest = open_generation(tmp_path).manifest_sha256
    move_pointer(tmp_path, name, digest)
    with pytest.raises(CheckpointCorrupt, match="not a published generation's name"):
        open_generation(tmp_path)
    assert open_generation(generation).round == 1  # the generation itself is fine


# --- every manifest pinned -------------------------------------------------------------------


def test_an_edited_root_manifest_is_refused_by_folder_and_by_pointer(tmp_path: Path) -> None:
    generation = save(tmp_path, 6)
    text = (generation / MANIFEST).read_text()
    (generation / MANIFEST).write_text(text.replace('"round": 6', '"round": 3'))
    with pytest.raises(CheckpointCorrupt, match=r"not the one .* was sealed with"):
        open_generation(generation)  # by its folder: the name's seal
    with pytest.raises(CheckpointCorrupt, match="is corrupt"):
        open_generation(tmp_path)  # by the pointer: its digest


@settings(max_examples=60, deadline=None)
@given(at=st.integers(0, 10**6), bit=st.integers(0, 7))
def test_any_flipped_bit_of_a_root_manifest_is_refused_however_it_is_opened(
    at: int, bit: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("flip")
    generation = save(folder, 6)
    data = bytearray((generation / MANIFEST).read_bytes())
    data[at % len(data)] ^= 1 << bit
    (generation / MANIFEST).write_bytes(bytes(data))
    for path in (generation, folder):
        with pytest.raises(CheckpointCorrupt) as caught:
            open_generation(path)
        assert type(caught.value) is CheckpointCorrupt


def test_a_pointer_without_its_digest_is_refused(tmp_path: Path) -> None:
    generation = save(tmp_path, 6)
    (tmp_path / POINTER).write_text(
        json.dumps({"format": "alpha-checkpoint-pointer/1", "generation": generation.name})
    )
    with pytest.raises(CheckpointCorrupt, match="pins no root manifest"):
        open_generation(tmp_path)


def test_a_pointer_whose_digest_is_not_its_names_seal_is_refused(tmp_path: Path) -> None:
    generation = save(tmp_path, 6)
    move_pointer(tmp_path, generation.name, "f" * 64)
    with pytest.raises(CheckpointCorrupt, match="whose seal is not the digest"):
        open_generation(tmp_path)


def test_a_resealed_manifest_of_another_round_than_its_folder_is_refused(tmp_path: Path) -> None:
    moved = reseal(save(tmp_path, 6), {"round": 3})
    with pytest.raises(CheckpointCorrupt, match=r"of round 3, but its folder is .* \(round 6\)"):
        open_generation(tmp_path)
    with pytest.raises(CheckpointCorrupt, match="round 3, but its folder"):
        open_generation(moved)


def test_a_resealed_manifest_naming_another_generation_is_refused(tmp_path: Path) -> None:
    reseal(save(tmp_path, 6), {"generation": generation_name(6, "ffffffff")})
    with pytest.raises(CheckpointCorrupt, match="records generation"):
        open_generation(tmp_path)


def test_a_folder_not_named_as_a_generation_is_never_opened_unpinned(tmp_path: Path) -> None:
    generation = save(tmp_path, 6)
    renamed = generation.rename(tmp_path / "copy")
    with pytest.raises(CheckpointCorrupt, match="is not named as a published generation"):
        open_generation(renamed)


# --- links, NULs and shapes past any bound ---------------------------------------------------


def test_a_pointer_that_is_a_link_is_refused_never_followed(tmp_path: Path) -> None:
    other = tmp_path / "other"
    save(other, 4)
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copytree(published(other)[0], mine / published(other)[0].name)
    (mine / POINTER).symlink_to(other / POINTER)
    with pytest.raises(CheckpointCorrupt, match="is a symbolic link"):
        open_generation(mine)


def test_a_pointer_naming_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    generation = save(other, 4)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / generation.name).symlink_to(generation)
    shutil.copy(other / POINTER, mine / POINTER)
    with pytest.raises(CheckpointCorrupt, match="a symbolic link"):
        open_generation(mine)


def shard_entry(**change: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": "w",
        "global_shape": [10],
        "start": 0,
        "stop": 10,
        "dtype": "float32",
        "bytes": 40,
        "sha256": "0" * 64,
        "file": shard_file("w", 0, 10),
    }
    entry.update(change)
    return entry


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"file": "shards/w.000000000000-000000000010.bin\0"}, "is not"),
        ({"file": "shards/../../w.bin"}, "is not"),
        ({"file": "/etc/passwd"}, "is not"),
        ({"name": "w\0"}, "is not a name"),
        ({"global_shape": [2**40, 2**40]}, "past the bound"),
        ({"global_shape": [2**62, 4]}, "past the bound"),  # wraps in 64 bits
        ({"global_shape": [1] * 9}, "is wrong"),
        ({"global_shape": [-1]}, "is wrong"),
        ({"sha256": "Z" * 64}, "sha256 is wrong"),
    ],
)
def test_a_hostile_shard_entry_is_corrupt_never_a_value_error(
    change: dict[str, object], words: str
) -> None:
    assert Shard.from_dict(shard_entry(), "t").file == shard_file("w", 0, 10)
    with pytest.raises(CheckpointCorrupt, match=words) as caught:
        Shard.from_dict(shard_entry(**change), "t")
    assert type(caught.value) is CheckpointCorrupt


def test_a_resealed_manifest_with_an_overflowing_shape_is_corrupt(tmp_path: Path) -> None:
    reseal(save(tmp_path, 2), {"arrays": {"w": {"shape": [2**33, 2**33], "dtype": "float32"}}})
    with pytest.raises(CheckpointCorrupt, match=f"past the bound of {MAX_ELEMENTS}"):
        open_generation(tmp_path)


def test_a_resealed_manifest_with_a_nul_in_an_array_name_is_corrupt(tmp_path: Path) -> None:
    reseal(save(tmp_path, 2), {"arrays": {"w\0": {"shape": [40], "dtype": "float32"}}})
    with pytest.raises(CheckpointCorrupt, match="is not a name"):
        open_generation(tmp_path)


# --- one writer per folder -------------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from alpha.checkpoint.store import hold_checkpoint_folder
with hold_checkpoint_folder(Path(sys.argv[1]), "the-first-run"):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow  # a second process holds the folder
def test_a_held_folder_is_refused_at_once_naming_its_holder_and_freed_by_death(
    tmp_path: Path,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with (
            pytest.raises(CheckpointFolderHeld) as caught,
            hold_checkpoint_folder(tmp_path, "the-second-run"),
        ):
            pytest.fail("a held folder was entered")
        said = str(caught.value)
        assert f"pid {holder.pid}" in said and "'the-first-run'" in said
        assert f"host {socket.gethostname()}" in said and "since 20" in said
        assert caught.value.folder == str(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    # The kernel's lock went with the process: the folder is free again.
    with hold_checkpoint_folder(tmp_path, "the-second-run"):
        assert json.loads((tmp_path / LOCK).read_text())["run"] == "the-second-run"


# --- the system refusing writes --------------------------------------------------------------


def refusing(code: int) -> object:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    return refuse


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EIO])
def test_staging_refused_by_the_system_names_the_path_and_its_words(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", refusing(code))
    staged = staged_folder(tmp_path, 1, NONCE)
    with pytest.raises(CheckpointWriteFailed) as caught:
        write_shards(staged, 0, parts_of(state(8), {"w": (0, 8)}))
    assert caught.value.errno == code and caught.value.reason == os.strerror(code)
    assert str(staged) in str(caught.value) and os.strerror(code) in str(caught.value)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_publishing_refused_by_the_system_leaves_nothing_published(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged = staged_folder(tmp_path, 1, NONCE)
    write_shards(staged, 0, parts_of(state(8), {"w": (0, 8), "p1": (0, 1)}))
    monkeypatch.setattr(os, "rename", refusing(code))
    with pytest.raises(CheckpointWriteFailed, match=os.strerror(code)) as caught:
        publish(
            tmp_path,
            1,
            NONCE,
            owners=1,
            arrays={"w": ((8,), "float32"), "p1": ((1,), "float32")},
            about={},
        )
    assert caught.value.action == "publish the checkpoint generation at"
    assert published(tmp_path) == []


def test_pointing_refused_by_the_system_leaves_the_old_pointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path, 1)
    second = save(tmp_path / "elsewhere", 2)
    before = (tmp_path / POINTER).read_bytes()
    monkeypatch.setattr(os, "replace", refusing(errno.EROFS))
    digest = open_generation(second).manifest_sha256
    with pytest.raises(CheckpointWriteFailed, match="Read-only file system") as caught:
        move_pointer(tmp_path, second.name, digest)
    assert caught.value.path == str(tmp_path / POINTER)
    assert caught.value.action == "point"
    assert (tmp_path / POINTER).read_bytes() == before


def test_a_folder_that_takes_no_file_is_found_before_the_first_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", refusing(errno.EROFS))
    with pytest.raises(CheckpointWriteFailed, match="Read-only file system"):
        check_room(tmp_path, {"w": ((8,), "float32")}, 1)
    assert list(tmp_path.iterdir()) == []  # the probe went again


def test_a_folder_without_room_for_a_generation_is_found_before_the_first_round(
    tmp_path: Path,
) -> None:
    check_room(tmp_path, {"w": ((8,), "float32")}, 1)
    huge = {"w": ((MAX_ELEMENTS,), "float64")}
    with pytest.raises(CheckpointWriteFailed, match="No space left on device") as caught:
        check_room(tmp_path, huge, 4)
    assert caught.value.errno == errno.ENOSPC and "bytes free" in str(caught.value)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> object:
    """A 64 KiB tmpfs (``mount`` needs root; skipped where it is not permitted)."""
    yield from mount_tmpfs(tmp_path / "tmpfs", "size=64k")


def test_a_full_file_system_refuses_staging_with_enospc(small_tmpfs: Path) -> None:
    staged = staged_folder(small_tmpfs, 1, NONCE)
    big = {"w": np.zeros(64 * 1024, "float32")}  # 256 KiB into 64 KiB
    with pytest.raises(CheckpointWriteFailed, match="No space left on device") as caught:
        write_shards(staged, 0, parts_of(big, {"w": (0, big["w"].size)}))
    assert caught.value.errno == errno.ENOSPC
    with pytest.raises(CheckpointWriteFailed, match="No space left on device"):
        check_room(small_tmpfs, {"w": ((64 * 1024,), "float32")}, 1)


# --- removals: out of sight first, never another writer's ------------------------------------


def test_a_removal_killed_half_way_leaves_nothing_that_reads_as_a_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = save(tmp_path, 1)
    save(tmp_path, 2)
    real = shutil.rmtree

    def dies_half_way(path: Path, *args: object, **kwargs: object) -> None:
        (Path(path) / MANIFEST).unlink()  # the manifests go first, the shards stay
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(shutil, "rmtree", dies_half_way)
    failures = prune(tmp_path, keep=1)
    assert len(failures) == 1 and "Input/output error" in failures[0]
    hidden = tmp_path / f"{REMOVING_PREFIX}{first.name}"
    assert hidden.is_dir() and not first.exists()
    assert [p.name for p in published(tmp_path)] == [open_generation(tmp_path).path.name]
    open_generation(tmp_path).verify()
    # The next prune finishes the removal.
    monkeypatch.setattr(shutil, "rmtree", real)
    assert prune(tmp_path, keep=1) == []
    assert not hidden.exists()


def test_prune_never_touches_another_plans_generations_nor_staged_ones(tmp_path: Path) -> None:
    theirs = save(tmp_path, 1, about={"plan_sha256": "a" * 64}, nonce="aaaaaaaa")
    staged = staged_folder(tmp_path, 3, "bbbbbbbb")
    write_shards(staged, 0, parts_of(state(8), {"w": (0, 8)}))
    mine = [save(tmp_path, r, about={"plan_sha256": "c" * 64}) for r in (2, 4, 6)]
    assert prune(tmp_path, keep=1, plan_sha256="c" * 64) == []
    assert theirs.is_dir() and staged.is_dir() and mine[2].is_dir()
    assert not mine[0].exists() and not mine[1].exists()


def test_a_failed_segment_removes_only_its_own_staged_generations(tmp_path: Path) -> None:
    for nonce in ("aaaaaaaa", "bbbbbbbb"):
        for round_ in (3, 8, 120_000):
            write_shards(
                staged_folder(tmp_path, round_, nonce), 0, parts_of(state(8), {"w": (0, 8)})
            )
    published_one = save(tmp_path, 5, nonce="aaaaaaaa")  # its own, published: kept
    # Names that are not a staged generation of its own, as staged_folder spells them: kept.
    odd = [
        f"gen-0000000003-aaaaaaaa{STAGED_SUFFIX}",  # another spelling of round 3
        f"gen-000000004-aaaaaaaa{STAGED_SUFFIX}.x",
        f"gen-000000004-AAAAAAAA{STAGED_SUFFIX}",
    ]
    for name in odd:
        (tmp_path / name).mkdir()
    (tmp_path / staged_folder(tmp_path, 6, "aaaaaaaa").name).write_text("a file, not a folder")
    (tmp_path / staged_folder(tmp_path, 7, "aaaaaaaa").name).symlink_to(published_one)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert remove_staged(tmp_path, "aaaaaaaa") == []
    removed = {staged_folder(tmp_path, r, "aaaaaaaa").name for r in (3, 8, 120_000)}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(before) - removed)
    assert published_one.is_dir() and published_one.resolve() == published_one
    assert remove_staged(tmp_path, "aaaaaaaa") == []  # nothing left of its own: nothing done
    assert remove_staged(tmp_path / "missing", "aaaaaaaa") == []


# --- a generation says what it is ------------------------------------------------------------

RECORDED: dict[str, object] = {
    "run": "a",
    "rate": 0.1,
    "seed": 1,
    "batch": 8,
    "holdout": 0.2,
    "contributors": None,
    "membership": {"group": "(group (stride 0 1 4))", "epoch": 0},
    "topology": {"shape": "tree", "fanout": 2},
}


def test_each_differing_field_is_named_and_only_the_listed_ones_pass() -> None:
    now = {**RECORDED, "rate": 0.2, "seed": 2, "batch": 16}
    refused, changed = identity_changes(RECORDED, now, ())
    assert refused == {"rate": (0.1, 0.2), "seed": (1, 2), "batch": (8, 16)} and changed == {}
    refused, changed = identity_changes(RECORDED, now, ("rate",))
    assert sorted(refused) == ["batch", "seed"] and changed == {"rate": (0.1, 0.2)}
    assert identity_changes(RECORDED, RECORDED, ()) == ({}, {})
    # A generation that records nothing of its plan differs in every field.
    refused, _ = identity_changes({}, RECORDED, ())
    assert sorted(refused) == sorted(RECORDED)


def test_with_the_same_contributors_the_role_count_may_change_unlisted() -> None:
    recorded = {**RECORDED, "contributors": 4}
    now = {
        **recorded,
        "membership": {"group": "(group (stride 0 1 7))", "epoch": 0},
        "topology": {"shape": "tree", "fanout": 3},
    }
    refused, changed = identity_changes(recorded, now, ())
    assert refused == {} and set(changed) == FREE_WITH_CONTRIBUTORS
    # Without contributors the same change is another plan.
    refused, _ = identity_changes({**RECORDED}, {**now, "contributors": None}, ())
    assert set(refused) == FREE_WITH_CONTRIBUTORS


def test_a_segment_record_pins_the_identity_by_digest() -> None:
    one = json.loads(segment_record(RECORDED))
    two = json.loads(segment_record({**RECORDED, "rate": 0.2}, {"rate": (0.1, 0.2)}))
    assert one["run"] == "a" and one["plan"] == RECORDED and one["changed"] == []
    assert one["plan_sha256"] != two["plan_sha256"]
    assert two["changed"] == [{"field": "rate", "was": 0.1, "now": 0.2}]
