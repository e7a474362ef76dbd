"""The data sets of the shipped examples, generated rather than shipped (``docs/learners.md``):
each is computed from a seed in contract arithmetic and written by
:func:`alpha.learner.data.dataset_bytes`, so every machine makes the same bytes, whose SHA-256
the example's plan pins.

``teacher.npz`` (the ``teacher`` plan): 48,000 samples of 16 features, uniform in [-1, 1)
(float32), each labelled by a fixed random *teacher* network, a two-layer ReLU MLP of 64
hidden units in float64, as the class of its highest score (10 classes); 2% of the labels are
then replaced by a uniform random class, so no learner reaches 100%. Learning it takes a
nonlinear model: the shipped linear model stays far below the two-hidden-layer MLP of the
example (``alpha/data/plans/teacher_mlp.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np

import alpha.learner.contract as c
from alpha.learner.data import dataset_bytes

__all__ = ["GENERATED", "teacher", "write_generated"]

TEACHER_SEED: Final = 2026
TEACHER_SAMPLES: Final = 48_000
TEACHER_FEATURES: Final = 16
TEACHER_HIDDEN: Final = 64
TEACHER_CLASSES: Final = 10
TEACHER_NOISE: Final = 0.02  # the share of labels replaced by a uniform random class


def teacher() -> bytes:
    """The bytes of ``teacher.npz`` (module docstring): the same on every machine."""
    random = c.Random(TEACHER_SEED)
    x64 = random.uniform((TEACHER_SAMPLES, TEACHER_FEATURES)) * 2.0 - 1.0
    x = x64.astype(np.float32)  # one correctly rounded conversion per value
    w1 = np.zeros((TEACHER_FEATURES, TEACHER_HIDDEN))
    w2 = np.zeros((TEACHER_HIDDEN, TEACHER_CLASSES))
    c.fan_in_uniform(w1, random)
    c.fan_in_uniform(w2, random)
    b1 = random.uniform((TEACHER_HIDDEN,)) * 0.2 - 0.1
    b2 = np.zeros(TEACHER_CLASSES)
    hidden = c.relu(c.affine(x.astype(np.float64), w1, b1))
    scores = c.affine(hidden, w2, b2)
    # Centred per class (each class's mean score over the samples, folded in order), so that
    # every class is the highest often enough: a teacher's raw scores favour a few classes.
    centre = c.sum_rows(scores) / float(TEACHER_SAMPLES)
    labels = np.argmax(scores - centre, axis=1).astype(np.int64)
    noisy = random.uniform((TEACHER_SAMPLES,)) < TEACHER_NOISE
    drawn = np.floor(random.uniform((TEACHER_SAMPLES,)) * TEACHER_CLASSES).astype(np.int64)
    labels = np.where(noisy, drawn, labels)
    return dataset_bytes(x, labels, TEACHER_CLASSES)


#: Each generated data set by its file name: the function that makes its bytes.
GENERATED: Final[dict[str, Callable[[], bytes]]] = {"teacher.npz": teacher}


def write_generated(name: str, folder: Path) -> Path:
    """Write the generated data set ``name`` (a key of :data:`GENERATED`) into ``folder``
    (through a temporary file, renamed); return its path.

    Raises:
        KeyError: no example generates ``name``.
        OSError: the file cannot be written.
    """
    data = GENERATED[name]()
    path = folder / name
    partial = folder / f".{name}.partial"
    partial.write_bytes(data)
    partial.replace(path)
    return path
