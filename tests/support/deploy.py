"""Deployment files and ssh options for runs on the test's own sshds (``harness/sshd.py``): the
one copy that ``alpha launch --deploy`` and ``alpha run --deploy`` tests share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sshd import Sshd


def _node(name: str, sshd: Sshd, minor: int) -> dict[str, object]:
    return {
        "pod_id": name,
        "host": sshd.destination(),
        "port": sshd.port,
        "ssh_key": str(sshd.client_key),
        "minor": minor,
    }


def deployment_file(
    path: Path,
    remote_root: Path,
    nodes: Sequence[tuple[Sshd, int]],
    spares: Sequence[Sshd] = (),
) -> Path:
    """Write a deployment to ``path``: ``nodes`` as ``(sshd, GPU minor)``, named ``node-R``
    in role order, and ``spares`` named ``spare-K`` (no ``spares`` array when there is none),
    every node's artifacts under ``remote_root``."""
    data: dict[str, object] = {
        "transport": "ssh-tunnel",
        "remote_root": str(remote_root),
        "nodes": [_node(f"node-{r}", sshd, minor) for r, (sshd, minor) in enumerate(nodes)],
    }
    if spares:
        data["spares"] = [_node(f"spare-{k}", sshd, 0) for k, sshd in enumerate(spares)]
    path.write_text(json.dumps(data))
    return path


def ssh_options(*sshds: Sshd) -> list[str]:
    """--ssh-option words: the fixtures' known hosts (one option naming every file: ssh keeps
    the first value it is given) and no other configuration; keys come from the deployment."""
    words = ["-F", "/dev/null", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"]
    files = " ".join(str(sshd.known_hosts) for sshd in sshds)
    words += ["-o", f"UserKnownHostsFile={files}"]
    return [f"--ssh-option={word}" for word in words]


def left_running(remote: Path, *sshds: Sshd) -> list[int]:
    """Processes started from ``remote`` (participants, a ``tail`` of its progress records)
    and ssh processes talking to the sshds: what a run on them must not leave behind."""
    from harness.processes import running  # the harness's, loaded by the tests that need it

    found = running(remote)
    for sshd in sshds:
        found += [pid for pid in running(str(sshd.port), whole=True) if pid not in found]
    return found
