"""A participant's start loads what it runs and no more: no plan reader, no protocol checker,
no protocol forms or projection, no artifact builder; and a role without a learner no learner
payload or checkpoint saving.

Every participant is its own process started from its artifact, so each module the artifact's
entry imports is paid for at every start (``python -m bench startup``), and a launch starts
every role at once on the host's cores (``python -m bench endpoints``). Reading a plan (and
``tomllib``, which only the plan reader needs), checking and projecting a protocol and building
artifacts are the compiler's jobs; a participant runs the description, schedule and learner its
payload already holds. A role without a learner imports no learner module at all, checked on
every role of a real sum-check run, and a learner run's roles do import it.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from alpha.app.compile import compile_plan, parse_roles
from alpha.artifact.entry import BLAS_THREADS
from alpha.compiler.plan import Plan, load_plan, parse_plan
from alpha.exitcodes import EXIT_FAILURE
from alpha.launch.warm import _SERVER
from harness.compiled import CompiledRun
from tests.support import PLANS, run_alpha

COMPILE_ONLY = (
    "alpha.compiler.plan",
    "tomllib",
    "alpha.compiler.checks",
    "alpha.compiler.forms",
    "alpha.compiler.projection",
    "alpha.artifact.build",
)
"""What only compiling needs: the plan reader, the TOML parser it uses, the protocol's forms,
their checker and projection, and the artifact builder."""

LEARNER_ONLY = ("alpha.learner.payload", "alpha.learner.saving")
"""What only a role with a learner needs: its learner state from the payload, and saving it."""

SUM_CHECK = PLANS / "tree.toml"

DIGITS = PLANS / "digits.toml"

ENTRY_IMPORTS = (
    "from alpha.artifact.entry import run_embedded",
    "from alpha.artifact.participant import run_payload",
    "from alpha.learner.payload import attach_gpu, learner_from_payload",
    "from alpha.schedule.local import decode",
    "from alpha.schedule.role import RoleDescription",
)
"""What an artifact's entry imports on its way to running its payload: ``artifact.loader`` calls
``run_embedded``, which calls ``run_payload``, which decodes the schedule and, for a role with a
learner, the learner."""


def _imported(*argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run Python on ``argv`` with ``-X importtime``; the process (its stderr) and every module
    it imported. stdout is left out: a participant announces its port there, in binary."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    modules = {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return done, modules


def test_the_artifact_entry_imports_no_plan_reader_and_no_protocol_checker() -> None:
    done, modules = _imported("-c", "\n".join(ENTRY_IMPORTS))
    assert done.returncode == 0, done.stderr[-2000:]
    assert {
        "alpha.artifact.participant",
        "alpha.learner.state",
    } <= modules  # the check sees imports
    assert sorted(modules.intersection(COMPILE_ONLY)) == []


@pytest.mark.slow
def test_a_learner_role_starts_from_its_artifact_without_a_plan_reader_or_protocol_checker(
    tmp_path: Path,
) -> None:
    # Role 1 of the digits plan, with an empty stdin: it reads its payload (description,
    # schedule, learner shard), opens its listener and fails at its first wait, for role 0's
    # port; everything a real start imports is imported by then.
    plan = load_plan(DIGITS)
    compile_plan(plan, tmp_path, parse_roles("1", plan.participants))
    done, modules = _imported(str(tmp_path / "role-000001.pyz"))
    assert done.returncode == EXIT_FAILURE, done.stderr[-2000:]
    assert "failed: PortMissing" in done.stderr
    assert {
        "alpha.artifact.participant",
        "alpha.learner.payload",
        "alpha.schedule.local",
    } <= modules
    assert sorted(modules.intersection(COMPILE_ONLY)) == []


@pytest.mark.slow
def test_a_role_without_a_learner_starts_without_the_learners_payload_code(
    tmp_path: Path,
) -> None:
    # Role 1 of the sum check, with an empty stdin, as above.
    plan = load_plan(SUM_CHECK)
    compile_plan(plan, tmp_path, parse_roles("1", plan.participants))
    done, modules = _imported(str(tmp_path / "role-000001.pyz"))
    assert done.returncode == EXIT_FAILURE, done.stderr[-2000:]
    assert "failed: PortMissing" in done.stderr
    assert {"alpha.artifact.participant", "alpha.schedule.local"} <= modules
    assert sorted(modules.intersection(COMPILE_ONLY + LEARNER_ONLY)) == []
    assert _learner_modules(modules) == []


LEARNER_PACKAGE = "alpha.learner"
"""The learner's run-time half: model, optimizer, data, GPU binding, payload, checkpoint saving.
A role without a learner has no learner work, so it imports none of it."""


def _learner_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == LEARNER_PACKAGE or m.startswith(f"{LEARNER_PACKAGE}."))


def _launched_imports(plan: Plan, folder: Path, *options: str) -> dict[int, set[str]]:
    """Compile every role of ``plan`` into ``folder``, launch them all as ``alpha launch``
    does (real processes on 127.0.0.1, warm-started unless ``--cold``) with the interpreter's
    import profiling on (``PYTHONPROFILEIMPORTTIME``, which each participant inherits, forked
    by the warm starter or not), and return every role's imported modules, read from its log.
    The run must succeed."""
    run = CompiledRun(plan, folder)
    done = run_alpha(
        "launch",
        str(folder),
        *options,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(run.found_reports()) == list(range(plan.participants))
    return {
        role: {
            line.rpartition("|")[2].strip()
            for line in run.log(role).splitlines()
            if line.startswith("import time:")
        }
        for role in range(plan.participants)
    }


# Runs the warm starter's preload (alpha.launch.warm_server.preload) of the runtime argv[2] as
# the starter does, after numpy and trio, with the interpreter's import profiling on.
_PRELOAD = """
import runpy, sys
import numpy, trio
assert runpy.run_path(sys.argv[1])["preload"](sys.argv[2]) is None
"""


def _preloaded(folder: Path) -> set[str]:
    """The modules the warm starter of a launch of ``folder`` imports for every child, from the
    runtime there: every warm-started role holds them without importing them itself."""
    (runtime,) = folder.glob("runtime-*.pyz")
    done, modules = _imported("-c", _PRELOAD, str(_SERVER), str(runtime))
    assert done.returncode == 0, done.stderr[-2000:]
    return {module for module in modules if module == "alpha" or module.startswith("alpha.")}


@pytest.mark.slow
@pytest.mark.parametrize("start", ["warm", "cold"])
def test_no_participant_of_a_sum_check_run_imports_a_learner_module(
    start: str, tmp_path: Path
) -> None:
    # The shipped 13-role tree, run to its commit: each role established its edges, ran its
    # rounds and completed, so everything its session imports was imported by then. (A role
    # started cold, as `python3 ARTIFACT`, is the test below that stops at its first wait.)
    # Warm, a role holds what the starter imported for it too.
    options = ("--cold",) if start == "cold" else ()
    launched = _launched_imports(load_plan(SUM_CHECK), tmp_path, *options)
    preloaded = _preloaded(tmp_path) if start == "warm" else set()
    for role, modules in launched.items():
        assert {"alpha.artifact.participant", "alpha.runtime.session"} <= modules | preloaded, role
        assert _learner_modules(modules | preloaded) == [], role


@pytest.mark.slow
def test_a_warm_role_imports_nothing_its_starter_imported_for_it(tmp_path: Path) -> None:
    # The warm starter imported what every participant imports, from the runtime its artifact
    # binds; its loader kept those modules and imported none of them again. Cold, each role
    # imports them itself.
    warm = _launched_imports(load_plan(SUM_CHECK), tmp_path / "warm")
    preloaded = _preloaded(tmp_path / "warm")
    assert {"alpha.artifact.participant", "alpha.runtime.session"} <= preloaded
    for role, modules in warm.items():
        assert modules & preloaded == set(), role
    cold = _launched_imports(load_plan(SUM_CHECK), tmp_path / "cold", "--cold")
    for role, modules in cold.items():
        assert {"alpha.artifact.participant", "alpha.runtime.session"} <= modules, role


@pytest.mark.slow
def test_every_participant_of_a_learner_run_imports_the_learner(tmp_path: Path) -> None:
    # The other side of the test above: the same reading sees a learner role's learner.
    plan = parse_plan(LEARN_PAIR)
    for role, modules in _launched_imports(plan, tmp_path).items():
        assert {"alpha.learner.state", "alpha.learner.payload"} <= modules, role


LEARN_PAIR = """
[run]
name = "imports-learn-pair"
rounds = 2
[membership]
group = "(group (stride 0 1 2))"
[topology]
shape = "pair"
[budgets]
accept = 60.0
deadline = 120.0
[work]
kind = "learn"
[learner]
kind = "mlp"
hidden = 8
rate = 0.15
seed = 3
batch = 8
"""


# Runs an artifact in this interpreter as `python3 ARTIFACT` would, then says on stderr (stdout
# carries the port announcement, in binary) which BLAS thread count it left in the environment.
_RUN_AND_SAY_BLAS = """
import os, runpy, sys
sys.argv = [sys.argv[1]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
print(os.environ.get("OPENBLAS_NUM_THREADS"), file=sys.stderr)
"""


@pytest.mark.slow
@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("2", "2")])
def test_a_participant_gives_numpys_blas_one_thread_unless_told_otherwise(
    given: str | None, kept: str, tmp_path: Path
) -> None:
    # A participant computes without BLAS; the threads OpenBLAS would start at import only
    # take the cores every other role's start-up needs.
    plan = load_plan(SUM_CHECK)
    compile_plan(plan, tmp_path, parse_roles("1", plan.participants))
    environment = {k: v for k, v in os.environ.items() if k != BLAS_THREADS[0]}
    if given is not None:
        environment[BLAS_THREADS[0]] = given
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_SAY_BLAS, str(tmp_path / "role-000001.pyz")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=environment,
        check=False,
    )
    assert b"failed: PortMissing" in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].decode() == kept


def test_every_name_of_the_protocol_package_loads_from_its_module() -> None:
    # The package loads each name on first use, so that a participant, which needs only its
    # local schedule, loads none of the forms, checks or projection.
    import alpha.compiler as protocol
    from alpha.compiler import forms
    from alpha.schedule import local, regions

    modules = [
        importlib.import_module(f"alpha.compiler.{info.name}")
        for info in pkgutil.iter_modules(protocol.__path__)
    ]
    modules += [local, regions]
    for name in protocol.__all__:
        value = getattr(protocol, name)
        assert any(getattr(module, name, None) is value for module in modules), name
    assert forms.Region is regions.Region and forms.ITEM_SIZES is regions.ITEM_SIZES
