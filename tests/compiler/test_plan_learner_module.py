"""compiler/plan_learner.py: the ``[learner]`` keys of a learner module and a data set file
(docs/plans.md, [learner]): ``module`` with ``kind = "module"`` only, and required there;
``[learner.options]`` with a module only, each value a number, string, boolean or list of them;
``dataset`` a shipped name or a ``.npz`` that ``dataset_sha256`` pins, and only then."""

from __future__ import annotations

from typing import Any

import pytest

from alpha.compiler.plan import Plan
from alpha.compiler.plan_learner import MAX_OPTIONS, MAX_PATH_CHARS
from alpha.errors import PlanInvalid
from tests.support import plan_of, raises_exactly, toml_value

PIN = "0123456789abcdef" * 4
MODULE = {"kind": "module", "module": "mine.py", "rate": 0.1}


def learn(learner: dict[str, Any], extra: str = "") -> Plan:
    return plan_of(
        "module",
        roles=3,
        rounds=2,
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "learn"},
        learner=learner,
        extra=extra,
    )


def refused_at(learner: dict[str, Any], extra: str = "") -> str:
    return raises_exactly(PlanInvalid, learn, learner, extra).field


def options(**values: object) -> str:
    return "[learner.options]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in values.items())


# --- module ---------------------------------------------------------------------------------


def test_a_module_learner_names_its_module_and_options() -> None:
    plan = learn(MODULE, options(hidden=8, slope=0.25, name="relu", flag=True, widths=[4, 2]))
    learner = plan.learner
    assert learner is not None
    assert (learner.kind, learner.module, learner.hidden) == ("module", "mine.py", None)
    # Sorted by name, a list as a tuple.
    assert learner.options == (
        ("flag", True),
        ("hidden", 8),
        ("name", "relu"),
        ("slope", 0.25),
        ("widths", (4, 2)),
    )
    assert (learner.dataset, learner.dataset_sha256) == ("digits", "")
    assert learn(MODULE).learner.options == ()  # type: ignore[union-attr]


@pytest.mark.parametrize("module", ["mine.py", "learners/mine.py", "/abs/mine.py", "pkg.mine"])
def test_the_module_is_kept_as_the_plan_writes_it(module: str) -> None:
    assert learn({**MODULE, "module": module}).learner.module == module  # type: ignore[union-attr]


def test_kind_module_requires_the_module() -> None:
    error = raises_exactly(PlanInvalid, learn, {"kind": "module", "rate": 0.1})
    assert error.field == "learner.module"
    assert "needs the module" in error.message


@pytest.mark.parametrize("kind", ["mlp", "linear"])
def test_module_and_options_are_refused_with_a_shipped_learner(kind: str) -> None:
    shipped = {"kind": kind, "rate": 0.1}
    assert refused_at({**shipped, "module": "mine.py"}) == "learner.module"
    assert refused_at(shipped, options(hidden=3)) == "learner.options"
    error = raises_exactly(PlanInvalid, learn, {**shipped, "module": "mine.py"})
    assert f"this learner is {kind!r}" in error.message


def test_hidden_is_refused_with_a_module() -> None:
    assert refused_at({**MODULE, "hidden": 8}) == "learner.hidden"


@pytest.mark.parametrize(
    "module",
    ["", "x" * (MAX_PATH_CHARS + 1), "mine\0.py", 3, True, ["mine.py"]],
    ids=["empty", "too-long", "nul", "int", "bool", "list"],
)
def test_a_module_that_names_nothing_is_refused(module: object) -> None:
    assert refused_at({**MODULE, "module": module}) == "learner.module"


