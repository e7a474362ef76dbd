"""Role artifacts: build, read, determinism, the target check, run.json, and a real launch."""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import hashlib
import importlib.util
import io
import json
import marshal
import os
import stat
import subprocess
import sys
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import alpha
from alpha.app.compile import describe_role
from alpha.artifact import (
    ARTIFACT_FORMAT,
    ARTIFACT_MODE,
    KEYED_ARTIFACT_MODE,
    MANIFEST_NAME,
    MAX_PAYLOAD_BYTES,
    PAYLOAD_NAME,
    RUN_FORMAT,
    RUN_JSON,
    TARGETS,
    artifact_entry,
    artifact_name,
    build_artifact,
    check_target,
    file_sha256,
    host_target,
    read_artifact,
    read_run_json,
    run_embedded,
    runtime_entry,
    verify_archive,
    verify_artifact,
    write_run_json,
)
from alpha.artifact import loader as _loader
from alpha.artifact.build import SOURCE_SUFFIXES, _bytecode, _member
from alpha.artifact.loader import (
    HEADER,
    MAX_MANIFEST_BYTES,
    RUNTIME_NAME,
    Damaged,
    decode_manifest,
    decode_runtime,
    encode_manifest,
    encode_runtime,
)
from alpha.compiler import encode, project
from alpha.compiler.work import protocol_for
from alpha.compiler.work_sum_check import exchange_plan
from alpha.core.budgets import Budgets
from alpha.errors import ArtifactInvalid, TargetMismatch
from alpha.exitcodes import EXIT_FAILURE, EXIT_USAGE
from alpha.launch.launcher import launch_specs
from alpha.records.commit import COMMIT_NAME
from alpha.records.reports import committed_reports
from alpha.schedule.role import Edge, RoleDescription
from harness.compiled import CompiledRun
from tests.support import SECRET

HERE = host_target()
OTHER = next((t for t in TARGETS if t != HERE), "aarch64")
# The edge exchange on the tree of 4 roles, fan-out 3: the roles' descriptions and schedules
# as their artifacts carry them.
PLAN = exchange_plan(4, 3, payload=256)
TREE = PLAN.tree
DESCRIPTIONS = [describe_role(PLAN, role, secret=SECRET) for role in range(PLAN.participants)]
# The same roles of a plan with integrity "sha256": no keys in them.
UNKEYED = [
    dataclasses.replace(
        description,
        integrity="sha256",
        edges=tuple(Edge(edge.peer, edge.address) for edge in description.edges),
    )
    for description in DESCRIPTIONS
]
SCHEDULES = [encode(project(protocol_for(PLAN), role)) for role in range(PLAN.participants)]


def payload_of(
    description: RoleDescription, target: str = HERE, **extra: object
) -> dict[str, object]:
    """An artifact's payload for ``description``, with its role's compiled schedule unless
    ``extra`` gives another."""
    return {
        "format": ARTIFACT_FORMAT,
        "role": description.role,
        "target": target,
        "description": description.to_dict(),
        "schedule": SCHEDULES[description.role],
        **extra,
    }


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def package_sources() -> list[str]:
    root = Path(alpha.__file__).parent
    return sorted(
        p.relative_to(root.parent).as_posix()
        for p in root.rglob("*")
        if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts
    )


def source_of(name: str) -> bytes:
    """The bytes of the package file at archive path ``name`` (``alpha/wire/frame.py``)."""
    return (Path(alpha.__file__).parent.parent / name).read_bytes()


def loader_in(main: bytes) -> bytes:
    """The loader's source, as an artifact's ``__main__.py`` carries it in L."""
    text = main.decode("latin-1")
    carried = text[text.index("r'''") + 4 : text.rindex("'''")]
    return zlib.decompress(base64.b64decode(carried[66:]))


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
    **extra: object,
) -> dict[str, object]:
    """Build an artifact per description (with ``extra`` payload fields) into ``directory``
    and write its run.json."""
    entries = []
    for description in descriptions:
        path = directory / artifact_name(description.role)
        build_artifact(path, payload_of(description, target, **extra))
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
        "runtime": runtime_entry(),
        "roles": entries,
    }
    write_run_json(directory, run)
    return run


def runtime_of(artifact: Path) -> Path:
    """The shared runtime beside ``artifact`` that this process builds (and binds)."""
    return artifact.parent / str(runtime_entry()["file"])


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
    # It holds its edges' keys: its owner's alone, still an executable.
    assert stat.S_IMODE(path.stat().st_mode) == KEYED_ARTIFACT_MODE == 0o700
    runtime = runtime_of(path)
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, runtime.name]), (
        "the artifact and its runtime, no temporary file"
    )
    assert runtime.name == f"runtime-{hashlib.sha256(runtime.read_bytes()).hexdigest()}.pyz"
    built = runtime.stat().st_mtime_ns
    unkeyed = tmp_path / "role-000002.pyz"
    build_artifact(unkeyed, payload_of(UNKEYED[2]))
    assert runtime.stat().st_mtime_ns == built, "a runtime already there is not written again"
    assert stat.S_IMODE(unkeyed.stat().st_mode) == ARTIFACT_MODE == 0o755, "no key: anyone runs it"


