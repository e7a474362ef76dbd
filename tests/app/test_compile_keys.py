"""Keys from the compiler (issue 25): ``alpha compile`` draws a fresh run secret per build and
writes it nowhere; each role's artifact holds the keys of its own edges, both directions, and no
other edge's; both ends of an edge hold the same key for each direction; two compiles of one
plan share their identity and nothing of their keys; and after ``alpha run`` the keys appear in
no file of the run folder but the artifacts, and in nothing the command printed."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import alpha.app.compile as compile_module
from alpha.app.compile import compile_plan, compiled_identity, describe_role
from alpha.artifact import payload_description, read_artifact
from alpha.compiler.plan import Plan
from alpha.core.keys import RUN_SECRET_SIZE, edge_key
from alpha.errors import KeyScheduleInvalid, UsageError
from alpha.exitcodes import EXIT_OK
from alpha.schedule.role import RoleDescription
from tests.support import SECRET, plan_of, plan_text, raises_exactly, run_alpha

ROLES = 5  # a tree of fan-out 2: 0-1, 0-2, 1-3, 1-4


def _tables(integrity: str | None = None) -> dict[str, object]:
    return {
        "topology": {"shape": "tree", "fanout": 2},
        "contract": {"dtype": "float64", "integrity": integrity},
        "work": {"kind": "sum-check", "size": 8},
    }


def _plan(integrity: str | None = None) -> Plan:
    return plan_of("keys", roles=ROLES, rounds=2, **_tables(integrity))  # type: ignore[arg-type]


def _descriptions(folder: Path) -> dict[int, RoleDescription]:
    found = {}
    for path in sorted(folder.glob("role-*.pyz")):
        description = payload_description(read_artifact(path), path.name)
        found[description.role] = description
    return found


def _keys(descriptions: dict[int, RoleDescription]) -> dict[int, dict[tuple[int, int], bytes]]:
    """Each role's keys as its artifact holds them: ``(sender, receiver)`` to the key."""
    held: dict[int, dict[tuple[int, int], bytes]] = {}
    for role, description in descriptions.items():
        mine = held.setdefault(role, {})
        for edge in description.edges:
            assert edge.send_key is not None and edge.receive_key is not None
            mine[role, edge.peer] = edge.send_key
            mine[edge.peer, role] = edge.receive_key
    return held


def _check_own_edges_only(plan: Plan, held: dict[int, dict[tuple[int, int], bytes]]) -> None:
    tree = plan.tree
    every: dict[tuple[int, int], bytes] = {}
    for role, keys in held.items():
        # exactly the role's own edges, both directions
        own = {(role, p) for p in tree.edges(role)} | {(p, role) for p in tree.edges(role)}
        assert set(keys) == own
        for direction, key in keys.items():
            # a's send key to b is b's receive key from a
            assert every.setdefault(direction, key) == key
    assert len(every) == 2 * (plan.participants - 1)
    assert len(set(every.values())) == len(every)  # no two edge directions share a key
    for role, keys in held.items():
        # no key of another edge in this artifact, under any name
        others = {key for direction, key in every.items() if role not in direction}
        assert not others & set(keys.values())


# --- describe_role: the key schedule, deterministic from the secret --------------------------


def test_a_role_is_described_with_the_keys_of_its_edges_from_the_secret() -> None:
    plan = _plan()
    identity = compiled_identity(plan)
    for role in range(ROLES):
        description = describe_role(plan, role, identity, secret=SECRET)
        assert description == describe_role(plan, role, identity, secret=SECRET)
        assert description.keyed and description.integrity == "hmac-sha256"
        for edge in description.edges:
            assert edge.send_key == edge_key(SECRET, identity.encode(), role, edge.peer)
            assert edge.receive_key == edge_key(SECRET, identity.encode(), edge.peer, role)
    held = _keys({r: describe_role(plan, r, identity, secret=SECRET) for r in range(ROLES)})
    _check_own_edges_only(plan, held)
    other = bytes(RUN_SECRET_SIZE)
    again = _keys({r: describe_role(plan, r, identity, secret=other) for r in range(ROLES)})
    assert not set().union(*(k.values() for k in held.values())) & set().union(
        *(k.values() for k in again.values())
    )


