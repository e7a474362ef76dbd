"""The shipped linear model: ``scores = x W + b``, the squared error against one-hot labels
(``docs/learner.md``)."""

from __future__ import annotations

from typing import Any

import alpha.learner.contract as c


def layout(
    features: int, classes: int, options: dict[str, Any]
) -> list[tuple[str, tuple[int, ...]]]:
    del options
    return [("W", (features, classes)), ("b", (classes,))]


def initialize(p: dict[str, Any], random: c.Random) -> None:
    c.fan_in_uniform(p["W"], random)


def contribute(p: dict[str, Any], g: dict[str, Any], x: Any, labels: Any) -> tuple[Any, int]:
    scores = c.affine(x, p["W"], p["b"])
    loss, dscores = c.squared_error(scores, labels)
    g["W"][...] = c.outer_sum(x, dscores)
    g["b"][...] = c.sum_rows(dscores)
    return loss, c.correct(scores, labels)


def evaluate(p: dict[str, Any], x: Any, labels: Any) -> int:
    return c.correct(c.affine(x, p["W"], p["b"]), labels)
