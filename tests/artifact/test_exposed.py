"""Keyed artifacts are their owner's alone (issue 25): a keyed plan's artifacts are written 0700
(owner read, write and execute, an artifact being an executable), an unkeyed plan's 0755; and
``alpha launch`` refuses a folder one of whose keyed artifacts another user can read or owns,
with ``ArtifactExposed`` (exit 2), one line naming the file and what to do, and no role
started."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alpha.app.compile import compile_plan
from alpha.artifact import ARTIFACT_MODE, KEYED_ARTIFACT_MODE, check_private
from alpha.compiler.plan import Plan
from alpha.errors import ArtifactExposed, ArtifactInvalid
from alpha.exitcodes import EXIT_USAGE
from alpha.launch.launcher import launch_specs
from tests.support import plan_of, raises_exactly, run_alpha

ROLES = 3


def _plan(integrity: str | None = None) -> Plan:
    return plan_of(
        "exposed",
        roles=ROLES,
        rounds=1,
        topology={"shape": "tree", "fanout": 2},
        contract={"dtype": "float64", "integrity": integrity},
        work={"kind": "sum-check", "size": 4},
    )


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("keyed") / "compiled"
    compile_plan(_plan(), folder, range(ROLES))
    return folder


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _artifacts(folder: Path) -> list[Path]:
    found = sorted(folder.glob("role-*.pyz"))
    assert len(found) == ROLES
    return found


def test_keyed_artifacts_are_0700_and_unkeyed_ones_0755(keyed: Path, tmp_path: Path) -> None:
    assert (KEYED_ARTIFACT_MODE, ARTIFACT_MODE) == (0o700, 0o755)
    assert [_mode(path) for path in _artifacts(keyed)] == [0o700] * ROLES
    plain = tmp_path / "plain"
    compile_plan(_plan("sha256"), plain, range(ROLES))
    assert [_mode(path) for path in _artifacts(plain)] == [0o755] * ROLES
    # the shared runtime holds no key: the same mode either way
    assert {_mode(p) for p in keyed.glob("runtime-*.pyz")} == {
        _mode(p) for p in plain.glob("runtime-*.pyz")
    }
    launch_specs(plain)  # an unkeyed folder is launched whatever the artifacts' modes
    for path in _artifacts(plain):
        path.chmod(0o644)
    assert len(launch_specs(plain)[0]) == ROLES


def test_a_keyed_artifact_is_written_0700_whatever_the_umask(tmp_path: Path) -> None:
    before = os.umask(0)  # the most permissive umask: the mode is the build's, not the umask's
    try:
        compile_plan(_plan(), tmp_path / "compiled", range(ROLES))
    finally:
        os.umask(before)
    assert [_mode(path) for path in _artifacts(tmp_path / "compiled")] == [0o700] * ROLES


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 0o777))
def test_check_private_refuses_every_mode_with_a_group_or_other_bit(keyed: Path, mode: int) -> None:
    path = _artifacts(keyed)[0]
    path.chmod(mode)
    try:
        if mode & 0o077:
            error = raises_exactly(ArtifactExposed, check_private, path)
            assert f"mode {mode:04o}" in str(error) and path.name in str(error)
        else:
            check_private(path)
    finally:
        path.chmod(KEYED_ARTIFACT_MODE)


@pytest.mark.parametrize(
    "mode", [0o701, 0o702, 0o704, 0o710, 0o720, 0o740, 0o644, 0o755], ids=lambda m: f"{m:04o}"
)
def test_launch_refuses_a_keyed_artifact_another_user_can_reach(keyed: Path, mode: int) -> None:
    path = _artifacts(keyed)[1]
    path.chmod(mode)
    try:
        error = raises_exactly(ArtifactExposed, launch_specs, keyed)
    finally:
        path.chmod(KEYED_ARTIFACT_MODE)
    assert isinstance(error, ArtifactInvalid) and error.exit_code == EXIT_USAGE
    assert path.name in str(error) and "chmod go=" in str(error)
    assert len(launch_specs(keyed)[0]) == ROLES  # restored, it launches


def test_a_missing_artifact_is_invalid_not_exposed(tmp_path: Path) -> None:
    raises_exactly(ArtifactInvalid, check_private, tmp_path / "role-000000.pyz")


def test_launch_refuses_a_keyed_artifact_another_user_owns(keyed: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a file to another user (chown); this suite is not root")
    nobody = pwd.getpwnam("nobody")
    path = _artifacts(keyed)[2]
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    try:
        assert _mode(path) == 0o700  # the mode is right: the owner is what is refused
        error = raises_exactly(ArtifactExposed, launch_specs, keyed)
    finally:
        os.chown(path, os.getuid(), os.getgid())
    assert path.name in str(error) and f"user {nobody.pw_uid}" in str(error)
    assert "compile the plan again as this user" in str(error)


@pytest.mark.slow
def test_alpha_launch_refuses_an_exposed_folder_in_one_line_and_starts_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "compiled"
    compile_plan(_plan(), folder, range(ROLES))
    exposed = _artifacts(folder)[1]
    exposed.chmod(0o644)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    done = run_alpha("launch", str(folder))
    assert done.returncode == EXIT_USAGE
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert exposed.name in lines[0] and "another user can read it (mode 0644)" in lines[0]
    assert f"chmod go= {exposed}" in lines[0]
    assert "Traceback" not in done.stderr
    # no role started: no log, report or progress record; nothing new in the folder but the
    # lock every command takes on the folder it writes to (docs/cli.md)
    after = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    assert [p for p in after if p.name != ".alpha.lock"] == before
    assert not list(folder.glob("logs/role-*.log"))