def test_a_module_name_at_the_bound_is_read() -> None:
    name = "m" * (MAX_PATH_CHARS - 3) + ".py"
    assert learn({**MODULE, "module": name}).learner.module == name  # type: ignore[union-attr]


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[learner.options.inner]\na = 1\n", "learner.options.inner"),
        ("[learner.options]\ninner = { a = 1 }\n", "learner.options.inner"),
        ("[learner.options]\nrows = [[1, 2], [3]]\n", "learner.options.rows"),
        ("[learner.options]\nrows = [{ a = 1 }]\n", "learner.options.rows"),
        ("[learner.options]\nwhen = 1979-05-27\n", "learner.options.when"),
        ("[learner.options]\nwhen = 07:32:00\n", "learner.options.when"),
        ("[learner.options]\nlist = [1, 1979-05-27]\n", "learner.options.list"),
    ],
    ids=["table", "inline-table", "nested-list", "list-of-tables", "date", "time", "list-date"],
)
def test_an_option_that_is_not_a_plain_value_is_refused_at_its_key(text: str, key: str) -> None:
    error = raises_exactly(PlanInvalid, learn, MODULE, text)
    assert error.field == key
    assert "must be a number, a string, a boolean or a list of them" in error.message


@pytest.mark.parametrize("value", [3, "3", [1, 2]], ids=["int", "str", "list"])
def test_options_must_be_a_table(value: object) -> None:
    assert refused_at({**MODULE, "options": value}) == "learner.options"


def test_options_are_bounded_in_number() -> None:
    at_bound = {f"k{i:02d}": i for i in range(MAX_OPTIONS)}
    assert len(learn(MODULE, options(**at_bound)).learner.options) == MAX_OPTIONS  # type: ignore[union-attr]
    past = {**at_bound, "one_more": 1}
    error = raises_exactly(PlanInvalid, learn, MODULE, options(**past))
    assert error.field == "learner.options"
    assert f"more than {MAX_OPTIONS} options" in error.message


# --- dataset and dataset_sha256 -------------------------------------------------------------


def test_a_dataset_file_is_pinned() -> None:
    learner = learn({"rate": 0.1, "dataset": "data/mine.npz", "dataset_sha256": PIN}).learner
    assert learner is not None
    assert (learner.dataset, learner.dataset_sha256) == ("data/mine.npz", PIN)


@pytest.mark.parametrize(
    "pin",
    [None, "", PIN[:-1], PIN + "0", PIN.upper(), PIN[:-1] + "g", " " + PIN[1:], 5],
    ids=["absent", "empty", "63", "65", "upper", "not-hex", "space", "int"],
)
def test_a_dataset_file_needs_its_sha256_as_64_lowercase_hex_digits(pin: object) -> None:
    learner: dict[str, Any] = {"rate": 0.1, "dataset": "mine.npz", "dataset_sha256": pin}
    assert refused_at(learner) == "learner.dataset_sha256"


@pytest.mark.parametrize("dataset", [None, "digits"], ids=["default", "digits"])
def test_the_shipped_digits_refuse_a_pin(dataset: str | None) -> None:
    error = raises_exactly(
        PlanInvalid, learn, {"rate": 0.1, "dataset": dataset, "dataset_sha256": PIN}
    )
    assert error.field == "learner.dataset_sha256"
    assert "ships with alpha and is pinned by it" in error.message


@pytest.mark.parametrize(
    "dataset",
    ["mine.csv", "mine.npy", "mine", "", "x" * (MAX_PATH_CHARS + 1), "a\0.npz", 7],
    ids=["csv", "npy", "bare", "empty", "too-long", "nul", "int"],
)
def test_a_dataset_that_is_no_npz_file_is_refused(dataset: object) -> None:
    assert refused_at({"rate": 0.1, "dataset": dataset, "dataset_sha256": PIN}) == (
        "learner.dataset"
    )


def test_a_module_learner_trains_on_a_dataset_file_too() -> None:
    plan = learn({**MODULE, "dataset": "mine.npz", "dataset_sha256": PIN}, options(k=1))
    learner = plan.learner
    assert learner is not None
    assert (learner.module, learner.options, learner.dataset) == (
        "mine.py",
        (("k", 1),),
        "mine.npz",
    )