def test_a_keyed_plan_needs_a_secret_and_an_unkeyed_one_takes_none() -> None:
    keyed, unkeyed = _plan(), _plan("sha256")
    assert raises_exactly(UsageError, describe_role, keyed, 1).exit_code == 2
    raises_exactly(UsageError, describe_role, unkeyed, 1, secret=SECRET)
    raises_exactly(KeyScheduleInvalid, describe_role, keyed, 1, secret=bytes(31))
    plain = describe_role(unkeyed, 1)
    assert not plain.keyed and all(not edge.keyed for edge in plain.edges)
    assert "keys" not in plain.to_json()


# --- alpha compile ------------------------------------------------------------------------------


def test_compile_draws_a_secret_per_build_and_writes_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[bytes] = []
    real = compile_module.draw_run_secret

    def recorded() -> bytes:
        drawn.append(real())
        return drawn[-1]

    monkeypatch.setattr(compile_module, "draw_run_secret", recorded)
    plan = _plan()
    for build in ("a", "b"):
        compile_plan(plan, tmp_path / build, range(ROLES))
    assert len(drawn) == 2 and drawn[0] != drawn[1]  # one per build, never the same
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len([path for path in files if path.name.startswith("role-")]) == 2 * ROLES
    for path in files:
        blobs = [path.read_bytes()]
        if path.suffix == ".pyz":  # and every member, decompressed
            with zipfile.ZipFile(path) as archive:
                blobs += [archive.read(name) for name in archive.namelist()]
        for secret in drawn:
            for blob in blobs:
                assert secret not in blob and secret.hex().encode() not in blob, path
    # The keys the build derived are the secret's: recomputed from the recorded one.
    identity = compiled_identity(plan)
    held = _keys(_descriptions(tmp_path / "a"))
    for direction, key in held[1].items():
        assert key == edge_key(drawn[0], identity.encode(), *direction)


@pytest.mark.slow
def test_two_real_compiles_of_one_plan_share_the_identity_and_no_key(tmp_path: Path) -> None:
    source = tmp_path / "keys.toml"
    source.write_text(plan_text("keys", roles=ROLES, rounds=2, **_tables()))  # type: ignore[arg-type]
    plan = _plan()
    builds = []
    for name in ("first", "second"):
        done = run_alpha("compile", str(source), "-o", str(tmp_path / name))
        assert done.returncode == EXIT_OK, done.stderr
        descriptions = _descriptions(tmp_path / name)
        assert sorted(descriptions) == list(range(ROLES))
        held = _keys(descriptions)
        _check_own_edges_only(plan, held)
        run_json = (tmp_path / name / "run.json").read_text()
        for keys in held.values():
            for key in keys.values():
                assert key.hex() not in run_json
                assert key.hex() not in done.stdout + done.stderr
        builds.append((descriptions, held))
    (first, first_keys), (second, second_keys) = builds
    assert {d.identity for d in first.values()} == {d.identity for d in second.values()}
    assert len({d.identity for d in first.values()}) == 1
    for role in range(ROLES):
        for direction, key in first_keys[role].items():
            assert second_keys[role][direction] != key  # another compile, other keys
    assert not set().union(*(k.values() for k in first_keys.values())) & set().union(
        *(k.values() for k in second_keys.values())
    )


@pytest.mark.slow
def test_after_a_keyed_run_no_key_is_anywhere_but_in_the_artifacts(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    done = run_alpha("run", "digits", "--roles", "3", "--rounds", "2", "-o", str(folder))
    assert done.returncode == EXIT_OK, done.stderr
    held = _keys(_descriptions(folder))
    keys = {key for role_keys in held.values() for key in role_keys.values()}
    assert len(keys) == 4  # a tree of three roles: two edges, two directions each
    looked = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or (path.name.startswith("role-") and path.suffix == ".pyz"):
            continue
        looked.append(path.relative_to(folder).parts[0])
        data = path.read_bytes()
        for key in keys:
            for spelled in (key, key.hex().encode(), key.hex().upper().encode()):
                assert spelled not in data, path
    # what the run writes: run.json, logs/, reports/, progress/, its history and curve
    assert {"run.json", "logs", "reports", "progress", "history.csv"} <= set(looked)
    said = done.stdout + done.stderr
    assert said and not any(key.hex() in said.lower() for key in keys)
