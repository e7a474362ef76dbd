"""Adversarial and foreign participants (harness/adversary.py): each behaviour's patch still
matches the sources, an adversary is a whole, self-consistent artifact whose payload is the
honest one, and a foreign participant carries another run identity."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import alpha
from alpha.artifact import artifact_name, read_artifact, verify_artifact
from alpha.compile import compile_plan
from alpha.plan import parse_plan
from gates.catalogue import LEARN, PAIR
from harness.adversary import (
    BEHAVIOURS,
    Behaviour,
    Patch,
    PatchStale,
    build_adversary,
    compile_with_code,
    foreign_artifact,
    patched_package,
)


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("honest")
    compile_plan(parse_plan(PAIR.plan, source="pair"), folder, range(2))
    return folder


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.parametrize("name", sorted(BEHAVIOURS))
def test_every_behaviour_still_patches_the_sources(name: str, tmp_path: Path) -> None:
    behaviour = BEHAVIOURS[name]
    root = patched_package(behaviour, tmp_path)
    repository = Path(alpha.__file__).resolve().parents[1]
    for patch in behaviour.patches:
        original = (repository / patch.module).read_text()
        text = (root / patch.module).read_text()
        assert text != original
        assert text == original.replace(patch.old, patch.new)
        compile(text, patch.module, "exec")  # still Python


def test_a_patch_that_no_longer_matches_is_refused(tmp_path: Path) -> None:
    stale = Behaviour("stale", "", (Patch("alpha/frame.py", "no such text in frame.py", ""),))
    with pytest.raises(PatchStale, match="0 times, not 1"):
        patched_package(stale, tmp_path)


@pytest.mark.slow
def test_an_adversary_is_the_honest_payload_with_one_module_changed(
    honest: Path, tmp_path: Path
) -> None:
    source = honest / artifact_name(1)
    out = build_adversary(source, "inverted-choice", tmp_path / artifact_name(1))
    verify_artifact(out)  # the loader's own checks pass: only the behaviour differs
    assert read_artifact(out) == read_artifact(source)
    mine, theirs = _members(out), _members(source)
    assert mine.keys() == theirs.keys()
    changed = sorted(name for name in mine if mine[name] != theirs[name])
    assert changed == [
        "SHA256SUMS",
        "alpha/runtime/interpreter.py",
        "alpha/runtime/interpreter.pyc",
    ]
    assert b"ins.arm0 if word else ins.arm1" in mine["alpha/runtime/interpreter.py"]


@pytest.mark.slow
def test_foreign_participants_carry_another_run_identity(tmp_path: Path) -> None:
    compile_plan(parse_plan(LEARN.plan, source="learn"), tmp_path / "honest", [3])
    identity = read_artifact(tmp_path / "honest" / artifact_name(3))["description"]
    rate = foreign_artifact(LEARN.plan.replace("rate = 0.15", "rate = 0.3"), 3, tmp_path / "rate")
    program = compile_with_code(LEARN.plan, "other-program", tmp_path / "program", [3])
    other_rate = read_artifact(rate)["description"]
    other_code = read_artifact(program / artifact_name(3))["description"]
    assert isinstance(identity, dict)
    assert isinstance(other_rate, dict) and isinstance(other_code, dict)
    assert other_rate["identity"] != identity["identity"]
    assert other_code["identity"] != identity["identity"]
    # Everything else of the role is the same: only the identity names another run.
    for other in (other_code,):
        assert {k: v for k, v in other.items() if k != "identity"} == {
            k: v for k, v in identity.items() if k != "identity"
        }
