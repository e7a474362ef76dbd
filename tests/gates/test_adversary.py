"""Adversarial and foreign participants (harness/adversary.py): each behaviour's patch still
matches the sources, an adversary is a whole, self-consistent artifact whose payload is the
honest one, and a foreign participant carries another run identity."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import alpha
from alpha.app.compile import compile_plan
from alpha.artifact import (
    artifact_name,
    artifact_runtime,
    file_sha256,
    read_artifact,
    verify_archive,
    verify_artifact,
)
from alpha.compiler.plan import parse_plan
from alpha.errors import ArtifactInvalid, Forged
from alpha.runtime import edge_end
from alpha.schedule import RoleDescription
from alpha.wire import HEADER_SIZE
from gates.catalogue import LEARN, PAIR
from harness.adversary import (
    BEHAVIOURS,
    Behaviour,
    Damage,
    Patch,
    PatchStale,
    build_adversary,
    compile_with_code,
    damage_member,
    foreign_artifact,
    keyless_hello,
    patched_package,
)
from tests.support import raises_exactly


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
    expected: dict[str, str] = {}
    for patch in behaviour.patches:  # applied in order, several to one module in turn
        original = expected.get(patch.module, (repository / patch.module).read_text())
        expected[patch.module] = original.replace(patch.old, patch.new)
        assert expected[patch.module] != original
    for module, wanted in expected.items():
        text = (root / module).read_text()
        assert text == wanted
        compile(text, module, "exec")  # still Python


def test_a_patch_that_no_longer_matches_is_refused(tmp_path: Path) -> None:
    stale = Behaviour("stale", "", (Patch("alpha/wire/frame.py", "no such text in frame.py", ""),))
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
    # The role binds the patched package's runtime, beside it: only that binding differs.
    assert sorted(name for name in mine if mine[name] != theirs[name]) == ["RUNTIME", "SHA256SUMS"]
    ours, honest_runtime = artifact_runtime(out)[0], artifact_runtime(source)[0]
    assert ours != honest_runtime
    mine, theirs = _members(out.parent / ours), _members(source.parent / honest_runtime)
    assert mine.keys() == theirs.keys()
    changed = sorted(name for name in mine if mine[name] != theirs[name])
    assert changed == [
        "SHA256SUMS",
        "alpha/runtime/interpreter.py",
        "alpha/runtime/interpreter.pyc",
    ]
    assert b"ins.arm0 if word else ins.arm1" in mine["alpha/runtime/interpreter.py"]


@pytest.mark.slow
def test_a_tampered_runtime_is_whole_but_not_the_one_the_role_binds(
    honest: Path, tmp_path: Path
) -> None:
    source = honest / artifact_name(1)
    out = build_adversary(source, "tampered-runtime", tmp_path / artifact_name(1))
    assert out.read_bytes() == source.read_bytes(), "the role's own artifact is the honest one"
    name, digest = artifact_runtime(out)
    runtime = tmp_path / name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, name])
    verify_archive(runtime)  # whole and consistent within itself
    assert file_sha256(runtime) != digest
    mine, theirs = _members(runtime), _members(honest / name)
    changed = sorted(n for n in mine if mine[n] != theirs[n])
    assert changed == ["SHA256SUMS", "alpha/__init__.py", "alpha/__init__.pyc"]
    with pytest.raises(ArtifactInvalid) as info:
        verify_artifact(out)
    assert type(info.value) is ArtifactInvalid
    assert f"its runtime {name} does not match the SHA-256 role-000001.pyz binds" in str(info.value)


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

    # Everything else of the role is the same but its edge keys (each compile draws its own
    # run secret): only the identity names another run.
    def unkeyed(description: dict[str, object]) -> dict[str, object]:
        edges = description["edges"]
        assert isinstance(edges, list)
        bare = [{k: v for k, v in edge.items() if k != "keys"} for edge in edges]
        return {k: v for k, v in description.items() if k != "identity"} | {"edges": bare}

    for other in (other_code,):
        assert unkeyed(other) == unkeyed(identity)


def test_another_compile_of_the_same_plan_has_its_identity_and_other_keys(
    honest: Path, tmp_path: Path
) -> None:
    # admission.other-compile: the same plan compiled again is the same run identity with
    # other edge keys, so only the MAC can refuse its frames.
    again = foreign_artifact(PAIR.plan, 1, tmp_path / "again")
    mine = read_artifact(honest / artifact_name(1))["description"]
    other = read_artifact(again)["description"]
    assert isinstance(mine, dict) and isinstance(other, dict)
    assert other["identity"] == mine["identity"]
    assert other["edges"][0]["keys"] != mine["edges"][0]["keys"]
    assert other["edges"][0]["peer"] == mine["edges"][0]["peer"] == 0


def test_a_keyless_hello_is_right_in_every_header_field_and_forged(honest: Path) -> None:
    # admission.keyless-stranger: from the plan and the code alone, a stranger computes the
    # hello's every header byte; only the trailer, under a key of its own, is wrong.
    payload = read_artifact(honest / artifact_name(0))["description"]
    description = RoleDescription.from_json(json.dumps(payload))
    (edge,) = description.edges
    end = edge_end(description, edge)
    hello = keyless_hello(PAIR.plan, 1, 0, bytes(range(32)))
    expected = end.hello_in().expected_header(0)
    assert hello[:HEADER_SIZE] == bytes(expected)
    raises_exactly(Forged, end.hello_in().accept, hello)


def test_a_damaged_member_reads_cleanly_but_its_sha256_refuses_it(
    honest: Path, tmp_path: Path
) -> None:
    source = honest / artifact_name(1)
    out = build_adversary(source, "damaged-member", tmp_path / artifact_name(1))
    with zipfile.ZipFile(out) as archive:
        assert archive.testzip() is None  # every CRC-32 matches: zipfile sees nothing wrong
    mine, theirs = _members(out), _members(source)
    assert [name for name in mine if mine[name] != theirs[name]] == ["role.json"]
    assert mine["role.json"] == theirs["role.json"].replace(b'"receive":4.0', b'"receive":5.0')
    raw, honest_raw = out.read_bytes(), source.read_bytes()
    assert len(raw) == len(honest_raw)
    # Only the member's one byte and its two CRC-32 copies (local header, central entry).
    assert sum(a != b for a, b in zip(raw, honest_raw, strict=True)) <= 9
    with pytest.raises(ArtifactInvalid) as info:
        verify_artifact(out)
    assert type(info.value) is ArtifactInvalid
    assert "role.json does not match its SHA-256 in SHA256SUMS" in str(info.value)
    verify_artifact(source)


def test_a_damage_must_be_in_place_in_a_stored_member(honest: Path, tmp_path: Path) -> None:
    source = honest / artifact_name(1)
    runtime = source.parent / artifact_runtime(source)[0]  # a role's members are all stored
    with pytest.raises(ValueError, match="compressed"):
        damage_member(runtime, Damage("alpha/wire/frame.py", b"import", b"IMPORT"), tmp_path / "a")
    with pytest.raises(ValueError, match="once"):
        damage_member(
            source, Damage("role.json", b"no such bytes", b"NO SUCH BYTES"), tmp_path / "b"
        )
    with pytest.raises(ValueError, match="once"):
        damage_member(
            source, Damage("role.json", b'"receive":4.0', b'"receive":40.0'), tmp_path / "c"
        )


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_in_place_change_of_a_stored_member_reads_cleanly_and_is_refused(
    honest: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    source = honest / artifact_name(1)
    member = data.draw(st.sampled_from(["role.json", "__main__.py"]))
    content = _members(source)[member]
    at = data.draw(st.integers(0, len(content) - 24))
    old = content[at : at + 24]
    assume(content.count(old) == 1)
    flip = data.draw(st.integers(1, 255))
    index = data.draw(st.integers(0, len(old) - 1))
    new = old[:index] + bytes([old[index] ^ flip]) + old[index + 1 :]
    out = damage_member(source, Damage(member, old, new), tmp_path_factory.mktemp("d") / "a")
    with zipfile.ZipFile(out) as archive:
        assert archive.testzip() is None
    with pytest.raises(ArtifactInvalid) as info:
        verify_artifact(out)
    assert type(info.value) is ArtifactInvalid
    assert f"{member} does not match its SHA-256 in SHA256SUMS" in str(info.value)
