"""The run identity binds code: a compiled run's learner part covers the sources its artifacts
carry, so artifacts built from different sources refuse each other on the first frame."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest

import alpha
from alpha.app.compile import compile_plan, compiled_identity
from alpha.artifact import package_code_digest, read_artifact
from alpha.artifact.build import _package_sources
from alpha.compiler.plan import load_plan
from alpha.compiler.work import run_identity
from alpha.core.digests import CODE_BOUND_LEARNER_DOMAIN, CODE_DOMAIN, bind_code, code_digest
from alpha.core.identity import IDENTITY_PART_SIZE, RunIdentity
from alpha.errors import LearnerInputInvalid
from alpha.launch.launcher import launch, launch_specs
from alpha.schedule.role import RoleDescription
from tests.support import PLANS, raises_exactly

SOURCES = [("alpha/b.py", b"B = 2\n"), ("alpha/a.py", b"A = 1\n"), ("alpha/sub/c.py", b"")]


def u64(value: int) -> bytes:
    return struct.pack(">Q", value)


def field(body: bytes) -> bytes:
    return u64(len(body)) + body


# --- the code digest, pure ------------------------------------------------------------------


def test_code_digest_reproduces_from_the_documented_layout() -> None:
    ordered = sorted(SOURCES)
    data = CODE_DOMAIN + u64(3) + b"".join(field(n.encode()) + field(s) for n, s in ordered)
    assert code_digest(SOURCES) == hashlib.sha256(data).digest()
    assert len(code_digest(SOURCES)) == IDENTITY_PART_SIZE


def test_code_digest_follows_names_and_bytes_not_the_order_they_come_in() -> None:
    same = code_digest(SOURCES)
    assert code_digest(reversed(SOURCES)) == same
    assert code_digest(iter(SOURCES)) == same
    renamed = [("alpha/z.py", b"B = 2\n"), *SOURCES[1:]]
    assert code_digest(renamed) != same
    # A byte cannot move from a name to its source (or between sources) and agree.
    assert code_digest([("ab", b"c")]) != code_digest([("a", b"bc")])
    assert code_digest([("a", b"xy"), ("b", b"")]) != code_digest([("a", b"x"), ("b", b"y")])
    assert code_digest([]) != code_digest([("", b"")])


def test_code_digest_refusals() -> None:
    raises_exactly(LearnerInputInvalid, code_digest, [("a.py", b"1"), ("a.py", b"2")])
    raises_exactly(LearnerInputInvalid, code_digest, [("\ud800.py", b"")])
    raises_exactly(TypeError, code_digest, [(b"a.py", b"")])
    raises_exactly(TypeError, code_digest, [("a.py", "text")])
    raises_exactly(TypeError, code_digest, [("a.py", bytearray(b"x"))])


# --- binding code into the identity ---------------------------------------------------------


def test_bind_code_changes_the_learner_part_only() -> None:
    run = RunIdentity(b"\x01" * 32, b"\x02" * 32, b"\x03" * 32)
    code = code_digest(SOURCES)
    bound = bind_code(run, code)
    assert bound.learner == hashlib.sha256(CODE_BOUND_LEARNER_DOMAIN + run.learner + code).digest()
    assert (bound.contract, bound.membership) == (run.contract, run.membership)
    assert bound.differing_parts(run) == ("learner",)
    assert bind_code(run, code) == bound
    other = bind_code(run, code_digest(SOURCES[1:]))
    assert other.differing_parts(bound) == ("learner",)


def test_bind_code_refusals() -> None:
    run = RunIdentity(b"\x01" * 32, b"\x02" * 32, b"\x03" * 32)
    raises_exactly(LearnerInputInvalid, bind_code, run, bytes(31))
    raises_exactly(LearnerInputInvalid, bind_code, run, bytes(33))
    raises_exactly(TypeError, bind_code, run, bytearray(32))
    raises_exactly(TypeError, bind_code, run.encode(), bytes(32))


# --- the package's code ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the ``alpha`` package elsewhere: its ``__init__.py`` (as ``alpha.__file__``)."""
    root = Path(alpha.__file__).resolve().parent
    copy = tmp_path_factory.mktemp("elsewhere") / "deeper" / "alpha"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy / "__init__.py"


