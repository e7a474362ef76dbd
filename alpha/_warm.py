"""Warm starts: the launcher's side of the warm starter (``alpha._warm_server``), one
interpreter that has imported trio and numpy and forks a participant per role, so that
starting many roles on few cores costs one import of each rather than one per role
(``alpha launch --warm``, ``docs/launch.md``).

:class:`WarmStarter` starts the server and asks it for children; each is a
:class:`WarmProcess`, which the launcher handles as it handles a ``trio.Process``: its pid, its
stdin and stdout, ``wait()`` and ``kill()``. The launcher holds a pidfd of every child from the
moment it learns its pid, before the server may reap it, so a signal it sends can never reach
another process that took the pid over. If the server dies, every child it started is killed,
and the launcher is told (``on_lost``).
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

from alpha._artifact_entry import BLAS_THREADS
from alpha.runtime.parent import LAUNCHER_PID_ENV

__all__ = ["WarmProcess", "WarmStarter"]

_SERVER: Final = Path(__file__).with_name("_warm_server.py")
_MAX_MESSAGE: Final = 1 << 16
READY_WAIT: Final = 60.0
"""Seconds the server may take to import trio and numpy and say it is ready."""
ORPHAN_WAIT: Final = 10.0
"""Seconds to wait for a child killed after the server died to end (a SIGKILL takes
milliseconds)."""


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
        if self.exited_at is None and select.select([self.pidfd], [], [], 0)[0]:
            self.exited_at = time.monotonic()
        return self.exited_at is not None or self.returncode is not None

    def kill(self) -> None:
        """SIGKILL, through the pidfd: never another process, even once this one is gone."""
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


class WarmStarter:
    """The warm starter of one launch: ``await nursery.start(starter.serve)``, then
    :meth:`spawn` each role, and :meth:`close` once every child has been waited for.
    ``environment`` is the children's; ``on_lost`` is called, with why, if the server ends
    before :meth:`close`."""

    def __init__(self, environment: Mapping[str, str], on_lost: Callable[[str], None]) -> None:
        self.environment = dict(environment)
        self.on_lost = on_lost
        self.pid = 0
        self.children: dict[int, WarmProcess] = {}
        self._pending: dict[int, trio.MemorySendChannel[dict[str, object]]] = {}
        self._next = 0
        self._process: trio.Process | None = None
        self._control: trio.socket.SocketType | None = None
        self._closing = False
        self._sending = trio.Lock()  # one message at a time on the socket
        self._followers: trio.Nursery | None = None  # each child's follow()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the server, report ready, then relay its messages until it ends.

        Raises:
            OSError: the server did not start or say it is ready within ``READY_WAIT`` (the
                launcher then starts every role in an interpreter of its own).
        """
        # Numpy is imported there as a participant imports it: with one BLAS thread unless the
        # environment says otherwise, and a BLAS thread would make forking unsafe (the server
        # then refuses to serve, and every role starts an interpreter of its own).
        server_environment = dict(self.environment)
        server_environment.setdefault(*BLAS_THREADS)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = await trio.lowlevel.open_process(
                [sys.executable, "-c", _SERVER.read_text(), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=server_environment,
            )
        finally:
            theirs.close()
        self._control = trio.socket.from_stdlib_socket(ours)
        with trio.move_on_after(READY_WAIT):
            first = await self._control.recv(_MAX_MESSAGE)
            message = json.loads(first) if first else {"op": "gone"}
            if message["op"] == "ready":
                self.pid = int(message["pid"])
        if not self.pid:
            await self._stop()
            raise OSError(
                "the warm starter did not start: "
                f"{message.get('error', 'it did not say it was ready') if first else 'it exited'}"
            )
        # Its children's launcher is the server: their parent, whose end they watch.
        self.environment[LAUNCHER_PID_ENV] = str(self.pid)
        try:
            async with trio.open_nursery() as followers:
                self._followers = followers
                task_status.started()
                await self._relay()
        finally:
            with trio.CancelScope(shield=True):
                await self._stop()

    async def _relay(self) -> None:
        """Relay the server's messages until it ends; then finish every child it started."""
        assert self._control is not None
        try:
            while True:
                data = await self._control.recv(_MAX_MESSAGE)
                if not data:
                    break  # the server ended: asked to (close), or not
                message = json.loads(data)
                if message["op"] == "exit":
                    child = self.children.get(int(message["pid"]))
                    if child is not None:
                        child.ended(int(message["code"]))
                else:
                    channel = self._pending.pop(int(message["id"]))
                    await channel.send(message)
        finally:
            with trio.CancelScope(shield=True):
                for channel in self._pending.values():
                    channel.close()  # a start still waiting gets no answer now
                self._pending.clear()
                if not self._closing:
                    self.on_lost(f"the warm starter (pid {self.pid}) ended during the run")
                await self._orphans()

    async def _orphans(self) -> None:
        """Children the server can no longer report: killed through their pidfds, and waited
        for through them (a pidfd is readable once its process has ended, whoever its
        parent)."""
        for child in self.children.values():
            if child.returncode is None:
                child.kill()
                # Bounded: were the launch being cancelled, its follow() would be too.
                with trio.move_on_after(ORPHAN_WAIT):
                    await child._gone.wait()
                child.ended(-signal.SIGKILL)

    async def spawn(self, argv: Sequence[str], log: int) -> WarmProcess:
        """Fork a participant running ``argv`` (``[PYTHON, ARTIFACT]``), its stderr ``log``,
        with the launch's environment, in which its launcher is the server (its parent).

        Raises:
            OSError: the server could not fork.
        """
        assert self._control is not None
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        ident = self._next
        self._next += 1
        send, receive = trio.open_memory_channel[dict[str, object]](1)
        self._pending[ident] = send
        message = {
            "op": "start",
            "id": ident,
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
        finally:
            os.close(stdin_read)
            os.close(stdout_write)
        try:
            reply = await receive.receive()
        except trio.EndOfChannel:
            reply = {"op": "refused", "error": "it ended"}
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
        # Only now may the server reap it: this side holds its pidfd.
        async with self._sending:
            await self._control.send(json.dumps({"op": "watch", "pid": pid}).encode())
        return child

    def close(self) -> None:
        """Ask the server to end (once every child has been waited for): it ends when its end
        of the socket reads end-of-file, and :meth:`serve` returns after it."""
        self._closing = True
        if self._control is not None:
            with contextlib.suppress(OSError):  # it has ended already
                self._control.shutdown(socket.SHUT_WR)

    async def _stop(self) -> None:
        with trio.CancelScope(shield=True):
            if self._control is not None:
                self._control.close()
            if self._process is not None:
                await self._process.wait()
