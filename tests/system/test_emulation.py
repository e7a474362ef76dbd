"""An AArch64 participant, a real AArch64 CPython under qemu-aarch64, beside x86-64 ones: it
computes bit for bit what a native participant computes (docs/emulation.md).

These tests need the emulation that ``make aarch64`` builds (``make test`` does it first). They
never skip: without it each fails with the ``EmulationUnavailable`` message that says what is
missing and the command that provides it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from alpha.app.cli import EXIT_OK, EXIT_USAGE, main
from alpha.app.compile import compile_plan
from alpha.compiler.plan import Plan, parse_plan
from alpha.compiler.replicate import replicate
from alpha.errors import UsageError
from alpha.launch.launcher import LaunchResult, launch, launch_specs
from alpha.learner.data import load_digits
from alpha.records.reports import committed_reports
from harness.emulation import (
    HOME_ENV,
    QEMU,
    EmulationUnavailable,
    aarch64_interpreter,
    emulated,
)
from harness.processes import pid_running
from tests.support import FIXTURES, ROOT, run_alpha

# The emulated role: a leaf of the chain 0 - 1 - 2 and of the tree 0 < (1, 2).
EMULATED = 2

SUM_CHECK = (FIXTURES / "plans" / "emulated-sum-check.toml").read_text()
LEARN = (FIXTURES / "plans" / "emulated-digits.toml").read_text()

AARCH64_ROLE = f"""
[targets]
aarch64 = [{EMULATED}]
"""


def _plan(text: str, *, aarch64: bool) -> Plan:
    return parse_plan(text + (AARCH64_ROLE if aarch64 else ""), source="test")


def _compiled(text: str, folder: Path, *, aarch64: bool) -> Path:
    plan = _plan(text, aarch64=aarch64)
    compile_plan(plan, folder, range(plan.participants))
    return folder


class _Launched:
    """A compiled folder launched with the AArch64 interpreter, each role's pid seen while it
    ran and whether it ran under qemu."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.specs, self.deadline = launch_specs(folder, {"aarch64": aarch64_interpreter()})
        self.emulated: dict[int, dict[int, bool]] = {}  # role -> {pid: under qemu}

    async def _look(self, role: int, ports: tuple[int, ...]) -> None:
        # Called once the role announced, before it can finish (an emulated one still imports
        # numpy); qemu shows its command line a moment after exec, and pid_running waits for it.
        pid = await pid_running(self.specs[role].argv[-1])
        self.emulated[role] = {pid: emulated(pid)}

    def launch(self) -> LaunchResult:
        return trio.run(
            lambda: launch(
                self.specs, deadline=self.deadline, fail_fast=False, on_announce=self._look
            )
        )


def _reports(folder: Path, plan: Plan) -> dict[int, dict[str, Any]]:
    """Every role's report, as the run committed them (raises CommitInvalid otherwise)."""
    _, reports = committed_reports(folder / "reports", plan.tree.children)
    return reports


def _assert_ok(result: LaunchResult) -> None:
    assert result.ok, result.first_to_fail


# --- the interpreter ------------------------------------------------------------------------


def test_without_a_build_the_interpreter_says_what_is_missing_and_how_to_build_it(
    tmp_path: Path,
) -> None:
    with pytest.raises(EmulationUnavailable) as raised:
        aarch64_interpreter(tmp_path / "nothing")
    message = str(raised.value)
    assert "\n" not in message
    assert f"not built in {tmp_path / 'nothing'}" in message
    assert "make aarch64" in message
    # qemu's -E splits its value on commas: such a folder cannot be passed, and is refused.
    with pytest.raises(EmulationUnavailable, match="comma"):
        aarch64_interpreter(_copy_of_the_build(tmp_path / "a,b"))


def _copy_of_the_build(folder: Path) -> Path:
    """An apparently complete build in ``folder`` (its stamp, interpreter and site), linked to
    the real one."""
    home = Path(aarch64_interpreter()[2]).parent  # -L SYSROOT
    folder.mkdir()
    (folder / "stamp").write_bytes((home / "stamp").read_bytes())
    (folder / "sysroot").symlink_to(home / "sysroot")
    (folder / "site").symlink_to(home / "site")
    return folder