def digest_of_tree(monkeypatch: pytest.MonkeyPatch, init: Path) -> bytes:
    """The package code digest as computed for a package at ``init``'s folder (no cache)."""
    with monkeypatch.context() as patch:
        patch.setattr(alpha, "__file__", str(init))
        return package_code_digest.__wrapped__()


def test_the_package_digest_is_cached_and_deterministic() -> None:
    first = package_code_digest()
    assert package_code_digest() is first  # read and hashed once per process
    fresh = package_code_digest.__wrapped__()
    assert fresh == first
    sources = [(name, path.read_bytes()) for name, path in _package_sources()]
    assert code_digest(sources) == first


def test_the_package_digest_follows_relative_names_not_where_the_package_lies(
    monkeypatch: pytest.MonkeyPatch, package_copy: Path
) -> None:
    assert digest_of_tree(monkeypatch, package_copy) == package_code_digest()


def test_a_changed_byte_in_any_bundled_source_changes_the_learner_part(
    monkeypatch: pytest.MonkeyPatch, package_copy: Path
) -> None:
    plan = load_plan(PLANS / "pair.toml")
    plain = run_identity(plan)
    base = package_code_digest()
    digests = {base}
    root = package_copy.parent
    names = [name for name, _ in _package_sources()]
    assert names, "the package has sources"
    for name in names:
        path = root.parent / name
        original = path.read_bytes()
        changed = bytearray(original or b"\n")
        changed[len(changed) // 2] ^= 0x01  # one bit of one byte
        path.write_bytes(bytes(changed))
        try:
            digest = digest_of_tree(monkeypatch, package_copy)
        finally:
            path.write_bytes(original)
        assert digest not in digests, name
        digests.add(digest)
        changed_run = compiled_identity(plan, code=digest)
        assert changed_run.differing_parts(compiled_identity(plan)) == ("learner",), name
        assert changed_run.differing_parts(plain) == ("learner",), name
    # Restored, the copy is the same code again.
    assert digest_of_tree(monkeypatch, package_copy) == base


def test_an_added_source_changes_the_code(
    monkeypatch: pytest.MonkeyPatch, package_copy: Path
) -> None:
    extra = package_copy.parent / "zz_extra.py"
    extra.write_bytes(b"")
    try:
        assert digest_of_tree(monkeypatch, package_copy) != package_code_digest()
    finally:
        extra.unlink()


# --- compiled runs --------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["pair", "digits"])
def test_every_artifact_carries_the_identity_bound_to_the_package_code(
    fixture: str, tmp_path: Path
) -> None:
    plan = load_plan(PLANS / f"{fixture}.toml")
    roles = range(min(plan.participants, 2))
    compile_plan(plan, tmp_path, roles)
    want = bind_code(run_identity(plan), package_code_digest())
    assert want.differing_parts(run_identity(plan)) == ("learner",)
    assert compiled_identity(plan) == want
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["identity"] == {
        "learner": want.learner.hex(),
        "contract": want.contract.hex(),
        "membership": want.membership.hex(),
    }
    for role in roles:
        payload = read_artifact(tmp_path / f"role-{role:06d}.pyz")
        description = payload["description"]
        assert isinstance(description, dict)
        assert RoleDescription.from_dict(description).identity == want


@pytest.mark.slow
async def test_participants_built_from_different_sources_refuse_each_other(
    tmp_path: Path,
) -> None:
    plan = load_plan(PLANS / "pair.toml")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    compile_plan(plan, ours, range(2))
    # "Other sources": the same plan compiled by code whose digest differs.
    other_code = hashlib.sha256(b"other sources").digest()
    compile_plan(plan, theirs, range(2), code=other_code)
    our_specs, deadline = launch_specs(ours)
    their_specs, _ = launch_specs(theirs)
    result = await launch([our_specs[0], their_specs[1]], deadline=deadline, fail_fast=False)
    assert result.first_to_fail is not None
    logs = [spec.log.read_text() for spec in (our_specs[0], their_specs[1])]
    refused = [log for log in logs if "IdentityMismatch" in log]
    assert refused, logs
    for log in refused:
        assert "the run identity differs in learner;" in log
    for outcome in result.outcomes.values():
        assert outcome.returncode not in (None, 0), outcome
