"""An independent reference for the learn gates: the digits learner and its ordered fold,
written from the rules in docs/learner.md, docs/data.md and the contract's fold order
(docs/contract.md), one sample and one element at a time where the product uses whole arrays.

It imports nothing of ``alpha`` (not its data reader, learner, optimizer, combine or
topology): it reads the data file itself and checks its SHA-256, and it is given its tree as
an explicit map of children, not derived from a fan-out. So a change to the product's fold
order, learner arithmetic, split or batches moves the product's final digest away from this
one, where the product's own replicated learner (which shares the product's code) would move
with it. ``gates/catalogue.py`` pins the digests this computes (``PINNED``), and
``tests/gates/test_gates.py`` checks that this reference still computes them.

Every operation is an IEEE operation in the contract's dtype, in the declared order: a value
is folded left to right from its first term (a bias, or zero), and the tree folds a node's own
contribution first, then each child's subtree total in ascending role order.
"""

from __future__ import annotations

import gzip
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["DIGITS_FILE", "Learn", "final_digests"]

DIGITS_FILE: Final = Path(__file__).resolve().parents[1] / "alpha/data/digits/digits.csv.gz"
_DIGITS_SHA256: Final = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"
_FEATURES, _CLASSES, _MAX_PIXEL = 64, 10, 16

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Learn:
    """A learn scenario, as its plan states it: the MLP's width, the SGD rate, seed, batch
    and held-out share, the rounds, and the combine tree as each role's children, in the
    order they are folded (the contract's: ascending role order)."""

    hidden: int
    rate: float
    seed: int
    batch: int
    rounds: int
    children: Mapping[int, tuple[int, ...]]
    roles: int
    holdout: float = 0.2


def _digits() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    raw = DIGITS_FILE.read_bytes()
    if hashlib.sha256(raw).hexdigest() != _DIGITS_SHA256:
        raise ValueError(f"{DIGITS_FILE.name} is not the pinned digits file")
    rows = [
        [int(value) for value in line.split(",")]
        for line in gzip.decompress(raw).decode("ascii").splitlines()
        if line
    ]
    table = np.array(rows, dtype=np.uint8)
    return table[:, :_FEATURES].copy(), table[:, _FEATURES].copy()


def _initial(learn: Learn) -> list[F32]:
    """W1, b1, W2, b2: weights uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) from one PCG64
    stream (W1's draws first, row by row), biases zero."""
    generator = np.random.Generator(np.random.PCG64(learn.seed))
    out = []
    for fan_in, fan_out in ((_FEATURES, learn.hidden), (learn.hidden, _CLASSES)):
        scale = 1.0 / math.sqrt(fan_in)
        draws = generator.random((fan_in, fan_out))
        weights = np.empty((fan_in, fan_out), dtype=np.float32)
        for i in range(fan_in):
            for j in range(fan_out):
                weights[i, j] = np.float32((draws[i, j] - 0.5) * (2.0 * scale))
        out += [weights, np.zeros(fan_out, dtype=np.float32)]
    return out