@pytest.mark.slow
def test_the_guest_is_aarch64_with_the_venvs_numpy_whatever_the_hosts_python_environment() -> None:
    prefix = aarch64_interpreter()
    assert Path(prefix[0]).name == QEMU
    # The launcher passes its environment on: one that points at x86-64 code (the venv's
    # site-packages, another Python's home, a user site) must not reach the guest's imports.
    hostile = {
        **os.environ,
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "PYTHONHOME": sys.base_prefix,
        "PYTHONUSERBASE": sys.prefix,
    }
    probe = (
        "import platform, sys, numpy, trio; "
        "print(platform.machine()); print(numpy.__version__); print(trio.__version__); "
        "print(numpy.__file__); print(sys.dont_write_bytecode)"
    )
    guest = subprocess.run(
        [*prefix, "-c", probe], capture_output=True, text=True, env=hostile, check=False
    )
    assert guest.returncode == 0, guest.stderr
    machine, numpy_version, trio_version, numpy_file, no_bytecode = guest.stdout.split()
    assert machine == "aarch64"
    assert (numpy_version, trio_version) == (np.__version__, trio.__version__)
    site = prefix[prefix.index("-E") + 1].removeprefix("PYTHONPATH=")
    assert Path(numpy_file).is_relative_to(site)
    assert no_bytecode == "True"  # the sysroot and site are shared, and precompiled


# --- runs with an emulated role -------------------------------------------------------------


@pytest.mark.slow
def test_an_emulated_sum_check_role_computes_what_a_native_one_does(tmp_path: Path) -> None:
    emulated_run = _Launched(_compiled(SUM_CHECK, tmp_path / "mixed", aarch64=True))
    assert emulated_run.specs[EMULATED].argv[0] == aarch64_interpreter()[0]
    _assert_ok(emulated_run.launch())
    mixed = _reports(emulated_run.folder, _plan(SUM_CHECK, aarch64=True))
    assert (emulated_run.folder / "reports" / "commit.json").is_file()

    # The role that wrote role 2's report was the qemu process: the launcher saw it running
    # under qemu-aarch64, and the report carries that pid. The native roles were not emulated.
    seen = emulated_run.emulated[EMULATED]
    assert seen == {mixed[EMULATED]["pid"]: True}, seen
    assert emulated_run.emulated[0] == {mixed[0]["pid"]: False}

    native_folder = _compiled(SUM_CHECK, tmp_path / "native", aarch64=False)
    specs, deadline = launch_specs(native_folder)
    _assert_ok(trio.run(lambda: launch(specs, deadline=deadline, fail_fast=False)))
    native = _reports(native_folder, _plan(SUM_CHECK, aarch64=False))

    assert mixed[EMULATED]["digests"] == native[EMULATED]["digests"]
    assert {role: report["digests"] for role, report in mixed.items()} == {
        role: report["digests"] for role, report in native.items()
    }
    assert mixed[EMULATED]["rounds"] == native[EMULATED]["rounds"] == 4


@pytest.mark.slow
def test_without_an_interpreter_the_aarch64_artifact_refuses_to_start_on_x86_64(
    tmp_path: Path,
) -> None:
    # The same artifact that ran under qemu above checks its target first: started by this
    # host's Python it refuses, so a run that passes was one where it saw an aarch64 machine.
    folder = _compiled(SUM_CHECK, tmp_path / "mixed", aarch64=True)
    specs, deadline = launch_specs(folder)
    assert specs[EMULATED].argv[0] == sys.executable
    result = trio.run(lambda: launch(specs, deadline=deadline))
    failure = result.first_to_fail
    assert failure is not None and failure.role == EMULATED
    assert result.outcomes[EMULATED].returncode == EXIT_USAGE
    assert failure.cause.startswith(
        f"role {EMULATED}: this artifact is built for aarch64, but this machine is x86_64; "
    )
    assert not (folder / "reports" / "commit.json").exists()


