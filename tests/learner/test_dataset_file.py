"""learner/data.py's ``load_dataset``: a ``.npz`` data set of the user's (x, y, optional
classes), read only when its bytes hash to the plan's pin, its arrays checked and every refusal
a PlanInvalid at the field to mend (docs/data.md, "A data set of your own"); and the general
shard's split, encoding and decoding for features of any storage dtype."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from alpha.errors import PlanInvalid
from alpha.learner.data import (
    MAX_CLASSES,
    STORAGE_DTYPES,
    Dataset,
    decode_shard,
    encode_shard,
    features,
    load_dataset,
    split,
)
from tests.support import raises_exactly

DATASET = "learner.dataset"
PIN = "learner.dataset_sha256"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def saved(path: Path, **arrays: Any) -> Path:
    """``arrays`` saved as a .npz at ``path`` (numpy.savez, as docs/data.md says)."""
    with path.open("wb") as out:
        np.savez(out, **arrays)
    return path


def loaded(path: Path) -> Dataset:
    return load_dataset(path, sha256(path), "mine.npz")


def refused(path: Path, pin: str | None = None) -> PlanInvalid:
    return raises_exactly(PlanInvalid, load_dataset, path, pin or sha256(path), "mine.npz")


X = np.arange(24, dtype=np.float32).reshape(8, 3) / np.float32(4)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], dtype=np.int64)


# --- a good file ----------------------------------------------------------------------------


def test_a_good_file_is_read_whole(tmp_path: Path) -> None:
    found = loaded(saved(tmp_path / "mine.npz", x=X, y=Y))
    assert type(found) is Dataset
    assert found.x.dtype == np.float32 and found.x.tobytes() == X.tobytes()
    assert found.labels.dtype == np.uint8 and found.labels.tolist() == Y.tolist()
    assert (found.classes, found.divisor, found.name) == (3, 1, "mine.npz")
    assert (found.samples, found.features) == (8, 3)
    assert not found.x.flags.writeable and not found.labels.flags.writeable


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
def test_every_storage_dtype_of_x_is_kept(tmp_path: Path, dtype: str) -> None:
    x = (np.arange(12) % 7).astype(dtype).reshape(4, 3)
    found = loaded(saved(tmp_path / "mine.npz", x=x, y=np.array([0, 1, 1, 0])))
    assert found.x.dtype == np.dtype(dtype) and found.x.tobytes() == x.tobytes()


@pytest.mark.parametrize(
    "y_dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
)
def test_labels_of_any_integer_type_become_uint8(tmp_path: Path, y_dtype: str) -> None:
    found = loaded(saved(tmp_path / "mine.npz", x=X, y=Y.astype(y_dtype)))
    assert found.labels.dtype == np.uint8 and found.labels.tolist() == Y.tolist()


@pytest.mark.parametrize(
    ("y", "classes", "expected", "dtype"),
    [
        ([0, 0, 0, 0], None, 2, np.uint8),  # at least 2 classes
        ([0, 1, 1, 0], None, 2, np.uint8),
        ([0, 3, 1, 0], None, 4, np.uint8),
        ([0, 1, 1, 0], 7, 7, np.uint8),
        ([0, 0, 0, 0], 1, 2, np.uint8),
        ([0, 255, 1, 0], None, 256, np.uint8),  # the most uint8 labels hold
        ([0, 256, 1, 0], None, 257, np.uint16),
        ([0, 1, 1, 0], 257, 257, np.uint16),
        ([0, MAX_CLASSES - 1, 1, 0], None, MAX_CLASSES, np.uint16),
        ([0, 1, 1, 0], MAX_CLASSES, MAX_CLASSES, np.uint16),
    ],
)
def test_classes_default_to_the_largest_label_plus_one_and_set_the_label_type(
    tmp_path: Path, y: list[int], classes: int | None, expected: int, dtype: type
) -> None:
    arrays: dict[str, Any] = {"x": X[:4], "y": np.array(y, np.int64)}
    if classes is not None:
        arrays["classes"] = np.int64(classes)
    found = loaded(saved(tmp_path / "mine.npz", **arrays))
    assert found.classes == expected
    assert found.labels.dtype == dtype and found.labels.tolist() == y


def test_a_compressed_file_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "mine.npz"
    with path.open("wb") as out:
        np.savez_compressed(out, x=X, y=Y)
    assert loaded(path).x.tobytes() == X.tobytes()


# --- refusals, each at its field ------------------------------------------------------------


def test_a_wrong_digest_is_refused_at_the_pin_before_the_file_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "mine.npz"
    path.write_bytes(b"not even a zip")
    real = sha256(path)
    wrong = ("1" if real[0] == "0" else "0") + real[1:]
    error = refused(path, wrong)
    assert error.field == PIN
    assert real in error.message and wrong in error.message
    # A good file pinned wrong: the same.
    good = saved(tmp_path / "good.npz", x=X, y=Y)
    assert refused(good, "0" * 64).field == PIN


@pytest.mark.parametrize(
    ("arrays", "said"),
    [
        ({"y": Y}, "missing x"),
        ({"x": X}, "missing y"),
        ({}, "missing x, y"),
        ({"x": X, "y": Y, "weights": Y}, "unknown weights"),
        ({"x": X, "y": Y, "classes": np.int64(3), "z": Y}, "unknown z"),
    ],
    ids=["no-x", "no-y", "empty", "extra", "extra-with-classes"],
)
def test_keys_other_than_x_y_and_classes_are_refused(
    tmp_path: Path, arrays: dict[str, Any], said: str
) -> None:
    error = refused(saved(tmp_path / "mine.npz", **arrays))
    assert error.field == DATASET
    assert said in error.message


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (X[:, 0], Y),  # x 1-d
        (X.reshape(8, 3, 1), Y),  # x 3-d
        (X.astype(np.int64), Y),
        (X.astype(np.uint32), Y),
        (X.astype(np.float16), Y),
        (X.astype(np.complex64), Y),
        (X > 1, Y),  # bool
        (np.where(X > 2, np.nan, X), Y),
        (np.where(X > 2, np.inf, X).astype(np.float64), Y),
        (np.where(X > 2, -np.inf, X), Y),
        (X[:0], Y[:0]),  # no samples
        (np.zeros((8, 0), np.float32), Y),  # no features
        (X, Y[:7]),  # one label short
        (X, np.concatenate([Y, Y[:1]])),  # one too many
    ],
    ids=[
        "x-1d",
        "x-3d",
        "x-int64",
        "x-uint32",
        "x-float16",
        "x-complex",
        "x-bool",
        "x-nan",
        "x-inf",
        "x-minus-inf",
        "no-samples",
        "no-features",
        "y-short",
        "y-long",
    ],
)
def test_arrays_that_are_no_data_set_are_refused(tmp_path: Path, x: Any, y: Any) -> None:
    assert refused(saved(tmp_path / "mine.npz", x=x, y=y)).field == DATASET


@pytest.mark.parametrize(
    "y",
    [
        np.array([0, -1, 2, 1, 0, 2, 2, 1]),
        Y.astype(np.float64),
        Y.astype(np.float32),
        Y > 0,
        Y.reshape(8, 1),
        Y.reshape(2, 4),
        np.array([0, 70000, 1, 0, 0, 0, 0, 0]),  # past MAX_CLASSES - 1
        np.array(["a"] * 8),
    ],
    ids=["negative", "float64", "float32", "bool", "column", "matrix", "past-max", "str"],
)
def test_labels_that_are_not_integers_from_0_are_refused(tmp_path: Path, y: Any) -> None:
    assert refused(saved(tmp_path / "mine.npz", x=X, y=y)).field == DATASET


@pytest.mark.parametrize("classes", [256, MAX_CLASSES])
def test_a_negative_label_is_refused_whatever_classes_says(tmp_path: Path, classes: int) -> None:
    # -1 as uint8 is 255 and as uint16 65535: below classes, so only its sign refuses it.
    y = np.array([0, -1, 2, 1, 0, 2, 2, 1], np.int64)
    error = refused(saved(tmp_path / "mine.npz", x=X, y=y, classes=np.int64(classes)))
    assert error.field == DATASET
    assert "y must be a 1-d array of integers from 0" in error.message


@pytest.mark.parametrize(
    "classes",
    [
        np.int64(2),  # below the largest label plus one (3)
        np.int64(0),
        np.int64(-3),
        np.int64(MAX_CLASSES + 1),
        np.float64(3.0),
        np.array([3]),
        np.bool_(True),
        np.uint64(2**64 - 1),
    ],
    ids=["too-small", "zero", "negative", "past-max", "float", "1d", "bool", "huge"],
)
def test_classes_must_be_one_integer_above_every_label(tmp_path: Path, classes: Any) -> None:
    error = refused(saved(tmp_path / "mine.npz", x=X, y=Y, classes=classes))
    assert error.field == DATASET
    assert "classes must be one integer" in error.message


@pytest.mark.parametrize(
    "content",
    [b"", b"not a zip at all", b"PK\x03\x04truncated", b"\x93NUMPY"],
    ids=["empty", "text", "zip-header", "npy-magic"],
)
def test_a_file_that_is_not_an_npz_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "mine.npz"
    path.write_bytes(content)
    error = refused(path)
    assert error.field == DATASET
    assert "is not a .npz of arrays" in error.message


def test_a_zip_holding_something_else_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mine.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", b"this is no array")
        archive.writestr("y.npy", b"nor this")
    error = refused(path)
    assert error.field == DATASET
    assert "x, y" in error.message and "not arrays" in error.message


def test_one_array_saved_as_npy_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mine.npz"
    with path.open("wb") as out:
        np.save(out, X)  # numpy.save, not numpy.savez: one array, no names
    error = refused(path)
    assert error.field == DATASET
    assert "is not a .npz of arrays" in error.message


class _Unpickled:
    """Unpickling this makes the folder its marker names: the sign a file was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (str(self.marker),))


