"""A learner module: an MLP of two hidden layers (``docs/learners.md``), the ``teacher``
example's. ``options["hidden"]`` is the two widths, ``[512, 512]`` in the example's plan.

    z1 = x W1 + b1      h1 = relu(z1)
    z2 = h1 W2 + b2     h2 = relu(z2)
    scores = h2 W3 + b3
    loss = the squared error of scores against one-hot labels

Everything is contract arithmetic (``alpha.learner.contract``): ordered products, folds and
selections, so every role and the replicated learner compute the same bits on any CPU.
"""

from __future__ import annotations

from typing import Any

from alpha.learner import contract as c


def layout(
    features: int, classes: int, options: dict[str, Any]
) -> list[tuple[str, tuple[int, ...]]]:
    first, second = options["hidden"]
    return [
        ("W1", (features, first)),
        ("b1", (first,)),
        ("W2", (first, second)),
        ("b2", (second,)),
        ("W3", (second, classes)),
        ("b3", (classes,)),
    ]


def initialize(p: dict[str, Any], random: c.Random) -> None:
    for weights in ("W1", "W2", "W3"):
        c.fan_in_uniform(p[weights], random)


def _forward(p: dict[str, Any], x: Any) -> tuple[Any, Any, Any]:
    z1 = c.affine(x, p["W1"], p["b1"])
    z2 = c.affine(c.relu(z1), p["W2"], p["b2"])
    return c.affine(c.relu(z2), p["W3"], p["b3"]), z1, z2


def contribute(p: dict[str, Any], g: dict[str, Any], x: Any, labels: Any) -> tuple[Any, int]:
    scores, z1, z2 = _forward(p, x)
    loss, d3 = c.squared_error(scores, labels)
    h1, h2 = c.relu(z1), c.relu(z2)
    g["W3"][...] = c.outer_sum(h2, d3)
    g["b3"][...] = c.sum_rows(d3)
    d2 = c.relu_backward(c.matmul(d3, p["W3"].T), z2)
    g["W2"][...] = c.outer_sum(h1, d2)
    g["b2"][...] = c.sum_rows(d2)
    d1 = c.relu_backward(c.matmul(d2, p["W2"].T), z1)
    g["W1"][...] = c.outer_sum(x, d1)
    g["b1"][...] = c.sum_rows(d1)
    return loss, c.correct(scores, labels)


def evaluate(p: dict[str, Any], x: Any, labels: Any) -> int:
    return c.correct(_forward(p, x)[0], labels)
