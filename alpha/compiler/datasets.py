"""The data set a plan's learner trains on (``[learner] dataset``, ``docs/data.md``): the shipped
digits, or a ``.npz`` file (relative to the plan's folder, or to the working folder for a plan
given as text) whose SHA-256 the plan pins. A file is read, checked and parsed once per
process; the digits are read each time, as :func:`alpha.learner.data.load_digits` always was
(``ALPHA_DIGITS`` may name another copy between two reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alpha.errors import PlanInvalid
from alpha.learner.data import DIGITS_NAME, Dataset, load_dataset, load_digits
from alpha.learner.examples import GENERATED

if TYPE_CHECKING:  # a type only: the plan's module is above this one
    from alpha.compiler.plan import Plan

__all__ = ["dataset_file", "dataset_of"]

# Data set files by their path and pinned digest.
_LOADED: dict[tuple[str, str], Dataset] = {}


def dataset_file(plan: Plan) -> Path | None:
    """The ``.npz`` file the plan's learner trains on; None for the shipped digits.

    Raises:
        PlanInvalid: the plan has no learner.
    """
    learner = plan.learner
    if learner is None:
        raise PlanInvalid("only a plan with work.kind = 'learn' has a data set", field="work.kind")
    if learner.dataset == DIGITS_NAME:
        return None
    path = Path(learner.dataset)
    if not path.is_absolute() and Path(plan.source).is_file():
        path = Path(plan.source).parent / path
    return path


def dataset_of(plan: Plan) -> Dataset:
    """The data set the plan's learner trains on, checked against its pin.

    Raises:
        PlanInvalid: the plan has no learner; the file is missing, unreadable, not the one
            pinned (``learner.dataset_sha256``) or not a data set (``learner.dataset``).
    """
    path = dataset_file(plan)
    assert plan.learner is not None  # dataset_file refuses a plan without one
    if path is None:
        return load_digits()
    key = (str(path), plan.learner.dataset_sha256)
    found = _LOADED.get(key)
    if found is None:
        if not path.exists() and plan.learner.dataset in GENERATED:
            raise PlanInvalid(
                f"the data set {path} is not there: it is generated, not shipped; "
                f"`alpha plans copy {plan.name} DIR` writes the plan, its module and the data "
                "set into DIR (docs/learners.md)",
                field="learner.dataset",
            )
        found = _LOADED[key] = load_dataset(path, key[1], plan.learner.dataset)
    return found
