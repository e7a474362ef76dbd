"""The shared-memory transport on real runs: compiled plans launched by `alpha launch`, each role
its own process, payloads through regions in a folder of the test's own."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from harness.emulation import aarch64_interpreter
from harness.processes import descendants_of
from tests.support import ALPHA, plan_text, run_alpha

# 16384 float32 per region: 64 KiB, the least a region carries (SHARED_MIN).
SIZE = 16384


def _compile(
    tmp_path: Path,
    name: str,
    *,
    rounds: int,
    transport: str,
    roles: int = 5,
    aarch64: tuple[int, ...] = (),
) -> Path:
    text = plan_text(
        name,
        roles=roles,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "sum-check", "size": SIZE},
        addresses={"transport": transport},
        targets={"aarch64": list(aarch64)} if aarch64 else None,
    )
    plan = tmp_path / f"{name}.toml"
    plan.write_text(text)
    out = tmp_path / name
    done = run_alpha("compile", str(plan), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _reports(folder: Path) -> dict[int, dict[str, object]]:
    return {
        int(path.stem.split("-")[1]): json.loads(path.read_text())
        for path in (folder / "reports").glob("role-*.json")
    }


def test_a_run_over_regions_computes_the_tcp_runs_bits_and_leaves_no_region(
    tmp_path: Path,
) -> None:
    regions = tmp_path / "regions"
    regions.mkdir()
    env = {**os.environ, "ALPHA_REGION_FOLDER": str(regions)}
    runs = {}
    for transport in ("auto", "tcp"):
        folder = _compile(tmp_path, f"shm-{transport}", rounds=6, transport=transport)
        done = run_alpha("launch", str(folder), env=env)
        assert done.returncode == 0, done.stderr
        runs[transport] = _reports(folder)
    assert sorted(runs["auto"]) == list(range(5))
    for role, report in runs["auto"].items():
        tcp = runs["tcp"][role]
        assert report["digests"] == tcp["digests"]
        edges = report["edges"]
        assert isinstance(edges, list) and edges
        for edge, tcp_edge in zip(edges, tcp["edges"], strict=True):
            # Every edge moved its 64 KiB payloads both ways through its regions: 6 rounds of
            # a contribution up and a total down.
            assert edge["shared_bytes"] == 2 * 6 * SIZE * 4
            assert tcp_edge["shared_bytes"] == 0
            assert edge["sent_bytes"] == tcp_edge["sent_bytes"]
    assert list(regions.iterdir()) == []


def test_an_aarch64_role_under_qemu_shares_regions_with_native_roles_bit_for_bit(
    tmp_path: Path,
) -> None:
    regions = tmp_path / "regions"
    regions.mkdir()
    env = {**os.environ, "ALPHA_REGION_FOLDER": str(regions)}
    native = _compile(tmp_path, "shm-native", rounds=3, transport="auto")
    mixed = _compile(tmp_path, "shm-mixed", rounds=3, transport="auto", aarch64=(1,))
    option = f"aarch64={shlex.join(aarch64_interpreter())}"
    for folder, extra in ((native, []), (mixed, ["--interpreter", option])):
        done = run_alpha("launch", str(folder), *extra, env=env)
        assert done.returncode == 0, done.stderr
    ours, theirs = _reports(native), _reports(mixed)
    assert theirs[1]["machine"] == "aarch64" and ours[1]["machine"] != "aarch64"
    for role in range(5):
        assert theirs[role]["digests"] == ours[role]["digests"]
    for edge in theirs[1]["edges"]:  # role 1's edges (to 0, 3 and 4) all used their regions
        assert isinstance(edge, dict) and edge["shared_bytes"] == 2 * 3 * SIZE * 4
    assert list(regions.iterdir()) == []


def test_a_peer_killed_mid_run_over_regions_aborts_everywhere_and_its_regions_are_swept(
    tmp_path: Path,
) -> None:
    regions = tmp_path / "regions"
    regions.mkdir()
    env = {**os.environ, "ALPHA_REGION_FOLDER": str(regions)}
    folder = _compile(tmp_path, "shm-killed", rounds=100_000, transport="auto", roles=3)
    launcher = subprocess.Popen(
        [*ALPHA, "launch", str(folder)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = []
        assert launcher.stderr is not None
        while not said or " roles up in " not in said[-1]:  # every role announced its ports
            said.append(launcher.stderr.readline())
            assert said[-1], "".join(said)
        time.sleep(0.5)  # the edges come up in milliseconds; then rounds run
        assert launcher.poll() is None
        victim = next(
            pid
            for pid in descendants_of(launcher.pid)
            if "role-000002.pyz" in Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        )
        os.kill(victim, signal.SIGKILL)
        _, rest = launcher.communicate(timeout=120)
        stderr = "".join(said) + rest
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 1, stderr
    assert "role 2 was killed by SIGKILL" in stderr
    assert not (folder / "reports" / "commit.json").exists()  # nothing committed
    assert list(regions.iterdir()) == []
    assert descendants_of(launcher.pid) == []
