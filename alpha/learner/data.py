"""The digits data set, its split among roles, and the compact form a role's shard travels in.

The data set is the UCI "Optical Recognition of Handwritten Digits" 8x8 set as scikit-learn
ships it (``alpha/data/digits/digits.csv.gz``, package data: 1797 samples, 64 pixels of 0..16,
a label 0..9). :func:`load_digits` is the one function here that reads anything: it reads that
copy, or the one :data:`DIGITS_ENV` names, and checks the file's SHA-256 against
:data:`DIGITS_SHA256` before it parses a byte. Everything else is pure and
deterministic, because the replicated learner and the distributed one must agree bit for bit
on which sample every role sees in every round:

* :func:`split` holds out the last ``ceil(holdout * N)`` samples of a seeded PCG64 permutation
  and deals the rest to roles round-robin (training position ``i`` goes to role
  ``i % participants``);
* :func:`batch_indices` names the positions of a role's shard used in one round, wrapping
  around the shard;
* :func:`encode_shard` / :func:`decode_shard` turn a role's shard into a JSON-able object
  (base64 and a SHA-256) for embedding in its artifact, and back;
* :func:`features` turns pixels into the learner's inputs, ``pixels / 16``, which is exact.

Every rule is documented byte by byte in ``docs/data.md``.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import math
import os
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar, final

import numpy as np
import numpy.typing as npt

from alpha.checked import int_in
from alpha.errors import ArtifactInvalid, PlanInvalid, RoleOutOfRange
from alpha.files import package_data

__all__ = [
    "DIGITS_CLASSES",
    "DIGITS_ENV",
    "DIGITS_FEATURES",
    "DIGITS_MAX_PIXEL",
    "DIGITS_NAME",
    "DIGITS_RESOURCE",
    "DIGITS_SAMPLES",
    "DIGITS_SHA256",
    "FEATURE_DTYPES",
    "MAX_CLASSES",
    "MAX_DATASET_BYTES",
    "MAX_FEATURES",
    "MAX_SAMPLES",
    "MAX_SEED",
    "NPZ_KEYS",
    "STORAGE_DTYPES",
    "Dataset",
    "Split",
    "batch_indices",
    "dataset_bytes",
    "decode_shard",
    "encode_shard",
    "features",
    "holdout_count",
    "load_dataset",
    "load_digits",
    "shipped_digits",
    "split",
]

#: SHA-256 of ``alpha/data/digits/digits.csv.gz``, byte for byte the file scikit-learn 1.9.1
#: ships as ``sklearn/datasets/data/digits.csv.gz``. Pinned so that every role and the
#: replicated learner provably read the same samples; a file that differs by one byte is
#: refused, not parsed.
DIGITS_SHA256: Final = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"

#: Samples in the data set (the UCI set's test part, which is what scikit-learn ships).
DIGITS_SAMPLES: Final = 1797

#: Pixels per sample: an 8x8 image, flattened row by row.
DIGITS_FEATURES: Final = 64

#: Labels are the digits 0..9.
DIGITS_CLASSES: Final = 10

#: A pixel counts the "on" bits of a 4x4 block of a 32x32 bitmap, so it is 0..16.
DIGITS_MAX_PIXEL: Final = 16

#: The shipped data set's name in a plan (``learner.dataset``).
DIGITS_NAME: Final = "digits"

#: Where the data set ships: package data of ``alpha`` (``alpha/data/digits/`` in a checkout and
#: in an installed wheel alike), found by :func:`shipped_digits`. An artifact does not bundle
#: it; a role gets its shard embedded instead (:func:`encode_shard`).
DIGITS_RESOURCE: Final = "data/digits/digits.csv.gz"

#: The environment variable that names another copy of the data set for :func:`load_digits` to
#: read instead of the shipped one (a packager that strips package data, a shared read-only
#: copy). Only the location changes: the copy must be byte for byte the pinned file.
DIGITS_ENV: Final = "ALPHA_DIGITS"

#: The element types features can have: those of the numerical contract that a learner computes
#: in (``alpha.core.digests.DTYPES``). Both represent every ``k / 16`` for ``k`` in 0..255 exactly.
FEATURE_DTYPES: Final = ("float32", "float64")

#: A split's seed is the learner's seed, an unsigned 64-bit value (as in the learner digest).
MAX_SEED: Final = 2**64 - 1

#: The element types a data set's features may be stored in (``x`` of a ``.npz``): integers
#: and floats of a portable width. A learner computes with ``x`` converted to the contract's
#: dtype, one correctly rounded conversion per value.
STORAGE_DTYPES: Final = ("uint8", "uint16", "int8", "int16", "int32", "float32", "float64")

#: A data set's size, at most: the samples (a role's shard is an array in every round's
#: working set), features per sample and classes (labels travel as uint16).
MAX_SAMPLES: Final = 1 << 24
MAX_FEATURES: Final = 1 << 16
MAX_CLASSES: Final = 1 << 16

#: The largest ``.npz`` a plan may name: it is read whole, checked and split at compile time.
MAX_DATASET_BYTES: Final = 1 << 31

#: The keys of a ``.npz`` data set: ``x`` (samples x features), ``y`` (the labels, integers
#: from 0) and, optionally, ``classes`` (an integer above every label; default: the largest
#: label plus one).
NPZ_KEYS: Final = ("x", "y", "classes")

# The date every entry of a generated .npz bears (zip's earliest), so its bytes never vary.
_FIXED_DATE: Final = (1980, 1, 1, 0, 0, 0)

# The keys of an encoded shard, exactly; anything else is not a shard this module wrote.
_SHARD_KEYS: Final = frozenset(("samples", "features", "dtype", "x", "labels", "sha256"))
_LABELS: Final = np.dtype("<u2")  # a shard's labels, whatever the data set's

# A SHA-256 as this module writes it: 64 lowercase hex digits.
_SHA256_HEX_CHARS: Final = 64
_HEX_DIGITS: Final = frozenset("0123456789abcdef")

# The data set's own field name in a plan, used by every refusal about the data itself.
_DATASET_FIELD: Final = "learner.dataset"

U8Array = npt.NDArray[np.uint8]
Features = npt.NDArray[np.generic]  # a data set's x, of one of STORAGE_DTYPES
Labels = npt.NDArray[np.unsignedinteger]  # its labels, uint8 or uint16
I64Array = npt.NDArray[np.int64]
_Scalar = TypeVar("_Scalar", bound=np.generic)


def _frozen(array: npt.NDArray[_Scalar]) -> npt.NDArray[_Scalar]:
    """A read-only contiguous copy of ``array``, so a frozen value cannot be changed through it."""
    out = np.array(array, order="C", copy=True)
    out.flags.writeable = False
    return out


def _check_samples(
    x: object, labels: object, where: str, classes: int, divisor: int, name: str
) -> None:
    """Nothing if ``x`` and ``labels`` are a data set's samples; otherwise the reason why not.

    Raises:
        ValueError: with the reason, for the caller to wrap in its own error class.
    """
    if not isinstance(x, np.ndarray) or x.dtype.name not in STORAGE_DTYPES:
        raise ValueError(
            f"{where}: x must be an array of one of {', '.join(STORAGE_DTYPES)}, got {_shown(x)}"
        )
    if not isinstance(labels, np.ndarray) or labels.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"{where}: labels must be a uint8 or uint16 array, got {_shown(labels)}")
    if x.ndim != 2 or not 1 <= x.shape[1] <= MAX_FEATURES:
        raise ValueError(
            f"{where}: x must have shape [N, F] with 1 <= F <= {MAX_FEATURES}, got {list(x.shape)}"
        )
    if labels.shape != (x.shape[0],):
        raise ValueError(
            f"{where}: labels must have shape [{x.shape[0]}] (one per sample), "
            f"got {list(labels.shape)}"
        )
    if not 1 <= x.shape[0] <= MAX_SAMPLES:
        raise ValueError(f"{where}: there must be 1 to {MAX_SAMPLES} samples, got {x.shape[0]}")
    if x.dtype.kind == "f" and not bool(np.isfinite(x).all()):
        raise ValueError(f"{where}: a feature is not finite")
    if int(labels.max()) >= classes:
        raise ValueError(f"{where}: a label is {int(labels.max())}, past {classes - 1}")
    if divisor != 1 and (x.dtype.kind != "u" or int(x.max()) > divisor):
        raise ValueError(f"{where}: a value is past {divisor}, or not an unsigned integer")
    if name == DIGITS_NAME and (
        x.dtype != np.uint8
        or labels.dtype != np.uint8
        or x.shape[1] != DIGITS_FEATURES
        or (classes, divisor) != (DIGITS_CLASSES, DIGITS_MAX_PIXEL)
    ):
        raise ValueError(
            f"{where}: the digits are uint8 [N, {DIGITS_FEATURES}] pixels of 0..16 and uint8 "
            "labels of 0..9"
        )


def _shown(value: object) -> str:
    """A short description of a value for a message: its dtype and shape, or its type."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {list(value.shape)}"
    return type(value).__name__