@pytest.mark.slow
def test_an_emulated_learner_trains_the_same_model_bit_for_bit(tmp_path: Path) -> None:
    emulated_run = _Launched(_compiled(LEARN, tmp_path / "mixed", aarch64=True))
    _assert_ok(emulated_run.launch())
    mixed = _reports(emulated_run.folder, _plan(LEARN, aarch64=True))
    assert emulated_run.emulated[EMULATED] == {mixed[EMULATED]["pid"]: True}

    native_folder = _compiled(LEARN, tmp_path / "native", aarch64=False)
    specs, deadline = launch_specs(native_folder)
    _assert_ok(trio.run(lambda: launch(specs, deadline=deadline, fail_fast=False)))
    native = _reports(native_folder, _plan(LEARN, aarch64=False))

    replicated = replicate(_plan(LEARN, aarch64=False), load_digits()).digest
    for reports in (mixed, native):
        assert {report["digests"]["w"] for report in reports.values()} == {replicated}
    assert mixed[EMULATED]["digests"] == native[EMULATED]["digests"]
    assert mixed[EMULATED]["history"] == native[EMULATED]["history"]


# --- the command line -----------------------------------------------------------------------


@pytest.mark.slow
def test_alpha_run_and_launch_start_aarch64_roles_with_the_interpreter_option(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "digits-emulated.toml"
    plan.write_text(LEARN + AARCH64_ROLE)
    folder = tmp_path / "run"
    option = f"aarch64={shlex.join(aarch64_interpreter())}"

    ran = run_alpha("run", str(plan), "--dir", str(folder), "--interpreter", option)
    assert ran.returncode == EXIT_OK, ran.stderr
    assert "equal bit for bit   yes" in ran.stdout.splitlines()
    replicated = replicate(_plan(LEARN, aarch64=True), load_digits()).digest
    assert f"final parameters    {replicated}" in ran.stdout.splitlines()

    # The folder `alpha run` compiled launches again with the option, and without it too: the
    # aarch64 role then runs under the emulation alpha finds itself (docs/emulation.md).
    again = run_alpha("launch", str(folder), "--interpreter", option)
    assert again.returncode == EXIT_OK, again.stderr
    assert "3 role(s) finished" in again.stderr
    found = run_alpha("launch", str(folder))
    assert found.returncode == EXIT_OK, found.stderr
    assert "3 role(s) finished" in found.stderr


def test_a_run_whose_aarch64_role_cannot_start_here_is_refused_before_any_role_starts(
    tmp_path: Path,
) -> None:
    # No emulation built where alpha looks: `alpha run` is refused before it compiles, and
    # `alpha launch` of a compiled folder before any role starts, naming the role and the
    # command that builds what is missing.
    plan = tmp_path / "digits-emulated.toml"
    plan.write_text(LEARN + AARCH64_ROLE)
    nowhere = {**os.environ, HOME_ENV: str(tmp_path / "nothing")}
    ran = run_alpha("run", str(plan), "--dir", str(tmp_path / "run"), env=nowhere)
    assert ran.returncode == EXIT_USAGE, ran.stderr
    assert ran.stderr == (
        f"alpha: error: role {EMULATED} is built for aarch64 and this machine is x86_64, so it "
        f"runs under qemu-aarch64, but the AArch64 sysroot is not built in {tmp_path / 'nothing'}"
        f"; run `alpha emulation build {tmp_path / 'nothing'}` (in a checkout: `make aarch64`) "
        "(or give --interpreter aarch64=COMMAND)\n"
    )
    assert not (tmp_path / "run").exists()  # refused before the compile made anything

    folder = _compiled(SUM_CHECK, tmp_path / "mixed", aarch64=True)
    launched = run_alpha("launch", str(folder), env=nowhere)
    assert launched.returncode == EXIT_USAGE, launched.stderr
    assert f"role {EMULATED} is built for aarch64" in launched.stderr
    assert not (folder / "logs").exists()  # no role started


def test_alpha_emulation_shows_the_prefix_and_builds_at_once_when_current() -> None:
    shown = run_alpha("emulation", "show", "--json")
    assert shown.returncode == EXIT_OK, shown.stderr
    assert json.loads(shown.stdout)["interpreter"] == list(aarch64_interpreter())
    assert run_alpha("emulation").stdout == shlex.join(aarch64_interpreter()) + "\n"
    # The build the package ships, into the folder make aarch64 built: current, so it
    # returns at once without the network.
    home = Path(aarch64_interpreter()[2]).parent
    built = run_alpha("emulation", "build", str(home))
    assert built.returncode == EXIT_OK, built.stderr
    assert "emulation: ready" in built.stderr


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("aarch64", "expected TARGET=COMMAND"),
        ("sparc=python3", "no such target 'sparc'"),
        ("=python3", "no such target ''"),
        ("aarch64=", "no command for aarch64"),
        ("aarch64=   ", "no command for aarch64"),
        ("aarch64=qemu-aarch64 'unbalanced", "cannot split the command"),
        ("aarch64=/nonexistent/qemu-aarch64 -L x", "is not a command on this host"),
    ],
)
@pytest.mark.parametrize("command", ["run", "launch"])
def test_a_malformed_interpreter_option_is_one_line_and_exit_2(
    command: str, value: str, names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = [] if command == "run" else [str(tmp_path)]
    assert main([command, *target, "--interpreter", value]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"alpha: error: {command}: argument --interpreter: ")
    assert names in captured.err
    assert not (tmp_path / "logs").exists(), "nothing ran"


@pytest.mark.parametrize("command", ["run", "launch"])
def test_an_interpreter_given_twice_for_one_target_is_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = [] if command == "run" else [str(tmp_path)]
    twice = ["--interpreter", f"x86_64={sys.executable}"] * 2
    assert main([command, *target, *twice]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        f"alpha: error: {command}: --interpreter gives x86_64 twice\n"
    )


def test_launch_specs_refuses_an_unknown_target_or_an_empty_interpreter(tmp_path: Path) -> None:
    folder = _compiled(SUM_CHECK, tmp_path / "run", aarch64=True)
    with pytest.raises(UsageError, match="no such target 'arm'"):
        launch_specs(folder, {"arm": ("qemu-arm",)})
    with pytest.raises(UsageError, match="the interpreter for aarch64 is empty"):
        launch_specs(folder, {"aarch64": ()})
    # A target the map does not name starts with this Python; one it names, with its prefix.
    specs, _ = launch_specs(folder, {"aarch64": ("qemu-aarch64", "-L", "/sysroot", "python3")})
    assert [spec.argv[:-1] for spec in specs] == [
        (sys.executable,),
        (sys.executable,),
        ("qemu-aarch64", "-L", "/sysroot", "python3"),
    ]
    assert all(spec.argv[-1] == str(folder.resolve() / spec.log.stem) + ".pyz" for spec in specs)


def test_the_home_of_the_build_can_be_moved_by_the_environment(tmp_path: Path) -> None:
    # The module reads ALPHA_AARCH64_HOME once, when imported: a fresh interpreter shows it.
    shown = subprocess.run(
        [sys.executable, "-c", "from harness.emulation import AARCH64_HOME; print(AARCH64_HOME)"],
        capture_output=True,
        text=True,
        env={**os.environ, HOME_ENV: str(tmp_path)},
        cwd=ROOT,
        check=False,
    )
    assert shown.stdout.strip() == str(tmp_path), shown.stderr
    printed = subprocess.run(
        [sys.executable, "-m", "harness.emulation"],
        capture_output=True,
        text=True,
        env={**os.environ, HOME_ENV: str(tmp_path)},
        cwd=ROOT,
        check=False,
    )
    assert printed.returncode == 1
    assert printed.stderr == (
        f"harness.emulation: the AArch64 sysroot is not built in {tmp_path}; run `alpha emulation "
        f"build {tmp_path}` (in a checkout: `make aarch64`)\n"
    )
