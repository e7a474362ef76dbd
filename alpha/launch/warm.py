"""Warm starts: the launcher's side of the warm starter (``alpha.launch.warm_server``), one
interpreter that has imported trio and numpy and forks a participant per role, so that
starting many roles on few cores costs one import of each rather than one per role
(``alpha launch --warm``, ``docs/launch.md``).

:class:`WarmStarter` starts the server and asks it for children; each is a
:class:`WarmProcess`, which the launcher handles as it handles a ``trio.Process``: its pid, its
stdin and stdout, ``wait()`` and ``kill()``. The launcher holds a pidfd of every child from the
moment it learns its pid, before the server may reap it, so a signal it sends can never reach
another process that took the pid over. If the server dies, every child it started is killed,
and the launcher is told (``on_lost``).

Every wait for the server is bounded. While it owes the launcher an answer (that it is
ready, a start, a child's exit status, its own exit once asked to end) a watchdog looks at
its state every :data:`STALL_POLL` seconds: stopped (SIGSTOP, a debugger) for
:data:`STALL_GRACE` seconds, or silent past :data:`READY_WAIT` or :data:`REPLY_WAIT`, it has
stalled (:class:`~alpha.errors.WarmStarterStalled`), and the launcher kills it. One that ends
unasked is lost (:class:`~alpha.errors.WarmStarterLost`); a socket reset (it died with a
message of ours unread) is an end like any other.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import trio

from alpha.artifact.environ import BLAS_THREADS
from alpha.errors import AlphaError, WarmStarterLost, WarmStarterStalled
from alpha.launch.proc import STOPPED_HOW, process_state
from alpha.runtime.parent import LAUNCHER_PID_ENV

__all__ = ["STOPPED_HOW", "StarterUnfit", "WarmProcess", "WarmStarter"]

_SERVER: Final = Path(__file__).with_name("warm_server.py")
_MAX_MESSAGE: Final = 1 << 16
WARM_RUNTIME_ENV: Final = "ALPHA_WARM_RUNTIME"
"""The starter's environment variable naming the runtime it preloads (as ``warm_server``)."""
WARM_ARTIFACT_ENV: Final = "ALPHA_WARM_ARTIFACT"
"""The starter's environment variable naming the artifact whose loader it compiles."""
READY_WAIT: Final = 60.0
"""Seconds the server may take to import trio and numpy and say it is ready."""
ORPHAN_WAIT: Final = 10.0
"""Seconds to wait for a child killed after the server died to end (a SIGKILL takes
milliseconds), and for the server itself to end once its socket closed."""
REPLY_WAIT: Final = 60.0
"""Seconds the server may stay silent, running, while it owes the launcher an answer (a
start, a child's exit status, its own end once asked to): a fork takes milliseconds, and even
1,024 starts queued on two cores busy with the roles already forked come a few a second; a
minute of silence means it is stuck."""
STALL_POLL: Final = 0.1
"""Seconds between two looks at the server's state (``/proc/PID/stat``) while it owes an
answer: a stopped server is named within a tenth of a second of its grace."""
STALL_GRACE: Final = 1.0
"""Seconds the server may be seen stopped (state ``T`` or ``t``) while it owes an answer
before it counts as stalled: a tracer stops it at each system call for microseconds, a
SIGSTOP until someone continues it."""


