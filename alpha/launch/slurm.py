"""The Slurm engine: a compiled run's roles started across the nodes of a Slurm allocation
by one ``srun`` step (``alpha run --slurm``, ``docs/slurm.md``).

The allocation is the caller's (``alpha run`` inside ``salloc`` or an ``sbatch`` script:
``SLURM_JOB_ID``), or one ``alpha run`` asks for itself: a ``salloc`` with the
``--slurm-option`` words whose command reads this process's end of a pipe, so that the job is
given back when the run is over, however this process ends (:func:`slurm_allocation`).
Before each attempt its nodes are read from Slurm (the job's node list through ``scontrol
show hostnames``, each node's ``NodeAddr`` through ``scontrol show node NAME -o``), never
assumed, and the roles are placed on them in contiguous blocks, each edge listening on its
listener's node at a port fixed from the plan's range (:func:`place`,
:class:`alpha.core.placement.NodePlacement`).

:func:`srun_launch` then runs one ``srun --multi-prog`` step with one task per node used
(``--distribution=arbitrary``: task ``k`` on node ``k``): the node's starter, the warm
starter's own text (``alpha/launch/warm_server.py --node``) run from the run folder, which
imports trio, numpy and the run's runtime once and forks every role of its node at once, each
with its stderr in its log in the run folder, which must therefore be on storage every node
sees. The starter is each role's parent and launcher (``ALPHA_LAUNCHER_PID``), so a role
stops when its node's starter is gone, and it reports each role's start and end on its
stdout, which srun carries here (``--label``); srun reports on its stderr each task that
did not end well and each node it could not start (all of it kept as ``logs/srun.log``).
Nothing is relayed: no role announces or reads a port. The first failure reported stops the
step (``srun`` is sent SIGTERM, which kills every task and every process under it) unless
the run has passed its commit point, as ``alpha launch`` stops every other role. The role
that failed first is then named by the rules of :mod:`alpha.launch.outcome`: the roles'
failure clocks and the starters' times are the wall clock here
(``ALPHA_FAILURE_CLOCK=realtime``), since the monotonic clocks of different nodes are
unrelated. When Slurm itself ended the job (``scancel``, the time limit, a node failure),
read from ``scontrol show job`` and from the lines ``slurmstepd`` writes into the starters'
logs, that is the failure named, with its own class (:class:`alpha.errors.JobCancelled`,
:class:`alpha.errors.JobTimeLimit`, :class:`alpha.errors.NodeUnreachable`).

Nothing outlives the launch: the function returns only once Slurm no longer lists the step
(every task of it ended on every node), and ``srun`` (as ``salloc``) runs with a parent-death
signal, so that a launcher killed with SIGKILL takes it, and so its step, with it (``srun``
killed ends its step: measured).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import trio

from alpha.artifact.environ import BLAS_THREADS, FAILURE_CLOCK_ENV, REALTIME
from alpha.artifact.verify import artifact_runtime
from alpha.core.placement import NodePlacement, PortRange, port_offset
from alpha.errors import (
    AlphaError,
    ArtifactInvalid,
    JobCancelled,
    JobTimeLimit,
    NodeUnreachable,
    SlurmUnavailable,
    error_line,
)
from alpha.launch.outcome import (
    CAUSE_TAIL_BYTES,
    LAUNCH_SLACK,
    LaunchResult,
    OutcomeLedger,
    RoleOutcome,
)
from alpha.launch.slurm_lines import (
    CANCELLED,
    NODE_FAILURE,
    TIME_LIMIT,
    JobRecord,
    ended_by,
    hostfile,
    hostnames,
    job_record,
    multi_prog,
    node_address,
    srun_event,
    stepd_lines,
)
from alpha.launch.warm_server import NODE_FLAG
from alpha.records.folder import LOGS_DIR
from alpha.runtime.parent import LAUNCHER_PID_ENV
from alpha.runtime.shared import SHARED_ENV
from alpha.wire.console import cause_of

if TYPE_CHECKING:
    # The type only: the launcher is the caller's (a run-time import would stack this module
    # on it, one floor more for every command that stands on it, docs/architecture.md).
    from alpha.launch.launcher import LaunchSpec

__all__ = [
    "ALLOCATION_POLL",
    "COMMAND_WAIT",
    "NODE_LOG",
    "NODE_STARTER",
    "SLURM_DIR",
    "SRUN_LOG",
    "START_WAIT",
    "STEP_GONE_WAIT",
    "STOP_WAIT",
    "Allocation",
    "Placed",
    "SlurmNode",
    "place",
    "slurm_allocation",
    "srun_launch",
]

COMMAND_WAIT: Final = 60.0
"""Seconds one ``scontrol``, ``squeue`` or ``scancel`` call may take: each answers in
milliseconds from a live controller; a minute means the controller does not answer."""

STOP_WAIT: Final = 60.0
"""Seconds ``srun`` may take to end its step once sent SIGTERM (it kills every task at once,
then waits for each node to report, up to the cluster's ``KillWait`` and two seconds) before
it is killed too (which ends the step as well, from the nodes' side)."""

STEP_GONE_WAIT: Final = 60.0
"""Seconds Slurm may take to stop listing a step once ``srun`` ended: the nodes' step
daemons are reaping the last tasks. Measured: well under a second here."""

START_WAIT: Final = 60.0
"""Seconds the tasks of a step may take to start once ``srun`` started, which the launcher
allows past the participants' session deadline (with ``LAUNCH_SLACK``) before it stops the
step itself: ``alpha launch``'s announce wait, for the same start-ups."""

_POLL: Final = 0.1  # seconds between two looks at the step list

SLURM_DIR: Final = "slurm"
"""The run folder's folder of what ``srun`` reads: the multi-prog file and the hostfile,
rewritten by each launch."""

SRUN_LOG: Final = "srun.log"
"""``srun``'s own stderr, in ``logs/`` with the roles' logs (kept with each attempt's)."""

_PR_SET_PDEATHSIG: Final = 1  # linux/prctl.h


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node of the allocation: its name (as Slurm names it) and its IPv4 address."""

    name: str
    address: str


def _command(*argv: str) -> str:
    """What ``argv`` (a Slurm command) printed on stdout.

    Raises:
        SlurmUnavailable: the command is missing, fails, or does not answer within
            :data:`COMMAND_WAIT`; the message quotes its stderr.
    """
    if shutil.which(argv[0]) is None:
        raise SlurmUnavailable(
            f"{argv[0]} is not installed here: alpha run --slurm runs where Slurm's commands "
            "are (a login node of the cluster, or inside a job)"
        )
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_WAIT, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(
            f"{' '.join(argv)} did not answer within {COMMAND_WAIT:g} s"
        ) from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise SlurmUnavailable(
            f"{' '.join(argv)} exited {done.returncode}: {said[-1] if said else 'no message'}"
        )
    return done.stdout


def _ipv4(address: str) -> str:
    """``address`` (Slurm's ``NodeAddr``: an IPv4 address, or a host name the cluster
    resolves) as an IPv4 address.

    Raises:
        SlurmUnavailable: a name that does not resolve to IPv4.
    """
    try:
        return socket.gethostbyname(address)
    except OSError as error:
        raise SlurmUnavailable(f"the node address {address!r} does not resolve: {error}") from None


@dataclass
class Allocation:
    """The Slurm job a run's attempts run in: ``job``, its id; ``holder``, when ``alpha run``
    asked for the job itself, the ``salloc`` that holds it (its command reads this process's
    end of a pipe, so the job is relinquished when the run is over, however this process
    ends: :meth:`release`, or the pipe closed by its death)."""

    job: int
    holder: subprocess.Popen[bytes] | None = None
    nodelist: str | None = None  # SLURM_JOB_NODELIST, when the caller's allocation gave it

    @property
    def made(self) -> bool:
        return self.holder is not None

    def record(self) -> JobRecord:
        """The job as Slurm shows it now.

        Raises:
            SlurmUnavailable: ``scontrol`` fails, or no longer knows the job.
        """
        return job_record(_command("scontrol", "show", "job", "-o", str(self.job)), self.job)

    def nodes(self, record: JobRecord | None = None) -> tuple[SlurmNode, ...]:
        """The job's nodes, in Slurm's order, each with its address as Slurm gives it.

        Raises:
            SlurmUnavailable: Slurm's commands fail, or a node has no IPv4 address.
        """
        listed = self.nodelist or (record or self.record()).nodes
        if not listed or listed == "(null)":
            raise SlurmUnavailable(f"job {self.job} has no nodes (yet)")
        names = hostnames(_command("scontrol", "show", "hostnames", listed))
        shown = _command("scontrol", "show", "node", "-o", ",".join(names))
        return tuple(SlurmNode(name, _ipv4(node_address(shown, name))) for name in names)

    def release(self) -> None:
        """Relinquish the job when ``alpha run`` made it (nothing otherwise): its ``salloc``
        reads the end of its stdin, ends its command and gives the job back; one that does
        not end within :data:`STOP_WAIT` is cancelled and killed."""
        holder, self.holder = self.holder, None
        if holder is None:
            return
        if holder.stdin is not None:
            with contextlib.suppress(OSError):
                holder.stdin.close()
        try:
            holder.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(SlurmUnavailable):
                _command("scancel", "--quiet", str(self.job))
            holder.kill()
            holder.wait()


ALLOCATION_POLL: Final = 0.05
"""Seconds between two looks at what ``salloc`` said while it waits for its job."""


def _hold(argv: Sequence[str], said: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """Start ``salloc`` (``argv``), its stderr to the file ``said``, and wait until it says
    it was granted its job; the job's id and the salloc that holds it.

    Raises:
        SlurmUnavailable: salloc ended first (what it said last is quoted).
    """
    with said.open("wb") as sink:
        holder = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,  # Ctrl-C reaches alpha, which releases it
            preexec_fn=_pdeathsig(),  # made before the fork: the child only calls it
        )
    try:
        while True:
            lines = said.read_text(errors="replace").splitlines()
            granted = [line for line in lines if "Granted job allocation" in line]
            if granted:
                return int(granted[-1].rsplit(" ", 1)[1]), holder
            if holder.poll() is not None:
                last = [line for line in lines if line.strip()]
                raise SlurmUnavailable(
                    f"{' '.join(argv)} exited {holder.returncode}: "
                    f"{last[-1] if last else 'no message'}"
                )
            time.sleep(ALLOCATION_POLL)
    except BaseException:
        if holder.stdin is not None:
            holder.stdin.close()
        if holder.poll() is None:
            holder.terminate()  # salloc gives back a job it was granted or still waits for
        holder.wait()
        raise


def slurm_allocation(
    words: Sequence[str],
    name: str,
    environ: Mapping[str, str] | None = None,
    said: Path | None = None,
) -> Allocation:
    """The allocation a run goes into: the caller's, inside ``salloc`` or an ``sbatch``
    script (``SLURM_JOB_ID``; ``words`` are refused there, since the allocation is made);
    else a new one, ``salloc --job-name=alpha-NAME WORDS... cat`` (``--nodes=3 --time=30``,
    ...), which waits as long as Slurm queues it, and holds the job while its ``cat`` reads
    this process's end of a pipe. ``said`` is where salloc's messages go (default: a file
    of the system's temporary folder).

    Raises:
        SlurmUnavailable: no allocation and no words to ask for one; words inside one; or
            ``salloc`` fails (its message quoted).
    """
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID")
    if job is not None:
        if words:
            raise SlurmUnavailable(
                f"alpha run is inside job {job} already, whose nodes it uses: --slurm-option "
                "asks for a new allocation, which only a run outside a job makes"
            )
        if not job.isdecimal():
            raise SlurmUnavailable(f"SLURM_JOB_ID is {job!r}, not a job id")
        return Allocation(int(job), nodelist=env.get("SLURM_JOB_NODELIST") or None)
    if not words:
        raise SlurmUnavailable(
            "alpha run --slurm runs in a Slurm allocation: run it inside salloc or an sbatch "
            "script (docs/slurm.md), or let it ask for one with --slurm-option words such as "
            "--slurm-option=--nodes=3"
        )
    if shutil.which("salloc") is None:
        raise SlurmUnavailable("salloc is not installed here, so no allocation can be made")
    # salloc runs its command here, on this host: `cat` ends when this process's end of its
    # stdin closes (release(), or this process's death), and salloc then gives the job back.
    argv = ["salloc", f"--job-name=alpha-{name}", *words, "cat"]
    with contextlib.ExitStack() as stack:
        if said is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="alpha-salloc-"))
            said = Path(folder) / "salloc.log"
        job_id, holder = _hold(argv, said)
    return Allocation(job_id, holder)


@dataclass(frozen=True, slots=True)
class Placed:
    """One attempt's placement: the rule (:class:`NodePlacement`) and the nodes it indexes."""

    placement: NodePlacement
    nodes: tuple[SlurmNode, ...]

    def node_of(self, role: int) -> SlurmNode:
        return self.nodes[self.placement.node_of(role)]


def place(allocation: Allocation, roles: int, attempt: int, ports: PortRange) -> Placed:
    """Where attempt ``attempt`` of a run of ``roles`` roles runs: the job's nodes now, in
    blocks, its ports ``port_offset`` into ``ports``.

    Raises:
        JobCancelled, JobTimeLimit: Slurm ended the job (no attempt can run in it).
        NodeUnreachable: Slurm ended the job for a node failure.
        SlurmUnavailable: Slurm's commands fail.
    """
    record = allocation.record()
    ended = _job_ended(record, "")
    if ended is not None:
        raise ended
    nodes = allocation.nodes(record)
    offset = port_offset(allocation.job, attempt, roles, ports.span)
    placement = NodePlacement(tuple(node.address for node in nodes), roles, ports, offset)
    return Placed(placement, nodes)


def _job_ended(record: JobRecord, said: str) -> AlphaError | None:
    """The error of a job Slurm ended (``said``: slurmstepd's line about it, if any)."""
    how = record.ended_by
    state = f"JobState={record.state}" + (
        "" if record.reason in ("", "None") else f" Reason={record.reason}"
    )
    end = f" ({state}){': ' + said if said else ''}"
    if how == TIME_LIMIT:
        return JobTimeLimit(f"Slurm ended job {record.job} at its time limit{end}")
    if how == NODE_FAILURE:
        return NodeUnreachable(f"Slurm ended job {record.job} for a node failure{end}")
    if how == CANCELLED:
        return JobCancelled(f"job {record.job} was cancelled (scancel){end}")
    return None


def _role_cause(path: Path, *, labelled: bool = False) -> tuple[str, float | None, list[str]]:
    """A role's one-line cause and failure clock from the end of its log, the lines
    slurmstepd wrote into it left out (``alpha.wire.console.cause_of``), and those lines;
    ``labelled``: a node starter's log, each line with srun's ``TASK: `` (taken off)."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - CAUSE_TAIL_BYTES))
            tail = file.read(CAUSE_TAIL_BYTES).decode(errors="replace")
    except OSError:
        return "", None, []
    own, stepd = stepd_lines(tail, labelled=labelled)
    line, clock = cause_of(own)
    if not line and stepd:
        # The role wrote nothing: slurmstepd's line says why (an execve that failed).
        line = stepd[-1]
    return line, clock, stepd


def _pdeathsig() -> Callable[[], None] | None:
    """A function for ``preexec_fn`` that gives the child SIGTERM when this process ends
    (``prctl(PR_SET_PDEATHSIG)``), or None where there is no such call. It is made here, in
    the parent, so that the child runs no import and no lookup between fork and exec."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return child


@dataclass
class _Srun:
    """One running ``srun``: the process (started from the thread that runs trio, so that its
    parent-death signal is tied to this process's life, not to a worker thread's), a pidfd
    of it, and the read ends of its stdout (the node starters' events) and stderr."""

    process: subprocess.Popen[bytes]
    pidfd: int
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream

    @classmethod
    def start(cls, argv: Sequence[str], env: Mapping[str, str]) -> _Srun:
        pipes = [os.pipe(), os.pipe()]
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=pipes[0][1],
                stderr=pipes[1][1],
                env=dict(env),
                # Away from the terminal's process group: Ctrl-C reaches alpha alone, which
                # ends the step itself (srun would forward it to every task).
                start_new_session=True,
                preexec_fn=_pdeathsig(),  # made before the fork: the child only calls it
            )
        except BaseException:
            for read, _ in pipes:
                os.close(read)
            raise
        finally:
            for _, write in pipes:
                os.close(write)
        return cls(
            process,
            os.pidfd_open(process.pid),
            trio.lowlevel.FdStream(pipes[0][0]),
            trio.lowlevel.FdStream(pipes[1][0]),
        )

    async def wait(self) -> int:
        await trio.lowlevel.wait_readable(self.pidfd)
        return self.process.wait()

    def signal(self, number: int) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(number)

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.signal(signal.SIGTERM)
                with trio.move_on_after(STOP_WAIT):
                    await self.wait()
                if self.process.returncode is None:
                    self.signal(signal.SIGKILL)
                    await self.wait()
            await self.stdout.aclose()
            await self.stderr.aclose()
            os.close(self.pidfd)


def _environment() -> dict[str, str]:
    """What every task starts with (srun passes its own environment on): this process's,
    without what tells a participant it runs under a launcher on this host (its pid, which
    is not its parent there; a shared-memory token, which its peers on other nodes cannot
    use), with failure clocks on the wall clock, and numpy's BLAS on one thread."""
    env = {**os.environ, FAILURE_CLOCK_ENV: REALTIME}
    env.pop(LAUNCHER_PID_ENV, None)
    env.pop(SHARED_ENV, None)
    env.setdefault(*BLAS_THREADS)
    return env


def _starter_python(specs: Sequence[LaunchSpec]) -> str:
    """The interpreter a node's starter runs on: that of the node's first role started as
    ``PYTHON ARTIFACT``, whose roles it forks warm; this one's path when none is (an
    emulated role's command is started as it is)."""
    for spec in specs:
        if len(spec.argv) == 2:
            return spec.argv[0]
    return sys.executable


@dataclass
class _Step:
    """What one launch learns of its step as it runs: task ``k`` is node ``k``'s starter,
    which starts that node's roles and reports each start and end on its stdout."""

    specs: Sequence[LaunchSpec]  # every role, in role order
    placed: Placed
    allocation: Allocation
    ledger: OutcomeLedger
    committed: Callable[[], bool] | None
    started: float  # time.monotonic() at the start
    node_logs: Sequence[Path]  # each starter's stderr (slurmstepd's lines go there too)
    not_started: dict[int, str] = field(default_factory=dict)  # role -> why its node did not
    begun: set[int] = field(default_factory=set)  # roles their node's starter started
    # Roles whose starter ended while they ran, with its status and when srun said so: their
    # own ends, on the starter's stdout, may still be on their way (another pipe than srun's
    # stderr), so they are settled last.
    orphaned: dict[int, tuple[int | None, float]] = field(default_factory=dict)
    srun: _Srun | None = None
    stopping: bool = False

    def roles_of(self, task: int) -> list[LaunchSpec]:
        return [self.specs[role] for role in self.placed.placement.roles_of(task)]

    def stop(self) -> None:
        """End the step: SIGTERM to srun kills every task and every process under it; the
        roles not reported ended yet are the launcher's to have stopped."""
        if self.stopping:
            return
        self.stopping = True
        for spec in self.specs:
            if spec.role not in self.ledger.outcomes:
                self.ledger.killed.add(spec.role)
        if self.srun is not None:
            self.srun.signal(signal.SIGTERM)

    def fail(self, outcome: RoleOutcome) -> None:
        if self.ledger.fail(outcome, time.time(), self.committed):
            self.stop()

    def end(self, spec: LaunchSpec, code: int | None, at: float, said: str = "") -> None:
        """``spec``'s role ended with ``code`` (None: no status) at ``at`` (wall clock);
        ``said``: why, when its log cannot say (its node's starter said it)."""
        if spec.role in self.ledger.outcomes:
            return
        task = self.placed.placement.node_of(spec.role)

        def cause() -> tuple[str, float | None]:
            line, clock, _ = _role_cause(spec.log)
            if line:
                return line, clock
            if said:
                return said, None
            # Its node's starter never ran it: the starter's log says why (an exec that failed).
            return _role_cause(self.node_logs[task], labelled=True)[0], None

        outcome = self.ledger.ended(spec.role, code, at, log=spec.log, cause=cause)
        outcome.ended_s = time.monotonic() - self.started
        self.ledger.settle(outcome)
        if outcome.failed:
            self.fail(outcome)

    def event(self, line: str) -> None:
        """One line of srun's stdout: ``TASK: EVENT``, an event of a node's starter."""
        _, _, text = line.partition(": ")
        try:
            event = json.loads(text)
            role = event["role"]
            kind = event["event"]
        except (ValueError, KeyError, TypeError):
            return  # not a starter's event: srun's log keeps it
        if not (isinstance(role, int) and 0 <= role < len(self.specs)):
            return
        spec = self.specs[role]
        at = event.get("at")
        at = float(at) if isinstance(at, int | float) else time.time()
        if kind == "started":
            self.begun.add(role)
        elif kind == "exit":
            code = event.get("code")
            self.end(spec, code if isinstance(code, int) else None, at)
        elif kind == "refused":
            said = f"role {role} could not be started on its node: {event.get('error')}"
            self.end(spec, None, at, said)

    def report(self, line: str) -> None:
        """One line of srun's stderr: how a node's starter ended, or a node that did not
        start its tasks or failed."""
        found = srun_event(line)
        if found is None:
            return
        now = time.time()
        if found.launch_failed or found.node_failed:
            roles = [
                spec.role
                for spec in self.specs
                if self.placed.node_of(spec.role).name == found.node
                and spec.role not in self.ledger.outcomes
            ]
            for role in roles:
                self.not_started.setdefault(role, found.reason)
            if roles:
                what = "did not start" if found.launch_failed else "failed, with"
                error = NodeUnreachable(
                    f"node {found.node} {what} role{'s' if len(roles) > 1 else ''} "
                    f"{', '.join(map(str, roles))}: {found.reason} (srun)"
                )
                self.fail(
                    RoleOutcome(
                        roles[0],
                        None,
                        error_line(error),
                        ended_s=time.monotonic() - self.started,
                        error=error,
                    )
                )
            return
        if found.code == 0:
            return
        for task in found.tasks:
            # A starter that ended before it started its roles (its exec failed): each ends
            # with it, now. One that ended while they ran (killed): they end with it unless
            # their own ends come.
            for spec in self.roles_of(task):
                if spec.role in self.ledger.outcomes or spec.role in self.not_started:
                    continue
                if spec.role in self.begun:
                    self.orphaned.setdefault(spec.role, (found.code, now))
                else:
                    self.end(spec, found.code, now)

    def settle(self) -> None:
        """Every role left without an outcome when srun ended: stopped by the launcher, or
        ended with no status reported (its node's starter gone without a word)."""
        for spec in self.specs:
            if spec.role in self.ledger.outcomes:
                continue
            if spec.role in self.not_started:
                self.ledger.settle(RoleOutcome(spec.role, None, log=spec.log))  # its node's
                continue
            if spec.role in self.orphaned:
                self.end(spec, *self.orphaned[spec.role])
                continue
            self.end(
                spec,
                None,
                time.time(),
                "" if spec.role in self.ledger.killed else "its exit status was not reported",
            )


async def _lines(
    stream: trio.abc.ReceiveStream,
    log: IO[bytes],
    each: Callable[[str], None],
    done: trio.Event,
) -> None:
    """Every line of ``stream``, copied to ``log`` and handed to ``each`` as it comes; then
    ``done`` is set."""
    pending = b""
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        log.write(chunk)
        log.flush()
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            each(line.decode(errors="replace"))
    if pending:
        each(pending.decode(errors="replace"))
    done.set()


def _step_listed(job: int, name: str) -> bool:
    """Whether Slurm still lists a step named ``name`` of job ``job``."""
    try:
        shown = _command("squeue", "--steps", "--noheader", f"--jobs={job}", "--format=%j")
    except SlurmUnavailable:
        return False  # the job is gone, and every step with it
    return any(line.strip() == name for line in shown.splitlines())


NODE_STARTER: Final = "node-starter.py"
"""The node starter's file in the run folder's ``slurm/``: the warm starter's text
(``alpha/launch/warm_server.py``), which every node runs from the shared folder, and which
imports no ``alpha`` of its own."""

NODE_LOG: Final = "node-%t.log"
"""Each node's starter's stderr, in ``logs/`` (``%t``: its task, the node's index)."""


def _write_starters(folder: Path, placed: Placed, specs: Sequence[LaunchSpec]) -> list[list[str]]:
    """Write the node starter and each node's list of roles into ``folder``; the argv of each
    node's task, in node order."""
    starter = folder / NODE_STARTER
    starter.write_text(Path(__file__).with_name("warm_server.py").read_text())
    runtime = None
    for spec in specs:
        with contextlib.suppress(ArtifactInvalid, OSError):
            artifact = Path(spec.argv[-1])
            runtime = str(artifact.parent / artifact_runtime(artifact)[0])
            break
    argvs = []
    for node in range(placed.placement.nodes_used):
        mine = [specs[role] for role in placed.placement.roles_of(node)]
        listed = folder / f"node-{node}.json"
        entries = [
            {"role": spec.role, "argv": list(spec.argv), "log": str(spec.log)} for spec in mine
        ]
        listed.write_text(json.dumps({"runtime": runtime, "roles": entries}))
        argvs.append([_starter_python(mine), str(starter), NODE_FLAG, str(listed)])
    return argvs


async def srun_launch(
    specs: Sequence[LaunchSpec],
    placed: Placed,
    allocation: Allocation,
    directory: Path,
    *,
    name: str,
    deadline: float | None = None,
    committed: Callable[[], bool] | None = None,
) -> LaunchResult:
    """Start every role of ``specs`` with one ``srun`` step in ``allocation``: one task per
    node that ``placed`` uses, a starter (the warm starter's text, run from the run folder)
    that starts that node's roles, each forked from one interpreter that imported trio, numpy
    and the run's runtime once when its argv is ``PYTHON ARTIFACT``, else started as its own
    program; and wait for every role and for Slurm to be done with the step. ``directory`` is
    the run folder (on storage every node sees): the starter, each node's list of roles, the
    multi-prog file and the hostfile go to its ``slurm/``, each role's stderr to its log, each
    starter's to ``logs/node-K.log``, srun's own to ``logs/srun.log``. ``name`` names the
    step. ``deadline`` and ``committed`` as for :func:`alpha.launch.launcher.launch`.

    Returns:
        Every role's outcome and the failure to name first: a role's (by the failure
        clocks), a node's that did not start its roles (``NodeUnreachable``), or Slurm's own
        end of the job (``JobCancelled``, ``JobTimeLimit``, ``NodeUnreachable``), which comes
        first whenever it happened: every role's failure then follows from it.

    Raises:
        SlurmUnavailable: srun is missing, or a word of an argv cannot go in a multi-prog file.
    """
    if shutil.which("srun") is None:
        raise SlurmUnavailable("srun is not installed here")
    ordered = sorted(specs, key=lambda spec: spec.role)
    roles = len(ordered)
    if [spec.role for spec in ordered] != list(range(roles)):
        raise SlurmUnavailable("an srun step runs every role of the run, 0..n-1")
    folder = directory / SLURM_DIR
    folder.mkdir(parents=True, exist_ok=True)
    logs = directory / LOGS_DIR
    logs.mkdir(parents=True, exist_ok=True)
    tasks = _write_starters(folder, placed, ordered)
    programs = folder / "multi-prog.conf"
    programs.write_text(multi_prog(tasks))
    hosts = folder / "hosts"
    hosts.write_text(hostfile(node.name for node in placed.nodes[: len(tasks)]))
    step_name = f"alpha:{name}"
    argv = [
        "srun",
        f"--jobid={allocation.job}",
        f"--job-name={step_name}",
        f"--ntasks={len(tasks)}",
        "--distribution=arbitrary",  # task k on line k of SLURM_HOSTFILE: node k
        "--overcommit",  # the allocation may give a node one CPU: its roles mostly wait
        "--kill-on-bad-exit=0",  # the launcher decides, past the commit point too
        "--wait=0",
        "--input=none",
        "--label",  # the starters' events on srun's stdout, each line its task's
        f"--error={logs / NODE_LOG}",
        "--multi-prog",
        str(programs),
    ]
    env = {**_environment(), "SLURM_HOSTFILE": str(hosts)}
    node_logs = [logs / NODE_LOG.replace("%t", str(task)) for task in range(len(tasks))]
    ledger = OutcomeLedger(fail_fast=True)
    step = _Step(ordered, placed, allocation, ledger, committed, time.monotonic(), node_logs)
    # The launcher's own bound, past the participants' session deadline, as alpha launch's.
    bound = math.inf if deadline is None else deadline + START_WAIT + LAUNCH_SLACK
    code: int | None = None
    with (logs / SRUN_LOG).open("wb") as log:
        srun = step.srun = _Srun.start(argv, env)
        try:
            async with trio.open_nursery() as nursery:
                read = [trio.Event(), trio.Event()]  # srun's stdout and stderr, to their end
                nursery.start_soon(_lines, srun.stdout, log, step.event, read[0])
                nursery.start_soon(_lines, srun.stderr, log, step.report, read[1])
                with trio.move_on_after(bound) as scope:
                    code = await srun.wait()
                if scope.cancelled_caught:
                    step.fail(
                        RoleOutcome(
                            -1,
                            None,
                            f"still running {LAUNCH_SLACK:g} s past the session deadline "
                            f"({deadline:g} s)",
                        )
                    )
                    with trio.move_on_after(STOP_WAIT):
                        code = await srun.wait()
                # What srun wrote before it ended is read to its end.
                with trio.move_on_after(STOP_WAIT):
                    for each in read:
                        await each.wait()
                nursery.cancel_scope.cancel()
        finally:
            # However the launch ends: a signal to alpha (SIGINT, SIGTERM, SIGHUP) arrives
            # here as an interrupt, which alpha run reports; the step is ended all the same.
            await srun.aclose()
            # Slurm's step cleanup: every task of it gone on every node, before we return.
            with trio.move_on_after(STEP_GONE_WAIT):
                while await trio.to_thread.run_sync(_step_listed, allocation.job, step_name):
                    await trio.sleep(_POLL)
    step.settle()
    _settle(step, code)
    return ledger.result


def _settle(step: _Step, code: int | None) -> None:
    """The failure to name first: Slurm's end of the job when it ended it, else the ledger's
    first by the clocks, else srun's own failure."""
    ledger = step.ledger
    stepd: list[str] = []
    for path in step.node_logs:
        stepd += _role_cause(path, labelled=True)[2]
    result = ledger.close()
    result.elapsed_s = time.monotonic() - step.started
    if code == 0 and result.first_to_fail is None:
        return
    ended = _slurm_end(step.allocation, stepd)
    if ended is not None:
        # Slurm's signals reach every role at once: whatever a role logged after them (a
        # peer lost, an abort) follows from Slurm's end, which is the failure to name.
        result.first_to_fail = RoleOutcome(
            -1, None, error_line(ended), failed_at=time.time(), error=ended
        )
    elif result.first_to_fail is None:
        said = [line for line in _srun_lines(step) if line.startswith("srun: error")]
        result.first_to_fail = RoleOutcome(
            -1,
            code,
            f"srun exited {code} with no role failing: {said[-1] if said else 'no message'}; "
            f"its log: {step.specs[0].log.parent / SRUN_LOG}",
            failed_at=time.time(),
        )


def _srun_lines(step: _Step) -> list[str]:
    path = step.specs[0].log.parent / SRUN_LOG
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _slurm_end(allocation: Allocation, stepd: list[str]) -> AlphaError | None:
    """Slurm's own end of the job, if it ended it: the job's record (``scontrol show job``),
    else what slurmstepd wrote into the logs (the time limit, a node failure)."""
    said = ended_by(stepd)
    line = "" if said is None else said[1]
    try:
        ended = _job_ended(allocation.record(), line)
    except SlurmUnavailable:
        ended = None  # the job is gone from the controller's records already
    if ended is not None:
        return ended
    if said is not None and said[0] == TIME_LIMIT:
        return JobTimeLimit(f"Slurm ended job {allocation.job} at its time limit: {line}")
    if said is not None and said[0] == NODE_FAILURE:
        return NodeUnreachable(f"Slurm ended job {allocation.job} for a node failure: {line}")
    return None