@pytest.mark.parametrize("key", ["x", "y", "classes"])
def test_an_object_array_is_refused_without_being_unpickled(tmp_path: Path, key: str) -> None:
    marker = tmp_path / "unpickled"
    arrays: dict[str, Any] = {"x": X, "y": Y}
    arrays[key] = np.array([_Unpickled(marker)] * (8 if key != "classes" else 1), dtype=object)
    path = saved(tmp_path / "mine.npz", **arrays)
    error = refused(path)
    assert error.field == DATASET
    assert not marker.exists()
    # The file does unpickle to the marker: refusing it is what kept it from running.
    with np.load(path, allow_pickle=True) as unsafe:
        unsafe[key]
    assert marker.is_dir()


def test_a_missing_file_or_a_folder_is_refused(tmp_path: Path) -> None:
    error = raises_exactly(PlanInvalid, load_dataset, tmp_path / "absent.npz", "0" * 64, "x")
    assert error.field == DATASET
    assert "cannot read the data set" in error.message
    (tmp_path / "folder.npz").mkdir()
    error = raises_exactly(PlanInvalid, load_dataset, tmp_path / "folder.npz", "0" * 64, "x")
    assert error.field == DATASET


# --- the general shard: split, encoded, decoded ---------------------------------------------


@st.composite
def datasets(draw: st.DrawFn) -> Dataset:
    dtype = draw(st.sampled_from([np.float32, np.int16]))
    samples, width = draw(st.integers(2, 40)), draw(st.integers(1, 6))
    elements = (
        st.floats(width=32, allow_nan=False, allow_infinity=False)
        if dtype is np.float32
        else st.integers(-(2**15), 2**15 - 1)
    )
    x = draw(hnp.arrays(dtype, (samples, width), elements=elements))
    classes = draw(st.integers(2, 600))
    labels = draw(hnp.arrays(np.uint16, (samples,), elements=st.integers(0, classes - 1)))
    return Dataset(x, labels, classes=classes, divisor=1, name="mine.npz")


