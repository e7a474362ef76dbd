"""C sources of Alpha's, compiled on first use with the host's C compiler into a per-user
cache: the ordered fold (``alpha/learner/ordered.c``, :mod:`alpha.learner.kernels`) and the trace
store (``alpha/runtime/trace_store.c``, :mod:`alpha.runtime.tracing`); ``docs/kernels.md``.

A source is package data, read with importlib.resources (so it is found inside a zip, a run's
shared runtime, as in a folder), and compiled with ``$CC`` (else ``cc``) into the cache folder
(:data:`KERNEL_CACHE_ENV`, else ``$XDG_CACHE_HOME/alpha/kernels``, else
``~/.cache/alpha/kernels``, mode 0700, refused when it is not this user's alone), under a name
that is the SHA-256 of the source, the compiler's ``--version``, the command line, the machine
and whatever else the caller names (a Python extension's ABI); built under a temporary name and
renamed, so processes racing to build it each load a whole library. Whatever cannot be had is an
:class:`Unavailable` saying why, which each caller turns into its fallback: a compiled helper is
only ever faster, never different, and its caller checks it against its Python form before
first use.

An I/O module of the lowest rank (the file system, a subprocess): ``scripts/check_layers.py``
lists it among the I/O modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Final, Generic, TypeVar, final

__all__ = ["COMPILER_ENV", "KERNEL_CACHE_ENV", "Loaded", "Unavailable", "declined", "library"]

KERNEL_CACHE_ENV: Final = "ALPHA_KERNEL_CACHE"
"""The folder compiled libraries are kept in, made with mode 0700 when missing."""

COMPILER_ENV: Final = "CC"
DEFAULT_COMPILER: Final = "cc"

COMPILE_TIMEOUT_S: Final = 120.0
"""How long a compile may take: about 0.2 s on an idle x86-64 core, so this only ends a hung
compiler, with room for a loaded machine."""

PROBE_TIMEOUT_S: Final = 30.0
"""How long ``$CC --version`` or ``$CC -dumpmachine`` may take (milliseconds, normally)."""

MAX_MESSAGE_CHARS: Final = 400
"""How much of a compiler's message an :class:`Unavailable` keeps: enough for its first error."""

CACHE_MODE: Final = 0o700
"""The cache folder is the user's own: a shared library is code this process runs."""

_UNSAFE_MODE: Final = stat.S_IWGRP | stat.S_IWOTH

# Machine names as platform.machine() and compilers' target triples spell them on the systems
# Alpha runs on, to one name each.
_MACHINE_ALIASES: Final = {"amd64": "x86_64", "arm64": "aarch64"}


class Unavailable(Exception):
    """Why a compiled library cannot be had, in words; each caller catches it and falls back
    to its Python form. Not an :class:`~alpha.errors.AlphaError`: it never leaves the module
    that asked for the library."""


T = TypeVar("T")


