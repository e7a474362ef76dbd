"""checkpoint/manifest.py: the format alpha-checkpoint/2 as pure code over values and bytes.

Every manifest has one encoding; each decodes back to what was encoded, and each field that
is wrong is refused as ``CheckpointCorrupt``, never anything else. The module opens no file.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from alpha.checkpoint import manifest as manifest_module
from alpha.checkpoint.manifest import (
    POINTER_FORMAT,
    GenerationName,
    Shard,
    decode_json,
    decode_owner_manifest,
    decode_pointer,
    decode_root_manifest,
    encode_owner_manifest,
    encode_pointer,
    encode_root_manifest,
    generation_name,
    parse_generation,
    sealed_name,
    sha256_hex,
    shard_file,
    staged_name,
)
from alpha.errors import CheckpointCorrupt
from tests.support import raises_exactly

NONCES = st.text("0123456789abcdef", min_size=8, max_size=8)
ROUNDS = st.integers(0, 10**9 - 1)
DIGESTS = st.text("0123456789abcdef", min_size=64, max_size=64)


def test_the_manifest_module_does_no_io() -> None:
    tree = ast.parse(Path(manifest_module.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    calls: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
    assert imported & {"os", "pathlib", "shutil", "fcntl", "socket", "io", "tempfile"} == set()
    # Of alpha, nothing that touches a file: not the store, not the file helpers' I/O (their
    # constants, and the values of lower layers, are fine).
    io_helpers = {"read_regular_file", "write_bytes_atomically", "write_atomically", "fsync_folder"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("alpha"):
            assert node.module != "alpha.checkpoint.store"
            assert {alias.name for alias in node.names} & io_helpers == set(), node.module
    assert "open" not in calls


@given(ROUNDS, NONCES, DIGESTS)
def test_a_sealed_name_reads_back(round: int, nonce: str, digest: str) -> None:
    base = generation_name(round, nonce)
    assert staged_name(round, nonce) == f"{base}.staged"
    assert parse_generation(staged_name(round, nonce)) is None
    assert parse_generation(sealed_name(base, digest)) == GenerationName(round, nonce, digest[:16])


def _shard(name: str, start: int, stop: int) -> Shard:
    data = bytes(4 * (stop - start))
    return Shard(
        name,
        (stop,),
        start,
        stop,
        "float32",
        len(data),
        sha256_hex(data),
        shard_file(name, start, stop),
    )


@given(st.integers(0, 1000), st.lists(st.integers(1, 50), max_size=4))
def test_an_owner_manifest_reads_back(owner: int, stops: list[int]) -> None:
    shards = [_shard(f"a{i}", 0, stop) for i, stop in enumerate(stops)]
    data, _ = decode_json(encode_owner_manifest(owner, shards), "owner")
    assert decode_owner_manifest(data, owner, "owner") == shards
    raises_exactly(CheckpointCorrupt, decode_owner_manifest, data, owner + 1, "owner")


@given(ROUNDS, NONCES, DIGESTS)
def test_a_pointer_reads_back_and_its_seal_must_be_its_digest(
    round: int, nonce: str, digest: str
) -> None:
    name = sealed_name(generation_name(round, nonce), digest)
    data, _ = decode_json(encode_pointer(name, digest), "LATEST")
    assert decode_pointer(data, "LATEST") == (name, digest)
    other = ("f" if digest[0] != "f" else "e") + digest[1:]
    raises_exactly(CheckpointCorrupt, decode_pointer, {**data, "manifest_sha256": other}, "LATEST")
    raises_exactly(CheckpointCorrupt, decode_pointer, {**data, "format": "x"}, "LATEST")
    raises_exactly(CheckpointCorrupt, decode_pointer, {**data, "generation": "LATEST"}, "LATEST")


def test_a_pointer_format_is_its_own() -> None:
    assert json.loads(encode_pointer("n", "d"))["format"] == POINTER_FORMAT


def _root(round: int = 3) -> tuple[dict[str, object], GenerationName]:
    base = generation_name(round, "0badcafe")
    data = encode_root_manifest(
        base,
        round,
        [{"owner": 0, "file": "owner-000000.json", "sha256": "a" * 64}],
        {"w": ((6,), "float32")},
        {"run": "r"},
    )
    decoded, digest = decode_json(data, "manifest")
    name = parse_generation(sealed_name(base, digest))
    assert name is not None
    return decoded, name


def test_a_root_manifest_reads_back() -> None:
    data, name = _root()
    root = decode_root_manifest(data, name, str(name), "manifest")
    assert (root.round, root.owner_sha256) == (3, ("a" * 64,))
    assert (root.arrays, root.about) == ({"w": ((6,), "float32")}, {"run": "r"})


def test_a_root_manifest_of_another_round_than_its_folder_is_refused() -> None:
    data, _ = _root(3)
    _, other = _root(4)
    raises_exactly(CheckpointCorrupt, decode_root_manifest, data, other, str(other), "manifest")


def test_every_wrong_field_of_a_root_manifest_is_refused_as_corrupt() -> None:
    data, name = _root()
    wrong: list[dict[str, object]] = [
        {**data, "format": "alpha-checkpoint/1"},
        {**data, "round": "3"},
        {**data, "owners": {}},
        {**data, "arrays": []},
        {**data, "about": []},
        {**data, "arrays": {"W!": {"shape": [6], "dtype": "float32"}}},
        {**data, "arrays": {"w": {"shape": [6], "dtype": "float16"}}},
        {**data, "arrays": {"w": {"shape": [2**40], "dtype": "float32"}}},
        {**data, "owners": [{"owner": 1, "sha256": "a" * 64}]},
    ]
    for each in wrong:
        raises_exactly(CheckpointCorrupt, decode_root_manifest, each, name, str(name), "m")


def test_a_digest_not_the_recorded_one_is_refused() -> None:
    data = encode_pointer("n", "d")
    assert decode_json(data, "p", sha256_hex(data))[1] == sha256_hex(data)
    raises_exactly(CheckpointCorrupt, decode_json, data, "p", "0" * 64)
    raises_exactly(CheckpointCorrupt, decode_json, b"[1]", "p")
    raises_exactly(CheckpointCorrupt, decode_json, b"\xff", "p")