@settings(max_examples=100, deadline=None)
@given(datasets(), st.data())
def test_a_split_deals_every_training_sample_once_and_each_shard_round_trips(
    dataset: Dataset, data: st.DataObject
) -> None:
    holdout = data.draw(st.sampled_from([0.1, 0.2, 0.5]))
    trained = dataset.samples - int(np.ceil(holdout * dataset.samples))
    participants = data.draw(st.integers(1, max(1, trained)))
    seed = data.draw(st.integers(0, 2**64 - 1))
    parts = split(dataset, participants=participants, holdout=holdout, seed=seed)
    assert parts.train_x.dtype == dataset.x.dtype
    assert parts.train_x.tobytes() == dataset.x[parts.train_indices].tobytes()
    dealt_x, dealt_labels = [], []
    for role in range(participants):
        x, labels = parts.shard(role)
        encoded = json.loads(json.dumps(encode_shard(x, labels)))
        assert (encoded["dtype"], encoded["features"]) == (dataset.x.dtype.name, dataset.features)
        back_x, back_labels = decode_shard(encoded)
        assert back_x.dtype == x.dtype and back_x.tobytes() == x.tobytes()
        assert back_labels.dtype == np.uint16 and back_labels.tolist() == labels.tolist()
        dealt_x.append(back_x)
        dealt_labels.append(back_labels)
    # Round-robin: training position i is role i % participants's.
    for position in range(len(parts.train_indices)):
        role, index = position % participants, position // participants
        assert dealt_x[role][index].tobytes() == parts.train_x[position].tobytes()
        assert dealt_labels[role][index] == parts.train_labels[position]
    held = encode_shard(parts.holdout_x, parts.holdout_labels)
    assert decode_shard(held)[0].tobytes() == parts.holdout_x.tobytes()


@settings(max_examples=100, deadline=None)
@given(datasets(), st.sampled_from(["float32", "float64"]))
def test_features_of_a_file_are_x_converted_once(dataset: Dataset, dtype: str) -> None:
    found = features(dataset.x, dtype, dataset.divisor)
    assert found.dtype == np.dtype(dtype)
    assert found.tobytes() == dataset.x.astype(dtype).tobytes()