@final
@dataclass(frozen=True, slots=True)
class Dataset:
    """A data set, read-only: the shipped digits, or a ``.npz`` of the user's
    (:func:`load_dataset`).

    Attributes:
        x: ``[N, F]`` features, of one of :data:`STORAGE_DTYPES` (the digits: uint8 pixels
            0..16, an 8x8 image row by row).
        labels: ``[N]`` uint8 or uint16, each below ``classes`` (the digits: 0..9).
        classes: the number of classes, above every label.
        divisor: what a learner's inputs are ``x`` divided by (:func:`features`): 16 for the
            digits' pixels (an exact division), 1 for a user's features.
        name: ``"digits"``, or the file's name, for messages.

    Both arrays are read-only contiguous copies of what was passed in.

    Raises:
        PlanInvalid: (``field="learner.dataset"``) the arrays are of another dtype, their
            shapes do not agree, there are no samples, a feature is not finite, a label is not
            below ``classes``; for the digits, a pixel or label out of range.
    """

    x: Features
    labels: Labels
    classes: int = DIGITS_CLASSES
    divisor: int = DIGITS_MAX_PIXEL
    name: str = DIGITS_NAME

    def __post_init__(self) -> None:
        try:
            _check_samples(self.x, self.labels, self.name, self.classes, self.divisor, self.name)
        except ValueError as why:
            raise PlanInvalid(str(why), field=_DATASET_FIELD) from None
        object.__setattr__(self, "x", _frozen(self.x))
        object.__setattr__(self, "labels", _frozen(self.labels))

    @property
    def samples(self) -> int:
        """The number of samples, ``N``."""
        return int(self.x.shape[0])

    @property
    def features(self) -> int:
        """Features per sample, ``F``."""
        return int(self.x.shape[1])


