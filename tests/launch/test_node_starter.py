"""A node's starter under srun (``alpha/launch/warm_server.py --node``, docs/slurm.md), run
as srun runs it, as a program of its own: every role it lists starts at once, its stderr in
its log, this starter its parent and its launcher; each start and end is one JSON line on
stdout; a role that cannot start is refused there; the starter ends once every role has,
with 1 when one failed. Its warm forks of real artifacts are tests/system/test_slurm.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from alpha.launch.warm_server import NODE_FLAG

STARTER = Path(__file__).resolve().parents[2] / "alpha" / "launch" / "warm_server.py"


def start(tmp_path: Path, roles: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    listed = tmp_path / "node-0.json"
    listed.write_text(json.dumps({"runtime": None, "roles": roles}))
    done = subprocess.run(
        [sys.executable, str(STARTER), NODE_FLAG, str(listed)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_every_role_starts_its_stderr_in_its_log_and_each_end_is_reported(
    tmp_path: Path,
) -> None:
    script = (
        "import os, sys; "
        "print(os.environ['ALPHA_LAUNCHER_PID'] == str(os.getppid()), file=sys.stderr); "
        "sys.exit(int(sys.argv[1]))"
    )
    roles = [
        {"role": 3, "argv": ["/bin/sh", "-c", "echo three >&2"], "log": str(tmp_path / "3.log")},
        {"role": 4, "argv": [sys.executable, "-c", script, "0"], "log": str(tmp_path / "4.log")},
        {"role": 5, "argv": [sys.executable, "-c", script, "7"], "log": str(tmp_path / "5.log")},
    ]
    code, events = start(tmp_path, roles)
    assert code == 1  # role 5 failed
    assert [e["role"] for e in events if e["event"] == "started"] == [3, 4, 5]
    ends = {e["role"]: e["code"] for e in events if e["event"] == "exit"}
    assert ends == {3: 0, 4: 0, 5: 7}
    assert all(isinstance(e["at"], float) for e in events if e["event"] == "exit")
    assert (tmp_path / "3.log").read_text() == "three\n"
    # The starter is each role's parent and launcher: a role stops when it is gone.
    assert (tmp_path / "4.log").read_text() == "True\n"


def test_a_role_that_cannot_start_is_refused_and_the_others_run(tmp_path: Path) -> None:
    roles = [
        {"role": 0, "argv": [str(tmp_path / "missing")], "log": str(tmp_path / "0.log")},
        {"role": 1, "argv": ["/bin/true"], "log": str(tmp_path / "no-such-folder" / "1.log")},
        {"role": 2, "argv": ["/bin/true"], "log": str(tmp_path / "2.log")},
    ]
    code, events = start(tmp_path, roles)
    assert code == 1
    refused = {e["role"]: e["error"] for e in events if e["event"] == "refused"}
    assert set(refused) == {0, 1}
    assert "No such file or directory" in refused[0] and "No such file" in refused[1]
    assert [(e["role"], e["code"]) for e in events if e["event"] == "exit"] == [(2, 0)]
