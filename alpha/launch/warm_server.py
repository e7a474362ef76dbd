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

import base64
import gc
import hashlib
import json
import os
import re
import select
import signal
import socket
import sys
import time
import traceback
import types
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any

MAX_MESSAGE = 1 << 20  # bytes: a start carries the environment, a few kilobytes
FAILPOINTS_ENV = "ALPHA_FAILPOINTS"  # as alpha.failpoints.FAILPOINTS_ENV
WARM_RUNTIME_ENV = "ALPHA_WARM_RUNTIME"  # as alpha.launch.warm.WARM_RUNTIME_ENV
WARM_ARTIFACT_ENV = "ALPHA_WARM_ARTIFACT"  # as alpha.launch.warm.WARM_ARTIFACT_ENV
# What every participant imports of its runtime's alpha before it runs its role: the entry its
# loader calls, and the participant the entry runs (alpha/artifact/entry.py). Imported here
# once, from a runtime checked first, they are every child's, shared, instead of imported
# again by each: about 45 ms of CPU and several MiB of private memory a child.
PRELOAD = ("alpha.artifact.entry", "alpha.artifact.participant")
# The module in which this process leaves the loaders it compiled for its children, each under
# the SHA-256 its artifact's __main__.py carries of it (alpha.artifact.build.LOADERS_MODULE).
LOADERS_MODULE = "__alpha_loaders__"
OPEN_L, CLOSE_L = "L = r" + "'" * 3, "'" * 3  # how __main__.py opens and closes L
# A runtime's file name binds its SHA-256 (alpha.artifact.loader.runtime_name).
RUNTIME_FILE = re.compile(r"runtime-([0-9a-f]{64})\.pyz")
HASH_CHUNK = 1 << 20  # bytes read at a time when hashing the runtime


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
    exits at once instead of running a role the launcher cannot see or stop.

    ``keep_closed`` are the server's descriptors this child must not hold while it waits for
    ``gate`` (the socket, the gate's other end); every other one it inherited (the pidfds of the
    children forked before it) is closed at once after, in one ``close_range``, as ``python
    ARTIFACT`` started with ``close_fds`` would not have them either: a thousandth child closes
    them in one call rather than one call each."""
    try:
        for fd in keep_closed:
            os.close(fd)
        if os.read(gate, 1) != b"+":
            os._exit(1)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, _fd_limit())
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


def _fd_limit() -> int:
    """One past the highest descriptor this process may hold."""
    return os.sysconf("SC_OPEN_MAX")


def _alpha_modules() -> list[str]:
    return [name for name in sys.modules if name == "alpha" or name.startswith("alpha.")]


def _forget_alpha() -> None:
    """Drop every module of alpha this process imported: its children import their own."""
    for name in _alpha_modules():
        del sys.modules[name]


def _file_identity(path: str) -> tuple[int, int, int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns


def preload(runtime: str) -> str | None:
    """Import :data:`PRELOAD` from the runtime at ``runtime`` (``runtime-SHA256.pyz``), once for
    every child this process forks, if the file's SHA-256 is the one its name binds, as a
    role's loader checks it before any of its code runs; None once done, else why not (every
    child then imports its own, as a cold start does).

    Each child's loader still checks its own artifact and the runtime that artifact binds, and
    keeps these modules only if they came from that very runtime (``alpha/artifact/loader.py``):
    a child of another runtime imports its own. The file must not change while it is imported
    (the same device, inode, size and modification time before the hash and after the imports),
    and every module of alpha imported must come from it; otherwise none is kept."""
    name = os.path.basename(runtime)
    bound = RUNTIME_FILE.fullmatch(name)
    if bound is None:
        return f"{name} is not a runtime's file name"
    try:
        before = _file_identity(runtime)
        digest = hashlib.sha256()
        with open(runtime, "rb") as handle:
            while chunk := handle.read(HASH_CHUNK):
                digest.update(chunk)
    except OSError as error:
        return f"{name} cannot be read: {error.strerror or error}"
    if digest.hexdigest() != bound[1]:
        return f"{name} does not match the SHA-256 its name binds"
    sys.path.insert(0, runtime)
    try:
        for module in PRELOAD:
            __import__(module)  # as an import statement does (what -X importtime sees)
        after = _file_identity(runtime)
    except Exception as error:
        _forget_alpha()
        return f"importing from {name} failed: {type(error).__name__}: {error}"
    finally:
        sys.path.remove(runtime)
    inside = runtime + os.sep
    strangers = [
        module
        for module in _alpha_modules()
        if not str(getattr(sys.modules[module], "__file__", None) or "").startswith(inside)
    ]
    if after != before or strangers:
        _forget_alpha()
        why = "it changed while it was imported" if after != before else "it is not whole"
        return f"{name}: {why}"
    return None


def precompile_loader(artifact: str) -> str | None:
    """Compile the loader the artifact at ``artifact`` carries in its ``__main__.py`` (the
    string L: a newline, the SHA-256 of the rest, a newline, the loader deflated in base64;
    ``alpha/artifact/build.py``), once for every child this process forks, if L's SHA-256
    checks; the code object goes into :data:`LOADERS_MODULE` under that SHA-256. None once
    done, else why not (every child then compiles its own, as a cold start does).

    A child's ``__main__.py`` checks its own L first, as always, and runs the code object kept
    under its own L's SHA-256 (the same text, compiled the same way), if there is one."""
    name = os.path.basename(artifact)
    try:
        with zipfile.ZipFile(artifact) as archive:
            main = archive.read("__main__.py").decode("latin-1")
    except Exception as error:  # OSError, BadZipFile, KeyError: not an artifact to read
        return f"{name} cannot be read: {type(error).__name__}: {error}"
    opening = main.find(OPEN_L)
    start = opening + len(OPEN_L)
    loader = main[start : main.find(CLOSE_L, start)] if opening >= 0 else ""
    digest = loader[1:65]
    if len(loader) < 66 or hashlib.sha256(loader[66:].encode("latin-1")).hexdigest() != digest:
        return f"{name}: its loader does not match its SHA-256"
    try:
        source = zlib.decompress(base64.b64decode(loader[66:]))
        code = compile(source, "alpha/artifact/loader.py", "exec")
    except Exception as error:  # as the child would fail on it: it compiles its own
        return f"{name}: its loader does not compile: {type(error).__name__}: {error}"
    module = sys.modules.get(LOADERS_MODULE)
    if module is None:
        module = sys.modules[LOADERS_MODULE] = types.ModuleType(LOADERS_MODULE)
        module.__dict__["codes"] = {}
    module.__dict__["codes"][digest] = code
    return None


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
            _child(message["argv"], message["env"], fds, [control.fileno(), opened], gate)
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