@final
@dataclass(frozen=True, slots=True)
class Split:
    """A data set split into a training part, dealt to roles, and a held-out part.

    Build it with :func:`split`; every array is read-only.

    Attributes:
        participants: the number of roles the training part is dealt to.
        train_indices: int64, the data set's sample indices of the training part, in order.
        holdout_indices: int64, those of the held-out part, in order.
        train_x, train_labels: the training part (uint8), in ``train_indices`` order.
        holdout_x, holdout_labels: the held-out part (uint8), in ``holdout_indices`` order.

    Raises:
        Nothing: construct through :func:`split`.
    """

    participants: int
    train_indices: I64Array
    holdout_indices: I64Array
    train_x: Features
    train_labels: Labels
    holdout_x: Features
    holdout_labels: Labels

    def shard(self, role: int) -> tuple[Features, Labels]:
        """Role ``role``'s training samples: training positions ``role, role + n, role + 2n, ...``.

        Args:
            role: 0..participants-1.

        Returns:
            ``(pixels [M, 64], labels [M])``, uint8, in training order; fresh contiguous
            (writable) copies, ``M = ceil((T - role) / participants)`` for ``T`` training samples.

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..participants-1``.
        """
        if not int_in(role):
            raise RoleOutOfRange(f"a shard's role must be an int, got {type(role).__name__}")
        if not 0 <= role < self.participants:
            raise RoleOutOfRange(
                f"role {role} has no shard: the split is among roles 0..{self.participants - 1}"
            )
        step = self.participants
        return (
            np.ascontiguousarray(self.train_x[role::step]).copy(),
            np.ascontiguousarray(self.train_labels[role::step]).copy(),
        )


