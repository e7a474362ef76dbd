"""Keyed frames on the AArch64 participant (issue 25): under qemu-aarch64 the sysroot's
CPython derives the same edge keys, the same keyed trailers and the same SHA-256 and BLAKE3
payload digests as this host, byte for byte; and keyed runs (SHA-256, BLAKE3) with one
AArch64 role commit the replicated learner's parameters (docs/emulation.md).

Like tests/system/test_emulation.py these need the emulation ``make aarch64`` builds (its
site has the blake3 wheel), and never skip: without it they fail with the
``EmulationUnavailable`` message that says how to build it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import zipfile
from pathlib import Path

import pytest

from alpha.app.cli import EXIT_OK
from alpha.compiler.plan import parse_plan
from alpha.compiler.replicate import replicate
from alpha.core.keys import edge_key, keys_for_role
from alpha.learner.data import load_digits
from alpha.wire import KEYED_FORMAT_VERSION, FrameKind, FrameSpec, keyed_seal, payload_digest
from harness.emulation import aarch64_interpreter
from tests.support import FIXTURES, IDENTITY, ROOT, SECRET, run_alpha

EMULATED = 2  # role 2 of the fixture's tree 0 < (1, 2) is built for AArch64
LEARN = (FIXTURES / "plans" / "emulated-digits.toml").read_text()
AARCH64_ROLE = f"""
[targets]
aarch64 = [{EMULATED}]
"""

# Fixed inputs: the tests' run secret and identity, a 1 KiB and a 1 MiB + 3 byte payload (more
# than one BLAKE3 chunk and SIMD batch, and not a whole number of SHA-256 blocks).
PAYLOADS = (bytes(range(256)) * 4, bytes((i * 7 + 3) % 251 for i in range((1 << 20) + 3)))
EDGES = ((0, 1), (1, 0), (0, 2), (2, 0), (1, 2))

# The primitives, computed by whichever interpreter runs it: argv is the secret, the identity's
# wire form and a folder holding the payloads, all in hex or paths; it prints JSON. It imports
# this checkout's alpha (pure Python on top of hashlib, hmac and the blake3 wheel).
_PROBE = """
import json, platform, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from alpha.core.keys import edge_key, keys_for_role
from alpha.wire import KEYED_FORMAT_VERSION, FrameKind, FrameSpec, keyed_seal, payload_digest
from alpha.core import RunIdentity
secret, identity = bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
payloads = [p.read_bytes() for p in sorted(Path(sys.argv[4]).iterdir())]
run = RunIdentity(identity[:32], identity[32:64], identity[64:])
found = {"machine": platform.machine(), "edges": {}, "role": {}, "frames": []}
for sender, receiver in json.loads(sys.argv[5]):
    found["edges"][f"{sender}-{receiver}"] = edge_key(secret, identity, sender, receiver).hex()
for (s, r), key in keys_for_role(secret, identity, 0, [], [1, 2]).items():
    found["role"][f"{s}-{r}"] = key.hex()
key = edge_key(secret, identity, 2, 0)
for payload in payloads:
    header = FrameSpec(run, FrameKind.DATA, 2, 0, 1, len(payload)).header(
        5, layout=KEYED_FORMAT_VERSION
    )
    for name in ("sha256", "blake3"):
        digest = payload_digest(payload, name)
        found["frames"].append([name, digest.hex(), keyed_seal(key, header, digest).hex()])
print(json.dumps(found, sort_keys=True))
"""


def _native() -> dict[str, object]:
    """What the probe prints, computed here on x86-64 with the same functions."""
    identity = IDENTITY.encode()
    frames = []
    key = edge_key(SECRET, identity, 2, 0)
    for payload in PAYLOADS:
        header = FrameSpec(IDENTITY, FrameKind.DATA, 2, 0, 1, len(payload)).header(
            5, layout=KEYED_FORMAT_VERSION
        )
        for name in ("sha256", "blake3"):
            digest = payload_digest(payload, name)
            frames.append([name, digest.hex(), keyed_seal(key, header, digest).hex()])
    return {
        "machine": "aarch64",
        "edges": {f"{s}-{r}": edge_key(SECRET, identity, s, r).hex() for s, r in EDGES},
        "role": {
            f"{s}-{r}": key.hex()
            for (s, r), key in keys_for_role(SECRET, identity, 0, [], [1, 2]).items()
        },
        "frames": frames,
    }


def _guest(tmp_path: Path) -> dict[str, object]:
    """What the probe prints under qemu-aarch64 with the sysroot's CPython."""
    folder = tmp_path / "payloads"
    folder.mkdir()
    for index, payload in enumerate(PAYLOADS):
        (folder / f"{index}.bin").write_bytes(payload)
    argv = [str(ROOT), SECRET.hex(), IDENTITY.encode().hex(), str(folder), json.dumps(EDGES)]
    guest = subprocess.run(
        [*aarch64_interpreter(), "-c", _PROBE, *argv], capture_output=True, text=True, check=False
    )
    assert guest.returncode == 0, guest.stderr
    found: dict[str, object] = json.loads(guest.stdout)
    return found


@pytest.mark.slow
def test_the_aarch64_guest_derives_the_same_keys_macs_and_digests(tmp_path: Path) -> None:
    guest = _guest(tmp_path)
    assert guest["machine"] == "aarch64"
    assert guest == _native()


def _plan_text(contract: str) -> str:
    """The fixture's 3-role digits plan, ``contract`` added to its ``[contract]`` table, role 2
    built for AArch64."""
    table = 'delivery = "all"\n'
    assert LEARN.count(table) == 1
    return LEARN.replace(table, table + contract) + AARCH64_ROLE


@pytest.mark.slow
@pytest.mark.parametrize(
    ("contract", "digest"),
    [('integrity = "hmac-sha256"\n', "sha256"), ('payload_digest = "blake3"\n', "blake3")],
    ids=["keyed-sha256", "keyed-blake3"],
)
def test_a_keyed_run_with_an_aarch64_role_equals_the_replicated_learner(
    contract: str, digest: str, tmp_path: Path
) -> None:
    text = _plan_text(contract)
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    folder = tmp_path / "run"
    option = f"aarch64={shlex.join(aarch64_interpreter())}"
    ran = run_alpha("run", str(plan), "--dir", str(folder), "--interpreter", option)
    assert ran.returncode == EXIT_OK, ran.stderr
    lines = ran.stdout.splitlines()
    assert "equal bit for bit   yes" in lines, ran.stdout
    replicated = replicate(parse_plan(text, source="test"), load_digits()).digest
    assert f"final parameters    {replicated}" in lines, ran.stdout

    # Role 2's artifact is the AArch64 one (on x86-64 it refuses to start: test_emulation.py),
    # and it sealed with its own edge keys and the plan's payload digest.
    run = json.loads((folder / "run.json").read_text())
    assert [entry["target"] for entry in run["roles"]] == ["x86_64", "x86_64", "aarch64"]
    with zipfile.ZipFile(folder / f"role-{EMULATED:06d}.pyz") as artifact:
        description = json.loads(artifact.read("role.json"))["description"]
    assert (description["integrity"], description["payload_digest"]) == ("hmac-sha256", digest)
    (edge,) = description["edges"]
    assert edge["peer"] == 0
    assert {len(bytes.fromhex(key)) for key in edge["keys"].values()} == {32}