def _contribution(params: list[F32], x: F32, labels: npt.NDArray[np.uint8]) -> F32:
    """The summed gradient of the squared error over the batch, then the summed loss and the
    count of correct predictions: one flat float32 vector (W1, b1, W2, b2, loss, correct)."""
    w1, b1, w2, b2 = params
    hidden = b1.shape[0]
    zero = np.float32(0)
    gw1 = np.zeros_like(w1)
    gb1 = np.zeros_like(b1)
    gw2 = np.zeros_like(w2)
    gb2 = np.zeros_like(b2)
    loss = zero
    correct = 0
    for s in range(x.shape[0]):
        z1 = np.empty(hidden, dtype=np.float32)
        for j in range(hidden):
            acc = b1[j]
            for k in range(_FEATURES):
                acc = np.float32(acc + np.float32(x[s, k] * w1[k, j]))
            z1[j] = acc
        h = np.array([v if v > 0 else zero for v in z1], dtype=np.float32)
        z2 = np.empty(_CLASSES, dtype=np.float32)
        for c in range(_CLASSES):
            acc = b2[c]
            for j in range(hidden):
                acc = np.float32(acc + np.float32(h[j] * w2[j, c]))
            z2[c] = acc
        error = np.array(
            [z2[c] - np.float32(1 if c == labels[s] else 0) for c in range(_CLASSES)],
            dtype=np.float32,
        )
        sample_loss = zero
        for c in range(_CLASSES):
            sample_loss = np.float32(sample_loss + np.float32(error[c] * error[c]))
        loss = np.float32(loss + sample_loss)
        best = 0
        for c in range(1, _CLASSES):
            if z2[c] > z2[best]:
                best = c
        correct += int(best == labels[s])
        dz2 = np.array([error[c] * np.float32(2) for c in range(_CLASSES)], dtype=np.float32)
        # Each gradient term is folded over the samples in order, from zero.
        for j in range(hidden):
            for c in range(_CLASSES):
                gw2[j, c] = np.float32(gw2[j, c] + np.float32(h[j] * dz2[c]))
        for c in range(_CLASSES):
            gb2[c] = np.float32(gb2[c] + dz2[c])
        dz1 = np.empty(hidden, dtype=np.float32)
        for j in range(hidden):
            dh = zero
            for c in range(_CLASSES):
                dh = np.float32(dh + np.float32(dz2[c] * w2[j, c]))
            # A multiplication by 1 or 0 (not a selection): a negative dh gives -0.
            dz1[j] = np.float32(dh * np.float32(1 if z1[j] > 0 else 0))
        for k in range(_FEATURES):
            for j in range(hidden):
                gw1[k, j] = np.float32(gw1[k, j] + np.float32(x[s, k] * dz1[j]))
        for j in range(hidden):
            gb1[j] = np.float32(gb1[j] + dz1[j])
    stats = np.array([loss, np.float32(correct)], dtype=np.float32)
    return np.concatenate([gw1.ravel(), gb1, gw2.ravel(), gb2, stats])


def _fold(learn: Learn, role: int, contributions: Mapping[int, F32]) -> F32:
    """``role``'s subtree total: its own contribution, then each child's subtree total in
    the order ``learn.children`` gives them, added left to right."""
    total = contributions[role].copy()
    for child in learn.children.get(role, ()):
        part = _fold(learn, child, contributions)
        for i in range(total.shape[0]):
            total[i] = np.float32(total[i] + part[i])
    return total


def final_digests(learn: Learn) -> dict[str, str]:
    """SHA-256 of the parameters ``w`` and of the last round's combined total ``g`` after
    ``learn.rounds`` rounds, as every role's report gives them (float32 bytes, little-endian
    on every machine the project runs on)."""
    pixels, labels = _digits()
    total = labels.shape[0]
    order = np.random.Generator(np.random.PCG64(learn.seed)).permutation(total)
    trained = total - math.ceil(float(learn.holdout) * float(total))
    train = order[:trained]
    shards = {role: train[role :: learn.roles] for role in range(learn.roles)}
    params = _initial(learn)
    combined = np.zeros(0, dtype=np.float32)
    samples = np.float32(learn.batch * learn.roles)
    rate = np.float32(learn.rate)
    for round_ in range(learn.rounds):
        contributions = {}
        for role, shard in shards.items():
            rows = [shard[(round_ * learn.batch + j) % len(shard)] for j in range(learn.batch)]
            x = np.array(
                [[np.float32(pixels[r, k]) / np.float32(_MAX_PIXEL) for k in range(_FEATURES)]
                 for r in rows],
                dtype=np.float32,
            )  # fmt: skip
            contributions[role] = _contribution(params, x, labels[rows])
        combined = _fold(learn, 0, contributions)
        flat = np.concatenate([p.ravel() for p in params])
        for i in range(flat.shape[0]):
            step = np.float32(combined[i] / samples)
            flat[i] = np.float32(flat[i] - np.float32(rate * step))
        start = 0
        for p in params:
            p[...] = flat[start : start + p.size].reshape(p.shape)
            start += p.size
    w = np.concatenate([p.ravel() for p in params]).astype("<f4")
    return {
        "g": hashlib.sha256(combined.astype("<f4").tobytes()).hexdigest(),
        "w": hashlib.sha256(w.tobytes()).hexdigest(),
    }
