"""The layering check (scripts/check_layers.py, run by `make lint`): folders are ranks. It passes
on the package, and each of its rules fails, with that rule's message, on a copy of the package
broken on purpose: an upward import, a same-rank import, an impure import in a pure folder, a
private module imported from another folder, a participant reaching the compiler, a non-stdlib
import in the loader, alpha importing gates, harness importing a module behind a face, and a
chain of 13 floors; and inside alpha, an import of a folder's face."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


CHECK = _checker()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package, and harness/, gates/ and bench/ beside it, to break on purpose."""
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("alpha", "harness", "gates", "bench"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=ignore)
    return tmp_path / "alpha"


def _run(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(package)], capture_output=True, text=True, check=False
    )


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _late(path: Path, line: str) -> None:
    """Add ``line`` to the module at ``path`` inside a function (imports there run too)."""
    _append(path, f"\n\ndef _late() -> None:\n    {line}  # noqa\n")


def _failures(package: Path) -> str:
    result = _run(package)
    assert result.returncode == 1, result.stdout
    return result.stdout


def test_the_package_has_no_new_violation_and_every_known_one_still_occurs() -> None:
    result = _run(ROOT / "alpha")
    assert result.returncode == 0, result.stdout
    found = {(v.importer, v.imported) for v in CHECK.violations(ROOT / "alpha")}
    assert found == set(CHECK.KNOWN)


def test_the_rank_table_names_every_folder_and_ranks_them_as_the_design_does() -> None:
    folders = {path.parent.name for path in (ROOT / "alpha").glob("*/*.py")}
    assert folders | {"", "__main__"} == set(CHECK.RANKS)
    ranks = CHECK.RANKS
    assert ranks["compiler"] == ranks["runtime"] and ranks["records"] == ranks["checkpoint"]
    order = ("", "core", "wire", "schedule", "records", "learner", "runtime", "artifact")
    assert [ranks[f] for f in order] == sorted(ranks[f] for f in order)
    assert ranks["artifact"] < ranks["launch"] < ranks["app"] < ranks["__main__"]


# --- (a) upward and (b) same rank -------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "line", "what"),
    [
        (
            "wire/frame.py",
            "import alpha.runtime.channel",
            "imports a higher rank: wire/ (rank 2) imports runtime/ (rank 6)",
        ),
        (
            "core/topology.py",
            "from alpha.compiler import plan",
            "imports a higher rank: core/ (rank 1) imports compiler/ (rank 6)",
        ),
        (
            "errors.py",
            "from alpha.core.budgets import Budgets",
            "imports a higher rank: the top level (rank 0) imports core/ (rank 1)",
        ),
        (
            "runtime/whereabouts.py",
            "from alpha.app.cli import main",
            "imports a higher rank: runtime/ (rank 6) imports app/ (rank 9)",
        ),
        (
            "launch/launcher.py",
            "from alpha.app.run import run_plan",
            "imports a higher rank: launch/ (rank 8) imports app/ (rank 9)",
        ),
    ],
)
def test_an_upward_import_fails_the_check(tree: Path, module: str, line: str, what: str) -> None:
    _late(tree / module, line)
    assert what in _failures(tree)


@pytest.mark.parametrize(
    ("module", "line", "what"),
    [
        (
            "runtime/session.py",
            "from alpha.compiler.plan import Plan",
            "same rank: runtime/ and compiler/ (rank 6) never import each other",
        ),
        (
            "compiler/projection.py",
            "import alpha.runtime.channel",
            "same rank: compiler/ and runtime/ (rank 6) never import each other",
        ),
        (
            "checkpoint/store.py",
            "from alpha.records.commit import CommitRecord",
            "same rank: checkpoint/ and records/ (rank 4) never import each other",
        ),
    ],
)
def test_an_import_between_folders_of_one_rank_fails_the_check(
    tree: Path, module: str, line: str, what: str
) -> None:
    _late(tree / module, line)
    assert what in _failures(tree)


def test_an_import_for_types_only_does_not_count(tree: Path) -> None:
    _append(
        tree / "wire" / "frame.py",
        "\nif TYPE_CHECKING:\n    from alpha.runtime.channel import FrameChannel\n",
    )
    assert _run(tree).returncode == 0


# --- (c) purity by folder ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "line", "what"),
    [
        ("wire/abort.py", "import socket", "impure: alpha.wire.abort is in a pure folder"),
        ("compiler/forms.py", "import trio", "impure: alpha.compiler.forms is in a pure folder"),
        ("core/budgets.py", "import os", "impure: alpha.core.budgets is in a pure folder"),
        ("learner/model.py", "import subprocess", "impure: alpha.learner.model is in a pure"),
        ("schedule/role.py", "import asyncio", "impure: alpha.schedule.role is in a pure"),
        ("records/commit.py", "import pycuda.driver", "impure: alpha.records.commit is in a"),
        ("checked.py", "import os.path", "impure: alpha.checked is in a pure folder"),
    ],
)
def test_an_impure_import_in_a_pure_folder_fails_the_check(
    tree: Path, module: str, line: str, what: str
) -> None:
    _late(tree / module, line)
    assert what in _failures(tree)


