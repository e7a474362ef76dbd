"""compiler/contract_check.py: a learner module's source checked against the numerical
contract, read and never run: every operation outside it refused as ContractBroken naming the
file, the exact line and the operation as written; contract arithmetic, numpy's exact and
correctly rounded functions, type hints and dataclasses pass."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.contract_check import (
    ALLOWED_IMPORTS,
    MATH_ALLOWED,
    NUMPY_ALLOWED,
    Violation,
    check_contract,
    violations,
)
from alpha.errors import ContractBroken
from alpha.learner.contract import __all__ as CONTRACT_OPERATIONS
from alpha.learner.model import Model, contribute, evaluate, initial_parameters
from alpha.learner.program import from_source
from tests.support import ROOT, raises_exactly

PATH = "learners/mine.py"

# A module whose line LINE is the statement under test, inside a function.
HEADER = """\
from __future__ import annotations

import math

import numpy as np

from alpha.learner import contract as c


def contribute(p, g, x, labels):
    a, b = x, p["W"]
"""
LINE = HEADER.count("\n") + 1
FOOTER = "    return c.matmul(a, b), 0\n"


def module_with(statement: str) -> str:
    return HEADER + f"    {statement}\n" + FOOTER


def broken(source: str, path: str = PATH) -> ContractBroken:
    return raises_exactly(ContractBroken, check_contract, source, path)


# Every construct outside the contract, as a statement, and the operation a refusal names.
FORBIDDEN = [
    # products by BLAS
    ("y = a @ b", "@"),
    ("a @= b", "@="),
    ("y = np.dot(a, b)", "np.dot"),
    ("y = np.matmul(a, b)", "np.matmul"),
    ("y = np.einsum('ij,jk->ik', a, b)", "np.einsum"),
    ("y = np.inner(a, b)", "np.inner"),
    ("y = np.tensordot(a, b, 1)", "np.tensordot"),
    ("y = a.dot(b)", ".dot()"),
    ("y = a.T.dot(b)", ".dot()"),
    ("y = np.linalg.norm(a)", "np.linalg"),
    # reductions whose order numpy (or Python) chooses
    ("y = np.sum(a)", "np.sum"),
    ("y = np.mean(a)", "np.mean"),
    ("y = np.prod(a)", "np.prod"),
    ("y = np.cumsum(a)", "np.cumsum"),
    ("y = a.sum()", ".sum()"),
    ("y = a.sum(axis=0)", ".sum()"),
    ("y = a.mean()", ".mean()"),
    ("y = a.max()", ".max()"),
    ("y = a.min(axis=1)", ".min()"),
    ("y = a.std()", ".std()"),
    ("y = sum(a)", "sum()"),
    ("y = np.add.reduce(a)", ".reduce()"),
    ("y = np.add.reduce(a, axis=0)", ".reduce()"),
    ("y = np.multiply.reduce(a)", ".reduce()"),
    ("y = np.add.reduceat(a, [0, 2])", ".reduceat()"),
    ("y = np.add.accumulate(a)", ".accumulate()"),
    # powers and transcendentals
    ("y = a ** 2", "**"),
    ("a **= 2", "**="),
    ("y = pow(a, 2)", "pow()"),
    ("y = np.power(a, 2)", "np.power"),
    ("y = np.exp(a)", "np.exp"),
    ("y = np.log(a)", "np.log"),
    ("y = np.tanh(a)", "np.tanh"),
    ("y = math.exp(1.0)", "math.exp"),
    ("y = math.log(2.0)", "math.log"),
    ("y = math.pow(2.0, 3.0)", "math.pow"),
    # selections the CPU decides
    ("y = np.maximum(a, 0)", "np.maximum"),
    ("y = np.minimum(a, 0)", "np.minimum"),
    # randomness
    ("y = np.random.normal(size=3)", "np.random"),
    ("y = np.random.default_rng(0).random(3)", "np.random"),
    ("import random", "import random"),
    ("import secrets", "import secrets"),
    ("import numpy.random as npr", "import numpy.random"),
    ("from numpy import random", "np.random"),
    ("from numpy.random import default_rng", "from numpy.random import ..."),
    # imports of anything else
    ("import numpy.linalg", "import numpy.linalg"),
    ("from numpy import dot", "np.dot"),
    ("from numpy import exp as e", "np.exp"),
    ("from math import exp", "math.exp"),
    ("import os", "import os"),
    ("import time", "import time"),
    ("from os import path", "from os import ..."),
    ("from numpy import *", "from numpy import *"),
    ("from alpha.learner import model", "from alpha.learner import model"),
    ("from alpha.learner.contract import not_an_op", "c.not_an_op"),
    ("from . import helpers", "from . import ..."),
    ("from .helpers import f", "from .helpers import ..."),
    ("from .. import up", "from .. import ..."),
    ("from .math import sqrt", "from .math import ..."),
    # names this check cannot read
    ("y = eval('a')", "eval()"),
    ("exec('y = 1')", "exec()"),
    ("y = compile('1', 'f', 'eval')", "compile()"),
    ("y = getattr(a, 'sum')", "getattr()"),
    ("setattr(a, 'x', 1)", "setattr()"),
    ("y = __import__('os')", "__import__()"),
    ("y = globals()", "globals()"),
    ("y = vars(a)", "vars()"),
    ("y = open('data.bin')", "open()"),
    ("y = hash(a)", "hash()"),
    ("y = id(a)", "id()"),
    ("y = c.not_an_op(a)", "c.not_an_op"),
]


@pytest.mark.parametrize(("statement", "operation"), FORBIDDEN, ids=[op for _, op in FORBIDDEN])
def test_each_forbidden_construct_is_refused_at_its_line_naming_it(
    statement: str, operation: str
) -> None:
    error = broken(module_with(statement))
    assert (error.path, error.line, error.operation) == (PATH, LINE, operation)
    assert error.module == PATH
    assert str(error).startswith(f"learner module {PATH}: line {LINE}: {operation}: ")
    assert "(and" not in str(error)  # the one violation
    (found,) = violations(module_with(statement), PATH)
    assert type(found) is Violation and (found.line, found.operation) == (LINE, operation)
    assert found.why and found.why in str(error)


@pytest.mark.parametrize(
    ("source", "line", "operation"),
    [
        ("import numpy as xp\n\n\ndef f(a, b):\n    return xp.dot(a, b)\n", 5, "np.dot"),
        ("import math as m\nvalue = m.exp(1.0)\n", 2, "math.exp"),
        ("import numpy\nvalue = numpy.sum([1.0])\n", 2, "np.sum"),
        ("import alpha.learner.contract as k\nvalue = k.softmax\n", 2, "c.softmax"),
        ("from alpha.learner import contract\nvalue = contract.softmax\n", 2, "c.softmax"),
        ("from math import exp as e, sqrt\n", 1, "math.exp"),
        ("import os, math\n", 1, "import os"),
        ("import numpy as np\n\nv = [np.exp(i) for i in range(3)]\n", 3, "np.exp"),
        ("import numpy as np\n\nf = lambda v: np.log(v)\n", 3, "np.log"),
        ("import numpy as np\n\n\n@np.vectorize\ndef f(v):\n    return v\n", 4, "np.vectorize"),
        ("class A:\n    v = eval('1')\n", 2, "eval()"),
        ("x = (\n    1.0\n    ** 2\n)\n", 2, "**"),  # where its left operand starts
        (
            "import numpy as np\n\ny = np.where(\n    True,\n    np.exp(1.0),\n    0.0,\n)\n",
            5,
            "np.exp",
        ),
    ],
    ids=[
        "alias-np",
        "alias-math",
        "plain-numpy",
        "alias-contract",
        "from-alpha-learner",
        "from-math-first",
        "import-list",
        "comprehension",
        "lambda",
        "decorator",
        "class-body",
        "multi-line-binop",
        "multi-line-call",
    ],
)
def test_a_name_is_followed_through_its_alias_and_scope(
    source: str, line: int, operation: str
) -> None:
    error = broken(source)
    assert (error.line, error.operation) == (line, operation)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("def layout(:\n    pass\n", 1),
        ("import numpy as np\n\n\ndef f(a):\n    return a +\n", 5),
        ("def f(a):\n    return a\n  y = 1\n", 3),
        ("x = 1\x00\n", None),
    ],
    ids=["paren", "late", "indent", "nul"],
)
def test_a_module_that_does_not_parse_is_refused_at_its_line(source: str, line: int | None) -> None:
    error = broken(source)
    assert error.operation == "syntax"
    if line is not None:
        assert error.line == line
    assert raises_exactly(ContractBroken, violations, source, PATH).line == error.line


def test_the_first_violation_is_named_and_the_rest_counted() -> None:
    source = module_with("y = np.exp(a) @ b\n    z = a.sum()\n    import os")
    found = violations(source, PATH)
    assert [(v.line, v.operation) for v in found] == [
        (LINE, "@"),
        (LINE, "np.exp"),
        (LINE + 1, ".sum()"),
        (LINE + 2, "import os"),
    ]
    error = broken(source)
    assert (error.line, error.operation) == (LINE, "@")
    assert str(error).endswith(" (and 3 more)")
    two = broken(module_with("y = a.sum()\n    z = a.mean()"))
    assert (two.line, two.operation) == (LINE, ".sum()")
    assert str(two).endswith(" (and 1 more)")


def test_violations_are_in_the_order_of_their_lines() -> None:
    # A decorator's line comes before its function's body, whatever the visit order.
    source = (
        "import numpy as np\n\nv = np.exp(1.0)\n\n\n@np.vectorize\ndef f(a):\n    return a.sum()\n"
    )
    assert [v.line for v in violations(source, PATH)] == [3, 6, 8]


# --- what passes ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mlp", "linear"])
def test_the_shipped_programs_sources_pass(kind: str) -> None:
    source = (ROOT / "alpha" / "learner" / "programs" / f"{kind}.py").read_text(encoding="utf-8")
    assert violations(source, f"{kind}.py") == []
    check_contract(source, f"{kind}.py")


REALISTIC = '''\
"""A small MLP with a leaky hidden layer, written as a user would write one."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from alpha.learner import contract as c

