"""The digits data set: the pinned file, the split among roles, batches, shards and features."""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import json
import math
import pathlib
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import alpha.learner as learner_package
import alpha.learner.data as data_module
from alpha.errors import ArtifactInvalid, PlanInvalid, RoleOutOfRange
from alpha.learner.data import (
    DIGITS_CLASSES,
    DIGITS_ENV,
    DIGITS_FEATURES,
    DIGITS_SAMPLES,
    DIGITS_SHA256,
    MAX_SEED,
    Dataset,
    Split,
    batch_indices,
    decode_shard,
    encode_shard,
    features,
    holdout_count,
    load_digits,
    shipped_digits,
    split,
)
from tests.support import ROOT

DATA = ROOT / "alpha" / "data" / "digits"
DIGITS_FILE = DATA / "digits.csv.gz"
LICENSE = DATA / "LICENSE-digits.txt"
DOCS = ROOT / "docs" / "data.md"

#: Known answers, computed once with numpy 2.4 and pinned: they must never change, because the
#: replicated and the distributed learner agree only if every machine computes them alike.
SEED7_FIRST5: list[int] = [1041, 382, 1139, 1206, 54]
SHARD0_PIXELS_SHA256 = "3eda93cd3a4563d012d221a5f78a30603f9ef6934af1eb527b0120373135d0cf"
SHARD0_LABELS_SHA256 = "2d8f4dcc39552f8db207269b3d33fb8f9cbb6b507c6533c8adb3b610d91cb83c"
#: PCG64(7)'s first two raw 64-bit outputs: pins the bit generator and its seeding.
PCG64_SEED7_RAW2: list[int] = [11530976094092348043, 16550673365885938325]


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_digits()


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads the shipped copy unless it sets ALPHA_DIGITS itself."""
    monkeypatch.delenv(DIGITS_ENV, raising=False)


def refused(cls: type[Exception], call: Callable[[], object]) -> Exception:
    """The exception ``call`` raises, asserting that it is exactly ``cls``."""
    with pytest.raises(cls) as info:
        call()
    assert type(info.value) is cls
    return info.value


def plan_field(call: Callable[[], object]) -> str:
    """The field of the PlanInvalid (exactly that class) that ``call`` raises."""
    error = refused(PlanInvalid, call)
    assert isinstance(error, PlanInvalid)
    return error.field


# --- the file -------------------------------------------------------------------------------


def test_file_hash_is_pinned() -> None:
    raw = DIGITS_FILE.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == DIGITS_SHA256
    assert len(raw) == 57523


def test_the_shipped_copy_is_package_data() -> None:
    # importlib.resources finds it inside the package, in a checkout as in an installed wheel.
    assert shipped_digits() == DIGITS_FILE
    assert shipped_digits().is_file()


def test_license_names_origin_licence_and_hash() -> None:
    text = LICENSE.read_text(encoding="utf-8")
    for needle in (
        "UCI Machine Learning Repository",
        "Alpaydin",
        "Kaynak",
        "1998",
        "10.24432/C50P49",
        "CC BY 4.0",
        "Creative Commons Attribution 4.0 International",
        "BSD-3-Clause",
        DIGITS_SHA256,
    ):
        assert needle in text, needle


def test_shapes_dtypes_and_ranges(digits: Dataset) -> None:
    assert digits.x.shape == (DIGITS_SAMPLES, DIGITS_FEATURES)
    assert digits.labels.shape == (DIGITS_SAMPLES,)
    assert digits.x.dtype == np.uint8
    assert digits.labels.dtype == np.uint8
    assert digits.samples == DIGITS_SAMPLES
    assert int(digits.x.max()) == 16
    assert int(digits.x.min()) == 0
    assert set(np.unique(digits.labels).tolist()) == set(range(DIGITS_CLASSES))


def test_classes_roughly_balanced(digits: Dataset) -> None:
    counts = np.bincount(digits.labels, minlength=DIGITS_CLASSES)
    assert counts.shape == (DIGITS_CLASSES,)
    assert all(170 <= int(c) <= 190 for c in counts), counts.tolist()
    assert int(counts.sum()) == DIGITS_SAMPLES


def test_parse_agrees_with_the_csv_module(digits: Dataset) -> None:
    text = gzip.decompress(DIGITS_FILE.read_bytes()).decode("ascii")
    rows = [[int(v) for v in row] for row in csv.reader(io.StringIO(text))]
    table = np.array(rows, dtype=np.int64)
    assert np.array_equal(digits.x, table[:, :64])
    assert np.array_equal(digits.labels, table[:, 64])
    # The first sample, spelled out: a zero.
    assert digits.labels[0] == 0
    assert digits.x[0, :8].tolist() == [0, 0, 5, 13, 9, 1, 0, 0]


def test_digits_is_frozen_and_read_only(digits: Dataset) -> None:
    with pytest.raises(ValueError):
        digits.x[0, 0] = 1
    with pytest.raises(ValueError):
        digits.labels[0] = 1
    with pytest.raises(AttributeError):
        digits.x = digits.x  # type: ignore[misc]


def test_load_from_an_explicit_path(tmp_path: pathlib.Path, digits: Dataset) -> None:
    copy = tmp_path / "copy.csv.gz"
    shutil.copyfile(DIGITS_FILE, copy)
    again = load_digits(copy)
    assert np.array_equal(again.x, digits.x)
    assert np.array_equal(again.labels, digits.labels)


def test_missing_file_refused(tmp_path: pathlib.Path) -> None:
    error = refused(PlanInvalid, lambda: load_digits(tmp_path / "nope.csv.gz"))
    assert isinstance(error, PlanInvalid)
    assert error.field == "learner.dataset"
    assert str(error) == (
        f"learner.dataset: the digits data set {str(tmp_path / 'nope.csv.gz')!r} is missing; "
        f"name an unchanged copy of the digits data set (SHA-256 {DIGITS_SHA256})"
    )


def test_missing_shipped_copy_says_how_to_restore_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pip user is told to reinstall, a checkout to restore the file, either to set the override.
    monkeypatch.setattr(data_module, "shipped_digits", lambda: tmp_path / "gone.csv.gz")
    error = refused(PlanInvalid, load_digits)
    message = str(error)
    assert f"{str(tmp_path / 'gone.csv.gz')!r} (shipped with alpha) is missing" in message
    assert "pip install --force-reinstall --no-deps" in message
    assert "git checkout -- alpha/data/digits/digits.csv.gz" in message
    assert (
        f"set ALPHA_DIGITS to an unchanged copy of the digits data set (SHA-256 {DIGITS_SHA256})"
        in message
    )
    assert "alpha/data/digits/LICENSE-digits.txt" in message


# --- the override: ALPHA_DIGITS -------------------------------------------------------------


def test_override_names_a_copy(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, digits: Dataset
) -> None:
    copy = tmp_path / "elsewhere.csv.gz"
    shutil.copyfile(DIGITS_FILE, copy)
    monkeypatch.setenv("ALPHA_DIGITS", str(copy))
    # The shipped copy is not read at all: only the named one.
    monkeypatch.setattr(data_module, "shipped_digits", lambda: tmp_path / "gone.csv.gz")
    again = load_digits()
    assert np.array_equal(again.x, digits.x)
    assert np.array_equal(again.labels, digits.labels)


def test_empty_override_reads_the_shipped_copy(
    monkeypatch: pytest.MonkeyPatch, digits: Dataset
) -> None:
    monkeypatch.setenv("ALPHA_DIGITS", "")
    assert np.array_equal(load_digits().x, digits.x)


def test_an_explicit_path_wins_over_the_override(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALPHA_DIGITS", str(tmp_path / "gone.csv.gz"))
    assert load_digits(DIGITS_FILE).samples == DIGITS_SAMPLES


def test_override_with_another_file_refused(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = bytearray(DIGITS_FILE.read_bytes())
    raw[-1] ^= 1
    bad = tmp_path / "digits.csv.gz"
    bad.write_bytes(bytes(raw))
    monkeypatch.setenv("ALPHA_DIGITS", str(bad))
    error = refused(PlanInvalid, load_digits)
    assert isinstance(error, PlanInvalid)
    assert error.field == "learner.dataset"
    assert str(error) == (
        f"learner.dataset: the digits data set {str(bad)!r} (named by ALPHA_DIGITS) is not the "
        f"file this Alpha pins: its SHA-256 is {hashlib.sha256(bytes(raw)).hexdigest()}, "
        f"expected {DIGITS_SHA256}; set ALPHA_DIGITS to an unchanged copy of the digits data "
        f"set (SHA-256 {DIGITS_SHA256}), or unset it to read the copy shipped with alpha"
    )


def test_override_naming_no_file_refused(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALPHA_DIGITS", str(tmp_path / "nope.csv.gz"))
    error = refused(PlanInvalid, load_digits)
    assert f"{str(tmp_path / 'nope.csv.gz')!r} (named by ALPHA_DIGITS) is missing" in str(error)
    monkeypatch.setenv("ALPHA_DIGITS", str(tmp_path))  # a folder: cannot be read
    error = refused(PlanInvalid, load_digits)
    assert str(error).startswith(
        f"learner.dataset: cannot read the digits data set {str(tmp_path)!r} (named by "
        "ALPHA_DIGITS): "
    )


def test_unreadable_path_refused(tmp_path: pathlib.Path) -> None:
    assert plan_field(lambda: load_digits(tmp_path)) == "learner.dataset"


def test_wrong_hash_refused(tmp_path: pathlib.Path) -> None:
    raw = bytearray(DIGITS_FILE.read_bytes())
    raw[-1] ^= 1
    bad = tmp_path / "digits.csv.gz"
    bad.write_bytes(bytes(raw))
    error = refused(PlanInvalid, lambda: load_digits(bad))
    assert isinstance(error, PlanInvalid)
    assert error.field == "learner.dataset"
    assert DIGITS_SHA256 in str(error)
    assert hashlib.sha256(bytes(raw)).hexdigest() in str(error)


def test_same_content_recompressed_is_refused(tmp_path: pathlib.Path) -> None:
    # The pin is on the file's bytes, not on what it decompresses to.
    text = gzip.decompress(DIGITS_FILE.read_bytes())
    other = tmp_path / "digits.csv.gz"
    other.write_bytes(gzip.compress(text, compresslevel=1, mtime=0))
    assert plan_field(lambda: load_digits(other)) == "learner.dataset"


@pytest.mark.parametrize(
    ("pixels", "labels"),
    [
        (np.zeros((2, 64), np.int64), np.zeros(2, np.uint8)),
        (np.zeros((2, 64), np.uint8), np.zeros(2, np.int32)),
        (np.zeros((2, 63), np.uint8), np.zeros(2, np.uint8)),
        (np.zeros((2, 64), np.uint8), np.zeros(3, np.uint8)),
        (np.zeros((0, 64), np.uint8), np.zeros(0, np.uint8)),
        (np.full((2, 64), 17, np.uint8), np.zeros(2, np.uint8)),
        (np.zeros((2, 64), np.uint8), np.full(2, 10, np.uint8)),
    ],
)
def test_digits_refuses_malformed_arrays(pixels: Any, labels: Any) -> None:
    assert plan_field(lambda: Dataset(pixels, labels)) == "learner.dataset"


# --- the split ------------------------------------------------------------------------------


def reference_permutation(n: int, seed: int) -> list[int]:
    """docs/data.md's permutation, from PCG64's raw 64-bit outputs, in plain Python."""
    bits = np.random.PCG64(seed)
    pending: list[int] = []

    def next32() -> int:
        if pending:
            return pending.pop()
        word = int(bits.random_raw())
        pending.append(word >> 32)
        return word & 0xFFFFFFFF

    order = list(range(n))
    for i in range(n - 1, 0, -1):
        mask = (1 << i.bit_length()) - 1
        j = next32() & mask
        while j > i:
            j = next32() & mask
        order[i], order[j] = order[j], order[i]
    return order


def test_pcg64_raw_stream_pinned() -> None:
    assert np.random.PCG64(7).random_raw(2).tolist() == PCG64_SEED7_RAW2


@pytest.mark.parametrize("seed", [0, 7, 2**32, MAX_SEED])
def test_permutation_is_the_documented_algorithm(seed: int) -> None:
    numpy_order = np.random.Generator(np.random.PCG64(seed)).permutation(DIGITS_SAMPLES)
    assert numpy_order.tolist() == reference_permutation(DIGITS_SAMPLES, seed)


def test_known_answer(digits: Dataset) -> None:
    order = np.random.Generator(np.random.PCG64(7)).permutation(DIGITS_SAMPLES)
    assert order[:5].tolist() == SEED7_FIRST5
    parts = split(digits, participants=8, holdout=0.2, seed=7)
    assert parts.train_indices[:5].tolist() == SEED7_FIRST5
    pixels, labels = parts.shard(0)
    assert pixels.shape == (180, 64)
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == SHARD0_PIXELS_SHA256
    assert hashlib.sha256(labels.tobytes()).hexdigest() == SHARD0_LABELS_SHA256


def test_holdout_count() -> None:
    # 0.2 * 1797 is 359.40000000000003 as a double: 360 held out.
    assert holdout_count(DIGITS_SAMPLES, 0.2) == 360
    assert holdout_count(DIGITS_SAMPLES, 0.5) == 899
    assert holdout_count(100, 0.07) == 8  # 0.07 * 100 is 7.000000000000001 as a double
    assert holdout_count(DIGITS_SAMPLES, 1e-9) == 1


@pytest.mark.parametrize(
    ("participants", "holdout", "seed"), [(1, 0.2, 0), (8, 0.2, 7), (13, 0.5, 3), (1437, 0.2, 9)]
)
def test_split_is_a_partition(
    digits: Dataset, participants: int, holdout: float, seed: int
) -> None:
    parts = split(digits, participants=participants, holdout=holdout, seed=seed)
    assert type(parts) is Split
    held = math.ceil(holdout * DIGITS_SAMPLES)
    assert parts.holdout_indices.shape == (held,)
    assert parts.train_indices.shape == (DIGITS_SAMPLES - held,)
    assert parts.train_indices.dtype == np.int64
    both = np.concatenate([parts.train_indices, parts.holdout_indices])
    assert sorted(both.tolist()) == list(range(DIGITS_SAMPLES))
    assert not set(parts.train_indices.tolist()) & set(parts.holdout_indices.tolist())
    order = np.random.Generator(np.random.PCG64(seed)).permutation(DIGITS_SAMPLES)
    assert np.array_equal(both, order)
    assert np.array_equal(parts.train_x, digits.x[parts.train_indices])
    assert np.array_equal(parts.train_labels, digits.labels[parts.train_indices])
    assert np.array_equal(parts.holdout_x, digits.x[parts.holdout_indices])
    assert np.array_equal(parts.holdout_labels, digits.labels[parts.holdout_indices])
    for array in (parts.train_x, parts.train_labels, parts.holdout_x):
        assert array.dtype == np.uint8
        assert not array.flags.writeable


@pytest.mark.parametrize("participants", [1, 2, 3, 8, 13, 100])
def test_shards_partition_the_training_part(digits: Dataset, participants: int) -> None:
    parts = split(digits, participants=participants, holdout=0.2, seed=11)
    trained = parts.train_indices.shape[0]
    seen = np.zeros(trained, dtype=np.int64)
    for role in range(participants):
        pixels, labels = parts.shard(role)
        positions = np.arange(role, trained, participants)
        assert pixels.dtype == np.uint8
        assert labels.dtype == np.uint8
        assert pixels.flags.c_contiguous
        assert pixels.shape == (positions.shape[0], 64)
        assert pixels.shape[0] == math.ceil((trained - role) / participants) >= 1
        assert np.array_equal(pixels, parts.train_x[positions])
        assert np.array_equal(labels, parts.train_labels[positions])
        assert all(int(p) % participants == role for p in positions)
        seen[positions] += 1
    assert seen.tolist() == [1] * trained


def test_shard_is_a_copy(digits: Dataset) -> None:
    parts = split(digits, participants=1, holdout=0.2, seed=1)
    pixels, _ = parts.shard(0)
    before = int(parts.train_x[0, 0])
    pixels[0, 0] = 99
    assert int(parts.train_x[0, 0]) == before


def test_split_is_deterministic(digits: Dataset) -> None:
    a = split(digits, participants=5, holdout=0.2, seed=42)
    b = split(digits, participants=5, holdout=0.2, seed=42)
    for name in ("train_indices", "holdout_indices", "train_x", "holdout_labels"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert np.array_equal(a.shard(3)[0], b.shard(3)[0])
    c = split(digits, participants=5, holdout=0.2, seed=43)
    assert not np.array_equal(a.train_indices, c.train_indices)
    assert sorted(a.train_indices.tolist() + a.holdout_indices.tolist()) == sorted(
        c.train_indices.tolist() + c.holdout_indices.tolist()
    )


def test_shard_refuses_roles_out_of_range(digits: Dataset) -> None:
    parts = split(digits, participants=4, holdout=0.2, seed=0)
    refused(RoleOutOfRange, lambda: parts.shard(4))
    refused(RoleOutOfRange, lambda: parts.shard(-1))
    refused(RoleOutOfRange, lambda: parts.shard(True))


def test_split_refusals(digits: Dataset) -> None:
    trained = DIGITS_SAMPLES - 360

    def go(**changes: Any) -> Callable[[], object]:
        args: dict[str, Any] = {"participants": 4, "holdout": 0.2, "seed": 0, **changes}
        return lambda: split(digits, **args)

    assert split(digits, participants=trained, holdout=0.2, seed=0).shard(trained - 1)[0].shape
    assert plan_field(go(participants=trained + 1)) == "membership.group"
    assert plan_field(go(participants=0)) == "membership.group"
    assert plan_field(go(participants=True)) == "membership.group"
    assert plan_field(go(participants=2, holdout=0.9999)) == "membership.group"
    for holdout in (0.0, 1.0, -0.1, math.nan, math.inf, True, "0.2"):
        assert plan_field(go(holdout=holdout)) == "learner.holdout"
    for seed in (-1, MAX_SEED + 1, 1.0, True):
        assert plan_field(go(seed=seed)) == "learner.seed"


# --- batches --------------------------------------------------------------------------------


def test_batch_indices_wrap_around() -> None:
    assert batch_indices(10, 4, 0).tolist() == [0, 1, 2, 3]
    assert batch_indices(10, 4, 1).tolist() == [4, 5, 6, 7]
    assert batch_indices(10, 4, 2).tolist() == [8, 9, 0, 1]
    assert batch_indices(3, 7, 0).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert batch_indices(3, 7, 1).tolist() == [1, 2, 0, 1, 2, 0, 1]
    assert batch_indices(1, 3, 5).tolist() == [0, 0, 0]
    assert batch_indices(10, 4, 0).dtype == np.int64


@settings(max_examples=200)
@given(st.integers(1, 5000), st.integers(1, 300), st.integers(0, 2**40))
def test_batch_indices_formula(size: int, batch: int, round: int) -> None:
    got = batch_indices(size, batch, round)
    assert got.dtype == np.int64
    assert got.tolist() == [(round * batch + j) % size for j in range(batch)]


def test_batch_indices_huge_round_does_not_overflow() -> None:
    round, batch, size = 2**32 - 1, 2**20, 1437
    assert batch_indices(size, batch, round)[:3].tolist() == [
        (round * batch + j) % size for j in range(3)
    ]


def test_batch_indices_refusals() -> None:
    assert plan_field(lambda: batch_indices(0, 4, 0)) == "membership.group"
    assert plan_field(lambda: batch_indices(10, 0, 0)) == "learner.batch"
    assert plan_field(lambda: batch_indices(10, 4, -1)) == "run.rounds"
    assert plan_field(lambda: batch_indices(10, True, 0)) == "learner.batch"


# --- shards in artifacts --------------------------------------------------------------------


@st.composite
def shards(draw: st.DrawFn) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    samples = draw(st.integers(1, 12))
    pixels = draw(st.binary(min_size=samples * 64, max_size=samples * 64))
    labels = draw(st.lists(st.integers(0, 9), min_size=samples, max_size=samples))
    pixel_array = (np.frombuffer(pixels, dtype=np.uint8) % 17).astype(np.uint8)
    return pixel_array.reshape(samples, 64), np.array(labels, dtype=np.uint8)


@given(shards())
def test_encode_decode_round_trip(
    shard: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]],
) -> None:
    pixels, labels = shard
    encoded = encode_shard(pixels, labels)
    assert set(encoded) == {"samples", "features", "dtype", "x", "labels", "sha256"}
    assert encoded["samples"] == pixels.shape[0]
    assert (encoded["features"], encoded["dtype"]) == (64, "uint8")
    wide = labels.astype("<u2").tobytes()
    assert encoded["sha256"] == hashlib.sha256(pixels.tobytes() + wide).hexdigest()
    # Through JSON, as it travels in an artifact's payload.
    back = json.loads(json.dumps(encoded, sort_keys=True, separators=(",", ":")))
    got_pixels, got_labels = decode_shard(back)
    assert got_pixels.dtype == np.uint8
    assert got_labels.dtype == np.uint16
    assert np.array_equal(got_pixels, pixels)
    assert np.array_equal(got_labels, labels)
    assert got_pixels.flags.writeable


def test_encode_is_c_order_and_exact(digits: Dataset) -> None:
    parts = split(digits, participants=8, holdout=0.2, seed=7)
    pixels, labels = parts.shard(0)
    encoded = encode_shard(np.asfortranarray(pixels), labels)
    assert base64.b64decode(str(encoded["x"])) == pixels.tobytes(order="C")
    assert encoded["samples"] == 180
    decoded = decode_shard(encoded)
    assert hashlib.sha256(decoded[0].tobytes()).hexdigest() == SHARD0_PIXELS_SHA256


def good_shard() -> dict[str, object]:
    pixels = np.arange(2 * 64, dtype=np.uint8).reshape(2, 64) % 17
    return encode_shard(pixels.astype(np.uint8), np.array([3, 9], dtype=np.uint8))


def rehashed(shard: dict[str, object]) -> dict[str, object]:
    """``shard`` with its sha256 recomputed from its (possibly changed) fields."""
    pixels = base64.b64decode(str(shard["x"]))
    labels = base64.b64decode(str(shard["labels"]))
    return {**shard, "sha256": hashlib.sha256(pixels + labels).hexdigest()}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize(
    "change",
    [
        lambda s: [s],
        lambda s: {k: v for k, v in s.items() if k != "sha256"},
        lambda s: {**s, "extra": 1},
        lambda s: {**s, "samples": True},
        lambda s: {**s, "samples": 2.0},
        lambda s: {**s, "samples": 0},
        lambda s: {**s, "samples": DIGITS_SAMPLES + 1},
        lambda s: {**s, "samples": 3},
        lambda s: {**s, "sha256": "0" * 64},
        lambda s: {**s, "sha256": str(s["sha256"]).upper()},
        lambda s: {**s, "sha256": str(s["sha256"])[:-1]},
        lambda s: {**s, "x": 5},
        lambda s: {**s, "x": str(s["x"])[:-4]},
        lambda s: {**s, "x": "é" + str(s["x"])},
        lambda s: {**s, "x": " " + str(s["x"])},
        lambda s: {**s, "labels": "AwX="},  # non-zero padding bits: not canonical
        lambda s: rehashed({**s, "labels": b64(b"\x03\x00")}),  # one label short
        lambda s: {**s, "features": 63},
        lambda s: {**s, "features": 0},
        lambda s: {**s, "dtype": "int64"},
        lambda s: {**s, "dtype": "uint16"},  # twice the bytes x holds
        lambda s: rehashed({**s, "dtype": "float32", "features": 32}),  # x as float32: finite?
    ],
)
def test_decode_refusals(change: Callable[[dict[str, object]], Any]) -> None:
    shard = good_shard()
    decode_shard(shard)
    refused(ArtifactInvalid, lambda: decode_shard(change(shard)))


def test_decode_refuses_a_flipped_byte() -> None:
    shard = good_shard()
    pixels = bytearray(base64.b64decode(str(shard["x"])))
    pixels[5] ^= 1
    error = refused(ArtifactInvalid, lambda: decode_shard({**shard, "x": b64(bytes(pixels))}))
    assert "hash" in str(error)


@pytest.mark.parametrize(
    ("pixels", "labels"),
    [
        (np.zeros((1, 64), np.int64), np.zeros(1, np.uint8)),
        (np.zeros((1, 64), np.uint8), np.zeros((1, 1), np.uint8)),
        (np.zeros((0, 64), np.uint8), np.zeros(0, np.uint8)),
        (np.full((1, 4), np.nan, np.float32), np.zeros(1, np.uint8)),
        (np.zeros((1, 64), np.uint8), np.zeros(1, np.int32)),
        ([[0] * 64], np.zeros(1, np.uint8)),
    ],
)
def test_encode_refusals(pixels: Any, labels: Any) -> None:
    refused(ArtifactInvalid, lambda: encode_shard(pixels, labels))


# --- features -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_features_are_exact(digits: Dataset, dtype: str) -> None:
    got = features(digits.x, dtype)
    assert got.dtype == np.dtype(dtype)
    assert got.shape == digits.x.shape
    assert np.array_equal(got, digits.x.astype(dtype) * np.dtype(dtype).type(0.0625))
    every = features(np.arange(256, dtype=np.uint8), dtype)
    assert [float(v) for v in every] == [k / 16 for k in range(256)]
    assert float(got.max()) == 1.0


def test_features_refusals(digits: Dataset) -> None:
    assert plan_field(lambda: features(digits.x, "float16")) == "contract.dtype"
    assert plan_field(lambda: features(digits.x, "uint8")) == "contract.dtype"
    pixels: Any = digits.x.astype(np.int64)
    assert plan_field(lambda: features(pixels, "float32")) == "learner.dataset"


# --- the package and the docs ---------------------------------------------------------------


def test_package_reexports() -> None:
    assert set(data_module.__all__) <= set(learner_package.__all__)
    for name in data_module.__all__:
        assert getattr(learner_package, name) is getattr(data_module, name)


def test_docs_pin_the_same_answers() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert DIGITS_SHA256 in text
    assert SHARD0_PIXELS_SHA256 in text
    assert ", ".join(map(str, SEED7_FIRST5)) in text
