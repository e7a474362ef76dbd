#!/usr/bin/env python3
"""Check that alpha's folders are its layers: imports run down the rank table, never up.

Every module of ``alpha`` lives in a folder, and every folder has a rank (``RANKS``):

    rank  folder        its job                                             pure
    0     (top level)   errors, exitcodes, checked, files, failpoints,      yes
                        native, faces, __init__
    1     core/         membership, topology, identity and digests,         yes
                        combine, budgets
    2     wire/         the frame layout, abort causes                      yes
    3     schedule/     what a compiled role carries: local forms,          yes
                        regions, role, operations
    4     records/      commit and progress records                         yes
    4     checkpoint/   the checkpoint store                                no
    5     learner/      the learner's run-time half (numpy)                 yes
    6     compiler/     plan, forms, checks, projection, replicate          yes
    6     runtime/      one participant process (trio)                      no
    7     artifact/     build, read, verify, loader, entry, participant     no
    8     launch/       launcher, warm starts, deploy, remote               no
    9     app/          the command line and one module per command         no
    10    __main__      ``python -m alpha``, above all                      no

The rules, each with its own message (one line per violation, importer and imported named):

(a) ``imports a higher rank``: a module imports its own folder and lower ranks only.
(b) ``same rank``: two folders of one rank never import each other (compiler/ and runtime/, the
    compiler's output being data the runtime reads; records/ and checkpoint/).
(c) ``impure``: a module of a pure folder (``PURE_FOLDERS``) imports none of ``FORBIDDEN_IN_PURE``
    (trio, socket, subprocess, os, asyncio, pycuda), but for the few modules of ``IO_MODULES``,
    each with its reason. Purity goes by folder so that the list stays short.
(d) ``private``: ``_x.py`` is private to its folder: only the modules of that folder (its face
    included) import it.
(e) ``participant``: nothing reachable at run time from a participant's entry (``ENTRY``, the
    loader inside every artifact) imports compiler/, app/ or launch/ (``NOT_IN_PARTICIPANT``):
    reachability runs over every run-time import, those inside functions included, and over the
    loader's hand-off, a call by name (its ``ENTRY = ("module", "function")``, as an entry
    point names its function), which the check reads from the loader's source and follows; a
    loader that names no hand-off this way fails the check. And
    ``learner-free``: runtime/ and schedule/, which every participant runs (a sum check's too),
    import no learner module: a role with learner work is handed its learner's state by the
    entry, which imports the learner for such a role only.
(f) ``loader``: the loader imports the standard library only, since it runs before the bundled
    package is checked; a hand-off written as an import (``LOADER_HANDOFF``), inside a function,
    once the check has passed, would be the listed exception.
(g) ``outside``: alpha/ never imports harness, gates, bench or tests (``OUTSIDE``), but for the
    ``EXCEPTIONS`` listed with their reason.
(h) ``face``: harness/, gates/ and bench/ (beside the package) import alpha through package faces
    only: ``alpha``, ``alpha.<folder>`` or a public top-level module such as ``alpha.errors``,
    never ``alpha.<folder>.<module>`` nor a private module.
(i) ``floors``: the longest chain of run-time imports across alpha/ is at most ``MAX_FLOORS``
    modules (a circle counts as one floor); the check prints the chain when it fails. Floors
    count imports, what importing a module runs: the loader's hand-off by name is a call its
    ``main()`` makes when an artifact runs, not an import, so the toolchain's import of the
    loader (for its reader) does not stand on the participant. And ``circle``: at most one
    import circle, inside artifact/ only.
(j) ``concrete``: inside alpha, a module imports the module a name lives in
    (``from alpha.core.membership import ...``), never a folder's face, its own included: a face
    is for harness/, gates/, bench/ and users, and importing one from inside deepens the graph
    and risks a half-initialised package. The top-level package ``alpha`` is no folder's face.

What an import is: ``import a.b`` and ``from a.b import c`` (``a.b.c`` too when that is a module),
relative ones resolved, at module level or inside functions (they run). Imports under
``if TYPE_CHECKING:`` are types only and do not count. ``from alpha.x import n``, where
``alpha.x`` is a lazy face (``alpha.faces``), imports the module the face loads ``n`` from, as
the face's own ``if TYPE_CHECKING:`` imports say (tests/test_faces.py keeps them true). For
reachability and floors, importing ``alpha.x.y`` also runs the face ``alpha.x`` when the
importer is not inside ``alpha.x`` already.

Known violations still to fix are listed in ``KNOWN`` with the reason; the check fails on any
violation not listed there, and on a listed one that no longer occurs, so the list only shrinks.
Run by ``make lint``: ``scripts/check_layers.py [PACKAGE]``, exit 0 when clean, 1 with one line
per violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "alpha"

# The folder of each top-level module and package; "" is the top level itself.
RANKS: dict[str, int] = {
    "": 0,
    "core": 1,
    "wire": 2,
    "schedule": 3,
    "records": 4,
    "checkpoint": 4,
    "learner": 5,
    "compiler": 6,
    "runtime": 6,
    "artifact": 7,
    "launch": 8,
    "app": 9,
    "__main__": 10,
}

# Folders of pure code over values and bytes (the sans-IO core): the top level, core/, wire/,
# schedule/, records/ (the records are values; the few files they live in are read and written
# by one module), learner/ (numpy arithmetic; its data set and GPU are its two doors to the
# machine, and its compiled fold a library alpha.native builds) and compiler/ (a plan in,
# schedules out).
PURE_FOLDERS = frozenset({"", "core", "wire", "schedule", "records", "learner", "compiler"})

FORBIDDEN_IN_PURE = frozenset({"trio", "socket", "subprocess", "os", "asyncio", "pycuda"})

# Modules of pure folders that do I/O, each for its one reason.
IO_MODULES: dict[str, str] = {
    "alpha.files": "the one helper for writing a file whole (temporary name, fsync, rename)",
    "alpha.failpoints": "the test fault points, switched on from the environment",
    "alpha.native": (
        "C sources of Alpha's compiled on first use: runs the host's C compiler, keeps each "
        "library in a per-user cache folder, reads its environment (CC, the cache's place)"
    ),
    "alpha.records.progress": "the progress records' writer and incremental reader (one file)",
    "alpha.learner.data": "the data set's one read (the shipped copy, or the one DIGITS_ENV names)",
    "alpha.learner.gpu": "the GPU, through PyCUDA, chosen by CUDA_VISIBLE_DEVICES (isolated)",
}

# The module every artifact runs first, and the packages a participant must never reach.
ENTRY = "alpha.artifact.loader"
NOT_IN_PARTICIPANT = ("compiler", "app", "launch")
LEARNER_FREE = ("runtime", "schedule")
LEARNER = "learner"

# The loader's imports of alpha: the hand-off to the entry once every member checked.
LOADER_HANDOFF = frozenset({"alpha.artifact.entry"})

OUTSIDE = frozenset({"harness", "gates", "bench", "tests"})
# (importer, outside package): why alpha imports it.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("alpha.app.observe", "gates"): (
        "`alpha observe gate` runs the gates from a source checkout: they drive real runs with "
        "the test harness, sshd and the AArch64 sysroot, which an installed alpha does not ship"
    ),
}
# The folders beside the package that import it through faces only.
USERS = ("harness", "gates", "bench")

MAX_FLOORS = 12

# (importer, imported): why it is still here. ("alpha", "floors") stands for the floor count,
# ("alpha", "circles") for a circle outside artifact/ or a second one.
KNOWN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One run-time import in a file: the module named and whether it sits inside a function."""

    name: str
    in_function: bool
    # From `from m import n`: ``m.n``, which counts only where it is a module of alpha.
    alias: bool = False
    # The module a lazy face loads a name from (``from alpha.x import n``: n's module).
    via_face: bool = False


