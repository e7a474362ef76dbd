"""The numerical contract, checked in a learner module's source (``docs/learners.md``, "What
the compiler checks"): pure, over the text of the module and nothing else (it is read, never
run, here).

A learner module computes its contribution in contract arithmetic: the operations of
:mod:`alpha.learner.contract`, elementwise array arithmetic (``+ - * /``, comparisons,
selections) and numpy's correctly rounded or exact functions. Everything else could give
other bits on another host, so the module is refused at compile time, naming its file, line
and operation, instead of running into a digest that differs between an x86-64 and an AArch64
role:

- a product by BLAS (``@``, ``np.dot``, ``np.matmul``, ``np.einsum``, ``x.dot(y)``) or a
  reduction whose order numpy chooses (``np.sum``, ``np.mean``, ``x.sum()``,
  ``np.add.reduce``, the builtin ``sum``, whose float order changed in Python 3.12);
- a transcendental or a power (``np.exp``, ``np.log``, ``np.tanh``, ``math.exp``, ``**``,
  ``pow``): library approximations whose last bit differs between libms;
- ``np.maximum`` and ``np.minimum``, which leave the sign of a zero and the NaN they return to
  the CPU's instruction (use ``c.relu`` or ``np.where``);
- randomness but the seeded :class:`~alpha.learner.contract.Random` a module is handed
  (``np.random``, ``random``, ``secrets``), and any other import than ``numpy``, ``math``,
  ``alpha.learner.contract`` and the typing modules (a module that reads files, clocks or the
  environment computes what its host has);
- ``eval``, ``exec``, ``getattr`` and the like, with which a name could not be checked.

What is checked is names: the modules a name is bound to by the module's imports, and the
attribute or function each use names. It catches what an honest module would get wrong; it is
no sandbox against a module written to evade it (the artifact's own checks and the run identity
are what bind a run to its code).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Final, final

from alpha.errors import ContractBroken
from alpha.learner.contract import __all__ as CONTRACT_NAMES

__all__ = [
    "ALLOWED_IMPORTS",
    "MATH_ALLOWED",
    "NUMPY_ALLOWED",
    "Violation",
    "check_contract",
    "violations",
]

CONTRACT_MODULE: Final = "alpha.learner.contract"

#: The modules a learner module may import, and what each is.
ALLOWED_IMPORTS: Final = {
    "__future__": "annotations",
    "typing": "type hints",
    "collections.abc": "type hints",
    "dataclasses": "plain records",
    "math": "correctly rounded scalar functions (MATH_ALLOWED)",
    "numpy": "arrays and their exact or correctly rounded functions (NUMPY_ALLOWED)",
    "numpy.typing": "type hints",
    CONTRACT_MODULE: "the contract operations",
    "alpha.learner": "for `from alpha.learner import contract`",
}

#: numpy's names a learner module may use: constructors, shapes and dtypes, and functions
#: that are exact (comparisons, selections, argmax) or correctly rounded (the IEEE basic
#: operations and square root), element by element.
NUMPY_ALLOWED: Final = frozenset(
    [
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "empty",
        "empty_like",
        "full",
        "full_like",
        "array",
        "asarray",
        "arange",
        "eye",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "reshape",
        "transpose",
        "swapaxes",
        "expand_dims",
        "squeeze",
        "broadcast_to",
        "flip",
        "roll",
        "tile",
        "repeat",
        "take",
        "copy",
        "where",
        "newaxis",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "intp",
        "bool_",
        "dtype",
        "ndarray",
        # numpy's abstract scalar types: for type hints and isinstance, computing nothing
        "generic",
        "number",
        "integer",
        "signedinteger",
        "unsignedinteger",
        "floating",
        "add",
        "subtract",
        "multiply",
        "divide",
        "true_divide",
        "negative",
        "positive",
        "abs",
        "absolute",
        "sqrt",
        "square",
        "reciprocal",
        "sign",
        "floor",
        "ceil",
        "trunc",
        "rint",
        "outer",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "isfinite",
        "isnan",
        "isinf",
        "argmax",
        "argmin",
        "count_nonzero",
        "nonzero",
        "any",
        "all",
        "shape",
        "size",
        "ndim",
        "array_equal",
    ]
)

#: math's names a learner module may use: correctly rounded or exact ones, and constants.
MATH_ALLOWED: Final = frozenset(
    [
        "sqrt",
        "isqrt",
        "isfinite",
        "isnan",
        "isinf",
        "fabs",
        "floor",
        "ceil",
        "trunc",
        "copysign",
        "prod",
        "fsum",
        "gcd",
        "comb",
        "perm",
        "inf",
        "nan",
        "pi",
        "e",
        "tau",
    ]
)

# What a method of that name computes, whatever its receiver: the reductions and products
# numpy arrays have as methods, and a ufunc's reductions (``np.add.reduce`` is ``np.sum``).
_METHODS: Final = {
    "reduce": "a reduction whose order numpy chooses",
    "reduceat": "a reduction whose order numpy chooses",
    "accumulate": "a reduction whose order numpy chooses",
    "dot": "a BLAS product",
    "sum": "a reduction whose order numpy chooses",
    "mean": "a reduction whose order numpy chooses",
    "prod": "a reduction whose order numpy chooses",
    "cumsum": "a reduction whose order numpy chooses",
    "cumprod": "a reduction whose order numpy chooses",
    "std": "a reduction whose order numpy chooses",
    "var": "a reduction whose order numpy chooses",
    "trace": "a reduction whose order numpy chooses",
    "max": "a reduction that leaves NaNs and signed zeros to the CPU",
    "min": "a reduction that leaves NaNs and signed zeros to the CPU",
}

# Builtins a module may not call: each hides a name from this check, or computes outside
# the contract.
_BUILTINS: Final = {
    "eval": "runs code this check cannot read",
    "exec": "runs code this check cannot read",
    "compile": "makes code this check cannot read",
    "__import__": "imports a module this check cannot name",
    "getattr": "names an attribute this check cannot read",
    "setattr": "names an attribute this check cannot read",
    "delattr": "names an attribute this check cannot read",
    "globals": "reaches names this check cannot read",
    "locals": "reaches names this check cannot read",
    "vars": "reaches names this check cannot read",
    "open": "reads what its host has",
    "input": "reads what its host has",
    "breakpoint": "stops the participant",
    "sum": "adds floats in an order Python chooses (compensated since 3.12)",
    "pow": "a power: a library approximation",
    "hash": "differs between processes",
    "id": "differs between processes",
}

# Why a named numpy or math function is refused, for the common ones (others: "not
# contract arithmetic").
_WHY: Final = {
    "dot": "a BLAS product",
    "matmul": "a BLAS product",
    "vdot": "a BLAS product",
    "inner": "a BLAS product",
    "tensordot": "a BLAS product",
    "einsum": "a product whose order numpy chooses",
    "linalg": "BLAS and LAPACK",
    "sum": "a reduction whose order numpy chooses",
    "mean": "a reduction whose order numpy chooses",
    "average": "a reduction whose order numpy chooses",
    "prod": "a reduction whose order numpy chooses",
    "cumsum": "a reduction whose order numpy chooses",
    "nansum": "a reduction whose order numpy chooses",
    "exp": "a transcendental: a library approximation",
    "log": "a transcendental: a library approximation",
    "tanh": "a transcendental: a library approximation",
    "power": "a power: a library approximation",
    "maximum": "leaves the sign of a zero and NaNs to the CPU (use c.relu or np.where)",
    "minimum": "leaves the sign of a zero and NaNs to the CPU (use np.where)",
    "random": "randomness but the seeded one Alpha hands over",
}


@final
@dataclass(frozen=True, slots=True)
class Violation:
    """One use outside the contract: its line, the operation as written, and why."""

    line: int
    operation: str
    why: str


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.modules: dict[str, str] = {}  # a bound name -> the module it names

    def refuse(self, node: ast.AST, operation: str, why: str) -> None:
        self.found.append(Violation(getattr(node, "lineno", 0), operation, why))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS:
                self.refuse(node, f"import {alias.name}", _import_why(alias.name))
                continue
            if alias.asname is not None:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = node.module or ""
        if node.level or source not in ALLOWED_IMPORTS:
            self.refuse(node, f"from {'.' * node.level}{source} import ...", _import_why(source))
            return
        for alias in node.names:
            bound = alias.asname or alias.name
            if alias.name == "*":
                self.refuse(node, f"from {source} import *", "hides the names it binds")
            elif source == "alpha.learner":
                if alias.name != "contract":
                    self.refuse(node, f"from alpha.learner import {alias.name}", _import_why(""))
                self.modules[bound] = CONTRACT_MODULE
            elif source in ("numpy", "math", CONTRACT_MODULE):
                self._name_of(node, source, alias.name)
            # typing, collections.abc, dataclasses, __future__: names for types and records

    def _name_of(self, node: ast.AST, module: str, name: str) -> None:
        """Refuse ``module.name`` unless it is contract arithmetic."""
        shown = {"numpy": "np", "math": "math", CONTRACT_MODULE: "c"}[module]
        if module == "numpy" and name not in NUMPY_ALLOWED:
            self.refuse(node, f"{shown}.{name}", _WHY.get(name, "not contract arithmetic"))
        elif module == "math" and name not in MATH_ALLOWED:
            self.refuse(node, f"math.{name}", _WHY.get(name, "not correctly rounded"))
        elif module == CONTRACT_MODULE and name not in CONTRACT_NAMES:
            self.refuse(node, f"c.{name}", "is no operation of alpha.learner.contract")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None and dotted[0] in self.modules:
            # A module's name used through its path: `alpha.learner.contract.relu` after an
            # `import alpha.learner.contract`, or `np.dot`.
            path = ".".join([self.modules[dotted[0]], *dotted[1:]])
            if path.startswith(CONTRACT_MODULE + "."):
                self._name_of(node, CONTRACT_MODULE, path.split(".")[3])
                return
            if path.split(".")[0] == "alpha":
                if CONTRACT_MODULE.startswith(path):
                    return  # a part of the contract module's own path
                self.refuse(node, path, _import_why(path))
                return
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            module = self.modules[node.value.id]
            if module in ("numpy", "math", CONTRACT_MODULE):
                self._name_of(node, module, node.attr)
                return  # its value is a module's name: nothing more to look at
        elif node.attr in _METHODS and isinstance(node.ctx, ast.Load):
            self.refuse(node, f".{node.attr}()", _METHODS[node.attr])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name in _BUILTINS and name not in self.modules:  # not a name it bound itself
            self.refuse(node, f"{name}()", _BUILTINS[name])
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.refuse(node, "@", "a BLAS product (use c.matmul or c.affine)")
        elif isinstance(node.op, ast.Pow):
            self.refuse(node, "**", "a power: a library approximation (write x * x)")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult):
            self.refuse(node, "@=", "a BLAS product (use c.matmul or c.affine)")
        elif isinstance(node.op, ast.Pow):
            self.refuse(node, "**=", "a power: a library approximation (write x * x)")
        self.generic_visit(node)


def _dotted(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]`` when the chain is names and attributes only."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    return [current.id, *reversed(parts)]


def _import_why(module: str) -> str:
    if module in ("random", "secrets") or module.startswith("numpy.random"):
        return "randomness but the seeded one Alpha hands over (initialize's random)"
    if module.startswith("numpy."):
        return "BLAS, LAPACK or other numpy parts outside the contract"
    allowed = ", ".join(sorted(set(ALLOWED_IMPORTS) - {"alpha.learner"}))
    return f"a learner module imports only {allowed}"


def violations(source: str, path: str) -> list[Violation]:
    """Every use outside the contract in ``source`` (the text of the module at ``path``), in
    the order of its lines.

    Raises:
        ContractBroken: the text does not parse (line 0 when it has none).
    """
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        raise ContractBroken(path, error.lineno or 0, "syntax", str(error.msg)) from None
    checker = _Checker()
    # The imports first, wherever they stand: a function above `import numpy as np` uses `np`
    # as the module it names by the time it runs.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            checker.visit(node)
    imports = list(checker.found)
    checker.found.clear()
    for node in tree.body:
        checker.visit(node)
    found = {(each.line, each.operation): each for each in [*imports, *checker.found]}
    return sorted(found.values(), key=lambda each: each.line)


def check_contract(source: str, path: str) -> None:
    """Refuse ``source`` at its first use outside the contract.

    Raises:
        ContractBroken: at the first such use, its path, line and operation named (and how
            many more there are), or when the text does not parse.
    """
    found = violations(source, path)
    if not found:
        return
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise ContractBroken(path, first.line, first.operation, first.why + more)