@final
class Loaded(Generic[T]):
    """What ``load`` makes of this process's environment (``os.environ``): a compiled
    library's handle, or why it cannot be had (a ``str``), made on the first :meth:`get` of
    the process, whichever thread asks first, and kept for the rest of it."""

    __slots__ = ("_found", "_load", "_lock")

    def __init__(self, load: Callable[[Mapping[str, str]], T | str]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._found: T | str | None = None

    def get(self) -> T | str:
        found = self._found
        if found is None:
            with self._lock:  # one load per process
                if self._found is None:
                    self._found = self._load(os.environ)
                found = self._found
        return found


def declined(environ: Mapping[str, str], name: str, instead: str) -> str | None:
    """Why the variable ``name`` of ``environ`` asks for the form ``instead`` (the Python or
    numpy one) rather than the compiled one: set to ``instead``, or to anything but ``auto``
    and empty; None when it leaves the choice to what can be had."""
    choice = environ.get(name, "")
    if choice == instead:
        return f"{name}={instead}"
    if choice not in ("", "auto"):
        return f"{name}={choice!r} is neither 'auto' nor {instead!r}"
    return None


def library(
    package: str,
    name: str,
    flags: Sequence[str],
    environ: Mapping[str, str],
    *,
    stem: str,
    key: Sequence[str] = (),
    again: bool = False,
) -> Path:
    """The shared library compiled from ``name`` (package data of ``package``) with ``flags``
    after ``$CC``'s own words: found in the cache, or built into it (``again``: built even so,
    when the one found did not load). ``stem`` begins its file name; ``key`` names what else
    its bytes follow from.

    Raises:
        Unavailable: no compiler, one that builds for another machine (a host's ``cc`` under
            qemu-aarch64), a compile error, an unusable cache.
    """
    source = _source(package, name)
    compiler = _compiler(environ)
    # English messages, and a --version that does not follow the locale into the key.
    env = {**environ, "LC_ALL": "C"}
    machine = platform.machine()
    folder = _cache_folder(environ)
    target, version = _probe(compiler, env, folder)
    # Under qemu-aarch64 the host's cc runs natively and builds for the host, not for us.
    if _machine(target.split("-")[0]) != _machine(machine):
        raise Unavailable(f"{compiler[0]} builds for {target}, not for this {machine} Python")
    command = [*compiler, *flags]
    path = folder / f"{stem}-{_key(source, version, shlex.join(command), machine, *key)}.so"
    if again or not path.exists():
        _build(command, env, source, name, path)
    _check_owned(path)
    return path


def _probe(compiler: list[str], env: Mapping[str, str], folder: Path) -> tuple[str, str]:
    """What the compiler builds for (``-dumpmachine``) and its ``--version``: asked once per
    compiler binary (its resolved file's size, time and inode, and the words of ``$CC``) and
    remembered in the cache folder, since every participant asks before its first product and
    two compiler runs cost it about 80 ms."""
    try:
        found = os.stat(compiler[0])
    except OSError as error:
        raise Unavailable(f"{compiler[0]} cannot be read: {error.strerror or error}") from None
    names = f"{shlex.join(compiler)}\0{found.st_size}\0{found.st_mtime_ns}\0{found.st_ino}"
    memo = folder / f"probe-{hashlib.sha256(names.encode()).hexdigest()[:32]}.json"
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if isinstance(known, dict) and all(isinstance(known.get(k), str) for k in _PROBED):
            return known["target"], known["version"]
    except (OSError, ValueError):
        pass  # not asked yet, or a torn memo: ask again
    target = _run([*compiler, "-dumpmachine"], env, PROBE_TIMEOUT_S).strip()
    version = _run([*compiler, "--version"], env, PROBE_TIMEOUT_S)
    partial = folder / f".{memo.name}.{os.getpid()}"
    try:
        partial.write_text(json.dumps({"target": target, "version": version}), encoding="utf-8")
        partial.replace(memo)
    except OSError:
        partial.unlink(missing_ok=True)  # not remembered: the next process asks again
    return target, version


def _source(package: str, name: str) -> bytes:
    try:
        return files(package).joinpath(name).read_bytes()
    except OSError as error:
        where = f"{package.replace('.', '/')}/{name}"
        raise Unavailable(f"{where} cannot be read: {error}") from None


def _compiler(environ: Mapping[str, str]) -> list[str]:
    """``$CC`` as words (it may carry options: ``ccache gcc``), its program found on PATH."""
    spelled = environ.get(COMPILER_ENV, "") or DEFAULT_COMPILER
    try:
        words = shlex.split(spelled)
    except ValueError as error:
        raise Unavailable(f"{COMPILER_ENV}={spelled!r} is not shell words: {error}") from None
    if not words:
        raise Unavailable(f"{COMPILER_ENV}={spelled!r} names no compiler")
    found = shutil.which(words[0], path=environ.get("PATH"))
    if found is None:
        raise Unavailable(f"no C compiler: {words[0]!r} is not on PATH (set {COMPILER_ENV})")
    return [found, *words[1:]]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def _run(argv: list[str], env: Mapping[str, str], timeout: float) -> str:
    """What ``argv`` prints (stdout, else stderr) when it succeeds. Its stdin is empty: a
    participant's stdin carries its peers' ports, which the compiler must not read."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            env=dict(env),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Unavailable(f"`{shlex.join(argv)}` ran past {timeout:g} s") from None
    except OSError as error:
        raise Unavailable(f"`{argv[0]}` cannot run: {error.strerror or error}") from None
    if done.returncode != 0:
        said = _short(done.stderr or done.stdout) or "no message"
        raise Unavailable(f"`{shlex.join(argv)}` failed with exit {done.returncode}: {said}")
    return done.stdout or done.stderr


def _machine(name: str) -> str:
    return _MACHINE_ALIASES.get(name.lower(), name.lower())


_PROBED = ("target", "version")  # a probe memo's keys


def _key(source: bytes, *parts: str) -> str:
    """A library's name: the SHA-256 of everything its bytes follow from (the source, the
    compiler's ``--version``, the command line, the machine, and what else its caller names),
    each part length-prefixed so that no two lists of parts give one stream."""
    digest = hashlib.sha256()
    for part in (source, *(part.encode() for part in parts)):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _cache_folder(environ: Mapping[str, str]) -> Path:
    """The cache folder, made (mode 0700) when missing; refused when it is not this user's
    alone (a library found there is run)."""
    named = environ.get(KERNEL_CACHE_ENV, "")
    xdg = environ.get("XDG_CACHE_HOME", "")
    if named:
        folder = Path(named)
    elif os.path.isabs(xdg):  # a relative XDG_CACHE_HOME is to be ignored (the XDG spec)
        folder = Path(xdg) / "alpha" / "kernels"
    else:
        folder = Path.home() / ".cache" / "alpha" / "kernels"
    try:
        folder.mkdir(mode=CACHE_MODE, parents=True, exist_ok=True)
        found = folder.stat()
    except OSError as error:
        raise Unavailable(
            f"the kernel cache {folder} cannot be made: {error.strerror or error}"
        ) from None
    if not stat.S_ISDIR(found.st_mode):
        raise Unavailable(f"the kernel cache {folder} is not a folder")
    _check_mine(folder, found)
    return folder


def _check_mine(path: Path, found: os.stat_result) -> None:
    if found.st_uid != os.getuid() or found.st_mode & _UNSAFE_MODE:
        raise Unavailable(f"{path} is another user's or writable by others; not used")


def _check_owned(path: Path) -> None:
    try:
        found = path.stat()
    except OSError as error:
        raise Unavailable(f"{path} cannot be read: {error.strerror or error}") from None
    _check_mine(path, found)


def _build(
    command: list[str], env: Mapping[str, str], source: bytes, name: str, path: Path
) -> None:
    """Compile ``source`` (its file named ``name``) with ``command`` (the compiler and its
    options) into ``path``: in a private folder beside it, then one rename, so a process that
    loads ``path`` meanwhile finds the old file or the whole new one."""
    try:
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as scratch:
            c_file = Path(scratch) / name
            c_file.write_bytes(source)
            built = Path(scratch) / path.name
            _run([*command, "-o", str(built), str(c_file)], env, COMPILE_TIMEOUT_S)
            descriptor = os.open(built, os.O_RDONLY)
            try:
                os.fsync(descriptor)  # its bytes on disk before its name: never a torn library
            finally:
                os.close(descriptor)
            os.replace(built, path)
    except OSError as error:
        raise Unavailable(
            f"the kernel cache {path.parent} is not writable: {error.strerror or error}"
        ) from None