@dataclass(frozen=True)
class Violation:
    importer: str
    imported: str
    why: str

    def line(self) -> str:
        return f"check_layers: {self.importer} imports {self.imported}: {self.why}"


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path``, ``root`` being the folder above the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, package: str, in_function: bool = False) -> Iterator[Import]:
    """Every import ``tree`` runs (absolute names; ``from m import n`` yields ``m`` and ``m.n``,
    the caller keeping ``m.n`` only where it is a module)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                yield from imports(child, package, in_function)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, in_function)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            elif node.module is not None:
                module = node.module
            else:
                continue
            yield Import(module, in_function)
            for alias in node.names:
                yield Import(f"{module}.{alias.name}", in_function, alias=True)
        else:
            inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from imports(node, package, inside)


def folder_of(module: str, root: Path) -> str:
    """The folder (a key of RANKS) that ``module`` of the package at ``root`` lives in."""
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    if len(parts) == 2 and not (root / parts[1]).is_dir():
        folder = "__main__" if parts[1] == "__main__" else ""
    else:
        folder = parts[1]
    if folder not in RANKS:
        raise SystemExit(f"check_layers: {module} is in no folder of RANKS; add {folder!r}")
    return folder


def _is_module(name: str, above: Path) -> bool:
    path = above.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last.startswith("_") and not (last.startswith("__") and last.endswith("__"))


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


# alpha/data/ is package data, not modules of the package: plans, the digits, and the learner
# modules of the shipped examples, which are run from their text (alpha.learner.program) like
# a user's, never imported, and checked against the contract as a user's are.
DATA = "data"


@dataclass(frozen=True)
class Package:
    """The package's modules and, for each, its run-time imports of other modules."""

    root: Path
    # module -> every import its file runs (of anything)
    imports: dict[str, tuple[Import, ...]]

    @classmethod
    def read(cls, root: Path) -> Package:
        found: dict[str, tuple[Import, ...]] = {}
        faces = face_homes(root)
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts or path.relative_to(root).parts[0] == DATA:
                continue
            module = module_name(path, root.parent)
            package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
            tree = ast.parse(path.read_text(), str(path))
            found[module] = tuple(_modules(imports(tree, package), root.parent, faces))
        return cls(root, found)

    def folder(self, module: str) -> str:
        return folder_of(module, self.root)

    def edges(self, module: str) -> list[str]:
        """The alpha modules ``module`` runs on import, the faces above them included."""
        out: list[str] = []
        for item in self.imports[module]:
            if not _within(item.name, PACKAGE) or item.name not in self.imports:
                continue
            parts = item.name.split(".")
            for n in range(2, len(parts) + 1):
                name = ".".join(parts[:n])
                if name != module and not _within(module, name) and name not in out:
                    out.append(name)
        return out


