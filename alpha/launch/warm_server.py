# alpha: the warm starter of a launch (alpha/launch/warm_server.py, run as python -c TEXT FD)
"""The warm starter: one interpreter that has imported trio and numpy, and forks a participant
for each role the launcher asks for (``alpha launch --warm``, ``docs/launch.md``).

Starting a participant costs about a third of a second of CPU, nearly all of it importing
trio and numpy; a fork of an interpreter that already did costs a few milliseconds. Each child
then runs its own artifact exactly as ``python ARTIFACT`` would: the artifact checks itself
and the shared runtime beside it, and imports the ``alpha`` of that runtime (this program
imports no ``alpha``, so none is shared).

The launcher runs this file's text as ``python -c TEXT FD``, FD one end of a ``SOCK_SEQPACKET``
socket pair. Each message is one JSON object:

- launcher → here: ``{"op": "start", "id": N, "role": R, "argv": [PYTHON, ARTIFACT],
  "env": {...}}`` with
  three file descriptors (the child's stdin, stdout and stderr) passed along
  (``SCM_RIGHTS``); here → launcher: ``{"op": "started", "id": N, "pid": P}``, or
  ``{"op": "refused", "id": N, "error": TEXT}``.
- launcher → here: ``{"op": "watch", "pid": P}`` once the launcher holds a pidfd of P. Only
  then is P reaped, so its pid cannot be reused while the launcher may still signal it.
- here → launcher: ``{"op": "exit", "pid": P, "code": C}``, C as ``Popen.returncode`` (minus
  the signal that killed it).

It runs in a session of its own, as its children do, so a terminal's signals do not reach
it; it ignores SIGINT, SIGTERM and SIGHUP all the same (a signal sent to it alone, or to a group
it is in, is the launcher's to act on: the launcher stops the run) and
exits when the launcher's end of the socket closes, whatever became of the launcher; its
children then find their parent gone (``LauncherLost``). It imports nothing of ``alpha``: its
text is run on its own.

Its failpoints (``ALPHA_FAILPOINTS``, ``docs/launch.md``) stop it with SIGSTOP before it says
it is ready (``warm.ready@0``), before it forks role R (``warm.forking@R``), after it forked
role R and before it tells the launcher (``warm.forked@R``), and once the launcher's end of its
socket closed (``warm.closing@0``), so that a test can kill or stall it at exactly that
moment.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Mapping
from typing import Any

MAX_MESSAGE = 1 << 20  # bytes: a start carries the environment, a few kilobytes
FAILPOINTS_ENV = "ALPHA_FAILPOINTS"  # as alpha.failpoints.FAILPOINTS_ENV


def _retitle(argv: list[str]) -> None:
    """Make this process's command line (``/proc/PID/cmdline``, what ``ps`` and ``pgrep -f``
    show) read ``argv``, as if it had been started as ``python ARTIFACT``: the bytes of the
    original command line are overwritten in place, the rest zeroed (what ``setproctitle``
    does). This server's own command line, its whole text, leaves room for any artifact path;
    one that does not fit leaves the line as it was."""
    try:
        # As alpha.launch.proc.parse_stat (the one parser; this server imports nothing of
        # alpha): the fields follow the command name's last ")".
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end (fields 48, 49)
    except (OSError, ValueError, IndexError):
        return
    title = b"\0".join(word.encode() for word in argv) + b"\0"
    if start <= 0 or len(title) > end - start:
        return
    import ctypes

    ctypes.memmove(start, title.ljust(end - start, b"\0"), end - start)


def _child(
    argv: list[str], env: dict[str, str], fds: list[int], keep_closed: list[int], gate: int
) -> None:
    """In the forked child: become ``python ARTIFACT`` with the given fds and environment, once
    the server has told the launcher this child's pid (a byte on ``gate``). A server that dies
    or stalls before (its end of ``gate`` closes unwritten) leaves a child no one knows of: it
    exits at once instead of running a role the launcher cannot see or stop."""
    try:
        for fd in keep_closed:
            os.close(fd)
        if os.read(gate, 1) != b"+":
            os._exit(1)
        os.close(gate)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        _retitle(argv)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(env)
        # As ``python ARTIFACT`` has it: the artifact first on the path, no current folder.
        sys.path[:] = [entry for entry in sys.path if entry not in ("", os.getcwd())]
        sys.argv = argv[1:]
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        import runpy

        code: Any = 0
        try:
            runpy.run_path(argv[1], run_name="__main__")
        except SystemExit as stop:
            code = stop.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException as error:  # outside the participant's own handling: one line
        if os.environ.get("ALPHA_TRACEBACK") == "1":  # as alpha.artifact.participant.TRACEBACK_ENV
            traceback.print_exc()
        text = " ".join(str(error).split())  # as alpha.errors.one_line: nothing of alpha here
        print(f"role ?: failed: {type(error).__name__}: {text}", file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _failpoints(environ: Mapping[str, str]) -> set[str]:
    """The warm starter's own failpoints that ``ALPHA_FAILPOINTS`` asks for (``warm.ready@0``,
    ``warm.forking@ROLE``, ``warm.forked@ROLE``, ``warm.closing@0``: ``alpha/failpoints.py``,
    which this program does not import)."""
    entries = (entry.strip() for entry in environ.get(FAILPOINTS_ENV, "").split(","))
    return {entry for entry in entries if entry.startswith("warm.")}


def _reach(point: str, requested: set[str]) -> None:
    """Stop here (SIGSTOP) if ``point`` is requested: whoever asked kills or continues it."""
    if point in requested:
        os.kill(os.getpid(), signal.SIGSTOP)


def serve(control: socket.socket, requested: set[str]) -> None:
    """Start children on request and report their exits until ``control`` closes.

    It waits with ``poll``, not ``select``: a launch of many roles has the launcher pass
    descriptors numbered past ``FD_SETSIZE`` (1024), and this process holds a pidfd per child."""
    pidfds: dict[int, int] = {}  # pidfd -> pid, for children the launcher watches
    unwatched: set[int] = set()  # children started, not yet acknowledged
    listening = control.fileno()
    poller = select.poll()
    poller.register(listening, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll()}
        for fd in ready:
            if fd == listening:
                continue
            pid = pidfds.pop(fd)
            poller.unregister(fd)
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            _send(control, {"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})
        if listening not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 3)
        except ConnectionResetError:
            data, fds = b"", []
        if not data:
            _reach("warm.closing@0", requested)
            return  # the launcher is gone; the children find their parent gone
        message = json.loads(data)
        if message["op"] == "watch":
            pid = message["pid"]
            if pid in unwatched:
                unwatched.discard(pid)
                pidfd = os.pidfd_open(pid)
                pidfds[pidfd] = pid
                poller.register(pidfd, select.POLLIN)
            continue
        _reach(f"warm.forking@{message.get('role')}", requested)
        gate, opened = os.pipe()  # the child runs once the launcher was told its pid
        try:
            pid = os.fork()
        except OSError as error:
            for fd in (*fds, gate, opened):
                os.close(fd)
            _send(control, {"op": "refused", "id": message["id"], "error": str(error)})
            continue
        if pid == 0:
            _child(message["argv"], message["env"], fds, [control.fileno(), opened, *pidfds], gate)
        for fd in (*fds, gate):
            os.close(fd)
        unwatched.add(pid)
        try:
            _reach(f"warm.forked@{message.get('role')}", requested)
            _send(control, {"op": "started", "id": message["id"], "pid": pid})
            os.write(opened, b"+")
        finally:
            os.close(opened)


class _LauncherGone(Exception):
    """The launcher's end of the socket is closed: nothing is left to serve."""


def _send(control: socket.socket, message: dict[str, object]) -> None:
    try:
        control.send(json.dumps(message).encode())
    except OSError:  # reset or broken: the launcher is gone
        raise _LauncherGone from None


def main(argv: list[str]) -> int:
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    control = socket.socket(fileno=int(argv[0]))
    # What every participant imports first, once for all of them. One BLAS thread (the
    # launcher's environment says so, as for any participant), so no thread runs here: a fork
    # copies only the thread that calls it.
    import numpy  # noqa: F401
    import trio  # noqa: F401

    tasks = len(os.listdir("/proc/self/task"))
    if tasks != 1:
        _send(control, {"op": "unfit", "error": f"{tasks} threads run here; forking is unsafe"})
        return 1
    requested = _failpoints(os.environ)
    try:
        _reach("warm.ready@0", requested)
        _send(control, {"op": "ready", "pid": os.getpid()})
        serve(control, requested)
    except _LauncherGone:
        pass  # the children find their parent gone
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
