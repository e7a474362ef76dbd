"""The ssh-tunnel transport: a compiled run's roles on the machines a deployment names
(``docs/deploy.md``).

The deployment host (the one running ``alpha launch DIR --deploy FILE``) copies each role's
artifact to its node's ``remote_root`` over SSH, and the shared runtime they bind once per
node, then starts each role there with ``ssh`` as its process: the session carries the role's
stdin (the ports it connects to), stdout (the ports it announces) and stderr (its log), as a
local process's pipes would. Every listener
binds its node's loopback. For each tree edge the deployment host opens two SSH sessions: a
local forward to the listener's node (``-L``, from a loopback port of the deployment host to
the listener's port there) and a remote forward from the connector's node (``-R``, a loopback
port there, allocated by its sshd, back to the local forward). The connector is given that
port. The sessions move bytes only: the executables own framing, computation, update and
checkpoint, and a relay that dies breaks the edges that cross it, so every participant
refuses within its budgets and nothing is committed.
"""

from __future__ import annotations

import re
import shlex
import socket
import stat
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import trio

from alpha.artifact.verify import artifact_runtime
from alpha.errors import NodeUnreachable
from alpha.launch.deploy import Deployment, Node
from alpha.launch.launcher import LaunchSpec, launch_specs
from alpha.runtime.parent import LAUNCHER_PID_ENV

__all__ = ["SSH_OPTIONS", "Tunnels", "deploy_specs", "stage_artifacts"]

SSH_OPTIONS: Final = (
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
)
"""Options of every ssh call: never prompt, bound the connection, notice a dead peer."""

COPIES: Final = 8
"""Artifacts copied at once."""

COPY_WAIT: Final = 120.0
"""Seconds one copy may take (a runtime is about 1 MB, an artifact less; ssh's ConnectTimeout
bounds an unreachable node well before this)."""

FORWARD_WAIT: Final = 30.0
"""Seconds one SSH forward may take to come up (measured: 0.25 to 0.7 s on one host)."""

_ALLOCATED: Final = re.compile(rb"Allocated port (\d+) for remote forward")
"""What ssh writes (at its default log level) once its sshd listens for a ``-R`` with port 0."""

_IN_USE: Final = b"Address already in use"

PORT_ATTEMPTS: Final = 3
"""Local ports tried for one ``-L``: a port picked free may be taken before ssh binds it."""

_POLL: Final = 0.02
"""Seconds between looks at a forward's log while it comes up."""


def _ssh(node: Node, extra: Sequence[str]) -> list[str]:
    """``ssh`` to ``node`` with the caller's words first: ssh keeps the first value it is given
    for an option, so ``--ssh-option`` overrides :data:`SSH_OPTIONS`."""
    return [
        "ssh",
        *extra,
        *SSH_OPTIONS,
        "-i",
        node.ssh_key,
        "-p",
        str(node.port),
        node.host,
    ]


def _remote_name(deployment: Deployment, artifact: Path) -> str:
    return f"{deployment.remote_root}/{artifact.name}"


def stage_artifacts(
    specs: Sequence[LaunchSpec], deployment: Deployment, extra: Sequence[str] = ()
) -> None:
    """Copy each role's artifact to its node's ``remote_root``, and the shared runtime they
    bind (``runtime-SHA256.pyz``, ``docs/artifacts.md``) once per node (per distinct host and
    port: nodes that are one sshd share its ``remote_root``), over an SSH session's stdin,
    several at once. Each is written under a temporary name of its own and renamed, so a node
    never holds half a file under its real name.

    Raises:
        ArtifactInvalid: an artifact names no runtime (it was checked by ``launch_specs``).
        NodeUnreachable: a node cannot be reached or written (for the lowest such role, its
            artifact before the runtime); the message names the node and quotes ssh's last line.
    """
    copies: list[tuple[Node, Path, str]] = []
    runtimes: list[tuple[Node, Path, str]] = []
    seen: set[tuple[str, int, str]] = set()
    for spec in specs:
        node = deployment.node(spec.role)
        artifact = Path(spec.argv[-1])
        copies.append((node, artifact, f"role {spec.role}'s artifact"))
        runtime, _ = artifact_runtime(artifact)
        if (node.host, node.port, runtime) not in seen:
            seen.add((node.host, node.port, runtime))
            runtimes.append((node, artifact.parent / runtime, f"the shared runtime {runtime}"))
    with ThreadPoolExecutor(max_workers=COPIES) as pool:
        failures = list(
            pool.map(
                lambda copy: _copy(*copy, deployment=deployment, extra=extra), [*copies, *runtimes]
            )
        )
    for failure in failures:
        if failure is not None:
            raise failure