Array = Any  # an array of the contract's dtype


@dataclass(frozen=True)
class Settings:
    hidden: int
    slope: float = 0.1


def _settings(options: Mapping[str, Any]) -> Settings:
    return Settings(int(options["hidden"]), float(options.get("slope", 0.1)))


def layout(features: int, classes: int, options: Mapping[str, Any]) -> list[tuple[str, Any]]:
    s = _settings(options)
    hidden = [("W1", (features, s.hidden)), ("b1", (s.hidden,))]
    return hidden + [("W2", (s.hidden, classes)), ("b2", (classes,))]


def initialize(p: dict[str, Array], random: c.Random) -> None:
    scale = 1.0 / math.sqrt(p["W1"].shape[0])
    p["W1"][...] = ((random.uniform(p["W1"].shape) - 0.5) * (2.0 * scale)).astype(p["W1"].dtype)
    c.fan_in_uniform(p["W2"], random)


def _forward(p: dict[str, Array], x: Array) -> tuple[Array, Array, Array]:
    z = c.affine(x, p["W1"], p["b1"])
    low = np.where(z > 0, np.ones_like(z), np.full_like(z, 0.1))
    h = z * low
    return c.affine(h, p["W2"], p["b2"]), z, h


def contribute(p: dict[str, Array], g: dict[str, Array], x: Array, labels: Any) -> tuple[Any, int]:
    scores, z, h = _forward(p, x)
    loss, d2 = c.squared_error(scores, labels)
    g["W2"][...] = c.outer_sum(h, d2)
    g["b2"][...] = c.sum_rows(d2)
    d1 = c.leaky_relu_backward(c.matmul(d2, p["W2"].T), z, 0.1)
    g["W1"][...] = c.outer_sum(x, d1)
    g["b1"][...] = c.sum_rows(d1)
    hits = np.zeros(1, dtype=np.int64)
    hits[0] = np.count_nonzero(np.argmax(scores, axis=1) == labels)
    return loss, int(hits[0])