NODE_FLAG = "--node"  # as alpha.launch.slurm: this text as a node's starter under srun


def _event(message: dict[str, object]) -> None:
    """One line of a node starter's events on its stdout, which srun carries to the launcher."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _warm_up(runtime: str | None, artifact: str | None) -> tuple[str | None, str | None]:
    """Import numpy and trio, and what every child imports of ``runtime`` and compile the
    loader of ``artifact``, once for all; then freeze every object (see :func:`main`); why the
    runtime and the loader were not, each (None: done)."""
    import numpy  # noqa: F401
    import trio  # noqa: F401

    refused = "no runtime named" if runtime is None else preload(runtime)
    unloaded = "no artifact named" if artifact is None else precompile_loader(artifact)
    gc.collect()
    gc.freeze()
    return refused, unloaded


def node_main(plan_path: str) -> int:
    """A node's starter under srun (``alpha run --slurm``, docs/slurm.md): the roles
    ``plan_path`` names (JSON: ``{"runtime": PATH, "roles": [{"role", "argv", "log"}, ...]}``,
    the runtime the roles' artifacts bind, preloaded as :func:`main` does), each forked warm when
    its argv is ``[THIS PYTHON, ARTIFACT]``, else started as its own program, every one at
    once, its stdin and stdout ``/dev/null`` and its stderr its log; this process is their
    parent and their launcher (``ALPHA_LAUNCHER_PID``), so they stop when it is gone.

    Each start and each end is one JSON line on stdout, which srun carries to the launcher:
    ``{"event": "started", "role": R, "pid": P}``, ``{"event": "exit", "role": R, "code": C,
    "at": T}`` (C as ``Popen.returncode``; T the wall clock when it was reaped), or
    ``{"event": "refused", "role": R, "error": TEXT, "at": T}`` for one that could not be
    started. It returns once every role ended: 0 when every one exited 0, else 1. Slurm's
    signals end it as any task (their default actions), and its roles with it."""
    del sys.path[0]  # this file's folder: a child finds its modules as `python ARTIFACT` does
    with open(plan_path) as file:
        plan: dict[str, Any] = json.load(file)
    entries: list[dict[str, Any]] = plan["roles"]
    warm = [e["argv"][1] for e in entries if e["argv"][:1] == [sys.executable]]
    refused, unloaded = _warm_up(plan.get("runtime"), warm[0] if warm else None)
    for why in (refused, unloaded):
        if why is not None:
            print(f"node starter: each role imports its own: {why}", file=sys.stderr, flush=True)
    forkable = len(os.listdir("/proc/self/task")) == 1  # a fork copies only its own thread
    env = {**os.environ, "ALPHA_LAUNCHER_PID": str(os.getpid())}  # as LAUNCHER_PID_ENV
    null_in = os.open(os.devnull, os.O_RDONLY)
    null_out = os.open(os.devnull, os.O_WRONLY)
    roles: dict[int, int] = {}  # pid -> role
    failed = False
    for entry in entries:
        role, argv = int(entry["role"]), [str(word) for word in entry["argv"]]
        try:
            log = os.open(entry["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as error:
            _event({"event": "refused", "role": role, "error": str(error), "at": time.time()})
            failed = True
            continue
        try:
            if forkable and argv[:1] == [sys.executable] and len(argv) == 2:
                gate, opened = os.pipe()
                os.write(opened, b"+")  # nothing to tell anyone first: it may run at once
                pid = os.fork()
                if pid == 0:
                    _child(argv, env, [null_in, null_out, log], [opened], gate)
                for fd in (gate, opened):
                    os.close(fd)
            else:
                pid = os.posix_spawn(
                    argv[0],
                    argv,
                    env,
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, null_in, 0),
                        (os.POSIX_SPAWN_DUP2, null_out, 1),
                        (os.POSIX_SPAWN_DUP2, log, 2),
                    ],
                )
        except OSError as error:
            _event({"event": "refused", "role": role, "error": str(error), "at": time.time()})
            failed = True
            continue
        finally:
            os.close(log)
        roles[pid] = role
        _event({"event": "started", "role": role, "pid": pid})
    while roles:
        pid, status = os.wait()
        if pid in roles:
            code = os.waitstatus_to_exitcode(status)
            failed = failed or code != 0
            _event({"event": "exit", "role": roles.pop(pid), "code": code, "at": time.time()})
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == [NODE_FLAG]:
        return node_main(argv[1])
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    control = socket.socket(fileno=int(argv[0]))
    # What every participant imports first, once for all of them. One BLAS thread (the
    # launcher's environment says so, as for any participant), so no thread runs here: a fork
    # copies only the thread that calls it.
    import numpy  # noqa: F401
    import trio  # noqa: F401

    # The runtime the launcher names (in this process's environment, if it does): what every
    # participant imports of it; and the loader of the artifact it names, which every artifact
    # of a compile carries. Neither is passed on to the children.
    runtime = os.environ.pop(WARM_RUNTIME_ENV, None)
    artifact = os.environ.pop(WARM_ARTIFACT_ENV, None)
    refused = "no runtime named" if runtime is None else preload(runtime)
    unloaded = "no artifact named" if artifact is None else precompile_loader(artifact)
    # Every object so far goes to the permanent generation, which a child's garbage collector
    # never walks: walking it would write to every object's header, and so copy every page of
    # the shared modules into each child (copy on write).
    gc.collect()
    gc.freeze()
    tasks = len(os.listdir("/proc/self/task"))
    if tasks != 1:
        _send(control, {"op": "unfit", "error": f"{tasks} threads run here; forking is unsafe"})
        return 1
    requested = _failpoints(os.environ)
    try:
        _reach("warm.ready@0", requested)
        ready = {"op": "ready", "pid": os.getpid(), "preload_refused": refused}
        _send(control, {**ready, "loader_refused": unloaded})
        serve(control, requested)
    except _LauncherGone:
        pass  # the children find their parent gone
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
