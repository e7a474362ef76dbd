"""A real OpenSSH ``sshd`` of a test's own, and network namespaces of a test's own, for the
ssh-tunnel transport's tests (``docs/deploy.md``).

:func:`running_sshd` starts ``/usr/sbin/sshd`` with keys, a configuration and a known-hosts
file it writes into a folder of the test's; no system service is involved or touched. It
accepts one key, the client key it generated, for the current user, and allows what the
transport does: remote commands and TCP forwards both ways (``-L`` and ``-R``). The
:class:`Sshd` it yields holds what an ``ssh`` call against it needs.

:func:`namespace_nodes` creates network namespaces, each joined to the caller's namespace by a
veth pair of its own and to no other, so that a test can put an sshd in each and show that a
process in one reaches another's loopback only through tunnels opened from the caller's. It
only ever touches the namespaces it created, and deletes them at exit.

``make test`` installs openssh-server, openssh-client and iproute2 (``scripts/system-deps.sh``).
Facts measured on this kind of machine: ``shared/notes/ssh-tunnel.md``.
"""

from __future__ import annotations

import dataclasses
import getpass
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.processes import children_of, descendants_of

__all__ = [
    "MAX_NODES",
    "SSHD",
    "START_WAIT",
    "Namespace",
    "Sshd",
    "SshdFailed",
    "SshdUnavailable",
    "free_port",
    "in_netns",
    "kill_host",
    "namespace_nodes",
    "running_sshd",
]

SSHD: Final = Path("/usr/sbin/sshd")
"""sshd re-executes itself for each connection, so it must be started by its absolute path."""

PRIVSEP_DIR: Final = Path("/run/sshd")
"""sshd started as root refuses to run without its privilege-separation folder."""

START_WAIT: Final = 10.0
"""Seconds sshd may take to accept a first ``ssh ... true`` (measured: well under a second;
the rest is room for a loaded host)."""

PORT_ATTEMPTS: Final = 3
"""Ports tried: a free port is picked by binding port 0 and closing it, so another process may
take it before sshd binds it; that is rare, and a new port is picked when it happens."""

STOP_WAIT: Final = 5.0
"""Seconds sshd may take to exit after SIGTERM before it is killed."""

_POLL: Final = 0.02  # how often the start looks at sshd's log again
_LOG_TAIL: Final = 20  # lines of sshd's log quoted by SshdFailed


class SshdUnavailable(RuntimeError):
    """``/usr/sbin/sshd`` (or ``ssh``/``ssh-keygen``) is not installed on this machine."""

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"{missing} is not installed: `make test` (scripts/system-deps.sh) installs "
            "openssh-server and openssh-client"
        )
        self.missing = missing


class SshdFailed(RuntimeError):
    """The test's sshd exited or did not accept a session within :data:`START_WAIT`; the
    message quotes the end of its log."""

    def __init__(self, reason: str, log: Path) -> None:
        try:
            lines = log.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
        except OSError:
            lines = []
        tail = "\n".join(f"  {line}" for line in lines) or "  (empty)"
        super().__init__(f"sshd {reason}; the end of its log {log}:\n{tail}")
        self.reason = reason
        self.log = log