def evaluate(p: dict[str, Array], x: Array, labels: Any) -> int:
    scores = _forward(p, x)[0]
    return int(np.count_nonzero(np.argmax(scores, axis=1) == labels))
'''


def test_a_realistic_module_passes_and_runs() -> None:
    assert violations(REALISTIC, PATH) == []
    check_contract(REALISTIC, PATH)
    model = Model(from_source("mine.py", REALISTIC), "float32", 6, 3, (("hidden", 4),))
    parameters = initial_parameters(model, 5)
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    labels = np.uint8([0, 1, 2, 1])
    out = contribute(model, parameters, x, labels)
    assert out.shape == (model.contribution_size,) and np.isfinite(out).all()
    assert 0 <= evaluate(model, parameters, x, labels) <= 1


@pytest.mark.parametrize("name", sorted(NUMPY_ALLOWED))
def test_every_allowed_numpy_name_passes(name: str) -> None:
    assert violations(f"import numpy as np\n\nvalue = np.{name}\n", PATH) == []
    assert violations(f"from numpy import {name}\n", PATH) == []


@pytest.mark.parametrize("name", sorted(MATH_ALLOWED))
def test_every_allowed_math_name_passes(name: str) -> None:
    assert violations(f"import math\n\nvalue = math.{name}\n", PATH) == []


@pytest.mark.parametrize("name", CONTRACT_OPERATIONS)
def test_every_contract_operation_passes(name: str) -> None:
    assert violations(f"from alpha.learner import contract as c\n\nv = c.{name}\n", PATH) == []
    assert violations(f"from alpha.learner.contract import {name}\n", PATH) == []


@pytest.mark.parametrize("module", sorted(set(ALLOWED_IMPORTS) - {"alpha.learner", "__future__"}))
def test_every_allowed_import_passes(module: str) -> None:
    assert violations(f"import {module}\n", PATH) == []


NUMPY_HINTS = """\
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

Array = npt.NDArray[np.floating]
Labels = NDArray[np.integer]


def evaluate(p: dict[str, Array], x: Array, labels: Labels) -> int:
    scores: NDArray[np.generic] = x
    ok = isinstance(scores, np.ndarray) and issubclass(x.dtype.type, np.floating)
    return int(np.count_nonzero(np.argmax(scores, axis=1) == labels)) if ok else 0


def typed(values: ArrayLike, n: np.number[Any], u: np.unsignedinteger[Any]) -> None:
    del values, n, u
"""


def test_numpy_type_hints_pass() -> None:
    assert violations(NUMPY_HINTS, PATH) == []


def test_methods_and_names_that_only_look_like_forbidden_ones_pass() -> None:
    source = (
        "import numpy as np\n"
        "def f(a, sums, maximum):\n"
        "    total = sums + a.shape[0]\n"  # a name, not a method
        "    a.sum_of_squares = 1\n"  # an attribute stored, not a reduction
        "    a.mean = 0.0\n"
        "    b = a.astype(np.float64).T.reshape(-1)\n"
        "    return np.where(maximum > 0, b, -b), max(1, 2), min(3.0, 4.0), abs(-1.0)\n"
    )
    assert violations(source, PATH) == []


# --- one forbidden operation anywhere is found ----------------------------------------------

CLEAN = [
    "y = c.matmul(a, b)",
    "y = np.where(a > 0, a, 0 * a)",
    "y = np.zeros(a.shape, dtype=a.dtype)",
    "k = int(np.argmax(a, axis=1)[0])",
    "y = math.sqrt(2.0) * a - a / 3.0",
    "y = c.relu(a) + c.hard_tanh(b)",
    "loss, d = c.squared_error(a, labels)",
    "g['W'][...] = c.outer_sum(x, d)",
    "n = a.shape[0] + len(labels)",
    "y = a.T.copy()",
]
# (an expression, its operation): placed anywhere an expression may stand.
EXPRESSIONS = [
    ("a @ b", "@"),
    ("a ** 2", "**"),
    ("np.dot(a, b)", "np.dot"),
    ("np.einsum('ij->i', a)", "np.einsum"),
    ("np.sum(a)", "np.sum"),
    ("a.sum()", ".sum()"),
    ("a.dot(b)", ".dot()"),
    ("a.mean()", ".mean()"),
    ("sum(a)", "sum()"),
    ("np.add.reduce(a)", ".reduce()"),
    ("pow(a, 2)", "pow()"),
    ("np.exp(a)", "np.exp"),
    ("math.exp(1.0)", "math.exp"),
    ("np.tanh(a)", "np.tanh"),
    ("np.maximum(a, 0)", "np.maximum"),
    ("np.random.random(3)", "np.random"),
    ("eval('a')", "eval()"),
    ("getattr(a, 'T')", "getattr()"),
    ("c.not_an_op(a)", "c.not_an_op"),
]
# (a statement, its operation): placed anywhere a statement may stand.
STATEMENTS = [
    ("import random", "import random"),
    ("import os", "import os"),
    ("import numpy.linalg", "import numpy.linalg"),
    ("from numpy import dot", "np.dot"),
    ("from . import helpers", "from . import ..."),
    ("a @= b", "@="),
    ("a **= 2", "**="),
]

# Where a forbidden expression or statement stands: its lines ({} is it), and which of them
# holds it (from 0).
EXPRESSION_PLACES = [
    (["y = {}"], 0),
    (["if a.shape[0] > 1:", "    y = {}"], 1),
    (["for i in range(2):", "    y = i * {}"], 1),
    (["while n > 0:", "    n = n - 1", "    y = {}"], 2),
    (["def inner(v):", "    return {}"], 1),
    (["f = lambda v: {}"], 0),
    (["ys = [{} for _ in range(2)]"], 0),
    (["y = c.relu(", "    {}", ")"], 1),
    (["try:", "    y = a", "except ValueError:", "    y = {}"], 3),
    (["with_ = {{'k': {}}}"], 0),
]
STATEMENT_PLACES = [
    (["{}"], 0),
    (["if n > 1:", "    {}"], 1),
    (["for i in range(2):", "    {}"], 1),
    (["def inner(v):", "    {}", "    return v"], 1),
]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_one_forbidden_operation_anywhere_in_a_clean_module_is_found(data: st.DataObject) -> None:
    body = data.draw(st.lists(st.sampled_from(CLEAN), max_size=8), label="clean lines")
    at = data.draw(st.integers(0, len(body)), label="where")
    if data.draw(st.booleans(), label="an expression"):
        text, operation = data.draw(st.sampled_from(EXPRESSIONS), label="forbidden")
        lines, holder = data.draw(st.sampled_from(EXPRESSION_PLACES), label="place")
    else:
        text, operation = data.draw(st.sampled_from(STATEMENTS), label="forbidden")
        lines, holder = data.draw(st.sampled_from(STATEMENT_PLACES), label="place")
    placed = [line.format(text) for line in lines]
    in_first = data.draw(st.booleans(), label="in the first function")
    clean = ["y = c.affine(x, p['W'], p['b'])", *body]
    # The module's lines, counting where the forbidden one lands.
    source_lines = HEADER.split("\n\n\ndef")[0].split("\n")
    line = 0
    for index, has_it in enumerate((in_first, not in_first)):
        source_lines += [
            "",
            "",
            f"def f{index}(p, g, x, labels):",
            "    a, b, n, d = x, p['W'], 3, x",
        ]
        if has_it:
            statements = body[:at] + placed + body[at:]
            line = len(source_lines) + at + holder + 1
        else:
            statements = clean
        source_lines += [f"    {each}" for each in statements] + ["    return a, 0"]
    source = "\n".join(source_lines) + "\n"
    assert violations(source.replace(text, "a"), PATH) == []  # clean without it
    error = broken(source)
    assert (error.line, error.operation) == (line, operation), source
    assert [(v.line, v.operation) for v in violations(source, PATH)] == [(line, operation)]


def test_a_name_used_above_its_import_is_checked_as_the_module_it_names() -> None:
    source = "def f(x):\n    return np.exp(x)\n\n\nimport numpy as np\n"
    assert [(v.line, v.operation) for v in violations(source, "m.py")] == [(2, "np.exp")]


def test_the_contract_module_through_its_full_path_is_checked_too() -> None:
    source = (
        "import alpha.learner.contract\n"
        "def f(x):\n"
        "    return alpha.learner.contract.relu(x) + alpha.learner.contract.not_an_op(x)\n"
    )
    assert [(v.line, v.operation) for v in violations(source, "m.py")] == [(3, "c.not_an_op")]