def shipped_digits() -> Path:
    """The copy of the data set that ships inside the ``alpha`` package (:data:`DIGITS_RESOURCE`).

    Raises:
        FileNotFoundError: ``alpha`` was imported from a zip archive, not a folder.
    """
    return package_data(DIGITS_RESOURCE)


def load_digits(path: Path | None = None) -> Dataset:
    """Read the digits data set, refusing any file but the one pinned by :data:`DIGITS_SHA256`.

    Args:
        path: the gzip CSV to read; by default the file the environment variable
            :data:`DIGITS_ENV` (``ALPHA_DIGITS``) names if it is set and not empty, else the
            copy that ships with ``alpha`` (:func:`shipped_digits`).

    Returns:
        The 1797 samples, in file order.

    Raises:
        PlanInvalid: (``field="learner.dataset"``) the file is missing or unreadable, or its
            SHA-256 is not :data:`DIGITS_SHA256`; the message names the file (and
            ``ALPHA_DIGITS`` when that chose it) and says how to put the right one there.
    """
    override = os.environ.get(DIGITS_ENV, "")
    pinned = f"an unchanged copy of the digits data set (SHA-256 {DIGITS_SHA256})"
    if path is not None:
        where, source, remedy = Path(path), "", f"name {pinned}"
    elif override:
        where, source = Path(override), f" (named by {DIGITS_ENV})"
        remedy = f"set {DIGITS_ENV} to {pinned}, or unset it to read the copy shipped with alpha"
    else:
        try:
            where, source = shipped_digits(), " (shipped with alpha)"
        except FileNotFoundError as why:  # alpha imported from a zip archive
            raise PlanInvalid(
                f"{why}; or set {DIGITS_ENV} to {pinned}", field=_DATASET_FIELD
            ) from None
        remedy = (
            "reinstall alpha (pip install --force-reinstall --no-deps, from the wheel or folder "
            f"it came from; in a source checkout: git checkout -- alpha/{DIGITS_RESOURCE}), or "
            f"set {DIGITS_ENV} to {pinned}; alpha/data/digits/LICENSE-digits.txt says where it "
            "comes from"
        )
    named_file = f"the digits data set {str(where)!r}{source}"
    try:
        raw = where.read_bytes()
    except FileNotFoundError:
        raise PlanInvalid(f"{named_file} is missing; {remedy}", field=_DATASET_FIELD) from None
    except OSError as why:
        raise PlanInvalid(
            f"cannot read {named_file}: {why.strerror or why}; {remedy}", field=_DATASET_FIELD
        ) from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != DIGITS_SHA256:
        raise PlanInvalid(
            f"{named_file} is not the file this Alpha pins: its SHA-256 is {digest}, expected "
            f"{DIGITS_SHA256}; {remedy}",
            field=_DATASET_FIELD,
        )
    return _parse_digits(raw, where)


def _parse_digits(raw: bytes, where: Path) -> Dataset:
    """The samples of the pinned gzip CSV (its hash already checked).

    Raises:
        PlanInvalid: (``field="learner.dataset"``) the file does not parse as 1797 rows of 65
            small integers; unreachable for the pinned file, kept so a wrong pin cannot pass.
    """
    try:
        text = gzip.decompress(raw).decode("ascii")
        table = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as why:
        raise PlanInvalid(f"{str(where)!r} does not parse: {why}", field=_DATASET_FIELD) from None
    expected = (DIGITS_SAMPLES, DIGITS_FEATURES + 1)
    if table.shape != expected:
        raise PlanInvalid(
            f"{str(where)!r} has shape {list(table.shape)}, expected {list(expected)}",
            field=_DATASET_FIELD,
        )
    if int(table.min()) < 0 or int(table.max()) > DIGITS_MAX_PIXEL:
        raise PlanInvalid(f"{str(where)!r} has a value outside 0..16", field=_DATASET_FIELD)
    return Dataset(
        x=table[:, :DIGITS_FEATURES].astype(np.uint8),
        labels=table[:, DIGITS_FEATURES].astype(np.uint8),
    )