def test_the_io_modules_are_few_and_each_has_its_reason_and_needs_its_place() -> None:
    assert len(CHECK.IO_MODULES) <= 6
    for module, why in CHECK.IO_MODULES.items():
        assert why, module
        # Listed only where it is needed: off the list, the package fails.
        assert CHECK.folder_of(module, ROOT / "alpha") in CHECK.PURE_FOLDERS


@pytest.mark.parametrize("module", sorted(CHECK.IO_MODULES))
def test_an_io_module_off_the_list_fails_the_check(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        CHECK, "IO_MODULES", {m: w for m, w in CHECK.IO_MODULES.items() if m != module}
    )
    lines = [v.line() for v in CHECK.violations(ROOT / "alpha")]
    assert any(f"impure: {module} is in a pure folder" in line for line in lines), lines


# --- (d) private modules ----------------------------------------------------------------------


def test_a_private_module_imported_from_another_folder_fails_the_check(tree: Path) -> None:
    _late(tree / "app" / "describe.py", "from alpha.compiler._fields import shown")
    assert "private: alpha.compiler._fields is private to compiler/" in _failures(tree)


def test_a_private_module_is_open_to_its_own_folder(tree: Path) -> None:
    _late(tree / "compiler" / "forms.py", "from alpha.compiler._fields import shown")
    assert _run(tree).returncode == 0


# --- (e) what a participant reaches -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("from alpha.compiler.plan import load_plan", "reaches compiler/"),
        ("from alpha.app.run import run_plan", "reaches app/"),
        ("from alpha.launch.deploy import load_deployment", "reaches launch/"),
    ],
)
def test_a_participant_reaching_the_compiler_app_or_launcher_fails_the_check(
    tree: Path, line: str, what: str
) -> None:
    # artifact/ may import compiler/ (a lower rank): only reachability forbids it here.
    _late(tree / "artifact" / "participant.py", line)
    out = _failures(tree)
    assert f"alpha.artifact.participant imports {line.split()[1]}: participant: " in out
    assert what in out
    assert "alpha.artifact.loader -> alpha.artifact.entry -> alpha.artifact.participant" in out


def test_a_participant_reaching_the_compiler_through_a_module_and_a_face_fails_the_check(
    tree: Path,
) -> None:
    # The builder may use the compiler; the participant, through the artifact's lazy face,
    # reaches the builder inside a function: the face hides nothing.
    _append(tree / "artifact" / "build.py", "\nfrom alpha.compiler.plan import load_plan  # noqa\n")
    _late(tree / "artifact" / "participant.py", "from alpha.artifact import build_artifact")
    out = _failures(tree)
    assert (
        "alpha.artifact.build imports alpha.compiler.plan: participant: a participant reaches "
        "compiler/ at run time: alpha.artifact.loader -> alpha.artifact.entry -> "
        "alpha.artifact.participant -> alpha.artifact.build -> alpha.compiler.plan"
    ) in out


def test_the_builder_may_use_the_compiler_where_no_participant_reaches_it(tree: Path) -> None:
    _append(tree / "artifact" / "build.py", "\nfrom alpha.compiler.plan import load_plan  # noqa\n")
    assert _run(tree).returncode == 0


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("runtime/session.py", "from alpha.learner import state"),
        ("runtime/interpreter.py", "from alpha.learner import LearnerState"),
        ("schedule/operations.py", "import alpha.learner.state"),
        ("schedule/role.py", "from alpha.learner.model import Model"),
    ],
)
def test_the_runtime_or_schedule_importing_the_learner_fails_the_check(
    tree: Path, module: str, line: str
) -> None:
    _late(tree / module, line)
    assert "learner-free: every participant runs it, a sum check's too" in _failures(tree)


# --- (f) the loader ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    ["import numpy", "from alpha.errors import AlphaError", "import alpha.artifact.payload"],
)
def test_the_loader_importing_more_than_the_standard_library_fails_the_check(
    tree: Path, line: str
) -> None:
    _late(tree / "artifact" / "loader.py", line)
    assert "loader: it runs before the bundled package is checked" in _failures(tree)


