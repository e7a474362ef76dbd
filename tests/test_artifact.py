"""Role artifacts: build, read, determinism, the target check, run.json, and a real launch."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import json
import marshal
import os
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import alpha
from alpha.artifact import (
    ARTIFACT_FORMAT,
    MAX_PAYLOAD_BYTES,
    PAYLOAD_NAME,
    RUN_FORMAT,
    RUN_JSON,
    TARGETS,
    _bytecode,
    artifact_entry,
    artifact_name,
    build_artifact,
    check_target,
    host_target,
    launch_specs,
    read_artifact,
    read_run_json,
    run_embedded,
    write_run_json,
)
from alpha.budgets import Budgets
from alpha.errors import ArtifactInvalid, TargetMismatch
from alpha.exitcodes import EXIT_USAGE
from alpha.launch import launch
from alpha.role import RoleDescription, exchange_roles
from alpha.topology import ParticipantTree

HERE = host_target()
OTHER = next((t for t in TARGETS if t != HERE), "aarch64")
TREE = ParticipantTree(4, 3)
DESCRIPTIONS = list(exchange_roles(TREE, exchange=256))


def payload_of(
    description: RoleDescription, target: str = HERE, **extra: object
) -> dict[str, object]:
    return {
        "format": ARTIFACT_FORMAT,
        "role": description.role,
        "target": target,
        "description": description.to_dict(),
        **extra,
    }


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def package_sources() -> list[str]:
    root = Path(alpha.__file__).parent
    return sorted(
        p.relative_to(root.parent).as_posix()
        for p in root.rglob("*.py")
        if "__pycache__" not in p.parts
    )


def stored_zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> Path:
    """A zip written by hand, for what build_artifact refuses to write."""
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def write_run(
    directory: Path,
    descriptions: list[RoleDescription],
    *,
    target: str = HERE,
    participants: int | None = None,
) -> dict[str, object]:
    """Build an artifact per description into ``directory`` and write its run.json."""
    entries = []
    for description in descriptions:
        path = directory / artifact_name(description.role)
        build_artifact(path, payload_of(description, target))
        entries.append(artifact_entry(path))
    identity = descriptions[0].identity
    run: dict[str, object] = {
        "format": RUN_FORMAT,
        "name": "exchange-4-3",
        "participants": descriptions[0].participants if participants is None else participants,
        "plan_sha256": hashlib.sha256(b"a plan").hexdigest(),
        "identity": {
            "learner": identity.learner.hex(),
            "contract": identity.contract.hex(),
            "membership": identity.membership.hex(),
        },
        "alpha_version": alpha.__version__,
        "roles": entries,
    }
    write_run_json(directory, run)
    return run


def run_artifact(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *options, str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )


# --- targets ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "target"),
    [
        ("x86_64", "x86_64"),
        ("AMD64", "x86_64"),
        ("amd64", "x86_64"),
        ("aarch64", "aarch64"),
        ("arm64", "aarch64"),
        ("riscv64", "riscv64"),
        ("", ""),
    ],
)
def test_host_target_normalizes_machine_names(machine: str, target: str) -> None:
    assert host_target(machine) == target


def test_an_unknown_machine_matches_no_target() -> None:
    assert host_target("riscv64") not in TARGETS
    with pytest.raises(TargetMismatch):
        check_target(payload_of(DESCRIPTIONS[0], "x86_64"), host=host_target("riscv64"))


def test_check_target_accepts_its_own_target_and_refuses_the_other() -> None:
    check_target(payload_of(DESCRIPTIONS[2], HERE))
    check_target(payload_of(DESCRIPTIONS[2], "aarch64"), host="aarch64")
    with pytest.raises(TargetMismatch) as caught:
        check_target(payload_of(DESCRIPTIONS[2], "aarch64"), host="x86_64")
    assert type(caught.value) is TargetMismatch
    assert str(caught.value) == (
        "role 2: this artifact is built for aarch64, but this machine is x86_64; "
        "run it on a aarch64 machine (or under qemu-aarch64)"
    )


# --- building and reading ---------------------------------------------------


def test_build_and_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "role-000001.pyz"
    payload = payload_of(DESCRIPTIONS[1], schedule={"forms": [1, 2, {"repeat": 200000}]})
    size = build_artifact(path, payload)
    assert size == path.stat().st_size
    assert read_artifact(path) == payload
    assert path.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file is left"


def test_the_zip_holds_main_the_package_sources_and_role_json(tmp_path: Path) -> None:
    path = tmp_path / "role-000000.pyz"
    payload = payload_of(DESCRIPTIONS[0])
    build_artifact(path, payload)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        modules = [m for name in package_sources() for m in (name, name[:-3] + ".pyc")]
        assert names == ["__main__.py", *modules, PAYLOAD_NAME]
        assert b"run_embedded" in archive.read("__main__.py")
        for info in infos:
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            expected = zipfile.ZIP_STORED if info.filename == PAYLOAD_NAME else zipfile.ZIP_DEFLATED
            assert info.compress_type == expected, info.filename
        for name in package_sources():
            source = (Path(alpha.__file__).parent.parent / name).read_bytes()
            assert archive.read(name) == source
            # PEP 552: magic, flags "hash-based, check the source", the source's hash, code.
            pyc = archive.read(name[:-3] + ".pyc")
            assert pyc[:4] == importlib.util.MAGIC_NUMBER
            assert int.from_bytes(pyc[4:8], "little") == 0b11
            assert pyc[8:16] == importlib.util.source_hash(source)
            assert marshal.loads(pyc[16:]).co_filename == name
        assert archive.read(PAYLOAD_NAME) == canonical(payload)


def test_bytecode_is_left_out_where_a_hash_seed_would_change_it() -> None:
    # A frozenset of strings iterates in hash order, which the seed changes: no .pyc, and the
    # module is compiled at start. One of integers iterates the same way in every process.
    assert _bytecode("m.py", b'KEYS = frozenset({"a", "b", "c"})\n') is None
    assert _bytecode("m.py", b"def f(x):\n    return x in {'a', 'b'}\n") is None
    assert _bytecode("m.py", b"SIZES = frozenset({8, 2, 4})\n") is not None
    assert _bytecode("m.py", b'KEYS = frozenset(("a", "b", "c"))\n') is not None


@pytest.mark.slow
def test_a_participant_loads_the_bytecode_and_not_the_source(tmp_path: Path) -> None:
    path = tmp_path / "role-000000.pyz"
    build_artifact(path, payload_of(DESCRIPTIONS[0]))
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import alpha.participant, alpha.frame; "
        "print(alpha.frame.__file__); print(alpha.frame.field_at.__code__.co_filename)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [f"{path}/alpha/frame.pyc", "alpha/frame.py"]


def test_role_json_is_stored_so_the_size_follows_the_payload_exactly(tmp_path: Path) -> None:
    small = build_artifact(tmp_path / "a.pyz", payload_of(DESCRIPTIONS[3], schedule="x"))
    large = build_artifact(tmp_path / "b.pyz", payload_of(DESCRIPTIONS[3], schedule="x" * 1001))
    assert large - small == 1000
    data = (tmp_path / "b.pyz").read_bytes()
    assert canonical(payload_of(DESCRIPTIONS[3], schedule="x" * 1001)) in data


def test_the_same_inputs_give_byte_identical_artifacts(tmp_path: Path) -> None:
    payload = payload_of(DESCRIPTIONS[2], schedule=[3, 1, 2])
    first, second = tmp_path / "one" / "role-000002.pyz", tmp_path / "two" / "role-000002.pyz"
    build_artifact(first, payload)
    # Key order of the mapping given does not matter either: role.json is canonical.
    build_artifact(second, dict(reversed(list(payload.items()))))
    assert first.read_bytes() == second.read_bytes()
    build_artifact(first, payload)  # rebuilt in place
    assert first.read_bytes() == second.read_bytes()
    build_artifact(second, payload_of(DESCRIPTIONS[2], schedule=[3, 1, 2, 0]))
    assert first.read_bytes() != second.read_bytes()


@pytest.mark.slow
def test_another_process_builds_the_same_bytes(tmp_path: Path) -> None:
    payload = payload_of(DESCRIPTIONS[1], schedule={"b": [1.5, None], "a": "\u00e9"})
    here = tmp_path / "here.pyz"
    build_artifact(here, payload)
    there = tmp_path / "there.pyz"
    script = (
        "import json, os, sys; from pathlib import Path; "
        "from alpha.artifact import build_artifact; os.umask(0o077); "
        "build_artifact(Path(sys.argv[1]), json.loads(sys.stdin.read()))"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(there)],
        input=json.dumps(payload),
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert here.read_bytes() == there.read_bytes()
    assert stat.S_IMODE(there.stat().st_mode) == 0o755, "the umask does not change the mode"


def test_artifacts_of_one_build_share_everything_but_role_json(tmp_path: Path) -> None:
    sizes = {
        d.role: build_artifact(tmp_path / artifact_name(d.role), payload_of(d))
        for d in DESCRIPTIONS
    }
    base = {
        role: size - len(canonical(payload_of(DESCRIPTIONS[role]))) for role, size in sizes.items()
    }
    assert len(set(base.values())) == 1


@pytest.mark.parametrize("key", ["format", "role", "target", "description"])
def test_build_refuses_a_payload_without_a_key(key: str, tmp_path: Path) -> None:
    payload = payload_of(DESCRIPTIONS[0])
    del payload[key]
    with pytest.raises(ArtifactInvalid) as caught:
        build_artifact(tmp_path / "role-000000.pyz", payload)
    assert type(caught.value) is ArtifactInvalid
    assert repr(key) in str(caught.value)
    assert list(tmp_path.iterdir()) == [], "nothing is written"


def _describe_role(r: int) -> Callable[[dict[str, object]], None]:
    def change(payload: dict[str, object]) -> None:
        payload["description"] = DESCRIPTIONS[r].to_dict()

    return change


def _set(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def change(payload: dict[str, object]) -> None:
        payload[key] = value

    return change


def _break_description(payload: dict[str, object]) -> None:
    description = payload["description"]
    assert isinstance(description, dict)
    description["edges"] = [{"peer": 0}, {"peer": 0}]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_set("format", "alpha-artifact/2"), "format"),
        (_set("role", -1), "role"),
        (_set("role", True), "role"),
        (_set("role", "0"), "role"),
        (_set("target", "riscv64"), "target"),
        (_set("target", "X86_64"), "target"),
        (_set("description", "role 0"), "description"),
        (_break_description, "description: edges"),
        (_describe_role(1), "description.role"),
        (_set("schedule", {1, 2}), "not a JSON value"),
        (_set("schedule", float("nan")), "not a JSON value"),
    ],
    ids=[
        "format",
        "negative-role",
        "bool-role",
        "string-role",
        "unknown-target",
        "target-spelling",
        "description-not-a-table",
        "description-invalid",
        "description-of-another-role",
        "schedule-a-set",
        "schedule-nan",
    ],
)
def test_build_refuses_a_wrong_payload(
    change: Callable[[dict[str, object]], None], named: str, tmp_path: Path
) -> None:
    payload = copy.deepcopy(payload_of(DESCRIPTIONS[0]))
    change(payload)
    with pytest.raises(ArtifactInvalid) as caught:
        build_artifact(tmp_path / "role-000000.pyz", payload)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def _padded(size: int) -> dict[str, object]:
    """A payload whose canonical JSON is exactly ``size`` bytes."""
    payload = payload_of(DESCRIPTIONS[0], schedule="")
    payload["schedule"] = "x" * (size - len(canonical(payload)))
    assert len(canonical(payload)) == size
    return payload


def test_build_accepts_a_payload_of_the_maximum_size_and_refuses_one_byte_more(
    tmp_path: Path,
) -> None:
    path = tmp_path / "role-000000.pyz"
    build_artifact(path, _padded(MAX_PAYLOAD_BYTES))
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo(PAYLOAD_NAME).file_size == MAX_PAYLOAD_BYTES
    assert read_artifact(path)["role"] == 0
    with pytest.raises(ArtifactInvalid) as caught:
        build_artifact(tmp_path / "big.pyz", _padded(MAX_PAYLOAD_BYTES + 1))
    assert type(caught.value) is ArtifactInvalid
    assert str(MAX_PAYLOAD_BYTES) in str(caught.value)


def test_read_refuses_a_role_json_past_the_maximum(tmp_path: Path) -> None:
    path = stored_zip(
        tmp_path / "big.pyz",
        {"__main__.py": b"", PAYLOAD_NAME: canonical(_padded(MAX_PAYLOAD_BYTES + 1))},
    )
    with pytest.raises(ArtifactInvalid) as caught:
        read_artifact(path)
    assert type(caught.value) is ArtifactInvalid
    assert str(MAX_PAYLOAD_BYTES) in str(caught.value)


def _built(tmp_path: Path) -> Path:
    path = tmp_path / "role-000000.pyz"
    build_artifact(path, payload_of(DESCRIPTIONS[0]))
    return path


def _flip_in_role_json(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.rindex(b'"format"') + 2
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda p: p.unlink(), "does not exist"),
        (lambda p: p.write_bytes(b"#!/usr/bin/env python3\nnot a zip at all\n"), "not a readable"),
        (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "not a readable"),
        (lambda p: p.write_bytes(b""), "not a readable"),
        (_flip_in_role_json, "not a readable"),  # the CRC no longer matches
        (
            lambda p: stored_zip(p, {"__main__.py": b"", "other.json": b"{}"}),
            f"no {PAYLOAD_NAME}",
        ),
        (lambda p: stored_zip(p, {PAYLOAD_NAME: b"{}"}), "no __main__.py"),
        (
            lambda p: stored_zip(
                p,
                {"__main__.py": b"", PAYLOAD_NAME: canonical(payload_of(DESCRIPTIONS[0]))},
                zipfile.ZIP_DEFLATED,
            ),
            "stored uncompressed",
        ),
        (lambda p: stored_zip(p, {"__main__.py": b"", PAYLOAD_NAME: b"{"}), "not JSON"),
        (lambda p: stored_zip(p, {"__main__.py": b"", PAYLOAD_NAME: b"\xff"}), "not JSON"),
        (lambda p: stored_zip(p, {"__main__.py": b"", PAYLOAD_NAME: b"[]"}), "JSON object"),
        (
            lambda p: stored_zip(
                p,
                {
                    "__main__.py": b"",
                    PAYLOAD_NAME: canonical(
                        {**payload_of(DESCRIPTIONS[0]), "format": "alpha-role/1"}
                    ),
                },
            ),
            "format",
        ),
        (
            lambda p: stored_zip(
                p,
                {
                    "__main__.py": b"",
                    PAYLOAD_NAME: canonical({**payload_of(DESCRIPTIONS[0]), "target": "mips"}),
                },
            ),
            "target",
        ),
        (
            lambda p: stored_zip(
                p,
                {
                    "__main__.py": b"",
                    PAYLOAD_NAME: canonical({**payload_of(DESCRIPTIONS[0]), "role": None}),
                },
            ),
            "role",
        ),
    ],
    ids=[
        "missing",
        "not-a-zip",
        "truncated",
        "empty",
        "role-json-damaged",
        "no-role-json",
        "no-main",
        "role-json-compressed",
        "role-json-not-json",
        "role-json-not-utf8",
        "role-json-not-an-object",
        "wrong-format",
        "wrong-target",
        "no-role",
    ],
)
def test_read_refuses_what_alpha_did_not_build(
    damage: Callable[[Path], object], named: str, tmp_path: Path
) -> None:
    path = _built(tmp_path)
    damage(path)
    with pytest.raises(ArtifactInvalid) as caught:
        read_artifact(path)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)


def test_artifact_entry_describes_the_file(tmp_path: Path) -> None:
    path = tmp_path / artifact_name(0)
    build_artifact(path, payload_of(DESCRIPTIONS[0]))
    assert artifact_entry(path) == {
        "role": 0,
        "target": HERE,
        "file": "role-000000.pyz",
        "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "lower": [],
        "higher": [1, 2, 3],
    }
    misnamed = tmp_path / artifact_name(5)
    path.rename(misnamed)
    with pytest.raises(ArtifactInvalid) as caught:
        artifact_entry(misnamed)
    assert type(caught.value) is ArtifactInvalid
    assert "name it role-000000.pyz" in str(caught.value)


# --- the entry inside an artifact -------------------------------------------


def test_run_embedded_refuses_another_target_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / artifact_name(3)
    build_artifact(path, payload_of(DESCRIPTIONS[3], OTHER))
    assert run_embedded(path) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"role 3: this artifact is built for {OTHER}, but this machine is {HERE}; "
        f"run it on a {OTHER} machine (or under qemu-{OTHER})\n"
    )


def test_run_embedded_refuses_a_damaged_artifact_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "role-000000.pyz"
    path.write_bytes(b"nothing")
    assert run_embedded(path) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("role ?: failed: ArtifactInvalid: role-000000.pyz is not a readable")


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("-S",)], ids=["python", "python-without-site"])
def test_an_artifact_refuses_another_target_before_it_imports_anything(
    options: tuple[str, ...], tmp_path: Path
) -> None:
    # -S leaves numpy and trio out of reach: the target is checked without them.
    path = tmp_path / artifact_name(3)
    build_artifact(path, payload_of(DESCRIPTIONS[3], OTHER))
    done = run_artifact(path, *options)
    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"role 3: this artifact is built for {OTHER}, but this")


@pytest.mark.slow
def test_an_artifact_runs_by_its_shebang(tmp_path: Path) -> None:
    path = tmp_path / artifact_name(1)
    build_artifact(path, payload_of(DESCRIPTIONS[1], OTHER))
    # The python3 the shebang finds is this interpreter.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(path)], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("role 1: this artifact is built for")
    assert done.stderr.count("\n") == 1


@pytest.mark.slow
def test_an_artifact_names_a_missing_numpy_or_trio_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / artifact_name(1)
    build_artifact(path, payload_of(DESCRIPTIONS[1]))
    done = run_artifact(path, "-S")
    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"role 1: failed: {sys.executable} cannot import ")
    assert "numpy and trio installed (they are not bundled)" in done.stderr


@pytest.mark.slow
def test_a_damaged_artifact_process_exits_2_in_one_line(tmp_path: Path) -> None:
    path = _built(tmp_path)
    _flip_in_role_json(path)
    done = run_artifact(path)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("role ?: failed: ArtifactInvalid: ")


# --- run.json ---------------------------------------------------------------


def test_run_json_round_trip(tmp_path: Path) -> None:
    run = write_run(tmp_path, DESCRIPTIONS)
    assert read_run_json(tmp_path) == run
    text = (tmp_path / RUN_JSON).read_text()
    assert json.loads(text) == run
    assert stat.S_IMODE((tmp_path / RUN_JSON).stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        *(artifact_name(r) for r in range(4)),
        RUN_JSON,
    ]


def test_run_json_may_list_a_subset_of_roles(tmp_path: Path) -> None:
    run = write_run(tmp_path, [DESCRIPTIONS[1], DESCRIPTIONS[3]])
    roles = read_run_json(tmp_path)["roles"]
    assert isinstance(roles, list)
    assert [entry["role"] for entry in roles] == [1, 3]
    assert read_run_json(tmp_path) == run


def _field(*keys: str | int, value: object) -> Callable[[dict[str, object]], None]:
    def change(run: dict[str, object]) -> None:
        target: object = run
        for key in keys[:-1]:
            target = target[key]  # type: ignore[index]
        target[keys[-1]] = value  # type: ignore[index]

    return change


def _drop(*keys: str | int) -> Callable[[dict[str, object]], None]:
    def change(run: dict[str, object]) -> None:
        target: object = run
        for key in keys[:-1]:
            target = target[key]  # type: ignore[index]
        del target[keys[-1]]  # type: ignore[attr-defined]

    return change


def _swap_roles(run: dict[str, object]) -> None:
    roles = run["roles"]
    assert isinstance(roles, list)
    roles[0], roles[1] = roles[1], roles[0]


def _repeat_role(run: dict[str, object]) -> None:
    roles = run["roles"]
    assert isinstance(roles, list)
    roles.append(copy.deepcopy(roles[-1]))


RUN_MUTATIONS = {
    "format": (_field("format", value="alpha-run/2"), "format"),
    "no-name": (_drop("name"), "name"),
    "empty-name": (_field("name", value=""), "name"),
    "participants-zero": (_field("participants", value=0), "participants"),
    "participants-bool": (_field("participants", value=True), "participants"),
    "participants-too-few": (_field("participants", value=3), "roles[0].higher"),
    "plan-sha-short": (_field("plan_sha256", value="ab"), "plan_sha256"),
    "plan-sha-upper": (_field("plan_sha256", value="A" * 64), "plan_sha256"),
    "no-identity": (_drop("identity"), "identity"),
    "identity-part": (_field("identity", "membership", value="0" * 63), "identity.membership"),
    "no-version": (_drop("alpha_version"), "alpha_version"),
    "no-roles": (_field("roles", value=[]), "roles"),
    "roles-not-a-list": (_field("roles", value={}), "roles"),
    "entry-not-a-table": (_field("roles", 0, value=0), "roles[0]"),
    "roles-out-of-order": (_swap_roles, "roles[1].role"),
    "role-twice": (_repeat_role, "roles[4].role"),
    "role-negative": (_field("roles", 0, "role", value=-1), "roles[0].role"),
    "target": (_field("roles", 1, "target", value="sparc"), "roles[1].target"),
    "file": (_field("roles", 1, "file", value="../role-000001.pyz"), "roles[1].file"),
    "bytes": (_field("roles", 1, "bytes", value=0), "roles[1].bytes"),
    "sha256": (_field("roles", 1, "sha256", value=None), "roles[1].sha256"),
    "lower-of-higher": (_field("roles", 1, "lower", value=[2]), "roles[1].lower"),
    "higher-of-lower": (_field("roles", 1, "higher", value=[0]), "roles[1].higher"),
    "lower-unsorted": (_field("roles", 3, "lower", value=[2, 0]), "roles[3].lower"),
    "higher-past-run": (_field("roles", 0, "higher", value=[1, 4]), "roles[0].higher"),
    "peer-bool": (_field("roles", 1, "lower", value=[False]), "roles[1].lower"),
}


@pytest.mark.parametrize(("change", "named"), RUN_MUTATIONS.values(), ids=RUN_MUTATIONS.keys())
def test_run_json_refusals(
    change: Callable[[dict[str, object]], None], named: str, tmp_path: Path
) -> None:
    good = write_run(tmp_path, DESCRIPTIONS)
    bad = copy.deepcopy(good)
    change(bad)
    with pytest.raises(ArtifactInvalid) as caught:
        write_run_json(tmp_path / "other", bad)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)
    assert not (tmp_path / "other" / RUN_JSON).exists()
    # The same refusal on read, for a run.json written by hand.
    (tmp_path / RUN_JSON).write_text(json.dumps(bad))
    with pytest.raises(ArtifactInvalid) as caught:
        read_run_json(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [(None, "has no run.json"), ("{", "is not JSON"), ("[]", "JSON object")],
    ids=["missing", "not-json", "not-an-object"],
)
def test_read_run_json_refuses_a_missing_or_unreadable_file(
    text: str | None, named: str, tmp_path: Path
) -> None:
    if text is not None:
        (tmp_path / RUN_JSON).write_text(text)
    with pytest.raises(ArtifactInvalid) as caught:
        read_run_json(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)


# --- launch specs -----------------------------------------------------------


def test_launch_specs_follow_run_json(tmp_path: Path) -> None:
    slow = Budgets(deadline=900.0)
    descriptions = [*DESCRIPTIONS[:2], dataclasses.replace(DESCRIPTIONS[2], budgets=slow)]
    descriptions.append(DESCRIPTIONS[3])
    write_run(tmp_path, descriptions)
    specs, deadline = launch_specs(tmp_path)
    assert deadline == 900.0
    assert [spec.role for spec in specs] == [0, 1, 2, 3]
    for spec in specs:
        assert spec.argv == (sys.executable, str((tmp_path / artifact_name(spec.role)).resolve()))
        assert spec.lower == tuple(p for p in TREE.edges(spec.role) if p < spec.role)
        assert spec.higher == tuple(p for p in TREE.edges(spec.role) if p > spec.role)
        assert spec.log == tmp_path / "logs" / f"role-{spec.role:06d}.log"


def test_launch_specs_refuses_a_run_without_every_role(tmp_path: Path) -> None:
    write_run(tmp_path, [DESCRIPTIONS[0], DESCRIPTIONS[1], DESCRIPTIONS[3]])
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert "lists no artifact for role 2 of 4" in str(caught.value)
    assert "compile all roles to launch on one host" in str(caught.value)


def _append_byte(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\0")


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (_append_byte, "role-000003.pyz changed since it was built"),
        (_flip_last_byte, "role-000003.pyz changed since it was built"),
        (lambda p: p.unlink(), "role-000003.pyz is missing"),
    ],
    ids=["grown", "same-size", "deleted"],
)
def test_launch_specs_refuses_a_changed_artifact(
    damage: Callable[[Path], object], named: str, tmp_path: Path
) -> None:
    write_run(tmp_path, DESCRIPTIONS)
    damage(tmp_path / artifact_name(3))
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)


def test_launch_specs_refuses_a_run_json_that_disagrees_with_an_artifact(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path, DESCRIPTIONS)
    roles = run["roles"]
    assert isinstance(roles, list)
    roles[2]["lower"] = []
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert "role-000002.pyz has lower peers [0]" in str(caught.value)
    roles[2]["lower"] = [0]
    roles[2]["target"] = OTHER
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert f"lists role 2 for {OTHER}" in str(caught.value)


# --- end to end -------------------------------------------------------------


@pytest.mark.slow
async def test_artifacts_of_the_edge_exchange_launch_and_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    build = tmp_path / "build"
    write_run(build, list(exchange_roles(TREE, exchange=256, report_dir=str(reports))))
    specs, deadline = launch_specs(build)
    result = await launch(specs, deadline=deadline)
    assert result.ok, result.first_failure
    assert sorted(p.name for p in reports.iterdir()) == [f"role-{r:06d}.json" for r in range(4)]
    for role in range(4):
        report = json.loads((reports / f"role-{role:06d}.json").read_text())
        assert report["role"] == role
        assert [edge["peer"] for edge in report["edges"]] == list(TREE.edges(role))
        assert "done:" in (build / "logs" / f"role-{role:06d}.log").read_text()