@dataclass(frozen=True)
class Sshd:
    """A running sshd of the test's own: where it listens and what a client needs."""

    host: str  # the address it listens on
    port: int
    user: str  # the only user it lets in: the current one
    client_key: Path  # the private key it accepts
    known_hosts: Path  # its host key, for [host]:port
    netns: str | None  # the network namespace it runs in, None for this process's own
    pid: int | None = None  # the sshd's own process, once it runs

    def ssh_options(self) -> list[str]:
        """The options every ``ssh`` call against this sshd needs, as separate argv words:
        this key only, never a prompt, this known-hosts file only, strictly. The caller adds
        ``-p`` with :attr:`port`."""
        return [
            "-F",
            "/dev/null",  # no user or system client configuration
            "-i",
            str(self.client_key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=10",
        ]

    def destination(self) -> str:
        """``user@host``, as ssh's destination argument."""
        return f"{self.user}@{self.host}"


def in_netns(netns: str | None, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the network namespace ``netns`` (``ip netns exec``, which execs
    the command in place: its pid is the command's), or as it is when ``netns`` is None."""
    if netns is None:
        return list(argv)
    return ["ip", "netns", "exec", netns, *argv]


_FREE_PORT = (
    "import socket, sys\n"
    "s = socket.socket(int(sys.argv[1]))\n"
    "s.bind((sys.argv[2], 0))\n"
    "print(s.getsockname()[1])\n"
)


def free_port(host: str, netns: str | None = None) -> int:
    """A TCP port free on ``host`` now (bound as port 0, then closed), looked up inside
    ``netns`` when given. Another process may take it before the caller binds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if netns is None:
        with socket.socket(family) as probe:
            probe.bind((host, 0))
            port: int = probe.getsockname()[1]
            return port
    # This Python (3.11) has no os.setns: a child in the namespace binds for us.
    argv = in_netns(netns, [sys.executable, "-c", _FREE_PORT, str(int(family)), host])
    found = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
    return int(found.stdout)


_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10).close()\n"
    "except OSError as error:\n"
    "    print(error.errno or 0)\n"
)


def connect_error(host: str, port: int, netns: str | None = None) -> int | None:
    """The errno of one TCP connection from ``netns`` to ``host:port`` (for example
    ``ENETUNREACH`` where the namespace has no route there), or None if it connected."""
    argv = in_netns(netns, [sys.executable, "-c", _CONNECT, host, str(port)])
    found = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return int(found.stdout) if found.stdout.strip() else None


def _keygen(path: Path, comment: str) -> None:
    # A folder used again gets new keys: ssh-keygen would ask before overwriting.
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )


def _config(folder: Path, host: str, port: int, user: str, host_key: Path) -> str:
    return "\n".join(
        [
            f"Port {port}",
            f"ListenAddress {host}",
            f"HostKey {host_key}",
            f"AuthorizedKeysFile {folder / 'authorized_keys'}",
            f"AllowUsers {user}",
            "AuthenticationMethods publickey",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # The keys live under the test's folder, possibly below a world-writable /tmp.
            "StrictModes no",
            "PidFile none",
            # What the transport does: remote commands (the authorized_keys line does not
            # restrict them) and forwards both ways, to and from any port.
            "AllowTcpForwarding yes",
            "PermitOpen any",
            "PermitListen any",
            "X11Forwarding no",
            "AllowAgentForwarding no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            "LogLevel VERBOSE",
            "",
        ]
    )


def _public(key: Path) -> str:
    """``TYPE BASE64`` of the public half of ``key``, without its comment."""
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def _known_host(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate sshd and the sessions it forked (each calls setsid, so they are not in its
    process group), and reap sshd. Sessions that exit meanwhile are skipped."""
    sessions = []
    pending = [process.pid]
    while pending:
        found = children_of(pending.pop())
        sessions.extend(found)
        pending.extend(found)
    if process.poll() is None:
        process.terminate()
    for pid in sessions:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ssh_true(sshd: Sshd, timeout: float) -> bool:
    argv = ["ssh", "-p", str(sshd.port), *sshd.ssh_options(), sshd.destination(), "true"]
    try:
        done = subprocess.run(
            in_netns(sshd.netns, argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=max(timeout, 0.1),
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _start(
    sshd: Sshd, config: Path, log: Path, deadline: float
) -> tuple[subprocess.Popen[bytes] | None, str]:
    """Start sshd on ``sshd.port`` and wait for a real ``ssh ... true`` to succeed. Returns
    the process, or None and why it failed; a busy port says ``"port taken"``."""

    def said() -> str:  # what this start wrote: the log holds earlier tries' lines too
        with log.open("rb") as text:
            text.seek(start)
            return text.read().decode(errors="replace")

    with log.open("ab") as sink:
        start = sink.tell()
        process = subprocess.Popen(
            in_netns(sshd.netns, [str(SSHD), "-D", "-e", "-f", str(config)]),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    try:
        listening = False
        while time.monotonic() < deadline:
            if process.poll() is not None:
                taken = "Address already in use" in said()
                return None, "port taken" if taken else f"exited with status {process.returncode}"
            if not listening:
                # sshd logs this once it has bound; an ssh before that would only be refused.
                listening = "Server listening on" in said()
            if listening and _ssh_true(sshd, deadline - time.monotonic()):
                return process, ""
            time.sleep(_POLL)
        _stop(process)
        return None, f"did not accept a session within {START_WAIT} s"
    except BaseException:
        _stop(process)
        raise


@contextmanager
def running_sshd(
    folder: Path, *, host: str = "127.0.0.1", netns: str | None = None
) -> Iterator[Sshd]:
    """A real sshd listening on ``host`` at a free port, inside ``netns`` when given, that
    lets the current user in with a client key it generates, runs remote commands and allows
    ``-L`` and ``-R`` forwards. Its keys, ``sshd_config``, ``known_hosts`` and ``sshd.log``
    are written into ``folder``. It is stopped, with the sessions it forked, at exit.

    The sshd has been seen to accept a real ``ssh ... true`` before this yields.

    Raises:
        SshdUnavailable: sshd, ssh or ssh-keygen is not installed; the message names the
            command that installs them.
        SshdFailed: sshd exited or did not accept a session within :data:`START_WAIT`
            seconds; the message quotes the end of its log.
    """
    if not os.access(SSHD, os.X_OK):
        raise SshdUnavailable(str(SSHD))
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise SshdUnavailable(tool)
    folder.mkdir(parents=True, exist_ok=True)
    user = getpass.getuser()
    host_key = folder / "host_ed25519"
    client_key = folder / "client_ed25519"
    _keygen(host_key, "alpha test sshd host key")
    _keygen(client_key, "alpha test client key")
    # No options on the line: remote commands and forwarding are both allowed.
    (folder / "authorized_keys").write_text(_public(client_key) + "\n")
    if not PRIVSEP_DIR.is_dir() and os.geteuid() == 0:
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    config = folder / "sshd_config"
    known_hosts = folder / "known_hosts"
    log = folder / "sshd.log"

    deadline = time.monotonic() + START_WAIT
    process = None
    for _ in range(PORT_ATTEMPTS):
        port = free_port(host, netns)
        config.write_text(_config(folder, host, port, user, host_key))
        known_hosts.write_text(f"{_known_host(host, port)} {_public(host_key)}\n")
        sshd = Sshd(host, port, user, client_key, known_hosts, netns)
        process, why = _start(sshd, config, log, deadline)
        if process is not None:
            sshd = dataclasses.replace(sshd, pid=process.pid)
            break
        if why != "port taken":
            raise SshdFailed(why, log)
    if process is None:
        raise SshdFailed(f"found no free port in {PORT_ATTEMPTS} tries", log)
    try:
        yield sshd
    finally:
        _stop(process)


def kill_host(sshd: Sshd) -> list[int]:
    """Make the machine behind ``sshd`` gone, as a host that dies is: sshd and every process
    under it (its sessions, the commands they run: a role's participant, a forward's end)
    killed with SIGKILL, so that its port refuses connections and nothing it ran goes on.
    Every process is stopped (SIGSTOP) first, from sshd down, so that none forks a process
    the kill would miss. Returns the pids killed, sshd's first. The caller's
    :func:`running_sshd` still reaps sshd at its exit.
    """
    assert sshd.pid is not None, "an Sshd that running_sshd started"
    frozen = [sshd.pid]
    with suppress(ProcessLookupError):
        os.kill(sshd.pid, signal.SIGSTOP)
    while True:
        below = [pid for pid in descendants_of(sshd.pid) if pid not in frozen]
        if not below:
            break
        for pid in below:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        frozen += below
    for pid in frozen:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return frozen


_sets = itertools.count()  # several sets in one process get distinct names and addresses

# `ip netns add` says one of these where the caller may not create namespaces (not root, no
# CAP_SYS_ADMIN, or a container that forbids the mount ip makes for them).
_NOT_PERMITTED: Final = ("Operation not permitted", "Permission denied")

MAX_NODES: Final = 16
"""Namespaces one :func:`namespace_nodes` makes at most (each takes a /30 of its set's /26)."""


@dataclass(frozen=True)
class Namespace:
    """A network namespace of the test's own, one veth away from this process's namespace."""

    name: str
    address: str  # its end of the veth: where a process here reaches it
    gateway: str  # this namespace's end of the veth, in the same /30


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)


@contextmanager
def namespace_nodes(prefix: str, count: int = 2) -> Iterator[list[Namespace] | None]:
    """``count`` network namespaces of the caller's own, ``PREFIX-PID-N-K``, each with its
    loopback up and joined to this process's namespace (the deployment host) by a veth pair
    of its own, on a /30 of ``10.X.Y.0`` picked from the pid (so that parallel runs differ).
    Each namespace has a route to its own /30 only: this process reaches every one of them,
    and none of them reaches another. All are deleted at exit, whatever happened; no other
    namespace is touched.

    Yields None where ``ip netns add`` is not permitted, so that a test can skip.

    Raises:
        SshdUnavailable: ``ip`` (iproute2) is not installed.
        ValueError: ``count`` is not 1 to :data:`MAX_NODES`.
        subprocess.CalledProcessError: creating a namespace failed for another reason (for
            example a namespace of that name exists: it is not ours, so it is left alone).
    """
    if shutil.which("ip") is None:
        raise SshdUnavailable("ip (iproute2)")
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"namespace_nodes makes 1 to {MAX_NODES} namespaces, not {count}")
    pid = os.getpid()
    n = next(_sets)
    x, y, base = (pid >> 8) % 256, pid % 256, 64 * (n % 4)
    created: list[str] = []
    links: list[str] = []
    try:
        nodes = []
        for k in range(count):
            name = f"{prefix}-{pid}-{n}-{k}"
            added = subprocess.run(
                ["ip", "netns", "add", name], capture_output=True, text=True, timeout=30
            )
            if added.returncode != 0:
                if any(words in added.stderr for words in _NOT_PERMITTED):
                    yield None
                    return
                raise subprocess.CalledProcessError(
                    added.returncode, added.args, added.stdout, added.stderr
                )
            created.append(name)
            z = base + 4 * k
            gateway, address = f"10.{x}.{y}.{z + 1}", f"10.{x}.{y}.{z + 2}"
            # Made inside the namespace, then one end moved here; the end here is named from
            # the pid and the counters (15 bytes at most), so runs cannot clash.
            here = f"av{pid % 10**7}{n % 4}{k:x}"
            _ip("-n", name, "link", "add", here, "type", "veth", "peer", "name", "veth0")
            _ip("-n", name, "link", "set", here, "netns", str(pid))
            links.append(here)
            _ip("address", "add", f"{gateway}/30", "dev", here)
            _ip("link", "set", here, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "address", "add", f"{address}/30", "dev", "veth0")
            _ip("-n", name, "link", "set", "veth0", "up")
            nodes.append(Namespace(name, address, gateway))
        yield nodes
    finally:
        # The kernel removes a deleted namespace's links later, in the background: the ends
        # here are deleted first (which deletes their peers), so none outlives the call.
        for here in reversed(links):
            subprocess.run(["ip", "link", "delete", here], capture_output=True, timeout=30)
        for name in reversed(created):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
