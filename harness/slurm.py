"""A real Slurm cluster of a test's own on this one machine: munged, slurmctld and one
``slurmd -N NAME`` per node, each node on its own loopback address (127.0.0.2, 127.0.0.3,
...), for ``alpha run --slurm``'s tests and benchmark (``docs/slurm.md``).

:func:`running_cluster` writes a munge key, a ``slurm.conf`` and every daemon's state and logs
into a fresh folder of its own, starts each daemon in the foreground as a child of this
process (no system service is involved or touched), waits until ``sinfo`` shows every node
idle, and at exit stops every job, then every daemon, by the pid it started. slurmctld's and
every slurmd's port is picked free at start-up.

Node addresses stay on loopback (all of 127/8 is on ``lo``): a Slurm client on this host
given a node in a private range would send its traffic out of the machine. The cluster's
clients find it through ``SLURM_CONF`` (:attr:`SlurmCluster.env`); the code under test reads
each node's address from Slurm (``scontrol show node NAME -o``), never from here.

``make test`` installs slurm-wlm and munge (``scripts/system-deps.sh``). Facts measured on
this kind of machine: ``shared/notes/slurm.md``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "DAEMONS",
    "MAX_NODES",
    "READY_WAIT",
    "ClusterFailed",
    "ClusterUnavailable",
    "SlurmCluster",
    "running_cluster",
]

DAEMONS: Final = ("munged", "mungekey", "slurmctld", "slurmd", "slurmstepd")
"""The programs a cluster needs (in /usr/sbin), and the clients: ``CLIENTS``."""

CLIENTS: Final = ("srun", "salloc", "sbatch", "scontrol", "sinfo", "squeue", "scancel")

MAX_NODES: Final = 16
"""Nodes one cluster has at most: 127.0.0.2 to 127.0.0.17."""

READY_WAIT: Final = 30.0
"""Seconds each daemon may take to be ready (measured: all of them in under a second)."""

STOP_WAIT: Final = 15.0
"""Seconds every job may take to end after ``scancel``, and each daemon after SIGTERM."""

NODE_CPUS: Final = 8
"""CPUs each node claims (``SlurmdParameters=config_overrides`` lets it claim more than the
machine's): several roles run on one node without ``--overcommit`` where a test asks."""

KILL_WAIT: Final = 2
"""``KillWait``: seconds between a task's SIGTERM and its SIGKILL when Slurm ends a step. A
participant dies of SIGTERM at once, so this only bounds one that does not."""

_POLL: Final = 0.1
_LOG_TAIL: Final = 20  # lines of each daemon's log quoted by ClusterFailed


class ClusterUnavailable(RuntimeError):
    """Slurm or munge is not installed here, or this process cannot run their daemons (not
    root): the message says which, and what installs them."""

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"{missing}: `make test` (scripts/system-deps.sh) installs slurm-wlm and munge, "
            "and the cluster's daemons run as root"
        )
        self.missing = missing