def face_homes(root: Path) -> dict[str, dict[str, str]]:
    """For each face (a package's ``__init__.py``) of the package at ``root``: the module each
    name it loads lazily lives in, read from its ``if TYPE_CHECKING:`` imports, which
    tests/test_faces.py keeps equal to what the face loads."""
    faces: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("__init__.py")):
        homes: dict[str, str] = {}
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.If) and _type_checking(node):
                for child in node.body:
                    if isinstance(child, ast.ImportFrom) and child.module and not child.level:
                        for alias in child.names:
                            homes[alias.asname or alias.name] = child.module
        faces[module_name(path, root.parent)] = homes
    return faces


def _modules(
    found: Iterable[Import], above: Path, faces: dict[str, dict[str, str]] | None = None
) -> Iterator[Import]:
    """The imports of ``found`` that name a module: ``from alpha.x import y`` adds ``alpha.x.y``
    to ``alpha.x`` where ``y`` is a module of alpha, or, where ``alpha.x`` is a lazy face (one
    of ``faces``), the module it loads ``y`` from; a name of alpha that is no module (``from
    alpha import __version__``) stands for the package it is in."""
    seen: set[tuple[str, bool, bool]] = set()
    for item in found:
        name, via_face = item.name, False
        if _within(name, PACKAGE):
            if item.alias and not _is_module(name, above):
                face, _, attribute = name.rpartition(".")
                home = (faces or {}).get(face, {}).get(attribute)
                if home is None:
                    continue
                name, via_face = home, True
            while not _is_module(name, above) and "." in name:
                name = name.rsplit(".", 1)[0]
        elif item.alias:
            continue
        if (name, item.in_function, via_face) not in seen:
            seen.add((name, item.in_function, via_face))
            yield Import(name, item.in_function, via_face=via_face)