def load_dataset(path: Path, sha256: str, shown: str = "") -> Dataset:
    """Read the ``.npz`` data set at ``path`` (:data:`NPZ_KEYS`), refusing it unless its bytes
    hash to ``sha256``; ``shown`` is how messages name it (default: the path).

    ``x`` must be ``[N, F]`` of one of :data:`STORAGE_DTYPES`, every value finite; ``y`` ``[N]``
    integers from 0; ``classes``, when present, an integer above every label (default: the
    largest label plus one, at least 2). The labels become uint8 (up to 256 classes) or
    uint16. Nothing but arrays is read (no pickled objects).

    Raises:
        PlanInvalid: (``field="learner.dataset_sha256"``) the file's SHA-256 is another;
            (``field="learner.dataset"``) it is missing, unreadable, larger than
            :data:`MAX_DATASET_BYTES`, not a ``.npz``, or its arrays are not a data set
            (the key and what is wrong named).
    """
    from alpha.files import read_regular_file  # the one reader of a file a user named

    named = shown or str(path)
    try:
        raw = read_regular_file(path, MAX_DATASET_BYTES)
    except OSError as why:
        raise PlanInvalid(
            f"cannot read the data set {named}: {why.strerror or why}", field=_DATASET_FIELD
        ) from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        raise PlanInvalid(
            f"the data set {named} has SHA-256 {digest}, not the {sha256} the plan pins: it "
            "changed, or the plan names another file (pin the file you mean with its "
            "sha256sum)",
            field="learner.dataset_sha256",
        )
    try:
        opened = np.load(io.BytesIO(raw), allow_pickle=False)
        if not isinstance(opened, np.lib.npyio.NpzFile):  # numpy.save's one array, no names
            raise ValueError("it holds one unnamed array (numpy.save), not named ones")
        with opened as found:
            arrays: dict[str, Any] = {key: found[key] for key in found.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as why:
        raise PlanInvalid(f"{named} is not a .npz of arrays: {why}", field=_DATASET_FIELD) from None
    # A member that is no .npy array is read as its bytes.
    others = sorted(key for key, value in arrays.items() if not isinstance(value, np.ndarray))
    if others:
        raise PlanInvalid(
            f"{named} holds {', '.join(others)}, which are not arrays", field=_DATASET_FIELD
        )
    missing = [key for key in ("x", "y") if key not in arrays]
    extra = sorted(set(arrays) - set(NPZ_KEYS))
    if missing or extra:
        raise PlanInvalid(
            f"{named} must hold the arrays x and y (and optionally classes); "
            f"{'missing ' + ', '.join(missing) if missing else 'unknown ' + ', '.join(extra)}",
            field=_DATASET_FIELD,
        )
    x, y = arrays["x"], arrays["y"]
    if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and int(y.min()) < 0):
        raise PlanInvalid(
            f"{named}: y must be a 1-d array of integers from 0, got {_shown(y)}",
            field=_DATASET_FIELD,
        )
    top = int(y.max()) + 1 if y.size else 0
    classes = max(2, top)
    if "classes" in arrays:
        given = arrays["classes"]
        if (
            given.shape != ()
            or given.dtype.kind not in "iu"
            or not top <= int(given) <= MAX_CLASSES
        ):
            raise PlanInvalid(
                f"{named}: classes must be one integer in {max(2, top)}..{MAX_CLASSES} (above "
                f"every label), got {given!r}",
                field=_DATASET_FIELD,
            )
        classes = max(2, int(given))
    if classes > MAX_CLASSES:
        raise PlanInvalid(
            f"{named}: a label is {top - 1}, past {MAX_CLASSES - 1}", field=_DATASET_FIELD
        )
    labels = y.astype(np.uint8 if classes <= 256 else np.uint16)
    return Dataset(x, labels, classes=classes, divisor=1, name=named)


