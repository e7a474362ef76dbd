"""learner/program.py: a learner program's four functions, loaded from a module's text
(``from_source``), shipped (``builtin``) or known by its recorded layout alone (``recorded``);
each thing a module can get wrong refused as LearnerModuleInvalid naming it; and the shipped MLP
and linear model, run as a module's text, giving the same bits as the shipped programs."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest

from alpha.errors import LearnerModuleInvalid
from alpha.learner.data import features, load_digits
from alpha.learner.model import Model, contribute, evaluate, initial_parameters
from alpha.learner.program import (
    BUILTINS,
    INTERFACE,
    MAX_PARAMETERS,
    Program,
    builtin,
    from_source,
    recorded,
)
from tests.support import ROOT, raises_exactly

PROGRAMS = ROOT / "alpha" / "learner" / "programs"
SHIPPED_IMPORT = "import alpha.learner.contract as c"
MODULE_IMPORT = "from alpha.learner import contract as c"

# A valid learner module, function by function: a test replaces or drops one of them.
HEADER = "import numpy as np\n\nfrom alpha.learner import contract as c\n"
FUNCTIONS = {
    "layout": (
        "def layout(features, classes, options):\n"
        '    return [("W", (features, classes)), ("b", (classes,))]\n'
    ),
    "initialize": 'def initialize(p, random):\n    c.fan_in_uniform(p["W"], random)\n',
    "contribute": (
        "def contribute(p, g, x, labels):\n"
        '    scores = c.affine(x, p["W"], p["b"])\n'
        "    loss, d = c.squared_error(scores, labels)\n"
        '    g["W"][...] = c.outer_sum(x, d)\n'
        '    g["b"][...] = c.sum_rows(d)\n'
        "    return loss, c.correct(scores, labels)\n"
    ),
    "evaluate": (
        'def evaluate(p, x, labels):\n    return c.correct(c.affine(x, p["W"], p["b"]), labels)\n'
    ),
}


def module_text(**replaced: str | None) -> str:
    """The valid module, each function named in ``replaced`` replaced by its text (None: left
    out)."""
    parts = [HEADER]
    for name, text in FUNCTIONS.items():
        chosen = replaced.get(name, text)
        if chosen is not None:
            parts.append(chosen)
    return "\n\n".join(parts)


def returning(function: str, expression: str) -> str:
    """``function`` defined with the interface's parameters, returning ``expression``."""
    parameters = {
        "layout": "features, classes, options",
        "initialize": "p, random",
        "contribute": "p, g, x, labels",
        "evaluate": "p, x, labels",
    }[function]
    return f"def {function}({parameters}):\n    return {expression}\n"


def refused(call: object, *args: object) -> LearnerModuleInvalid:
    assert callable(call)
    return raises_exactly(LearnerModuleInvalid, call, *args)