def test_the_zip_holds_main_the_runtime_binding_and_role_json(tmp_path: Path) -> None:
    path = tmp_path / "role-000000.pyz"
    payload = payload_of(DESCRIPTIONS[0])
    build_artifact(path, payload)
    runtime = runtime_of(path)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        assert [info.filename for info in infos] == [
            "__main__.py",
            RUNTIME_NAME,
            PAYLOAD_NAME,
            MANIFEST_NAME,
        ]
        assert loader_in(archive.read("__main__.py")) == source_of("alpha/artifact/loader.py")
        assert decode_runtime(archive.read(RUNTIME_NAME)) == (
            runtime.name,
            hashlib.sha256(runtime.read_bytes()).hexdigest(),
        )
        for info in infos:
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.create_version == info.extract_version == 20
            assert info.compress_type == zipfile.ZIP_STORED, info.filename
        assert archive.read(PAYLOAD_NAME) == canonical(payload)


def test_the_runtime_holds_the_package_sources_and_bytecode_once(tmp_path: Path) -> None:
    path = tmp_path / "role-000000.pyz"
    build_artifact(path, payload_of(DESCRIPTIONS[0]))
    runtime = runtime_of(path)
    assert runtime.read_bytes().startswith(_loader.HEADER)
    verify_archive(runtime)  # its own manifest, as an artifact's
    with zipfile.ZipFile(runtime) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        # Beside each source its bytecode, unless that would follow the hash seed.
        modules = [
            member
            for name in package_sources()
            for member in (name, name.removesuffix(".py") + ".pyc")
            if member == name or _bytecode(name, source_of(name)) is not None
        ]
        assert names == [*modules, MANIFEST_NAME]
        # The compiled fold's C source too, which a participant compiles from its runtime.
        assert "alpha/learner/ordered.c" in names
        assert "alpha/learner/ordered.pyc" not in names
        for info in infos:
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.create_version == info.extract_version == 20
            expected = (
                zipfile.ZIP_STORED if info.filename == MANIFEST_NAME else zipfile.ZIP_DEFLATED
            )
            assert info.compress_type == expected, info.filename
        for name in package_sources():
            source = source_of(name)
            assert archive.read(name) == source
            if name[:-3] + ".pyc" not in names:
                continue
            # PEP 552: magic, flags "hash-based, check the source", the source's hash, code.
            pyc = archive.read(name[:-3] + ".pyc")
            assert pyc[:4] == importlib.util.MAGIC_NUMBER
            assert int.from_bytes(pyc[4:8], "little") == 0b11
            assert pyc[8:16] == importlib.util.source_hash(source)
            assert marshal.loads(pyc[16:]).co_filename == name


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
    path = runtime_of(path)  # what the loader puts first on the path
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import alpha.artifact.participant, alpha.wire.frame; "
        "print(alpha.wire.frame.__file__); print(alpha.wire.frame.field_at.__code__.co_filename)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [f"{path}/alpha/wire/frame.pyc", "alpha/wire/frame.py"]


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
    # Unkeyed, so that its mode (0755) is one a umask of 077 would change.
    payload = payload_of(UNKEYED[1], schedule={"b": [1.5, None], "a": "\u00e9"})
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
    verify_artifact(path)  # the loader's bound on a member is the payload's
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


# --- the manifest and the loader --------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Role 1's artifact, built once for the module: copy it before damaging it. Role 1 has a
    lower peer, so started by hand it fails at once (PortMissing) once its checks pass."""
    path = tmp_path_factory.mktemp("built") / artifact_name(1)
    build_artifact(path, payload_of(DESCRIPTIONS[1]))
    return path


@pytest.fixture
def artifact(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the module's artifact and its runtime, to damage."""
    path = tmp_path / built.name
    path.write_bytes(built.read_bytes())
    runtime_of(path).write_bytes(runtime_of(built).read_bytes())
    return path


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Members = list[tuple[str, bytes]]


def members_of(path: Path) -> Members:
    with zipfile.ZipFile(path) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def repack(path: Path, members: Members, *, manifest: bool = False) -> Path:
    """Write ``members`` at ``path`` as a build lays them out (good headers and CRC-32s); with
    ``manifest``, replace the manifest by one that lists them (a consistent forgery)."""
    if manifest:
        members = [(name, data) for name, data in members if name != MANIFEST_NAME]
        listed = encode_manifest([(name, sha256_hex(data)) for name, data in members])
        members.append((MANIFEST_NAME, listed))
    out = io.BytesIO()
    out.write(HEADER)
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name, which is the point
        for name, data in members:
            stored = name in ("__main__.py", RUNTIME_NAME, PAYLOAD_NAME, MANIFEST_NAME)
            method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(_member(name, method), data)
    path.write_bytes(out.getvalue())
    return path