def _readable(fd: int) -> bool:
    """Whether ``fd`` is readable now (a pidfd: its process has ended). ``poll``, not
    ``select``: a launch of many roles holds descriptors numbered past ``FD_SETSIZE``
    (1024), which ``select`` cannot take."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class StarterUnfit(Exception):
    """The server refused to serve (a thread runs in it, so forking is unsafe): not a fault,
    the launch starts every role in an interpreter of its own."""


class WarmProcess:
    """A participant the warm starter forked, handled like a ``trio.Process``.

    ``exited_at`` is when it ended, on the monotonic clock, as this process saw it through its
    own pidfd (as the launcher sees a child of its own end), however late the starter's report
    of its exit status comes."""

    def __init__(self, pid: int, stdin: trio.lowlevel.FdStream, stdout: trio.lowlevel.FdStream):
        self.pid = pid
        self.stdin: trio.lowlevel.FdStream | None = stdin
        self.stdout: trio.lowlevel.FdStream | None = stdout
        self.returncode: int | None = None
        self.exited_at: float | None = None
        self.pidfd = os.pidfd_open(pid)
        # It ended, but the server was lost before it reported how: returncode is then a
        # placeholder (-SIGKILL), and the launcher says the status is lost.
        self.status_lost = False
        self.killed = False  # the launcher sent it SIGKILL: an end that follows is that
        self._ended = trio.Event()  # its exit status is known
        self._gone = trio.Event()  # it has ended (its pidfd is readable)

    async def follow(self) -> None:
        """Note the moment it ends; then, once its status is known too, close the pidfd."""
        try:
            await trio.lowlevel.wait_readable(self.pidfd)
            self.has_ended()
            self._gone.set()
            await self._ended.wait()
        finally:
            os.close(self.pidfd)

    def has_ended(self) -> bool:
        """Whether it has ended, its status reported by the starter or not yet: its pidfd is
        readable (a ``trio.Process``'s ``returncode`` tells the same, as it reaps its own)."""
        if self.exited_at is None and _readable(self.pidfd):
            self.exited_at = time.monotonic()
        return self.exited_at is not None or self.returncode is not None

    def kill(self) -> None:
        """SIGKILL, through the pidfd: never another process, even once this one is gone."""
        self.killed = True
        self.send_signal(signal.SIGKILL)

    def send_signal(self, number: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it exited; its code is on its way
                signal.pidfd_send_signal(self.pidfd, number)

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    def ended(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._ended.set()

    @property
    def unreported(self) -> bool:
        """It has ended and the server owes its exit status."""
        return self.returncode is None and (self.exited_at is not None or self._gone.is_set())


class WarmStarter:
    """The warm starter of one launch: ``await nursery.start(starter.serve)``, then
    :meth:`spawn` each role, and :meth:`close` once every child has been waited for.
    ``environment`` is the children's. ``on_lost`` is called once, with the fault
    (:class:`~alpha.errors.WarmStarterLost` or :class:`~alpha.errors.WarmStarterStalled`) and
    whether it harms the run (a start or a role's outcome was still owed), if the server ends
    otherwise than asked to by :meth:`close` after it was ready. ``runtime``, when given, is the
    runtime (``runtime-SHA256.pyz``) the roles' artifacts bind: the server checks it and imports
    what every participant imports of it once for all its children (``preload_refused`` says
    why not, once it is ready); ``artifact``, with it, one of those artifacts, whose loader the
    server compiles once for all its children."""

    def __init__(
        self,
        environment: Mapping[str, str],
        on_lost: Callable[[AlphaError, bool], None],
        runtime: Path | None = None,
        artifact: Path | None = None,
    ) -> None:
        self.environment = dict(environment)
        self.on_lost = on_lost
        # The runtime whose participant modules the server imports once for every child
        # (alpha.launch.warm_server.preload), and, once it is ready, why it did not (None: it
        # did, or there was none to import).
        self.runtime = runtime
        self.preload_refused: str | None = None
        # An artifact whose loader (every artifact of a compile carries the same) the server
        # compiles once for every child (alpha.launch.warm_server.precompile_loader).
        self.artifact = artifact
        self.pid = 0
        self.children: dict[int, WarmProcess] = {}
        self.lost: AlphaError | None = None  # why the server is gone, once it is
        self.discarded: list[int] = []  # children killed on arrival (their start given up)
        self._pending: dict[int, trio.MemorySendChannel[dict[str, object]]] = {}
        self._next = 0
        self._process: trio.Process | None = None
        self._control: trio.socket.SocketType | None = None
        self._ready = False
        self._closing = False
        self._stall: WarmStarterStalled | None = None  # found by the watchdog, which killed it
        self._heard = 0.0  # when the server last said anything, or last owed nothing
        self._gone = trio.Event()  # the relay has seen it end
        # When the relay saw the server end (its socket closed), on the monotonic clock: None
        # while it runs, or when the watchdog ended it (a stall is not an exit).
        self.ended_at: float | None = None
        # When the watchdog found it stalled, on the monotonic clock, just before it killed it:
        # every role it had started can find its parent gone (LauncherLost) only after that.
        self.stalled_at: float | None = None
        self._sending = trio.Lock()  # one message at a time on the socket
        self._followers: trio.Nursery | None = None  # each child's follow()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the server, report ready, then relay its messages until it ends.

        Raises:
            StarterUnfit: the server refused to serve (forking would be unsafe there).
            WarmStarterLost: the server ended before it said it was ready.
            WarmStarterStalled: it was stopped, or silent past ``READY_WAIT``, before it said
                it was ready; it was killed.

            In each case the launcher starts every role in an interpreter of its own.
        """
        # Numpy is imported there as a participant imports it: with one BLAS thread unless the
        # environment says otherwise, and a BLAS thread would make forking unsafe (the server
        # then refuses to serve, and every role starts an interpreter of its own).
        server_environment = dict(self.environment)
        server_environment.setdefault(*BLAS_THREADS)
        # What it preloads, named in its environment, not on its command line: a role's
        # artifact there would make the starter one more process that names it (pgrep -f).
        for name in (WARM_RUNTIME_ENV, WARM_ARTIFACT_ENV):
            server_environment.pop(name, None)
        if self.runtime is not None:
            server_environment[WARM_RUNTIME_ENV] = str(self.runtime)
            if self.artifact is not None:
                server_environment[WARM_ARTIFACT_ENV] = str(self.artifact)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = await trio.lowlevel.open_process(
                [
                    sys.executable,
                    "-c",
                    _SERVER.read_text(),
                    str(theirs.fileno()),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=server_environment,
                # Its own session, which the roles it forks share: no terminal's signal reaches
                # them; the launcher stops them (alpha.launch.launcher).
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._control = trio.socket.from_stdlib_socket(ours)
        self._heard = trio.current_time()
        try:
            async with trio.open_nursery() as waiting:
                waiting.start_soon(self._watch_over)
                first = await self._receive()
                waiting.cancel_scope.cancel()
            message = json.loads(first) if first else {"op": "gone"}
            if message.get("op") == "unfit":
                raise StarterUnfit(str(message.get("error")))
            if message.get("op") != "ready":
                raise await self._fault()
            self.pid = int(message["pid"])
            refused = message.get("preload_refused")
            self.preload_refused = None if self.runtime is None or refused is None else str(refused)
            self._ready = True
            # Its children's launcher is the server: their parent, whose end they watch.
            self.environment[LAUNCHER_PID_ENV] = str(self.pid)
            async with trio.open_nursery() as followers:
                self._followers = followers
                followers.start_soon(self._watch_over)
                task_status.started()
                await self._relay()
                followers.cancel_scope.cancel()  # the watchdog; every child was finished
        finally:
            with trio.CancelScope(shield=True):
                await self._stop()

    async def _receive(self) -> bytes:
        """The server's next message, or ``b""`` once it ended: end-of-file, or a reset (it
        died with a message of ours unread)."""
        assert self._control is not None
        try:
            data = await self._control.recv(_MAX_MESSAGE)
        except ConnectionResetError:
            # Linux reports the reset before the messages still queued (a "started" among
            # them: a child this side must know of), and only once: read on to the end.
            try:
                data = await self._control.recv(_MAX_MESSAGE)
            except OSError:
                return b""
        except OSError:
            return b""
        self._heard = trio.current_time()
        return data

    def _owed(self) -> bool:
        """Whether the server owes the launcher an answer now."""
        return (
            not self._ready
            or self._closing
            or bool(self._pending)
            or any(child.unreported for child in self.children.values())
        )

    async def _watch_over(self) -> None:
        """Kill the server once it has stalled while it owes an answer: stopped for
        ``STALL_GRACE`` seconds, or silent past ``READY_WAIT`` (before it is ready) or
        ``REPLY_WAIT``. What it was doing is then the fault :meth:`_fault` names."""
        assert self._process is not None
        stopped_since: float | None = None
        while True:
            await trio.sleep(STALL_POLL)
            now = trio.current_time()
            if not self._owed():
                self._heard = now  # silence while nothing is owed is not a stall
                stopped_since = None
                continue
            state = process_state(self._process.pid)
            how = None
            if state in STOPPED_HOW:
                stopped_since = now if stopped_since is None else stopped_since
                if now - stopped_since >= STALL_GRACE:
                    how = f"was {STOPPED_HOW[state]}"
            else:
                stopped_since = None
            limit = REPLY_WAIT if self._ready else READY_WAIT
            if how is None and now - self._heard >= limit:
                how = f"did not answer within {limit:g} s"
            if how is not None:
                when, outcome, _ = self._moment()
                self.stalled_at = time.monotonic()
                self._stall = WarmStarterStalled(
                    pid=self._process.pid,
                    how=how,
                    when=when,
                    outcome=f"the launcher killed it; {outcome}",
                )
                self._process.kill()  # a SIGKILL ends a stopped process too
                return

    def _moment(self) -> tuple[str, str, bool]:
        """What the launch was waiting for from the server: when a fault struck, in words, what
        it means for the run, and whether it harms the run."""
        running = [child for child in self.children.values() if child.returncode is None]
        unreported = [child for child in running if child.unreported]
        if not self._ready:
            return (
                "before it was ready",
                "every role starts in an interpreter of its own instead, as with --cold",
                False,
            )
        if self._pending:
            return (
                f"while it was starting {len(self._pending)} role(s)",
                "the launcher stopped every role it had started, and nothing was committed",
                True,
            )
        if len(running) > len(unreported):
            return (
                f"while {len(running) - len(unreported)} role(s) it started were running",
                "the launcher stopped every role it had started",
                True,
            )
        if unreported:
            return (
                f"after {len(unreported)} role(s) it started had ended, before it reported how",
                "their exit status is lost: the run's commit record (reports/commit.json) says "
                "whether the run committed",
                True,
            )
        return (
            "after every role it started had ended",
            "every role's outcome was known by then, so the run's result stands",
            False,
        )

    async def _fault(self) -> AlphaError:
        """Why the server ended: the stall the watchdog found, or how it died."""
        if self._stall is not None:
            return self._stall
        assert self._process is not None
        with trio.move_on_after(ORPHAN_WAIT):
            await self._process.wait()  # it is ending: its socket closed
        code = self._process.returncode
        if code is None:
            how = "closed its socket"
        elif code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        when, outcome, _ = self._moment()
        return WarmStarterLost(pid=self._process.pid, how=how, when=when, outcome=outcome)

    async def _relay(self) -> None:
        """Relay the server's messages until it ends; then finish every child it started."""
        try:
            while True:
                data = await self._receive()
                if not data:
                    break  # the server ended: asked to (close), or not
                message = json.loads(data)
                if message["op"] == "exit":
                    child = self.children.get(int(message["pid"]))
                    if child is not None:
                        child.ended(int(message["code"]))
                else:
                    channel = self._pending.pop(int(message["id"]), None)
                    if channel is not None:
                        await channel.send(message)
                    elif message["op"] == "started":
                        await self._discard(int(message["pid"]))
        finally:
            if self._stall is None:
                self.ended_at = time.monotonic()
            with trio.CancelScope(shield=True):
                _, _, harmful = self._moment()
                fault = await self._fault()
                asked = self._closing and self._stall is None
                if not (asked and self._process is not None and self._process.returncode == 0):
                    self.lost = fault
                for channel in self._pending.values():
                    channel.close()  # a start still waiting gets no answer now
                self._pending.clear()
                self._gone.set()
                if self.lost is not None:
                    self.on_lost(self.lost, harmful)
                await self._orphans()

    async def _discard(self, pid: int) -> None:
        """Kill a child whose start the launch no longer waits for (it stopped meanwhile):
        through a pidfd of this side's, before the server may reap it, then let it reap."""
        self.discarded.append(pid)
        with contextlib.suppress(ProcessLookupError):
            pidfd = os.pidfd_open(pid)
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
        assert self._control is not None
        with contextlib.suppress(OSError, trio.ClosedResourceError):
            async with self._sending:
                await self._control.send(json.dumps({"op": "watch", "pid": pid}).encode())

    async def _orphans(self) -> None:
        """Children the server can no longer report: killed through their pidfds, and waited
        for through them (a pidfd is readable once its process has ended, whoever its
        parent). One that had ended already keeps no status: it is marked lost."""
        for child in self.children.values():
            if child.returncode is None:
                if child.unreported and not child.killed:
                    child.status_lost = True
                else:
                    child.kill()
                    # Bounded: were the launch being cancelled, its follow() would be too.
                    with trio.move_on_after(ORPHAN_WAIT):
                        await child._gone.wait()
                child.ended(-signal.SIGKILL)

    async def _lost_now(self) -> AlphaError:
        """The fault that ended the server, once the relay has seen it end (a send that failed
        comes just before)."""
        with trio.move_on_after(ORPHAN_WAIT):
            await self._gone.wait()
        if self.lost is not None:
            return self.lost
        return WarmStarterLost(
            pid=self.pid, how="stopped answering", when="while it was starting roles",
            outcome="the launcher stopped every role it had started",
        )  # fmt: skip

    async def spawn(self, argv: Sequence[str], log: int, role: int) -> WarmProcess:
        """Fork a participant running ``argv`` (``[PYTHON, ARTIFACT]``) for ``role``, its
        stderr ``log``, with the launch's environment, in which its launcher is the server
        (its parent).

        Raises:
            OSError: the server could not fork (it said why).
            WarmStarterLost: the server ended before it answered.
            WarmStarterStalled: the server stalled before it answered, and was killed.
        """
        if self.lost is not None or self._control is None:
            raise self.lost or await self._lost_now()
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        ident = self._next
        self._next += 1
        send, receive = trio.open_memory_channel[dict[str, object]](1)
        self._pending[ident] = send
        message = {
            "op": "start",
            "id": ident,
            "role": role,
            "argv": list(argv),
            "env": self.environment,
        }
        try:
            async with self._sending:
                await self._control.sendmsg(
                    [json.dumps(message).encode()],
                    [
                        (
                            socket.SOL_SOCKET,
                            socket.SCM_RIGHTS,
                            array.array("i", [stdin_read, stdout_write, log]),
                        )
                    ],
                )
        except (OSError, trio.ClosedResourceError):
            # A reset or a closed socket: the server is gone, and the relay says why.
            self._pending.pop(ident, None)
            os.close(stdin_write)
            os.close(stdout_read)
            raise await self._lost_now() from None
        finally:
            os.close(stdin_read)
            os.close(stdout_write)
        try:
            reply = await receive.receive()
        except BaseException as error:
            # No answer now: the server is gone, or the launch stopped this start (its child,
            # should it come, is killed on arrival: _relay).
            self._pending.pop(ident, None)
            os.close(stdin_write)
            os.close(stdout_read)
            if isinstance(error, trio.EndOfChannel):
                raise await self._lost_now() from None
            raise
        if reply["op"] != "started":
            os.close(stdin_write)
            os.close(stdout_read)
            raise OSError(f"the warm starter could not start {argv[-1]}: {reply.get('error')}")
        pid = int(str(reply["pid"]))
        child = WarmProcess(
            pid, trio.lowlevel.FdStream(stdin_write), trio.lowlevel.FdStream(stdout_read)
        )
        self.children[pid] = child
        assert self._followers is not None
        self._followers.start_soon(child.follow)
        # Only now may the server reap it: this side holds its pidfd. A server gone meanwhile
        # reaps nothing; the relay finishes the child through its pidfd.
        with contextlib.suppress(OSError, trio.ClosedResourceError):
            async with self._sending:
                await self._control.send(json.dumps({"op": "watch", "pid": pid}).encode())
        return child

    def close(self) -> None:
        """Ask the server to end (once every child has been waited for): it ends when its end
        of the socket reads end-of-file, and :meth:`serve` returns after it (a server that
        stalls meanwhile is killed, :data:`STALL_GRACE` or :data:`REPLY_WAIT` later)."""
        self._closing = True
        if self._control is not None:
            with contextlib.suppress(OSError):  # it has ended already
                self._control.shutdown(socket.SHUT_WR)

    async def _stop(self) -> None:
        """Close the socket and reap the server: bounded, it is killed past ``ORPHAN_WAIT``
        (a stopped server never reads the end of its socket)."""
        with trio.CancelScope(shield=True):
            if self._control is not None:
                self._control.close()
            if self._process is not None:
                with trio.move_on_after(ORPHAN_WAIT):
                    await self._process.wait()
                if self._process.returncode is None:
                    self._process.kill()
                    await self._process.wait()