def batch(dtype: str, samples: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` of the digits from ``start``: their features in ``dtype`` and labels."""
    digits = load_digits()
    x = features(digits.x[start : start + samples], dtype)
    return x, digits.labels[start : start + samples]


# --- a module's text ------------------------------------------------------------------------


def test_a_modules_text_is_loaded_with_its_name_and_digest() -> None:
    source = module_text()
    program = from_source("mine.py", source)
    assert type(program) is Program
    assert (program.name, program.source) == ("mine.py", source)
    assert program.sha256 == hashlib.sha256(source.encode()).hexdigest()
    assert not program.builtin
    assert set(program.functions) == set(INTERFACE)
    assert program.layout(12, 4, {}) == (("W", (12, 4)), ("b", (4,)))
    # Equal by name and digest: the same text under another name is another program.
    assert program == from_source("mine.py", source)
    assert hash(program) == hash(from_source("mine.py", source))
    assert program != from_source("other.py", source)
    assert program != from_source("mine.py", source + "\n")


def test_each_load_runs_the_text_in_a_fresh_module() -> None:
    # A module's globals are its own: a second load of the same text starts them again.
    counting = (
        "CALLS = []\n\n\ndef evaluate(p, x, labels):\n    CALLS.append(1)\n    return len(CALLS)\n"
    )
    first, second = (from_source("count.py", module_text(evaluate=counting)) for _ in range(2))
    assert [first.call("evaluate", {}, None, None) for _ in range(3)] == [1, 2, 3]
    assert second.call("evaluate", {}, None, None) == 1


@pytest.mark.parametrize("future", ["", "from __future__ import annotations\n"])
def test_a_module_with_a_dataclass_loads_with_or_without_postponed_annotations(
    future: str,
) -> None:
    # A dataclass looks its module up by name when annotations are strings (the contract check
    # allows both dataclasses and the __future__ import).
    record = "@dataclass(frozen=True)\nclass Width:\n    hidden: int\n    slope: float = 0.1\n"
    layout = returning("layout", "[('W', (features, Width(options['k']).hidden))]")
    source = future + "from dataclasses import dataclass\n" + module_text(layout=record + layout)
    program = from_source("records.py", source)
    assert program.layout(3, 2, {"k": 5}) == (("W", (3, 5)),)
    assert not any(name.startswith("alpha_learner_") for name in sys.modules)


@pytest.mark.parametrize("missing", INTERFACE)
def test_each_missing_function_is_refused_by_its_name(missing: str) -> None:
    error = refused(from_source, "partial.py", module_text(**{missing: None}))
    assert error.module == "partial.py"
    assert f"it defines no function {missing}()" in str(error)
    assert str(error).startswith("learner module partial.py: ")


@pytest.mark.parametrize("missing", INTERFACE)
def test_a_name_of_the_interface_that_is_no_function_is_refused(missing: str) -> None:
    error = refused(from_source, "partial.py", module_text(**{missing: f"{missing} = 3\n"}))
    assert f"it defines no function {missing}()" in str(error)


@pytest.mark.parametrize(
    "source",
    ["def layout(:\n    pass\n", "x = 1\n  y = 2\n", "x = 1\x00\n"],
    ids=["syntax", "indentation", "nul"],
)
def test_a_module_that_does_not_compile_is_refused(source: str) -> None:
    error = refused(from_source, "broken.py", source)
    assert error.module == "broken.py"
    assert "does not compile" in str(error)


@pytest.mark.parametrize(
    ("top", "said"),
    [
        ("raise RuntimeError('no data here')", "RuntimeError: no data here"),
        ("import not_a_module_anywhere", "ModuleNotFoundError"),
        ("value = 1 / 0", "ZeroDivisionError"),
    ],
)
def test_a_module_that_raises_at_import_is_refused_saying_what(top: str, said: str) -> None:
    error = refused(from_source, "raising.py", module_text() + "\n" + top + "\n")
    assert "running it failed" in str(error)
    assert said in str(error)


# --- layout ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ("[]", "non-empty list"),
        ("()", "non-empty list"),
        ("None", "non-empty list"),
        ("{'W': (2, 2)}", "non-empty list"),
        ("'W'", "non-empty list"),
        ("[('W',)]", "not (name, shape)"),
        ("[('W', (2,), 1)]", "not (name, shape)"),
        ("['W']", "not (name, shape)"),
        ("[('', (2,))]", "identifier"),
        ("[('1W', (2,))]", "identifier"),
        ("[('W-1', (2,))]", "identifier"),
        ("[('W 1', (2,))]", "identifier"),
        ("[('\u00e9', (2,))]", "identifier"),
        ("[('w' * 65, (2,))]", "identifier"),
        ("[(3, (2,))]", "identifier"),
        ("[('W', (2,)), ('W', (3,))]", "named twice"),
        ("[('W', (2,)), ('b', (2,)), ('W', (2,))]", "named twice"),
        ("[('W', ())]", "shape must be"),
        ("[('W', [])]", "shape must be"),
        ("[('W', (0,))]", "shape must be"),
        ("[('W', (2, 0))]", "shape must be"),
        ("[('W', (-1,))]", "shape must be"),
        ("[('W', (2.0,))]", "shape must be"),
        ("[('W', (True,))]", "shape must be"),
        ("[('W', (np.int64(2),))]", "shape must be"),
        ("[('W', 2)]", "shape must be"),
        ("[('W', '22')]", "shape must be"),
        ("[('W', None)]", "shape must be"),
        (f"[('W', ({MAX_PARAMETERS + 1},))]", "more than"),
        (f"[('W', ({MAX_PARAMETERS // 2},)), ('b', ({MAX_PARAMETERS // 2 + 1},))]", "more than"),
        ("[('W', (2**14, 2**14 + 1))]", "more than"),
        ("[('W', (2**63, 2**63))]", "more than"),
    ],
)
def test_each_wrong_layout_is_refused(returned: str, said: str) -> None:
    program = from_source("layout.py", module_text(layout=returning("layout", returned)))
    error = refused(program.layout, 12, 4, {})
    assert error.module == "layout.py"
    assert said in str(error)
    # A model over it is refused the same way: a Model never holds an unchecked layout.
    assert said in str(refused(Model, program, "float32", 12, 4))


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ("[('W', [3, 2])]", (("W", (3, 2)),)),
        ("(('w' * 64, (1,)),)", (("w" * 64, (1,)),)),
        ("[('_b9', (1, 1, 1))]", (("_b9", (1, 1, 1)),)),
        (f"[('W', ({MAX_PARAMETERS},))]", (("W", (MAX_PARAMETERS,)),)),
        (
            f"[('W', ({MAX_PARAMETERS // 2},)), ('b', ({MAX_PARAMETERS // 2},))]",
            (("W", (MAX_PARAMETERS // 2,)), ("b", (MAX_PARAMETERS // 2,))),
        ),
    ],
)
def test_a_layout_at_the_bounds_is_taken_as_tuples(returned: str, expected: object) -> None:
    program = from_source("layout.py", module_text(layout=returning("layout", returned)))
    assert program.layout(12, 4, {}) == expected


def test_layout_is_handed_the_features_classes_and_options() -> None:
    text = returning("layout", "[('W', (features, classes, options['k']))]")
    program = from_source("layout.py", module_text(layout=text))
    assert program.layout(7, 3, {"k": 5}) == (("W", (7, 3, 5)),)
    model = Model(program, "float64", 7, 3, (("k", 2),))
    assert (model.layout, model.size, model.contribution_size) == ((("W", (7, 3, 2)),), 42, 44)


def test_a_layout_that_raises_is_refused_saying_what() -> None:
    program = from_source("layout.py", module_text(layout=returning("layout", "options['k']")))
    error = refused(program.layout, 12, 4, {})
    assert "layout() failed: KeyError: 'k'" in str(error)


# --- initialize, contribute, evaluate -------------------------------------------------------


def test_a_function_that_raises_is_refused_naming_it() -> None:
    failing = "def initialize(p, random):\n    raise ValueError('no')\n"
    model = Model(from_source("init.py", module_text(initialize=failing)), "float32", 64, 10)
    error = refused(initial_parameters, model, 0)
    assert "initialize() failed: ValueError: no" in str(error)
    failing = returning("contribute", "p['nothing']")
    model = Model(from_source("c.py", module_text(contribute=failing)), "float32", 64, 10)
    x, labels = batch("float32", 4)
    error = refused(contribute, model, initial_parameters(model, 0), x, labels)
    assert "contribute() failed: KeyError: 'nothing'" in str(error)


@pytest.mark.parametrize(
    "returned",
    [
        "None",
        "1.0",
        "(1.0,)",
        "(1.0, 2, 3)",
        "[1.0, 2]",
        "(1.0, 2.0)",
        "(1.0, True)",
        "(1.0, '2')",
        "(1.0, None)",
        "('1.0', 2)",
        "(None, 2)",
        "(1, 2)",
        "(np.float32([1.0]), 2)",
        "(np.zeros((1, 1)), 2)",
    ],
)
def test_contribute_returning_anything_but_a_loss_and_a_count_is_refused(returned: str) -> None:
    model = Model(
        from_source("c.py", module_text(contribute=returning("contribute", returned))),
        "float32",
        64,
        10,
    )
    x, labels = batch("float32", 4)
    error = refused(contribute, model, initial_parameters(model, 0), x, labels)
    assert "contribute() must return (summed loss, correct count)" in str(error)


@pytest.mark.parametrize(
    ("returned", "loss", "correct"),
    [
        ("(1.5, 3)", 1.5, 3),
        ("(np.float32(1.5), np.int64(3))", 1.5, 3),
        ("(np.float64(-2.0), np.uint8(4))", -2.0, 4),
        ("(np.array(0.25), 0)", 0.25, 0),
    ],
)
def test_contribute_appends_the_loss_and_count_it_returns(
    returned: str, loss: float, correct: int
) -> None:
    model = Model(
        from_source("c.py", module_text(contribute=returning("contribute", returned))),
        "float32",
        64,
        10,
    )
    x, labels = batch("float32", 4)
    found = contribute(model, initial_parameters(model, 0), x, labels)
    assert found.dtype == np.float32 and found.shape == (model.contribution_size,)
    assert found[model.size :].tolist() == [loss, correct]
    assert not found[: model.size].any()  # the gradient, which this contribute leaves at +0


@pytest.mark.parametrize(
    "returned", ["1.0", "np.float64(3)", "True", "None", "'3'", "(3,)", "np.array([3])"]
)
def test_evaluate_returning_anything_but_an_int_is_refused(returned: str) -> None:
    model = Model(
        from_source("e.py", module_text(evaluate=returning("evaluate", returned))),
        "float32",
        64,
        10,
    )
    x, labels = batch("float32", 4)
    error = refused(evaluate, model, initial_parameters(model, 0), x, labels)
    assert "evaluate() must return the correct count, an int" in str(error)


@pytest.mark.parametrize("returned", ["3", "np.int64(3)", "np.uint16(3)"])
def test_evaluate_is_the_share_of_the_count(returned: str) -> None:
    model = Model(
        from_source("e.py", module_text(evaluate=returning("evaluate", returned))),
        "float32",
        64,
        10,
    )
    x, labels = batch("float32", 4)
    assert evaluate(model, initial_parameters(model, 0), x, labels) == 0.75


# --- shipped and recorded programs ----------------------------------------------------------


@pytest.mark.parametrize("kind", BUILTINS)
def test_a_shipped_program_is_a_package_module_with_no_text(kind: str) -> None:
    program = builtin(kind)
    assert program.builtin
    assert (program.name, program.source, program.sha256) == (kind, "", "")
    assert set(program.functions) == set(INTERFACE)


def test_an_unknown_shipped_program_is_refused() -> None:
    error = refused(builtin, "cnn")
    assert error.module == "cnn"
    assert "is not a shipped learner (mlp, linear)" in str(error)


LAYOUT = (("W1", (12, 5)), ("b1", (5,)), ("W2", (5, 4)), ("b2", (4,)))


def test_a_recorded_program_names_its_layout_and_refuses_to_run() -> None:
    program = recorded("mine.py", "ab" * 32, LAYOUT)
    assert (program.name, program.sha256, program.source) == ("mine.py", "ab" * 32, "")
    assert not program.builtin
    assert program.layout(12, 4, {}) == LAYOUT
    assert program.layout(1, 1, {"any": 1}) == LAYOUT  # whatever it is asked: what it recorded
    model = Model(program, "float32", 12, 4)
    assert model.size == 12 * 5 + 5 + 5 * 4 + 4
    flat = np.arange(model.size, dtype=np.float32)
    assert model.unpack(flat)["W2"].tolist() == flat[65:85].reshape(5, 4).tolist()
    for function in INTERFACE[1:]:
        error = refused(program.call, function, {}, None, None, None)
        assert "only its recorded layout is known here: it cannot run" in str(error)
    assert "cannot run" in str(refused(initial_parameters, model, 0))
    x, labels = batch("float32", 3)
    assert "cannot run" in str(refused(contribute, model, flat, x[:, :12], labels))


@pytest.mark.parametrize(
    "layout",
    [(), (("W1", (12, 5)), ("W1", (5,))), (("", (1,)),), (("W", (0,)),), (("W", ()),)],
    ids=["empty", "twice", "no-name", "zero", "no-shape"],
)
def test_a_recorded_layout_is_checked_as_a_modules_is(layout: object) -> None:
    error = refused(recorded, "mine.py", "ab" * 32, layout)
    assert error.module == "mine.py"


# --- the shipped learners as a module's text: the same bits ---------------------------------


def module_copy(kind: str) -> Program:
    """The shipped program ``kind``'s file, as a user would copy it: its one import of the
    contract written the other way a module may write it."""
    text = (PROGRAMS / f"{kind}.py").read_text(encoding="utf-8")
    assert text.count(SHIPPED_IMPORT) == 1
    return from_source(f"copy_of_{kind}.py", text.replace(SHIPPED_IMPORT, MODULE_IMPORT))


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("kind", "hidden", "shape"),
    [("mlp", 16, (64, 10)), ("mlp", 3, (64, 10)), ("linear", None, (64, 10)), ("mlp", 7, (9, 3))],
)
def test_a_module_copy_of_a_shipped_program_gives_the_same_bits(
    kind: str, hidden: int | None, shape: tuple[int, int], dtype: str
) -> None:
    features_, classes = shape
    shipped = Model.shipped(hidden, dtype, features_, classes)
    options = () if hidden is None else (("hidden", hidden),)
    copy = Model(module_copy(kind), dtype, features_, classes, options)
    assert copy.layout == shipped.layout
    assert not copy.program.builtin and shipped.program.builtin
    for seed in (0, 1, 7, 2**64 - 1):
        start = initial_parameters(shipped, seed)
        assert _bits(initial_parameters(copy, seed)) == _bits(start)
        # Parameters away from the start too, so that relu's both sides and every sign show.
        moved = start + np.linspace(-0.5, 0.5, start.size).astype(dtype)
        for parameters in (start, moved):
            for samples, first in ((1, seed % 100), (8, 0), (33, 200)):
                x, labels = batch(dtype, samples, first)
                x = x[:, :features_]
                labels = (labels % classes).astype(labels.dtype)
                mine = contribute(copy, parameters, x, labels)
                theirs = contribute(shipped, parameters, x, labels)
                assert _bits(mine) == _bits(theirs), (seed, samples)
                assert evaluate(copy, parameters, x, labels) == evaluate(
                    shipped, parameters, x, labels
                )