def data_span(path: Path, name: str) -> tuple[int, int]:
    """Where the member ``name``'s data lies in the file: offset and length."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    return info.header_offset + 30 + len(info.filename), info.compress_size


def flip(path: Path, at: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1 << bit
    path.write_bytes(bytes(data))


def refused(path: Path) -> str:
    """The message verify_artifact refuses ``path`` with (exactly ArtifactInvalid)."""
    with pytest.raises(ArtifactInvalid) as caught:
        verify_artifact(path)
    assert type(caught.value) is ArtifactInvalid
    return str(caught.value)


def started(path: Path, env: dict[str, str] | None = None) -> tuple[int, str, list[str], list[str]]:
    """Run the artifact as ``python -X importtime ARTIFACT``: its exit code, stdout, its stderr
    lines, and the modules of the alpha package that were imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    lines, imported = [], []
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            module = line.rpartition("|")[2].strip()
            if module.partition(".")[0] == "alpha":
                imported.append(module)
        else:
            lines.append(line)
    return done.returncode, done.stdout, lines, imported


DAMAGED = "role ?: failed: ArtifactInvalid: role-000001.pyz is damaged: "
REMEDY = "; compile it again with alpha compile"


def test_the_manifest_lists_every_other_member_with_its_sha256(built: Path) -> None:
    members = members_of(built)
    assert members[-1][0] == MANIFEST_NAME
    listed = members[-1][1]
    assert decode_manifest(listed) == [(name, sha256_hex(data)) for name, data in members[:-1]]
    # The lines sha256sum writes and checks: DIGEST, two spaces, NAME.
    first = listed.split(b"\n")[0]
    assert first == sha256_hex(members[0][1]).encode() + b"  __main__.py"
    assert built.read_bytes().startswith(HEADER)
    verify_artifact(built)


def test_the_loader_exit_codes_are_alphas() -> None:
    assert _loader.EXIT_DAMAGED == EXIT_USAGE
    assert _loader.EXIT_INTERRUPTED == EXIT_FAILURE


def test_the_checks_find_damage_not_a_consistent_forgery(artifact: Path) -> None:
    # The checks find damage, not intent: a file rewritten whole with a matching manifest is
    # an artifact, which is why run.json and the launcher compare digests with a build's.
    repack(artifact, members_of(artifact))
    verify_artifact(artifact)
    members = _changed("alpha/wire/frame.py", b"")(members_of(artifact))
    verify_artifact(repack(artifact, members, manifest=True))


# The manifest codec.

NAMES = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="\\"), min_size=1
)
DIGESTS = st.binary(min_size=32, max_size=32).map(bytes.hex)
ENTRIES = st.lists(st.tuples(NAMES, DIGESTS), min_size=1, unique_by=lambda entry: entry[0])


@given(ENTRIES)
def test_the_manifest_round_trips(entries: list[tuple[str, str]]) -> None:
    assert decode_manifest(encode_manifest(entries)) == entries


@given(DIGESTS)
def test_the_runtime_binding_round_trips(digest: str) -> None:
    data = encode_runtime(digest)
    assert data == f"{digest}  runtime-{digest}.pyz\n".encode("ascii")  # a sha256sum line
    assert decode_runtime(data) == (f"runtime-{digest}.pyz", digest)


@given(DIGESTS, DIGESTS, st.sampled_from(["other-digest", "two-lines", "other-name"]))
def test_a_runtime_binding_names_one_runtime_by_its_own_digest(
    digest: str, other: str, change: str
) -> None:
    entries = {
        "other-digest": [(f"runtime-{other}.pyz", digest)],
        "two-lines": [(f"runtime-{digest}.pyz", digest), (f"runtime-{other}.pyz", other)],
        "other-name": [(f"../runtime-{digest}.pyz", digest)],
    }[change]
    assume(other != digest)
    with pytest.raises(Damaged) as caught:
        decode_runtime(encode_manifest(entries))
    assert type(caught.value) is Damaged
    assert str(caught.value) == "RUNTIME must be one line 'DIGEST  runtime-DIGEST.pyz'"


@given(ENTRIES, st.data())
def test_a_changed_manifest_is_refused_or_lists_something_else(
    entries: list[tuple[str, str]], data: st.DataObject
) -> None:
    # A manifest has one encoding: any change of a byte is refused (exactly Damaged) or
    # decodes to other entries, which is then another, canonical manifest.
    encoded = bytearray(encode_manifest(entries))
    at = data.draw(st.integers(0, len(encoded) - 1))
    encoded[at] = data.draw(st.integers(0, 255).filter(lambda b: b != encoded[at]))
    try:
        changed = decode_manifest(bytes(encoded))
    except Damaged as error:
        assert type(error) is Damaged
        return
    assert changed != entries
    assert encode_manifest(changed) == bytes(encoded)


DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"", "empty"),
        (f"{DIGEST}  a".encode(), "last newline"),
        (f"{DIGEST}  a\n\n".encode(), "line 2 is not"),
        (f"{DIGEST} a\n".encode(), "line 1 is not 'DIGEST  NAME'"),
        (f"{DIGEST} *a\n".encode(), "line 1 is not 'DIGEST  NAME'"),  # sha256sum's binary mode
        (f"{DIGEST}\ta\n".encode(), "line 1 is not 'DIGEST  NAME'"),
        (f"{DIGEST.upper()}  a\n".encode(), "line 1: the digest"),
        (f"{DIGEST[:-1]}  a\n".encode(), "line 1"),
        (f"{DIGEST}  \n".encode(), "line 1: the name"),
        (f"{DIGEST}  a\\b\n".encode(), "line 1: the name"),
        (f"{DIGEST}  a\r\n".encode(), "line 1: the name"),
        (f"{DIGEST}  a\n{DIGEST}  a\n".encode(), "line 2: a is listed twice"),
        (f"{DIGEST}  \u00e9\n".encode(), "not ASCII"),
    ],
    ids=[
        "empty",
        "no-last-newline",
        "empty-line",
        "one-space",
        "binary-mode",
        "tab",
        "upper-case",
        "short-digest",
        "no-name",
        "backslash",
        "crlf",
        "twice",
        "not-ascii",
    ],
)
def test_decode_manifest_refusals(data: bytes, named: str) -> None:
    with pytest.raises(Damaged) as caught:
        decode_manifest(data)
    assert type(caught.value) is Damaged
    assert named in str(caught.value)


@pytest.mark.parametrize(
    "entries",
    [[], [("a", DIGEST.upper())], [("", DIGEST)], [("a\nb", DIGEST)], [("a", DIGEST)] * 2],
    ids=["none", "upper-case", "no-name", "newline", "twice"],
)
def test_encode_manifest_refuses_what_it_could_not_decode(entries: list[tuple[str, str]]) -> None:
    with pytest.raises(Damaged) as caught:
        encode_manifest(entries)
    assert type(caught.value) is Damaged


# What verify_artifact (the launcher) and the loader (the artifact) refuse.


def _without(name: str) -> Callable[[Members], Members]:
    return lambda members: [m for m in members if m[0] != name]


def _with_extra(at: int) -> Callable[[Members], Members]:
    return lambda members: [*members[:at], ("alpha/extra.py", b"print(1)\n"), *members[at:]]


def _appended(members: Members) -> Members:
    return [*members, ("alpha/extra.py", b"print(1)\n")]


def _twice(name: str) -> Callable[[Members], Members]:
    return lambda members: [*members[:-1], *[m for m in members if m[0] == name], members[-1]]


def _swapped(members: Members) -> Members:
    return [members[0], members[2], members[1], *members[3:]]


def _changed(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [(n, data if n == name else d) for n, d in members]


REPACKS = {
    "extra-member": (_with_extra(-1), "it holds alpha/extra.py, which SHA256SUMS does not list"),
    "member-after-manifest": (_appended, "it holds alpha/extra.py after SHA256SUMS"),
    "missing-member": (_without(RUNTIME_NAME), "it lacks RUNTIME, which SHA256SUMS"),
    "member-twice": (_twice(RUNTIME_NAME), "it holds RUNTIME twice"),
    "members-reordered": (_swapped, "not in the order SHA256SUMS lists them"),
    "changed-member": (
        _changed(RUNTIME_NAME, encode_runtime("0" * 64)),
        "RUNTIME does not match its SHA-256 in SHA256SUMS",
    ),
    "no-manifest": (_without(MANIFEST_NAME), "it has no manifest (SHA256SUMS)"),
    "manifest-not-text": (_changed(MANIFEST_NAME, b"\xff\n"), "SHA256SUMS is not ASCII text"),
    "manifest-at-maximum": (
        _changed(MANIFEST_NAME, b"x" * MAX_MANIFEST_BYTES),
        "SHA256SUMS is empty or lacks its last newline",
    ),
    "manifest-past-maximum": (
        _changed(MANIFEST_NAME, b"x" * (MAX_MANIFEST_BYTES + 1)),
        f"SHA256SUMS is {MAX_MANIFEST_BYTES + 1} bytes, past the {MAX_MANIFEST_BYTES} allowed",
    ),
}


@pytest.mark.parametrize(("change", "named"), REPACKS.values(), ids=REPACKS.keys())
def test_verify_refuses_members_the_manifest_does_not_describe(
    change: Callable[[Members], Members],
    named: str,
    artifact: Path,
) -> None:
    repack(artifact, change(members_of(artifact)))
    message = refused(artifact)
    assert message.startswith("role-000001.pyz is damaged: ")
    assert message.endswith(REMEDY)
    assert named in message


def test_verify_refuses_a_member_past_the_maximum_even_when_listed(artifact: Path) -> None:
    members = _changed(PAYLOAD_NAME, b" " * (MAX_PAYLOAD_BYTES + 1))(members_of(artifact))
    repack(artifact, members, manifest=True)
    assert f"role.json is {MAX_PAYLOAD_BYTES + 1} bytes, past the {MAX_PAYLOAD_BYTES} allowed" in (
        refused(artifact)
    )


def _append(data: bytes) -> Callable[[Path], object]:
    return lambda p: p.write_bytes(p.read_bytes() + data)


def _with_comment(path: Path) -> None:
    with zipfile.ZipFile(path, "a") as archive:
        archive.comment = b"hello"


def _header_changed(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"python3\n", b"python4\n", 1))


