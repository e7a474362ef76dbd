"""The warm starter's preload (``alpha.launch.warm_server.preload``): what every participant
imports of its runtime, imported once in the starter, and only from a runtime whose SHA-256 is
the one its name binds. Each case runs in an interpreter of its own, as the starter does: the
preload changes ``sys.modules``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import CodeType, ModuleType

import pytest

from alpha.app.compile import compile_plan, parse_roles
from alpha.artifact import build
from alpha.compiler.plan import load_plan
from alpha.launch import warm_server
from alpha.launch.warm import _SERVER
from tests.support import PLANS, ROOT

# Loads the starter's text as the launcher runs it (no module of alpha of its own), preloads the
# runtime argv[1] and says what it found.
_PRELOAD = """
import json, runpy, sys
server = runpy.run_path(sys.argv[1])
refused = server["preload"](sys.argv[2])
modules = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
           if name == "alpha" or name.startswith("alpha.")}
print(json.dumps({"refused": refused, "modules": modules}))
"""


def _preload(runtime: Path) -> tuple[str | None, dict[str, str | None]]:
    done = subprocess.run(
        [sys.executable, "-c", _PRELOAD, str(_SERVER), str(runtime)],
        capture_output=True,
        text=True,
        check=True,
        cwd=runtime.parent,  # no alpha of the tree's own on the path
    )
    found = json.loads(done.stdout)
    return found["refused"], found["modules"]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    plan = load_plan(PLANS / "tree.toml")
    compile_plan(plan, folder, parse_roles("1", plan.participants))
    (found,) = folder.glob("runtime-*.pyz")
    return found


def test_the_starter_imports_what_every_participant_imports_from_a_checked_runtime(
    runtime: Path,
) -> None:
    refused, modules = _preload(runtime)
    assert refused is None
    assert set(warm_server.PRELOAD) <= set(modules)
    assert "alpha.runtime.session" in modules  # what the participant imports, with it
    assert all(str(file).startswith(f"{runtime}/") for file in modules.values()), modules


def test_the_starter_imports_nothing_from_a_runtime_not_its_names_sha256(
    runtime: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / runtime.name
    data = bytearray(runtime.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))
    refused, modules = _preload(damaged)
    assert refused == f"{runtime.name} does not match the SHA-256 its name binds"
    assert modules == {}


def test_the_starter_imports_nothing_from_a_file_not_named_as_a_runtime(
    runtime: Path, tmp_path: Path
) -> None:
    renamed = tmp_path / "runtime.pyz"
    shutil.copyfile(runtime, renamed)
    refused, modules = _preload(renamed)
    assert refused == "runtime.pyz is not a runtime's file name"
    assert modules == {}


def test_the_starter_imports_nothing_from_a_missing_runtime(tmp_path: Path) -> None:
    missing = tmp_path / f"runtime-{'0' * 64}.pyz"
    refused, modules = _preload(missing)
    assert refused == f"{missing.name} cannot be read: No such file or directory"
    assert modules == {}


def test_the_starter_names_the_module_each_artifact_looks_its_loader_up_in() -> None:
    assert warm_server.LOADERS_MODULE == build.LOADERS_MODULE
    assert f'sys.modules.get("{build.LOADERS_MODULE}")' in build._main_source().decode()


def _loaders(monkeypatch: pytest.MonkeyPatch) -> dict[str, CodeType]:
    """The starter's loaders, in a module of this test's (removed after it)."""
    module = ModuleType(warm_server.LOADERS_MODULE)
    module.__dict__["codes"] = {}
    monkeypatch.setitem(sys.modules, warm_server.LOADERS_MODULE, module)
    codes: dict[str, CodeType] = module.__dict__["codes"]
    return codes


def test_the_starter_compiles_the_loader_an_artifact_carries_under_its_sha256(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codes = _loaders(monkeypatch)
    artifact = runtime.parent / "role-000001.pyz"
    assert warm_server.precompile_loader(str(artifact)) is None
    main = build._main_source().decode()
    carried = main.partition("L = r'''")[2].partition("'''")[0]  # L, as __main__.py has it
    source = (ROOT / "alpha" / "artifact" / "loader.py").read_bytes()
    assert codes == {carried[1:65]: compile(source, "alpha/artifact/loader.py", "exec")}


def test_the_starter_compiles_no_loader_whose_sha256_does_not_check(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codes = _loaders(monkeypatch)
    main = build._main_source().decode()
    at = main.index("L = r'''") + 200  # a base64 digit of the deflated loader
    flipped = main[:at] + ("A" if main[at] != "A" else "B") + main[at + 1 :]
    artifact = tmp_path / "role-000001.pyz"
    with zipfile.ZipFile(artifact, "w") as archive:
        archive.writestr("__main__.py", flipped)
    refused = warm_server.precompile_loader(str(artifact))
    assert refused == "role-000001.pyz: its loader does not match its SHA-256"
    assert codes == {}


def test_the_starter_reads_what_to_preload_where_the_launcher_names_it() -> None:
    from alpha.launch import warm

    assert (warm_server.WARM_RUNTIME_ENV, warm_server.WARM_ARTIFACT_ENV) == (
        warm.WARM_RUNTIME_ENV,
        warm.WARM_ARTIFACT_ENV,
    )