class ClusterFailed(RuntimeError):
    """A daemon exited, or the cluster was not ready within :data:`READY_WAIT`; the message
    quotes ``sinfo`` and the end of each daemon's log."""

    def __init__(self, reason: str, folder: Path) -> None:
        parts = [reason]
        for log in sorted((folder / "log").glob("*.log")):
            try:
                lines = log.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
            except OSError:
                lines = []
            parts.append(f"{log}:\n" + "\n".join(f"  {line}" for line in lines))
        super().__init__("\n".join(parts))
        self.reason = reason


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class SlurmCluster:
    """A running cluster: its folder and ``slurm.conf``, its node names in order, and the
    daemons this process started (name -> process)."""

    folder: Path
    conf: Path
    nodes: tuple[str, ...]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with the cluster's ``SLURM_CONF``: what a client of
        it (``alpha run --slurm``, ``srun``, ``scontrol``) runs with."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster, its output captured."""
        return subprocess.run(
            argv, env=self.env, capture_output=True, text=True, check=check, timeout=60
        )

    def idle(self) -> list[str]:
        """The nodes ``sinfo`` shows idle."""
        shown = self.command("sinfo", "-h", "-N", "-t", "idle", "-o", "%N", check=False)
        return sorted(set(shown.stdout.split()))

    def jobs(self) -> list[str]:
        """The ids of the jobs Slurm lists (running, pending or completing)."""
        return self.command("squeue", "-h", "-o", "%i", check=False).stdout.split()

    def steps(self, job: int) -> list[str]:
        """The step ids of ``job`` that Slurm still lists."""
        shown = self.command("squeue", "--steps", "-h", f"--jobs={job}", "-o", "%i", check=False)
        return shown.stdout.split()

    def wait_idle(self, nodes: Sequence[str] | None = None) -> None:
        """Wait until every node of ``nodes`` (default: all) is idle.

        Raises:
            ClusterFailed: a daemon exited, or they are not idle within :data:`READY_WAIT`.
        """
        wanted = set(self.nodes if nodes is None else nodes)
        deadline = time.monotonic() + READY_WAIT
        while not wanted <= set(self.idle()):
            self._alive()
            if time.monotonic() > deadline:
                shown = self.command("sinfo", "-N", "-o", "%N %t %E", check=False).stdout
                raise ClusterFailed(
                    f"nodes {sorted(wanted)} not idle within {READY_WAIT:g} s:\n{shown}",
                    self.folder,
                )
            time.sleep(_POLL)

    def clear(self) -> None:
        """Cancel every job and wait until Slurm lists none, then until every node is idle:
        what one test leaves, the next does not find."""
        if self.jobs():
            self.command("scancel", "--full", "--user", str(os.getuid()), check=False)
        deadline = time.monotonic() + STOP_WAIT
        while self.jobs() and time.monotonic() < deadline:
            time.sleep(_POLL)
        self.wait_idle()

    def stop_node(self, name: str) -> None:
        """Stop the slurmd of node ``name`` (SIGTERM, by its pid): a node that no longer
        starts tasks, while slurmctld still counts it as up (until ``SlurmdTimeout``)."""
        process = self.processes.pop(f"slurmd-{name}")
        _stop(process)

    def start_node(self, name: str) -> None:
        """Start node ``name``'s slurmd again and wait until Slurm has it idle (a node that
        was marked down returns: ``ReturnToService=2``).

        Raises:
            ClusterFailed: it is not idle within :data:`READY_WAIT`.
        """
        self.processes[f"slurmd-{name}"] = _daemon(
            ["slurmd", "-D", "-N", name], self.env, self.folder / "log" / f"slurmd.{name}.out"
        )
        self.command("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
        self.wait_idle([name])

    def _alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise ClusterFailed(f"{name} exited with status {process.returncode}", self.folder)


def _daemon(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _conf(folder: Path, host: str, control: int, nodes: Sequence[tuple[str, str, int]]) -> str:
    lines = [
        "ClusterName=alphatest",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={control}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge' / 'sock'}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}/%n",  # %n: the node's name, one per slurmd
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd'}.%n.pid",
        f"SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'log' / 'slurmd'}.%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",  # no cgroups here
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "SlurmdParameters=config_overrides",  # lets CPUs= exceed the machine's
        "ReturnToService=2",  # a node whose slurmd comes back is up again
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        f"KillWait={KILL_WAIT}",
        "OverTimeLimit=0",
        "MinJobAge=4",  # a finished job's record stays a few seconds
        "EnforcePartLimits=ALL",  # an impossible request fails at once instead of pending
        "SchedulerParameters=batch_sched_delay=0",
    ]
    for name, address, port in nodes:
        lines.append(
            f"NodeName={name} NodeHostname={host} NodeAddr={address} Port={port} "
            f"CPUs={NODE_CPUS} RealMemory=2000 State=UNKNOWN"
        )
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=60 State=UP")
    return "\n".join(lines) + "\n"


def _require() -> None:
    for name in DAEMONS:
        if shutil.which(name) is None and not Path("/usr/sbin", name).exists():
            raise ClusterUnavailable(f"{name} is not installed")
    for name in CLIENTS:
        if shutil.which(name) is None:
            raise ClusterUnavailable(f"{name} is not installed")
    if os.geteuid() != 0:
        raise ClusterUnavailable("not root")


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _munge(folder: Path) -> subprocess.Popen[bytes]:
    munge = folder / "munge"
    munge.mkdir()
    munge.chmod(0o755)  # munged refuses a socket folder others cannot traverse
    key = munge / "munge.key"
    subprocess.run([_sbin("mungekey"), "-c", "-f", "-k", str(key)], check=True, capture_output=True)
    process = _daemon(
        [
            _sbin("munged"),
            "-F",
            "-S",
            str(munge / "sock"),
            f"--key-file={key}",
            f"--log-file={folder / 'log' / 'munged.log'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
        ],
        dict(os.environ),
        folder / "log" / "munged.out",
    )
    deadline = time.monotonic() + READY_WAIT
    while not (munge / "sock").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            raise ClusterFailed("munged did not make its socket", folder)
        time.sleep(0.02)
    return process


@contextmanager
def running_cluster(nodes: int = 3, *, folder: Path | None = None) -> Iterator[SlurmCluster]:
    """A cluster of ``nodes`` nodes named ``n1``, ``n2``, ... at 127.0.0.2, 127.0.0.3, ...,
    all idle when it is yielded; every job and daemon stopped at exit. Its files go to
    ``folder`` (default: a new folder under the system's temporary folder, removed at exit:
    short, since munge's socket path must fit in a Unix socket's name).

    Raises:
        ClusterUnavailable: Slurm or munge is missing, or this process is not root.
        ClusterFailed: a daemon exited or the nodes were not idle within :data:`READY_WAIT`.
        ValueError: ``nodes`` is not 1 to :data:`MAX_NODES`.
    """
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"a test cluster has 1 to {MAX_NODES} nodes, not {nodes}")
    _require()
    made = folder is None
    base = Path(tempfile.mkdtemp(prefix="alpha-slurm-")) if folder is None else folder
    base.chmod(0o755)  # munged refuses a socket whose folders others cannot traverse
    for part in ("state", "spool", "log"):
        (base / part).mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    placed = [(f"n{k + 1}", f"127.0.0.{k + 2}", _free_port()) for k in range(nodes)]
    conf = base / "slurm.conf"
    conf.write_text(_conf(base, host, _free_port(), placed))
    cluster = SlurmCluster(base, conf, tuple(name for name, _, _ in placed))
    try:
        cluster.processes["munged"] = _munge(base)
        log = base / "log"
        cluster.processes["slurmctld"] = _daemon(
            [_sbin("slurmctld"), "-D", "-i"], cluster.env, log / "slurmctld.out"
        )
        deadline = time.monotonic() + READY_WAIT
        while "is UP" not in cluster.command("scontrol", "ping", check=False).stdout:
            cluster._alive()
            if time.monotonic() > deadline:
                raise ClusterFailed(f"slurmctld not up within {READY_WAIT:g} s", base)
            time.sleep(_POLL)
        for name, _, _ in placed:
            (base / "spool" / name).mkdir(exist_ok=True)
            cluster.processes[f"slurmd-{name}"] = _daemon(
                [_sbin("slurmd"), "-D", "-N", name], cluster.env, log / f"slurmd.{name}.out"
            )
        cluster.wait_idle()
        yield cluster
    finally:
        with suppress(Exception):
            if "slurmctld" in cluster.processes:
                cluster.clear()
        # The nodes first (each ends its steps), then the controller, then munge.
        for name in [key for key in cluster.processes if key.startswith("slurmd-")]:
            _stop(cluster.processes.pop(name))
        for name in ("slurmctld", "munged"):
            process = cluster.processes.pop(name, None)
            if process is not None:
                _stop(process)
        if made:
            shutil.rmtree(base, ignore_errors=True)