def _top_level_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names or name == "__future__"


def rank_rules(pkg: Package) -> Iterator[Violation]:
    """Rules (a) to (d), (f) and (g) and the learner-free rule, import by import."""
    for module, found in pkg.imports.items():
        mine = pkg.folder(module)
        for item in found:
            imported = item.name
            top = imported.split(".")[0]
            handoff = imported in LOADER_HANDOFF and item.in_function
            if module == ENTRY and not _top_level_stdlib(imported) and not handoff:
                yield Violation(
                    module,
                    imported,
                    "loader: it runs before the bundled package is checked, so it imports "
                    "the standard library only (but for its hand-off, in a function)",
                )
            if top in OUTSIDE and not any(
                module == a and _within(imported, b) for a, b in EXCEPTIONS
            ):
                yield Violation(
                    module,
                    imported,
                    f"outside: alpha never imports {top} (an exception needs EXCEPTIONS)",
                )
            if mine in PURE_FOLDERS and top in FORBIDDEN_IN_PURE and module not in IO_MODULES:
                yield Violation(
                    module, imported, f"impure: {module} is in a pure folder and imports {top}"
                )
            if top != PACKAGE or imported in (PACKAGE, module):
                continue
            theirs = pkg.folder(imported)
            if mine == theirs:
                pass
            elif RANKS[theirs] > RANKS[mine]:
                yield Violation(
                    module,
                    imported,
                    f"imports a higher rank: {_show(mine)} (rank {RANKS[mine]}) imports "
                    f"{_show(theirs)} (rank {RANKS[theirs]})",
                )
            elif RANKS[theirs] == RANKS[mine]:
                yield Violation(
                    module,
                    imported,
                    f"same rank: {_show(mine)} and {_show(theirs)} (rank {RANKS[mine]}) never "
                    "import each other",
                )
            if _private(imported) and theirs != mine and not item.via_face:
                yield Violation(
                    module,
                    imported,
                    f"private: {imported} is private to {_show(theirs)}; import its face",
                )
            if mine in LEARNER_FREE and theirs == LEARNER:
                yield Violation(
                    module,
                    imported,
                    "learner-free: every participant runs it, a sum check's too: it imports "
                    "the learner for types only, and is handed the learner's state",
                )
            if imported == f"{PACKAGE}.{theirs}" and not item.via_face:
                yield Violation(
                    module,
                    imported,
                    f"concrete: inside alpha, import the module itself, not {_show(theirs)}'s "
                    "face (faces are for harness/, gates/, bench/ and users)",
                )


def _show(folder: str) -> str:
    return "the top level" if folder == "" else f"{folder}/"


def handoff_of(pkg: Package) -> str | None:
    """The module the loader hands off to by name: its ``ENTRY = ("module", "function")``."""
    path = pkg.root.parent.joinpath(*ENTRY.split(".")).with_suffix(".py")
    for node in ast.parse(path.read_text(), str(path)).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(target, "id", None) for target in node.targets] == ["ENTRY"]
            and isinstance(node.value, ast.Tuple)
            and len(node.value.elts) == 2
            and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts
            )
        ):
            module = node.value.elts[0]
            assert isinstance(module, ast.Constant)
            return str(module.value)
    return None


def participant_rule(pkg: Package) -> Iterator[Violation]:
    """Rule (e): what a participant's entry reaches at run time stays out of the compiler, the
    launcher and the command line. One line per import that crosses into one of them."""
    if ENTRY not in pkg.imports:
        return
    handoff = handoff_of(pkg)
    if handoff is None or handoff not in pkg.imports:
        yield Violation(
            ENTRY,
            str(handoff),
            'participant: the loader names its hand-off as ENTRY = ("module", "function"), '
            "a module of the package, so that the check can follow it",
        )
    path_to: dict[str, list[str]] = {ENTRY: [ENTRY]}
    queue = [ENTRY]
    while queue:
        module = queue.pop(0)
        edges = pkg.edges(module)
        if module == ENTRY and handoff in pkg.imports:
            edges = [*edges, handoff]
        for imported in edges:
            if pkg.folder(imported) in NOT_IN_PARTICIPANT:
                chain = " -> ".join([*path_to[module], imported])
                yield Violation(
                    module,
                    imported,
                    f"participant: a participant reaches {_show(pkg.folder(imported))} at "
                    f"run time: {chain}",
                )
            elif imported not in path_to:
                path_to[imported] = [*path_to[module], imported]
                queue.append(imported)