def test_the_loaders_hand_off_at_module_level_fails_the_check(tree: Path) -> None:
    _append(tree / "artifact" / "loader.py", "\nimport alpha.artifact.entry  # noqa\n")
    out = _failures(tree)
    assert "alpha.artifact.loader imports alpha.artifact.entry: loader:" in out


# --- (g) alpha never imports harness, gates, bench or tests -------------------------------------


@pytest.mark.parametrize(
    ("module", "line", "what"),
    [
        ("app/run.py", "from gates.run import run_gates", "outside: alpha never imports gates"),
        ("runtime/session.py", "import harness.relay", "outside: alpha never imports harness"),
        ("launch/warm.py", "from bench import startup", "outside: alpha never imports bench"),
        ("core/topology.py", "from tests.support import plans", "outside: alpha never imports"),
        ("app/cli.py", "from harness.runs import run", "outside: alpha never imports harness"),
    ],
)
def test_alpha_importing_harness_gates_bench_or_tests_fails_the_check(
    tree: Path, module: str, line: str, what: str
) -> None:
    # cli.py's exception covers gates only.
    _late(tree / module, line)
    assert what in _failures(tree)


def test_the_one_exception_is_listed_with_its_reason_and_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(CHECK.EXCEPTIONS) == {("alpha.app.observe", "gates")}
    assert all(CHECK.EXCEPTIONS.values())
    monkeypatch.setattr(CHECK, "EXCEPTIONS", {})
    lines = [v.line() for v in CHECK.violations(ROOT / "alpha")]
    assert any(line.startswith("check_layers: alpha.app.observe imports gates.") for line in lines)


# --- (h) faces --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "line", "face"),
    [
        ("harness/relay.py", "from alpha.wire.frame import FrameKind", "alpha.wire"),
        ("gates/run.py", "import alpha.core.membership", "alpha.core"),
        ("bench/frames.py", "from alpha.core.digests import code_digest", "alpha.core"),
        ("harness/runs.py", "from alpha.runtime import channel", "alpha.runtime"),
    ],
)
def test_harness_gates_or_bench_importing_behind_a_face_fails_the_check(
    tree: Path, module: str, line: str, face: str
) -> None:
    _late(tree.parent / module, line)
    user = module.split("/")[0]
    what = f"face: {user}/ imports alpha through package faces only (import from {face})"
    assert what in _failures(tree)


def test_harness_importing_through_faces_and_top_level_modules_passes(tree: Path) -> None:
    _late(
        tree.parent / "harness" / "relay.py",
        "from alpha.wire import FrameKind; from alpha.errors import AlphaError; import alpha",
    )
    assert _run(tree).returncode == 0


# --- (j) inside alpha, concrete modules ----------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "line", "face"),
    [
        ("runtime/session.py", "from alpha.wire import FrameSpec", "wire/"),
        ("artifact/entry.py", "import alpha.runtime", "runtime/"),
        ("compiler/checks.py", "from alpha.core import Budgets", "core/"),
        ("core/budgets.py", "from alpha.core import Contract", "core/"),
    ],
)
def test_alpha_importing_a_face_fails_the_check(
    tree: Path, module: str, line: str, face: str
) -> None:
    _late(tree / module, line)
    assert f"concrete: inside alpha, import the module itself, not {face}'s face" in (
        _failures(tree)
    )


def test_the_top_level_package_is_no_face(tree: Path) -> None:
    _late(tree / "core" / "budgets.py", "from alpha import errors, AlphaError")
    assert _run(tree).returncode == 0