def dataset_bytes(x: Features, y: npt.NDArray[np.integer], classes: int | None = None) -> bytes:
    """``x``, ``y`` (and ``classes``) as a ``.npz`` :func:`load_dataset` reads, byte for byte the
    same on every machine and every day: each array in numpy's format 1.0, stored (not
    compressed) in a zip whose entries bear a fixed date, so a generated data set has one
    SHA-256 a plan can pin."""
    arrays: dict[str, npt.NDArray[np.generic]] = {"x": x, "y": y}
    if classes is not None:
        arrays["classes"] = np.array(classes, dtype=np.int64)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            entry = zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_DATE)
            entry.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.array(array, order="C"), version=(1, 0))
            archive.writestr(entry, member.getvalue())
    return buffer.getvalue()


def holdout_count(samples: int, holdout: float) -> int:
    """``ceil(holdout * samples)``, the product taken as one IEEE-754 double multiplication.

    Raises:
        Nothing: the caller has checked both arguments.
    """
    return math.ceil(float(holdout) * float(samples))


def split(digits: Dataset, *, participants: int, holdout: float, seed: int) -> Split:
    """Split ``digits`` into a held-out part and a training part dealt round-robin to roles.

    ``order = Generator(PCG64(seed)).permutation(N)``; the held-out part is the last
    ``ceil(holdout * N)`` entries of ``order``, the training part the others in ``order``
    order, and training position ``i`` belongs to role ``i % participants``. ``docs/data.md``
    gives the rule in full, down to the permutation's algorithm.

    Args:
        digits: the samples to split (``N`` of them).
        participants: the number of roles, 1..(training samples).
        holdout: the held-out share, a finite float with ``0 < holdout < 1``.
        seed: the learner's seed, 0..MAX_SEED.

    Returns:
        The split, every array read-only.

    Raises:
        PlanInvalid: ``field="learner.seed"`` for a seed that is not an int in 0..MAX_SEED;
            ``field="learner.holdout"`` for a share that is not a finite float in (0, 1);
            ``field="membership.group"`` for fewer than one role, or more roles than training
            samples (each role needs at least one).
    """
    if not int_in(seed, 0, MAX_SEED):
        raise PlanInvalid(f"must be an int in 0..{MAX_SEED}, got {seed!r}", field="learner.seed")
    if (
        isinstance(holdout, bool)
        or not isinstance(holdout, (int, float))
        or not math.isfinite(holdout)
        or not 0 < holdout < 1
    ):
        raise PlanInvalid(
            f"must be a finite float with 0 < holdout < 1, got {holdout!r}",
            field="learner.holdout",
        )
    if not int_in(participants, 1):
        raise PlanInvalid(
            f"a split needs at least one role, got {participants!r}", field="membership.group"
        )
    total = digits.samples
    held = holdout_count(total, holdout)
    trained = total - held
    if participants > trained:
        raise PlanInvalid(
            f"{participants} roles cannot each get a training sample: holdout {holdout!r} of "
            f"{total} samples leaves {trained} to train on; use at most {trained} roles or hold "
            "out less",
            field="membership.group",
        )
    order = np.random.Generator(np.random.PCG64(seed)).permutation(total).astype(np.int64)
    train_indices = order[:trained]
    holdout_indices = order[trained:]
    return Split(
        participants=participants,
        train_indices=_frozen(train_indices),
        holdout_indices=_frozen(holdout_indices),
        train_x=_frozen(digits.x[train_indices]),
        train_labels=_frozen(digits.labels[train_indices]),
        holdout_x=_frozen(digits.x[holdout_indices]),
        holdout_labels=_frozen(digits.labels[holdout_indices]),
    )


def batch_indices(shard_size: int, batch: int, round: int) -> I64Array:
    """The positions in a role's shard that a round uses: ``(round*batch + j) % shard_size``.

    For ``j`` in ``0..batch-1``, in that order: round ``r`` continues where round ``r-1`` stopped
    and wraps around the shard, so a batch larger than the shard repeats samples.

    Args:
        shard_size: samples in the role's shard, at least 1.
        batch: samples per round, at least 1.
        round: the round, at least 0.

    Returns:
        int64 ``[batch]``, each in ``0..shard_size-1``.

    Raises:
        PlanInvalid: ``field="membership.group"`` for an empty shard, ``field="learner.batch"``
            for a batch below 1, ``field="run.rounds"`` for a negative round (or any of them
            not an int).
    """
    for name, value, low, field in (
        ("shard_size", shard_size, 1, "membership.group"),
        ("batch", batch, 1, "learner.batch"),
        ("round", round, 0, "run.rounds"),
    ):
        if not int_in(value, low):
            raise PlanInvalid(
                f"{name} must be an int of at least {low}, got {value!r}", field=field
            )
    # The start is reduced in Python's exact integers, so a huge round times a huge batch cannot
    # overflow int64; (start + j) % size is then (round*batch + j) % size exactly.
    start = (round * batch) % shard_size
    return (np.arange(batch, dtype=np.int64) + np.int64(start)) % np.int64(shard_size)