def circles(pkg: Package) -> list[list[str]]:
    """The strongly connected components of the run-time import graph (Tarjan's, iterative),
    each as its sorted modules, in the order they close (callees first)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(pkg.imports):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(pkg.edges(start))))
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(pkg.edges(child))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def longest_chain(pkg: Package) -> list[str]:
    """The longest chain of run-time imports, a circle counting as one floor (its modules shown
    together in brackets)."""
    components = circles(pkg)
    home = {member: n for n, component in enumerate(components) for member in component}
    best: dict[int, list[int]] = {}
    for n, component in enumerate(components):  # callees close first
        below = {home[e] for member in component for e in pkg.edges(member)} - {n}
        tails = [best[m] for m in sorted(below)]
        best[n] = [n, *max(tails, key=len, default=[])]
    chain = max(best.values(), key=len, default=[])

    def name(n: int) -> str:
        members = components[n]
        return members[0] if len(members) == 1 else "[" + " ".join(members) + "]"

    return [name(n) for n in chain]


def graph_rules(pkg: Package) -> Iterator[Violation]:
    """Rule (i): floors and circles."""
    chain = longest_chain(pkg)
    if len(chain) > MAX_FLOORS:
        yield Violation(
            PACKAGE,
            "floors",
            f"floors: the longest chain of run-time imports is {len(chain)} floors, more than "
            f"{MAX_FLOORS}: {' -> '.join(chain)}",
        )
    loops = [c for c in circles(pkg) if len(c) > 1]
    for n, loop in enumerate(loops):
        inside = all(pkg.folder(m) == "artifact" for m in loop)
        if not inside or n > 0:
            yield Violation(
                PACKAGE,
                "circles",
                "circle: at most one import circle, inside artifact/ only; this one "
                f"{'is the second' if inside else 'leaves artifact/'}: {' -> '.join(loop)}",
            )


def face_rule(above: Path) -> Iterator[Violation]:
    """Rule (h): the folders beside the package import alpha through its faces only."""
    for user in USERS:
        folder = above / user
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.py")):
            module = module_name(path, above)
            package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
            tree = ast.parse(path.read_text(), str(path))
            for item in _modules(imports(tree, package), above):
                parts = item.name.split(".")
                if parts[0] != PACKAGE or item.via_face:
                    continue
                if len(parts) > 2 or any(_private(part) for part in parts):
                    face = ".".join(parts[:2])
                    yield Violation(
                        module,
                        item.name,
                        f"face: {user}/ imports alpha through package faces only (import "
                        f"from {face})",
                    )


def violations(root: Path) -> list[Violation]:
    """Every violation of every rule, for the package at ``root`` and the folders beside it."""
    pkg = Package.read(root)
    found = [
        *rank_rules(pkg),
        *participant_rule(pkg),
        *graph_rules(pkg),
        *face_rule(root.parent),
    ]
    unique: dict[tuple[str, str, str], Violation] = {}
    for v in found:
        unique.setdefault((v.importer, v.imported, v.why), v)
    return sorted(unique.values(), key=lambda v: (v.importer, v.imported, v.why))


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / PACKAGE
    found = violations(root)
    pairs = {(v.importer, v.imported) for v in found}
    bad = [v for v in found if (v.importer, v.imported) not in KNOWN]
    gone = sorted(set(KNOWN) - pairs)
    for v in bad:
        print(v.line())
    for importer, imported in gone:
        print(f"check_layers: {importer} no longer imports {imported}; remove it from KNOWN")
    if bad or gone:
        return 1
    chain = longest_chain(Package.read(root))
    print(
        f"check_layers: {len(KNOWN)} known violation(s) left, no new one; "
        f"{len(chain)} floors: {' -> '.join(chain)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
