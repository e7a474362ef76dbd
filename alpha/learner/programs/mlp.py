"""The shipped MLP: ``z1 = x W1 + b1``, ``h = relu(z1)``, ``scores = h W2 + b2``, the squared
error against one-hot labels (``docs/learner.md``). ``options["hidden"]`` is its hidden width."""

from __future__ import annotations

from typing import Any

import alpha.learner.contract as c


def layout(
    features: int, classes: int, options: dict[str, Any]
) -> list[tuple[str, tuple[int, ...]]]:
    hidden = options["hidden"]
    return [
        ("W1", (features, hidden)),
        ("b1", (hidden,)),
        ("W2", (hidden, classes)),
        ("b2", (classes,)),
    ]


def initialize(p: dict[str, Any], random: c.Random) -> None:
    c.fan_in_uniform(p["W1"], random)
    c.fan_in_uniform(p["W2"], random)


def _forward(p: dict[str, Any], x: Any) -> tuple[Any, Any]:
    z1 = c.affine(x, p["W1"], p["b1"])
    return c.affine(c.relu(z1), p["W2"], p["b2"]), z1


def contribute(p: dict[str, Any], g: dict[str, Any], x: Any, labels: Any) -> tuple[Any, int]:
    scores, z1 = _forward(p, x)
    loss, dscores = c.squared_error(scores, labels)
    h = c.relu(z1)
    g["W2"][...] = c.outer_sum(h, dscores)
    g["b2"][...] = c.sum_rows(dscores)
    dz1 = c.relu_backward(c.matmul(dscores, p["W2"].T), z1)
    g["W1"][...] = c.outer_sum(x, dz1)
    g["b1"][...] = c.sum_rows(dz1)
    return loss, c.correct(scores, labels)


def evaluate(p: dict[str, Any], x: Any, labels: Any) -> int:
    return c.correct(_forward(p, x)[0], labels)