def _shard_digest(x: bytes, labels: bytes) -> str:
    """The hex SHA-256 of a shard: its feature bytes, then its label bytes."""
    return hashlib.sha256(x + labels).hexdigest()


def encode_shard(x: npt.NDArray[np.generic], labels: npt.NDArray[np.integer]) -> dict[str, object]:
    """A role's shard as a JSON-able object, for embedding in its artifact.

    Args:
        x: ``[N, F]`` features of one of :data:`STORAGE_DTYPES` (N at least 1).
        labels: ``[N]`` unsigned integers below :data:`MAX_CLASSES`.

    Returns:
        ``{"samples": N, "features": F, "dtype": x's dtype name, "x": base64 of x's bytes,
        little-endian, in C order, "labels": base64 of the labels as little-endian uint16,
        "sha256": hex SHA-256 of the feature bytes followed by the label bytes}`` (standard
        base64 alphabet, with padding).

    Raises:
        ArtifactInvalid: the arrays are not a shard (dtype, shapes, no samples).
    """
    try:
        _check_samples(x, labels, "shard to embed", MAX_CLASSES, 1, "")
    except ValueError as why:
        raise ArtifactInvalid(str(why)) from None
    assert isinstance(x, np.ndarray)
    x_bytes = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")).tobytes()
    label_bytes = np.ascontiguousarray(labels, dtype=_LABELS).tobytes()
    return {
        "samples": int(x.shape[0]),
        "features": int(x.shape[1]),
        "dtype": x.dtype.name,
        "x": base64.b64encode(x_bytes).decode("ascii"),
        "labels": base64.b64encode(label_bytes).decode("ascii"),
        "sha256": _shard_digest(x_bytes, label_bytes),
    }


def _b64(value: object, name: str, length: int) -> bytes:
    """The bytes a canonical base64 string of ``length`` bytes holds.

    Raises:
        ArtifactInvalid: not a string, not canonical base64, or not ``length`` bytes long.
    """
    if not isinstance(value, str):
        raise ArtifactInvalid(f"shard: {name} must be a base64 string, got {type(value).__name__}")
    try:
        data = base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as why:
        raise ArtifactInvalid(f"shard: {name} is not base64 ({why})") from None
    # One byte string has one spelling: refuse non-zero padding bits and the like.
    if base64.b64encode(data).decode("ascii") != value:
        raise ArtifactInvalid(f"shard: {name} is not canonical base64")
    if len(data) != length:
        raise ArtifactInvalid(f"shard: {name} holds {len(data)} bytes, expected {length}")
    return data