def _copy(
    node: Node, file: Path, what: str, *, deployment: Deployment, extra: Sequence[str]
) -> NodeUnreachable | None:
    target = _remote_name(deployment, file)
    # The remote shell's pid in the temporary name: no two copies share one.
    part = f'{shlex.quote(target)}."$$".part'
    # The copy keeps the file's mode, and is its user's alone while it is written: a keyed
    # artifact (mode 0700, its edges' keys inside) is never readable by another user of the
    # node, not even for the moment before the chmod (docs/security.md).
    mode = stat.S_IMODE(file.stat().st_mode)
    command = (
        f"mkdir -p {shlex.quote(deployment.remote_root)} && "
        f"umask 077 && cat > {part} && chmod {mode:o} {part} && mv {part} {shlex.quote(target)}"
    )
    where = f"{what} to {node.pod_id} ({node.host} port {node.port})"
    with file.open("rb") as data:
        try:
            done = subprocess.run(
                [*_ssh(node, extra), command],
                stdin=data,
                capture_output=True,
                timeout=COPY_WAIT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return NodeUnreachable(f"cannot copy {where}: not done within {COPY_WAIT:g} s")
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return NodeUnreachable(
        f"cannot copy {where}: ssh exited {done.returncode}: {said[-1] if said else 'no output'}"
    )


def deploy_specs(
    directory: Path,
    deployment: Deployment,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    extra: Sequence[str] = (),
) -> tuple[list[LaunchSpec], float | None]:
    """What to start for the compiled run in ``directory`` on the deployment's nodes: each
    role as ``ssh NODE 'cd REMOTE_ROOT && ALPHA_LAUNCHER_PID=$PPID exec INTERPRETER...
    ARTIFACT'``, where the
    interpreter is the one ``interpreters`` names for the artifact's target (``python3`` by
    default: the node's own).

    Raises:
        ArtifactInvalid: as :func:`alpha.launch.launcher.launch_specs`.
        DeployInvalid: the deployment does not list one node per role.
    """
    local, deadline = launch_specs(directory)
    deployment.require_roles(len(local))
    chosen = dict(interpreters or {})
    remote = []
    for spec in local:
        node = deployment.node(spec.role)
        artifact = Path(spec.argv[-1])
        target = _target_of(artifact)
        words = [*chosen.get(target, ("python3",)), _remote_name(deployment, artifact)]
        # The participant's parent is the node's sshd session: named as its launcher, so that
        # a session that ends (the deployment host's ssh killed, the connection lost) stops
        # the participant (LauncherLost) instead of leaving it on the node.
        command = (
            f"cd {shlex.quote(deployment.remote_root)} && "
            f"{LAUNCHER_PID_ENV}=$PPID exec {shlex.join(words)}"
        )
        remote.append(replace(spec, argv=(*_ssh(node, extra), command)))
    return remote, deadline


def _target_of(artifact: Path) -> str:
    from alpha.artifact.payload import read_artifact

    target = read_artifact(artifact)["target"]
    assert isinstance(target, str)
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Tunnels:
    """The SSH forwards of one launch: a route hook for :func:`alpha.launch.launcher.launch` that
    turns each announced listener port into a port on the connector's node.

    Each forward is one ``ssh -N`` process whose stderr goes to a file in ``logs``
    (``ssh-L-LISTENER-CONNECTOR.log`` and ``ssh-R-LISTENER-CONNECTOR.log``). A forward is
    known to be up from what ssh itself writes there, never by connecting to it: a test
    connection would travel through the tunnel to the participant, which would take it for
    its peer.
    """

    deployment: Deployment
    logs: Path
    extra: Sequence[str] = ()
    processes: list[trio.Process] = field(default_factory=list)

    async def route(self, listener: int, connector: int, port: int) -> int:
        """Open ``-L`` to the listener's node and ``-R`` from the connector's node; return
        the port the connector's sshd allocated.

        Raises:
            NodeUnreachable: a forward did not come up within :data:`FORWARD_WAIT`.
        """
        near, far = self.deployment.node(listener), self.deployment.node(connector)
        local = self.logs / f"ssh-L-{listener}-{connector}.log"
        for attempt in range(PORT_ATTEMPTS):
            here = _free_port()  # another process may take it before ssh binds it: rare
            process = await self._open(
                near, ["-v", "-L", f"127.0.0.1:{here}:127.0.0.1:{port}"], local
            )
            try:
                await self._until(process, local, _listening(here), near, "local")
                break
            except NodeUnreachable:
                if attempt + 1 == PORT_ATTEMPTS or _IN_USE not in local.read_bytes():
                    raise
        remote = self.logs / f"ssh-R-{listener}-{connector}.log"
        process = await self._open(far, ["-R", f"127.0.0.1:0:127.0.0.1:{here}"], remote)
        found = await self._until(process, remote, _ALLOCATED, far, "remote")
        return int(found.group(1))

    async def _open(self, node: Node, args: list[str], log: Path) -> trio.Process:
        with log.open("wb") as sink:
            process = await trio.lowlevel.open_process(
                _ssh(node, [*self.extra, "-N", "-o", "ExitOnForwardFailure=yes", *args]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        self.processes.append(process)
        return process

    async def _until(
        self, process: trio.Process, log: Path, line: re.Pattern[bytes], node: Node, kind: str
    ) -> re.Match[bytes]:
        """Wait until ssh writes ``line`` to ``log``; refuse an ssh that exits first or a
        forward that is not up within :data:`FORWARD_WAIT`."""
        deadline = trio.current_time() + FORWARD_WAIT
        while True:
            seen = log.read_bytes()
            found = line.search(seen)
            if found is not None:
                return found
            if process.returncode is not None or trio.current_time() > deadline:
                break
            await trio.sleep(_POLL)
        said = [
            text
            for text in seen.decode(errors="replace").splitlines()
            if text.strip() and not text.startswith("debug")
        ]
        why = (
            f"ssh exited {process.returncode}"
            if process.returncode is not None
            else f"it did not come up within {FORWARD_WAIT:g} s"
        )
        raise NodeUnreachable(
            f"the {kind} forward through {node.pod_id} ({node.host} port {node.port}) failed: "
            f"{why}: {said[-1] if said else 'ssh wrote nothing'} (log: {log})"
        )

    async def aclose(self) -> None:
        """End every forward (the run is over, or failed)."""
        with trio.CancelScope(shield=True):
            for process in self.processes:
                if process.returncode is None:
                    process.kill()
                await process.wait()


def _listening(port: int) -> re.Pattern[bytes]:
    """What ``ssh -v`` writes once a local forward listens (OpenSSH's channels.c)."""
    return re.compile(rb"Local forwarding listening on 127\.0\.0\.1 port %d\." % port)
