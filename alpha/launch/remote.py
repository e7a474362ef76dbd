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

For ``alpha run --deploy`` it also asks each node whether it answers before an attempt
(:func:`probe_nodes`), clears what an earlier attempt left on the nodes
(:func:`clear_nodes`), brings role 0's progress records to the deployment host as they are
written (:class:`ProgressMirror`) and the reports and commit record back once the launch is
over (:func:`gather_reports`), so that the run is read as on one host.
"""

from __future__ import annotations

import io
import re
import shlex
import socket
import stat
import subprocess
import tarfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import trio

from alpha.artifact.verify import artifact_runtime
from alpha.errors import NodeUnreachable
from alpha.files import write_bytes_atomically
from alpha.launch.deploy import Deployment, Node
from alpha.records.commit import COMMIT_NAME
from alpha.records.folder import PROGRESS_DIR, REPORTS_DIR, progress_name, report_name
from alpha.records.reports import ATTEMPT_FILES
from alpha.runtime.parent import LAUNCHER_PID_ENV

if TYPE_CHECKING:
    # Types only: the launcher is the caller's (a run-time import here would stack this module
    # on it, one floor more for every command that stands on it, docs/architecture.md).
    from alpha.launch.launcher import LaunchSpec

__all__ = [
    "PROBE_WAIT",
    "SSH_OPTIONS",
    "ProgressMirror",
    "Tunnels",
    "clear_nodes",
    "deploy_specs",
    "gather_reports",
    "prepare_nodes",
    "probe_nodes",
    "stage_artifacts",
]

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

PROBE_WAIT: Final = 60.0
"""Seconds one probe (``ssh NODE true``) may take in all. ssh's ``ConnectTimeout`` (10 s, or
what ``--ssh-option`` says) bounds a node that does not answer; this bounds one that accepts
the connection and then never finishes the handshake."""

PROBES: Final = 32
"""Nodes probed, cleared or read back at once: each is one short ssh process."""

MIRROR_POLL: Final = 0.2
"""Seconds between the looks the node's ``tail`` takes at role 0's progress file (``-s``; at its
default of 1 s, GNU tail was seen to bring a file that appeared late more than a second after
its lines): a round shows on the deployment host within about this."""

MIRROR_STOP_WAIT: Final = 10.0
"""Seconds the progress mirror's ssh may take to end once its stdin is closed (the remote shell
ends its ``tail`` at once; the rest is room for a loaded host) before it is killed."""

_T = TypeVar("_T")


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
    local: Sequence[LaunchSpec],
    deployment: Deployment,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    extra: Sequence[str] = (),
) -> list[LaunchSpec]:
    """What to start on the deployment's nodes for the roles ``local`` (a compiled folder's,
    as :func:`alpha.launch.launcher.launch_specs` read and checked them): each role as
    ``ssh NODE 'cd REMOTE_ROOT && ALPHA_LAUNCHER_PID=$PPID exec INTERPRETER... ARTIFACT'``,
    where the interpreter is the one ``interpreters`` names for the artifact's target
    (``python3`` by default: the node's own).

    Raises:
        ArtifactInvalid: an artifact does not read.
        DeployInvalid: the deployment does not list one node per role.
    """
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
    return remote


def prepare_nodes(
    local: Sequence[LaunchSpec],
    deployment: Deployment,
    logs: Path,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    extra: Sequence[str] = (),
) -> tuple[list[LaunchSpec], Tunnels]:
    """Everything a launch on the deployment's nodes needs before its roles start, for
    ``alpha launch --deploy`` and each attempt of ``alpha run --deploy``: the artifacts and
    runtime copied (:func:`stage_artifacts`), what an earlier launch left on the nodes cleared
    (:func:`clear_nodes`), what to start (:func:`deploy_specs`) and the tunnels that route
    its ports, whose logs go to ``logs``.

    Raises:
        ArtifactInvalid: an artifact does not read.
        DeployInvalid: the deployment does not list one node per role.
        NodeUnreachable: a node cannot be reached or written; no role has started.
    """
    deployment.require_roles(len(local))
    stage_artifacts(local, deployment, extra)
    clear_nodes(deployment, extra)
    specs = deploy_specs(local, deployment, interpreters, extra)
    logs.mkdir(parents=True, exist_ok=True)
    return specs, Tunnels(deployment, logs, extra)


def _each_at_once(work: Callable[[_T], NodeUnreachable | None], items: Sequence[_T]) -> None:
    """``work`` on every item at once (at most :data:`PROBES` together); the first failure,
    in the items' order, is raised once all are done."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=min(PROBES, len(items))) as pool:
        failures = list(pool.map(work, items))
    for failure in failures:
        if failure is not None:
            raise failure


def _by_sshd(nodes: Sequence[Node]) -> list[Node]:
    """One node per sshd (host and port), in order: nodes that are one sshd share its
    ``remote_root``."""
    first: dict[tuple[str, int], Node] = {}
    for node in nodes:
        first.setdefault((node.host, node.port), node)
    return list(first.values())


def _ssh_line(stderr: bytes, returncode: int) -> str:
    """ssh's last line, as one says why a node did not answer: ``ssh: connect to host ...``."""
    said = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    if not said:
        return f"ssh exited {returncode} and wrote nothing"
    last = said[-1].strip()
    return last if last.startswith("ssh") else f"ssh: {last}"


def probe_nodes(nodes: Sequence[Node], extra: Sequence[str] = ()) -> dict[Node, str | None]:
    """Ask every node of ``nodes`` at once to run ``true`` over SSH (with ``extra`` first, as
    every ssh call): each node's answer is None when it answered, else why not, ssh's last
    line (``ssh: connect to host 10.0.0.2 port 22: Connection refused``). A node that does
    not answer is found within ssh's ``ConnectTimeout``; :data:`PROBE_WAIT` bounds the rest.
    """
    unique = list(dict.fromkeys(nodes))
    answers: dict[Node, str | None] = {}

    def probe(node: Node) -> NodeUnreachable | None:
        try:
            done = subprocess.run(
                [*_ssh(node, extra), "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_WAIT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            answers[node] = f"ssh: no answer within {PROBE_WAIT:g} s"
            return None
        answers[node] = None if done.returncode == 0 else _ssh_line(done.stderr, done.returncode)
        return None

    _each_at_once(probe, unique)
    return {node: answers[node] for node in unique}


# The patterns of what one launch writes in its reports and progress folders (ATTEMPT_FILES):
# globs the remote shell expands, so they must hold no character the shell would read as more.
_REMOTE_SWEPT: Final = tuple(
    f"{name}/{pattern}"
    for name, patterns in ATTEMPT_FILES
    if name in (REPORTS_DIR, PROGRESS_DIR)
    for pattern in patterns
)
assert all(re.fullmatch(r"[A-Za-z0-9_./*-]+", each) for each in _REMOTE_SWEPT)


def clear_nodes(deployment: Deployment, extra: Sequence[str] = ()) -> None:
    """Remove from the ``remote_root`` of every node of ``deployment`` (once per sshd) what an
    earlier launch wrote there: its reports, its commit record and role 0's progress records
    (the patterns :data:`alpha.records.reports.ATTEMPT_FILES` names), so that nothing of an
    earlier attempt is taken for this one's: neither a commit record nor a round. A file of
    the user's in those folders stays.

    Raises:
        NodeUnreachable: a node cannot be reached, or the files cannot be removed.
    """
    root = shlex.quote(deployment.remote_root)
    command = f"cd {root} 2>/dev/null || exit 0; rm -f -- {' '.join(_REMOTE_SWEPT)}"

    def clear(node: Node) -> NodeUnreachable | None:
        done = _run_ssh(node, extra, command)
        if isinstance(done, str) or done.returncode != 0:
            why = done if isinstance(done, str) else _ssh_line(done.stderr, done.returncode)
            return NodeUnreachable(
                f"cannot clear the earlier launch's reports and progress records on "
                f"{_named(node)} ({why})"
            )
        return None

    _each_at_once(clear, _by_sshd(deployment.nodes))


def _named(node: Node) -> str:
    return f"{node.pod_id} ({node.host} port {node.port})"


def _run_ssh(
    node: Node, extra: Sequence[str], command: str
) -> subprocess.CompletedProcess[bytes] | str:
    """``command`` on ``node``, its output captured; a string says it did not end in time."""
    try:
        return subprocess.run(
            [*_ssh(node, extra), command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COPY_WAIT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"not done within {COPY_WAIT:g} s"


def gather_reports(deployment: Deployment, folder: Path, extra: Sequence[str] = ()) -> None:
    """Bring each role's report from its node's ``remote_root/reports`` into ``folder`` (the
    run folder's ``reports/``), and role 0's commit record from role 0's node, each written
    whole (a temporary file, then renamed): the run's result is then read as on one host
    (:func:`alpha.records.reports.committed_reports`). Only the files of the roles a node ran
    are taken from it, so a report another role left on a node is never taken. A report
    that is not on its node is not written (the commit check names it).

    Raises:
        NodeUnreachable: a node cannot be reached or read.
    """
    wanted: dict[tuple[str, int], tuple[Node, list[str]]] = {}
    for role, node in enumerate(deployment.nodes):
        entry = wanted.setdefault((node.host, node.port), (node, []))
        entry[1].append(report_name(role))
        if role == 0:
            entry[1].append(COMMIT_NAME)
    folder.mkdir(parents=True, exist_ok=True)
    reports = shlex.quote(f"{deployment.remote_root}/{REPORTS_DIR}")

    def gather(item: tuple[Node, list[str]]) -> NodeUnreachable | None:
        node, names = item
        # The files that are there, as one tar stream (a missing one would fail tar whole).
        command = (
            f"cd {reports} 2>/dev/null || exit 0; set --; "
            f'for f in {" ".join(names)}; do [ -f "$f" ] && set -- "$@" "$f"; done; '
            '[ "$#" -eq 0 ] || exec tar -cf - -- "$@"'
        )
        done = _run_ssh(node, extra, command)
        if isinstance(done, str) or done.returncode != 0:
            why = done if isinstance(done, str) else _ssh_line(done.stderr, done.returncode)
            return NodeUnreachable(f"cannot bring the reports back from {_named(node)} ({why})")
        if not done.stdout:
            return None
        try:
            with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:") as archive:
                for member in archive.getmembers():
                    # Only the files asked for, by their plain names: nothing the node sends
                    # is written anywhere else.
                    if member.isfile() and member.name in names:
                        data = archive.extractfile(member)
                        assert data is not None  # a regular file's
                        write_bytes_atomically(folder / member.name, data.read())
        except tarfile.TarError as error:
            return NodeUnreachable(
                f"the reports {_named(node)} sent back do not read as tar: {error}"
            )
        return None

    _each_at_once(gather, list(wanted.values()))


@dataclass
class ProgressMirror:
    """Role 0's progress records (``progress/role-000000.jsonl`` on its node) brought to
    ``local`` as they are written, so that the deployment host follows the rounds as on one
    host (``alpha.app.display.follow`` reads ``local`` unchanged).

    One ssh session runs ``tail -c +1 -F`` on the node (which waits for the file to appear
    and follows the new file role 0 makes) into ``local``; the remote shell ends the ``tail``
    when the session's stdin closes, so that nothing is left running on the node.
    :meth:`finish` ends it and then reads the whole file once, appending what the ``tail``
    had not brought yet. The session's stderr goes to ``log``.
    """

    deployment: Deployment
    local: Path
    log: Path
    extra: Sequence[str] = ()
    process: trio.Process | None = None

    def _remote(self) -> str:
        return f"{self.deployment.remote_root}/{PROGRESS_DIR}/{progress_name(0)}"

    async def start(self) -> None:
        """Start following role 0's progress file on its node."""
        self.local.parent.mkdir(parents=True, exist_ok=True)
        # A background job of a shell without job control reads /dev/null, so the shell's own
        # `read` is the one that sees the session's stdin close.
        follow = f"tail -c +1 -F -s {MIRROR_POLL:g} {shlex.quote(self._remote())}"
        command = f"{follow} & t=$!; read -r _; kill $t"
        with self.local.open("wb") as sink, self.log.open("wb") as said:
            self.process = await trio.lowlevel.open_process(
                [*_ssh(self.deployment.node(0), self.extra), command],
                stdin=subprocess.PIPE,
                stdout=sink,
                stderr=said,
            )

    async def stop(self) -> None:
        """End the ``tail`` session (its stdin closed, then killed if it lingers)."""
        process, self.process = self.process, None
        if process is None:
            return
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with trio.move_on_after(MIRROR_STOP_WAIT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def finish(self) -> None:
        """:meth:`stop`, then read the whole remote file once and append to ``local`` what it
        holds past what was brought: the rounds written just before the launch ended. A node
        that cannot be read then leaves ``local`` as the ``tail`` brought it."""
        await self.stop()
        command = f"cat {shlex.quote(self._remote())}"
        node = self.deployment.node(0)
        done = await trio.to_thread.run_sync(_run_ssh, node, self.extra, command)
        if isinstance(done, str) or done.returncode != 0:
            return
        have = self.local.read_bytes() if self.local.exists() else b""
        # The tail brings the file's bytes in order: what it brought is where the file starts.
        if done.stdout.startswith(have) and len(done.stdout) > len(have):
            with self.local.open("ab") as sink:
                sink.write(done.stdout[len(have) :])


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