def decode_shard(
    encoded: Mapping[str, object],
) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.uint16]]:
    """The shard :func:`encode_shard` encoded, after checking its shape, dtype and hash.

    Args:
        encoded: the object :func:`encode_shard` returned, e.g. read back from JSON.

    Returns:
        ``(x [N, F], labels [N])``: x in its stored dtype (native byte order), labels uint16;
        fresh writable arrays.

    Raises:
        ArtifactInvalid: not a mapping of exactly ``samples``, ``features``, ``dtype``, ``x``,
            ``labels`` and ``sha256``; ``samples`` or ``features`` not an int in range; a
            dtype not one of :data:`STORAGE_DTYPES`; a field not canonical base64 of the
            right length; the SHA-256 not 64 lowercase hex digits or not the bytes' hash; a
            feature that is not finite.
    """
    if not isinstance(encoded, Mapping):
        raise ArtifactInvalid(f"shard must be an object, got {type(encoded).__name__}")
    keys = set(encoded)
    if keys != _SHARD_KEYS:
        raise ArtifactInvalid(
            f"shard must have exactly the keys {sorted(_SHARD_KEYS)}, got {sorted(map(str, keys))}"
        )
    samples, width, dtype = encoded["samples"], encoded["features"], encoded["dtype"]
    for name, value, high in (("samples", samples, MAX_SAMPLES), ("features", width, MAX_FEATURES)):
        if not int_in(value):
            raise ArtifactInvalid(f"shard: {name} must be an int, got {type(value).__name__}")
        if not 1 <= value <= high:
            raise ArtifactInvalid(f"shard: {name} must be in 1..{high}, got {value}")
    assert isinstance(samples, int) and isinstance(width, int)
    if dtype not in STORAGE_DTYPES:
        raise ArtifactInvalid(f"shard: dtype must be one of {', '.join(STORAGE_DTYPES)}")
    assert isinstance(dtype, str)
    digest = encoded["sha256"]
    if (
        not isinstance(digest, str)
        or len(digest) != _SHA256_HEX_CHARS
        or not set(digest) <= _HEX_DIGITS
    ):
        raise ArtifactInvalid("shard: sha256 must be 64 lowercase hex digits")
    stored = np.dtype(dtype).newbyteorder("<")
    x_bytes = _b64(encoded["x"], "x", samples * width * stored.itemsize)
    label_bytes = _b64(encoded["labels"], "labels", samples * _LABELS.itemsize)
    actual = _shard_digest(x_bytes, label_bytes)
    if actual != digest:
        raise ArtifactInvalid(f"shard: its bytes hash to {actual}, but it records {digest}")
    x = np.frombuffer(x_bytes, dtype=stored).reshape(samples, width).astype(dtype)
    labels = np.frombuffer(label_bytes, dtype=_LABELS).astype(np.uint16)
    if x.dtype.kind == "f" and not bool(np.isfinite(x).all()):
        raise ArtifactInvalid("shard: a feature is not finite")
    return x, labels


def features(
    x: npt.NDArray[np.generic], dtype: str, divisor: int = DIGITS_MAX_PIXEL
) -> npt.NDArray[np.floating]:
    """The learner's inputs: ``x.astype(dtype) / dtype(divisor)`` elementwise (``divisor`` 1:
    the conversion alone), each one correctly rounded IEEE conversion (and division).

    For the digits (``divisor`` 16) exact, not merely correctly rounded: every uint8 ``k`` is
    exact in float32 and float64, and ``k / 16`` divides by a power of two, so the quotient is
    representable (at most 8 significant bits, no subnormal) and IEEE-754 division returns it
    with no rounding at all. Any conforming implementation (numpy, a GPU kernel, another
    platform, ``* 0.0625``) gives the same bits.

    Args:
        x: features of one of :data:`STORAGE_DTYPES`, any shape.
        dtype: ``"float32"`` or ``"float64"``, the contract's element type.
        divisor: a power of two, at least 1.

    Returns:
        A new array of ``x``'s shape in ``dtype``.

    Raises:
        PlanInvalid: ``field="contract.dtype"`` for another dtype; ``field="learner.dataset"``
            for ``x`` of another dtype, or with a divisor that is not a power of two.
    """
    if dtype not in FEATURE_DTYPES:
        raise PlanInvalid(
            f"features are computed in one of {', '.join(FEATURE_DTYPES)}, got {dtype!r}",
            field="contract.dtype",
        )
    if not isinstance(x, np.ndarray) or x.dtype.name not in STORAGE_DTYPES:
        raise PlanInvalid(
            f"x must be an array of one of {', '.join(STORAGE_DTYPES)}, got {_shown(x)}",
            field=_DATASET_FIELD,
        )
    if divisor < 1 or divisor & (divisor - 1):
        raise PlanInvalid(f"a divisor must be a power of two, got {divisor}", field=_DATASET_FIELD)
    kind = np.dtype(dtype)
    converted: npt.NDArray[np.floating] = x.astype(kind)
    if divisor == 1:
        return converted
    divided: npt.NDArray[np.floating] = converted / kind.type(divisor)
    return divided