# --- (i) floors and circles -------------------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A small package named alpha with the modules ``files`` (path: text)."""
    root = tmp_path / "alpha"
    for path, text in {"__init__.py": "", "errors.py": "", **files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _lines(root: Path) -> list[str]:
    """What the check says of a small package (the main package's KNOWN list aside)."""
    return [v.line() for v in CHECK.violations(root)]


def _chain(floors: int) -> dict[str, str]:
    """core/m01 -> core/m02 -> ... -> alpha.errors: ``floors`` modules in all."""
    files = {"core/__init__.py": ""}
    for n in range(1, floors):
        after = f"alpha.core.m{n + 1:02}" if n < floors - 1 else "alpha.errors"
        files[f"core/m{n:02}.py"] = f"import {after}\n"
    return files


def test_a_chain_of_twelve_floors_passes(tmp_path: Path) -> None:
    root = _package(tmp_path, _chain(CHECK.MAX_FLOORS))
    assert len(CHECK.longest_chain(CHECK.Package.read(root))) == 12
    assert _lines(root) == []


def test_a_chain_of_thirteen_floors_fails_the_check_and_prints_the_chain(tmp_path: Path) -> None:
    root = _package(tmp_path, _chain(CHECK.MAX_FLOORS + 1))
    out = "\n".join(_lines(root))
    chain = " -> ".join([*(f"alpha.core.m{n:02}" for n in range(1, 13)), "alpha.errors"])
    assert (
        "check_layers: alpha imports floors: floors: the longest chain of run-time imports is "
        f"13 floors, more than 12: {chain}"
    ) in out


def test_thirteen_floors_added_to_a_copy_of_the_package_fail_the_check(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thirteen modules hung under the membership make the package's chain end in them.
    for n in range(1, 14):
        after = f"import alpha.core.deep{n + 1:02}" if n < 13 else ""
        (tree / "core" / f"deep{n:02}.py").write_text(f"{after}\n")
    _append(tree / "core" / "membership.py", "\nimport alpha.core.deep01  # noqa\n")
    monkeypatch.setattr(CHECK, "KNOWN", {k: v for k, v in CHECK.KNOWN.items() if k[1] != "floors"})
    lines = [v.line() for v in CHECK.violations(tree)]
    floors = [line for line in lines if ": floors: " in line]
    assert len(floors) == 1
    assert "alpha.core.membership -> alpha.core.deep01 -> " in floors[0]
    assert floors[0].endswith("alpha.core.deep12 -> alpha.core.deep13")


def test_a_circle_counts_as_one_floor(tmp_path: Path) -> None:
    files = _chain(CHECK.MAX_FLOORS)
    files["artifact/__init__.py"] = ""
    files["artifact/a.py"] = "import alpha.artifact.b\nimport alpha.core.m01\n"
    files["artifact/b.py"] = "def _late() -> None:\n    import alpha.artifact.a\n"
    # The circle on top of the twelve floors is one floor more (13), not two; on top of m02,
    # eleven of them, it makes twelve again, and the check passes.
    root = _package(tmp_path, files)
    chain = CHECK.longest_chain(CHECK.Package.read(root))
    assert chain[0] == "[alpha.artifact.a alpha.artifact.b]" and len(chain) == 13
    files["artifact/a.py"] = "import alpha.artifact.b\nimport alpha.core.m02\n"
    root = _package(tmp_path / "again", files)
    assert _lines(root) == []


def test_a_circle_outside_the_artifact_fails_the_check(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": "import alpha.core.b\n",
            "core/b.py": "def _late() -> None:\n    import alpha.core.a\n",
        },
    )
    assert "circle: at most one import circle, inside artifact/ only; this one leaves" in (
        "\n".join(_lines(root))
    )


def test_a_second_circle_in_the_artifact_fails_the_check(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "artifact/__init__.py": "",
            "artifact/a.py": "import alpha.artifact.b\n",
            "artifact/b.py": "import alpha.artifact.a\n",
            "artifact/c.py": "import alpha.artifact.d\n",
            "artifact/d.py": "import alpha.artifact.c\n",
        },
    )
    out = "\n".join(_lines(root))
    assert "this one is the second: alpha.artifact.c -> alpha.artifact.d" in out
    assert out.count(": circle: ") == 1


def test_the_package_has_no_import_circle() -> None:
    # The loader hands off to the entry by name (a call, not an import), so nothing of the
    # package imports itself back.
    loops = [c for c in CHECK.circles(CHECK.Package.read(ROOT / "alpha")) if len(c) > 1]
    assert loops == []


def test_the_participant_rule_follows_the_loaders_hand_off_by_name(tree: Path) -> None:
    # Nothing imports the entry: only the loader's ENTRY names it. The check follows that name.
    _late(tree / "artifact" / "entry.py", "import alpha.compiler.plan")
    assert (
        "participant: a participant reaches compiler/ at run time: alpha.artifact.loader -> "
        "alpha.artifact.entry -> alpha.compiler" in _failures(tree)
    )


def test_a_loader_that_names_no_hand_off_fails_the_check(tree: Path) -> None:
    loader = tree / "artifact" / "loader.py"
    text = loader.read_text()
    assert 'ENTRY = ("alpha.artifact.entry", "run_embedded")' in text
    loader.write_text(text.replace('ENTRY = ("alpha.artifact.entry", "run_embedded")', "ENTRY = 0"))
    assert "participant: the loader names its hand-off as ENTRY" in _failures(tree)


# --- the list of known violations -------------------------------------------------------------


def test_a_known_violation_that_is_gone_must_leave_the_list(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A list entry for an import that does not occur is reported, so the list only shrinks.
    known = {**CHECK.KNOWN, ("alpha.wire.frame", "alpha.app.cli"): "an old reason"}
    monkeypatch.setattr(CHECK, "KNOWN", known)
    assert CHECK.main(["check_layers", str(tree)]) == 1


def test_every_known_violation_has_its_reason() -> None:
    assert all(why for why in CHECK.KNOWN.values())