BYTES_AROUND = {
    "header": (_header_changed, "it does not begin with the two lines every artifact begins"),
    "bytes-after": (_append(b"\0"), "it holds bytes after its zip archive"),
    "zip-comment": (_with_comment, "its zip archive has a comment"),
    "not-a-zip": (lambda p: p.write_bytes(HEADER + b"PK but nothing else"), "BadZipFile"),
    "missing": (lambda p: p.unlink(), "role-000001.pyz cannot be read: No such file"),
}


@pytest.mark.parametrize(("damage", "named"), BYTES_AROUND.values(), ids=BYTES_AROUND.keys())
def test_verify_refuses_bytes_around_the_members_that_no_build_writes(
    damage: Callable[[Path], object], named: str, artifact: Path
) -> None:
    damage(artifact)
    assert named in refused(artifact)


def test_verify_refuses_a_truncated_artifact_at_any_length(artifact: Path) -> None:
    whole = artifact.read_bytes()
    with zipfile.ZipFile(artifact) as archive:
        central = archive.start_dir
    for size in [0, 1, len(HEADER) - 1, len(HEADER), len(HEADER) + 40, len(whole) // 2]:
        artifact.write_bytes(whole[:size])
        assert "role-000001.pyz is damaged: " in refused(artifact), size
    for size in [central - 1, central, central + 10, len(whole) - 22, len(whole) - 1]:
        artifact.write_bytes(whole[:size])
        assert "role-000001.pyz is damaged: " in refused(artifact), size


def _in_member(name: str, fraction: float, bit: int = 0) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        start, length = data_span(path, name)
        flip(path, start + int(length * fraction), bit)

    return damage


def _in_main(marker: bytes, after: int) -> Callable[[Path], None]:
    """Flip a bit ``after`` bytes past ``marker`` in __main__.py (stored: its bytes are the
    file's)."""

    def damage(path: Path) -> None:
        start, length = data_span(path, "__main__.py")
        main = path.read_bytes()[start : start + length]
        flip(path, start + main.index(marker) + after, 2)

    return damage


def _in_zip_record(signature: bytes, field: int) -> Callable[[Path], None]:
    """Flip a bit in a field of the last zip record with ``signature`` (a local header, a
    central directory entry, the end record)."""

    def damage(path: Path) -> None:
        data = path.read_bytes()
        flip(path, data.rindex(signature) + field, 3)

    return damage


def _in_runtime(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    """``damage`` done to the runtime beside the artifact, not to the artifact."""
    return lambda path: damage(runtime_of(path))


IN_RUNTIME = "does not match the SHA-256 role-000001.pyz binds"

FLIPS = {
    "module-source": (_in_runtime(_in_member("alpha/__init__.py", 0.5)), IN_RUNTIME),
    "module-bytecode": (_in_runtime(_in_member("alpha/__init__.pyc", 0.5)), IN_RUNTIME),
    "deep-module-source": (_in_runtime(_in_member("alpha/wire/frame.py", 0.9, 5)), IN_RUNTIME),
    "runtime-manifest": (_in_runtime(_in_member(MANIFEST_NAME, 0.5)), IN_RUNTIME),
    "runtime-binding": (_in_member(RUNTIME_NAME, 0.5), RUNTIME_NAME),
    "role-json": (_in_member(PAYLOAD_NAME, 0.5), PAYLOAD_NAME),
    "manifest-digest": (_in_member(MANIFEST_NAME, 0.5), MANIFEST_NAME),
    "main-loader-digest": (_in_main(b"r'''", 10), "its loader does not match its SHA-256"),
    "main-loader": (_in_main(b"r'''", 3000), "its loader does not match its SHA-256"),
    "main-comment": (_in_main(b"# An Alpha", 20), "__main__.py"),
    "local-header-flags": (_in_zip_record(b"PK\x03\x04", 7), "the local header of SHA256SUMS"),
    "central-directory-time": (
        _in_zip_record(b"PK\x01\x02", 12),
        "the central directory entry of SHA256SUMS",
    ),
    "end-record-count": (_in_zip_record(b"PK\x05\x06", 8), "its zip end record is not a build's"),
}


@pytest.mark.slow
@pytest.mark.parametrize(("damage", "named"), FLIPS.values(), ids=FLIPS.keys())
def test_a_flipped_bit_anywhere_stops_the_artifact_before_any_of_its_code_runs(
    damage: Callable[[Path], None], named: str, artifact: Path
) -> None:
    damage(artifact)
    code, out, lines, imported = started(artifact)
    assert code == EXIT_USAGE
    assert out == ""
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert lines[0].startswith(DAMAGED)
    assert lines[0].endswith(REMEDY)
    assert named in lines[0]
    assert imported == [], "the loader imports nothing of alpha before its checks pass"
    assert refused(artifact).startswith("role-000001.pyz is damaged: "), "and the launcher"


@pytest.mark.slow
def test_an_intact_artifact_passes_its_checks_and_starts(built: Path) -> None:
    # The control for the test above: the same harness sees a role start and import alpha.
    code, _, lines, imported = started(built)
    assert code == EXIT_FAILURE
    assert lines[-1].startswith("role 1: failed: PortMissing")
    assert "alpha.artifact.participant" in imported


@pytest.mark.slow
def test_a_changed_module_in_a_consistent_runtime_runs_none_of_its_code(
    artifact: Path, tmp_path: Path
) -> None:
    # The runtime rewritten whole with a manifest to match: its own checks pass, but the role
    # binds the SHA-256 of the runtime it was built with, and refuses before any of it runs.
    marker = tmp_path / "ran"
    env = {**os.environ, "ALPHA_TEST_MARKER": str(marker)}
    evil = b"import os\nopen(os.environ['ALPHA_TEST_MARKER'], 'w').close()\n"
    runtime = runtime_of(artifact)
    repack(runtime, _changed("alpha/__init__.py", evil)(members_of(runtime)), manifest=True)
    verify_archive(runtime)
    code, _, lines, imported = started(artifact, env)
    assert code == EXIT_USAGE
    found = sha256_hex(runtime.read_bytes())
    assert lines == [
        f"{DAMAGED}its runtime {runtime.name} does not match the SHA-256 role-000001.pyz binds "
        f"(it is {found}){REMEDY}"
    ]
    assert imported == []
    assert not marker.exists()
    # The control: with the role rebound to that runtime (its name and digest), it runs.
    forged = runtime.rename(tmp_path / f"runtime-{found}.pyz")
    repack(
        artifact, _changed(RUNTIME_NAME, encode_runtime(found))(members_of(artifact)), manifest=True
    )
    started(artifact, env)
    assert marker.exists()
    assert forged.exists()


@pytest.mark.parametrize("change", ["missing", "folder", "other-runtime"])
def test_a_role_whose_runtime_is_missing_or_another_starts_nothing(
    artifact: Path, tmp_path: Path, change: str
) -> None:
    runtime = runtime_of(artifact)
    data = runtime.read_bytes()
    runtime.unlink()
    if change == "folder":
        runtime.mkdir()
    elif change == "other-runtime":  # a runtime of other sources under this one's name
        runtime.write_bytes(data.replace(b"alpha", b"Alpha", 1))
    found = sha256_hex(runtime.read_bytes()) if runtime.is_file() else ""
    expected = {
        "missing": f"role-000001.pyz cannot start: its runtime {runtime.name} is missing from "
        f"{tmp_path}{REMEDY}",
        "folder": f"role-000001.pyz cannot start: its runtime {runtime.name} cannot be read: "
        f"Is a directory{REMEDY}",
        "other-runtime": f"role-000001.pyz is damaged: its runtime {runtime.name} does not match "
        f"the SHA-256 role-000001.pyz binds (it is {found}){REMEDY}",
    }[change]
    assert refused(artifact) == expected, "the launcher"
    code, out, lines, imported = started(artifact)
    assert (code, out, lines, imported) == (
        EXIT_USAGE,
        "",
        [f"role ?: failed: ArtifactInvalid: {expected}"],
        [],
    )


def test_a_runtime_is_found_beside_the_role_wherever_it_is_started_from(
    built: Path, tmp_path: Path
) -> None:
    # Started by a relative path from another folder: the runtime is the one beside the role.
    done = subprocess.run(
        [sys.executable, os.path.relpath(built, tmp_path)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == EXIT_FAILURE
    assert done.stderr.splitlines()[-1].startswith("role 1: failed: PortMissing")


@pytest.mark.slow
def test_an_extra_member_stops_the_artifact(artifact: Path) -> None:
    repack(artifact, _with_extra(-1)(members_of(artifact)))
    code, _, lines, imported = started(artifact)
    assert code == EXIT_USAGE
    assert lines == [f"{DAMAGED}it holds alpha/extra.py, which SHA256SUMS does not list{REMEDY}"]
    assert imported == []


@pytest.mark.slow
def test_a_truncated_artifact_says_so_in_one_line(artifact: Path) -> None:
    # Python reads a file whose zip end is gone as a script; the artifact's second line, a
    # coding declaration naming no encoding, stops it there (Python's own exit code, 1).
    whole = artifact.read_bytes()
    with zipfile.ZipFile(artifact) as archive:
        central = archive.start_dir
    for size in [len(HEADER), len(whole) // 2, central - 1, central + 10, len(whole) - 1]:
        artifact.write_bytes(whole[:size])
        done = run_artifact(artifact)
        assert done.returncode == 1, size
        assert done.stdout == ""
        assert done.stderr == (
            "SyntaxError: encoding problem: "
            "damaged-alpha-artifact.compile-it-again-with-alpha-compile\n"
        ), size


def _main_with_flip(main: bytes, at: int, bit: int) -> bytes:
    changed = bytearray(main)
    changed[at] ^= 1 << bit
    return bytes(changed)


@pytest.fixture(scope="module")
def main_py(built: Path) -> bytes:
    with zipfile.ZipFile(built) as archive:
        return archive.read("__main__.py")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_flip_in_the_carried_loader_is_refused_by_main(
    main_py: bytes, data: st.DataObject
) -> None:
    # __main__.py as Python compiles it, with one bit of L flipped: it still compiles (no
    # syntax error Python would report), and exits 2 in one line before the loader runs. The
    # newlines around L's digest are not in the check; the loader's CRC-32 check catches them.
    main = main_py
    start = main.index(b"r'''") + 4
    end = main.rindex(b"'''")
    at = data.draw(st.integers(start, end - 1))
    code = compile(_main_with_flip(main, at, data.draw(st.integers(0, 7))), "__main__.py", "exec")
    stderr = io.StringIO()
    status: object = None  # the check passed: the loader is defined, and would run its checks
    with contextlib.redirect_stderr(stderr):
        try:
            exec(code, {"__name__": "__artifact__"})  # not __main__: the loader would start
        except SystemExit as exited:
            status = exited.code
    if at - start in (0, 65):
        assert status is None
        return
    assert status == EXIT_USAGE
    assert stderr.getvalue().count("\n") == 1
    assert (
        "is damaged: its loader does not match its SHA-256; compile it again" in stderr.getvalue()
    )


def test_the_loader_is_one_line_on_an_interrupt(
    artifact: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(path: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sys, "argv", [str(artifact)])
    monkeypatch.setattr(_loader, "verify", interrupted)
    assert _loader.main() == EXIT_FAILURE
    assert capsys.readouterr() == (
        "",
        "role ?: failed: interrupted while checking role-000001.pyz\n",
    )


def test_the_loader_refuses_in_process_as_it_does_as_a_process(
    artifact: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_member(PAYLOAD_NAME, 0.5)(artifact)
    monkeypatch.setattr(sys, "argv", [str(artifact)])
    assert _loader.main() == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"role ?: failed: ArtifactInvalid: {refused(artifact)}\n"


def test_artifact_entry_refuses_a_damaged_artifact(artifact: Path) -> None:
    _in_member(PAYLOAD_NAME, 0.5)(artifact)
    with pytest.raises(ArtifactInvalid) as caught:
        artifact_entry(artifact)
    assert type(caught.value) is ArtifactInvalid
    assert "role-000001.pyz is damaged: role.json" in str(caught.value)


def test_artifact_entry_refuses_a_damaged_runtime(artifact: Path) -> None:
    _in_runtime(_in_member("alpha/wire/frame.py", 0.5))(artifact)
    with pytest.raises(ArtifactInvalid) as caught:
        artifact_entry(artifact)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value).startswith(
        f"role-000001.pyz is damaged: its runtime {runtime_of(artifact).name} does not match"
    )


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
        runtime_entry()["file"],
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
    "no-runtime": (_drop("runtime"), "runtime must be a table"),
    "runtime-sha256": (_field("runtime", "sha256", value="0" * 63), "runtime.sha256"),
    "runtime-file": (_field("runtime", "file", value="runtime.pyz"), "runtime.file"),
    "runtime-bytes": (_field("runtime", "bytes", value=0), "runtime.bytes"),
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
    # The launcher's bound is the largest session deadline, when every role has one.
    descriptions = [
        dataclasses.replace(d, budgets=Budgets(deadline=900.0 if d.role == 2 else 60.0))
        for d in DESCRIPTIONS
    ]
    write_run(tmp_path, descriptions)
    specs, deadline = launch_specs(tmp_path)
    assert deadline == 900.0
    assert [spec.role for spec in specs] == [0, 1, 2, 3]
    for spec in specs:
        assert spec.argv == (sys.executable, str((tmp_path / artifact_name(spec.role)).resolve()))
        assert spec.lower == tuple(p for p in TREE.edges(spec.role) if p < spec.role)
        assert spec.higher == tuple(p for p in TREE.edges(spec.role) if p > spec.role)
        assert spec.log == tmp_path / "logs" / f"role-{spec.role:06d}.log"


def test_a_role_without_a_deadline_leaves_the_launch_unbounded(tmp_path: Path) -> None:
    slow = Budgets(deadline=900.0)
    descriptions = [*DESCRIPTIONS[:2], dataclasses.replace(DESCRIPTIONS[2], budgets=slow)]
    write_run(tmp_path, [*descriptions, DESCRIPTIONS[3]])
    assert launch_specs(tmp_path)[1] is None


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


def _patch_entry(directory: Path, role: int) -> None:
    """Make run.json's entry for ``role`` match its artifact's size and SHA-256 again, as a
    hand-patched run.json would."""
    run = read_run_json(directory)
    roles = run["roles"]
    assert isinstance(roles, list)
    path = directory / artifact_name(role)
    roles[role].update(bytes=path.stat().st_size, sha256=file_sha256(path))
    write_run_json(directory, run)


def test_launch_specs_refuses_a_missing_or_changed_runtime(tmp_path: Path) -> None:
    write_run(tmp_path, DESCRIPTIONS)
    runtime = tmp_path / str(runtime_entry()["file"])
    whole = runtime.read_bytes()
    flip(runtime, len(whole) // 2)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value).startswith(
        f"the shared runtime {runtime.name} changed since it was built ({len(whole)} bytes, "
        f"sha256 {file_sha256(runtime)}; run.json says {len(whole)} bytes"
    )
    runtime.unlink()
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value) == f"{runtime.name} is missing from {tmp_path}; compile again"


def test_launch_specs_refuses_a_runtime_the_roles_do_not_bind(tmp_path: Path) -> None:
    # A runtime of other sources, with run.json patched to list it: its size and SHA-256 agree
    # with run.json, but no role binds it.
    run = write_run(tmp_path, DESCRIPTIONS)
    honest = tmp_path / str(runtime_entry()["file"])
    repack(honest, _changed("alpha/__init__.py", b"x = 1\n")(members_of(honest)), manifest=True)
    digest = file_sha256(honest)
    other = honest.rename(tmp_path / f"runtime-{digest}.pyz")
    run["runtime"] = {"file": other.name, "bytes": other.stat().st_size, "sha256": digest}
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value) == (
        f"role-000000.pyz binds the runtime {honest.name}, but run.json lists {other.name}; "
        "compile again"
    )


def _repacked(change: Callable[[Members], Members]) -> Callable[[Path], object]:
    return lambda path: repack(path, change(members_of(path)))


BEHIND_A_PATCHED_RUN_JSON = {
    "flipped-binding": (
        _in_member(RUNTIME_NAME, 0.5),
        "role-000003.pyz is damaged: RUNTIME cannot be read",
    ),
    "changed-binding": (
        _repacked(_changed(RUNTIME_NAME, encode_runtime("0" * 64))),
        "role-000003.pyz is damaged: RUNTIME does not match its SHA-256 in SHA256SUMS",
    ),
    "extra-member": (
        _repacked(_with_extra(-1)),
        "role-000003.pyz is damaged: it holds alpha/extra.py, which SHA256SUMS does not list",
    ),
    "truncated": (
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        "role-000003.pyz is damaged: ",
    ),
}


@pytest.mark.parametrize(
    ("damage", "named"), BEHIND_A_PATCHED_RUN_JSON.values(), ids=BEHIND_A_PATCHED_RUN_JSON.keys()
)
def test_launch_specs_refuses_a_damaged_artifact_behind_a_patched_run_json(
    damage: Callable[[Path], object], named: str, tmp_path: Path
) -> None:
    write_run(tmp_path, DESCRIPTIONS)
    damage(tmp_path / artifact_name(3))
    _patch_entry(tmp_path, 3)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert named in str(caught.value)
    assert str(caught.value).endswith("; compile it again with alpha compile")


@pytest.mark.parametrize("part", ["learner", "contract", "membership"])
def test_launch_specs_refuses_a_run_json_with_another_run_identity(
    part: str, tmp_path: Path
) -> None:
    run = write_run(tmp_path, DESCRIPTIONS)
    identity = run["identity"]
    assert isinstance(identity, dict)
    carried = identity[part]
    identity[part] = "0" * 64
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value) == (
        f"role-000000.pyz carries the run identity's {part} digest {carried}, but run.json "
        f"records {'0' * 64}"
    )


def test_launch_specs_refuses_a_run_json_with_another_number_of_participants(
    tmp_path: Path,
) -> None:
    # Roles 0..3 of a run of five whose run.json says four: every role is listed, and every
    # peer is below four, but the participants would not agree with the launcher.
    write_run(tmp_path, [dataclasses.replace(d, participants=5) for d in DESCRIPTIONS])
    run = read_run_json(tmp_path)
    run["participants"] = 4
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value) == (
        "role-000000.pyz is a role of a run of 5 participants, but run.json says 4"
    )


def test_launch_specs_refuses_a_run_json_that_names_another_plan(tmp_path: Path) -> None:
    run = write_run(tmp_path, DESCRIPTIONS, plan="exchange-4-3")
    launch_specs(tmp_path)  # run.json names the run as the payloads name their plan
    run["name"] = "exchange-4-3-patched"
    write_run_json(tmp_path, run)
    with pytest.raises(ArtifactInvalid) as caught:
        launch_specs(tmp_path)
    assert type(caught.value) is ArtifactInvalid
    assert str(caught.value) == (
        "role-000000.pyz was compiled from the plan 'exchange-4-3', but run.json names the run "
        "'exchange-4-3-patched'"
    )


# --- end to end -------------------------------------------------------------


@pytest.mark.slow
async def test_artifacts_of_the_edge_exchange_launch_and_report(tmp_path: Path) -> None:
    build = tmp_path / "build"
    result = await CompiledRun(PLAN, build).launch()
    assert result.ok, result.first_to_fail
    # Every role's report beside the artifacts, final through the run's commit record.
    reports = build / "reports"
    assert sorted(p.name for p in reports.iterdir()) == [
        COMMIT_NAME,
        *(f"role-{r:06d}.json" for r in range(4)),
    ]
    # Exactly the reports the run committed.
    record, found = committed_reports(reports, TREE.children)
    assert (record.participants, record.rounds) == (4, 1)
    assert record.identity == DESCRIPTIONS[0].identity.encode().hex()
    for role in range(4):
        report = found[role]
        assert report["role"] == role
        assert report["rounds"] == 1
        assert [edge["peer"] for edge in report["edges"]] == list(TREE.edges(role))
        assert "done:" in (build / "logs" / f"role-{role:06d}.log").read_text()
