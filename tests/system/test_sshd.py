"""The test sshd (harness/sshd.py): a real OpenSSH sshd of the test's own runs remote commands
and carries ``-L`` and ``-R`` forwards, on loopback and between two network namespaces where
the only way from one to the other's loopback is through the tunnels.

Bytes moved through a tunnel are checked end to end: a client sends seeded random bytes to an
echo server and reports the SHA-256 of what came back. The echo server and the clients are
processes of their own, so that they can run inside a namespace (``ip netns exec``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

import harness.sshd
from harness.processes import state_of
from harness.sshd import (
    PORT_ATTEMPTS,
    Namespace,
    Sshd,
    SshdFailed,
    SshdUnavailable,
    connect_error,
    free_port,
    in_netns,
    namespace_nodes,
    running_sshd,
)

SIZE = 8 << 20  # bytes through each tunnel: a few MiB, many SSH channel windows
FORWARD_WAIT = 30.0  # seconds a forward may take to come up (measured: 0.25 to 0.7 s)
_ALLOCATED = re.compile(rb"Allocated port (\d+) for remote forward")

# Echoes every connection on 127.0.0.1 of its namespace; prints its port first.
_ECHO = r"""
import socket, sys, threading
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
def echo(conn):
    with conn:
        while chunk := conn.recv(1 << 16):
            conn.sendall(chunk)
while True:
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"""

# Connects (retrying refusals for WAIT seconds: a -L forward comes up after ssh starts), sends
# SIZE seeded random bytes, half-closes, and prints how many bytes came back and their SHA-256;
# prints "refused" and exits 3 if the connection is refused when WAIT has passed.
_CLIENT = r"""
import hashlib, random, socket, sys, threading, time
host, port, size, seed, wait = *sys.argv[1:3], *map(float, sys.argv[3:6])
deadline = time.monotonic() + wait
while True:
    try:
        conn = socket.create_connection((host, int(port)), timeout=10)
        break
    except ConnectionRefusedError:
        if time.monotonic() >= deadline:
            print("refused")
            sys.exit(3)
        time.sleep(0.02)

conn.settimeout(60)
data = random.Random(int(seed)).randbytes(int(size))
def send():
    conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=send, daemon=True).start()
digest, got = hashlib.sha256(), 0
while chunk := conn.recv(1 << 16):
    digest.update(chunk)
    got += len(chunk)
print(got, digest.hexdigest())
"""


def _python(netns: str | None, script: str, *args: object) -> list[str]:
    return in_netns(netns, [sys.executable, "-c", script, *map(str, args)])


def expected(seed: int, size: int = SIZE) -> str:
    return f"{size} {hashlib.sha256(random.Random(seed).randbytes(size)).hexdigest()}"


def echoed(port: int, seed: int, *, netns: str | None = None, host: str = "127.0.0.1") -> str:
    """What the client in ``netns`` reports after a round trip through ``host:port``."""
    done = subprocess.run(
        _python(netns, _CLIENT, host, port, SIZE, seed, FORWARD_WAIT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done
    return done.stdout.strip()


def refused(port: int, host: str, netns: str | None) -> bool:
    """Whether one connection from ``netns`` to ``host:port`` is refused."""
    return connect_error(host, port, netns) == errno.ECONNREFUSED


def unroutable(host: str, netns: str) -> bool:
    """Whether ``netns`` has no route to ``host`` (ENETUNREACH, whatever the port)."""
    return connect_error(host, 22, netns) == errno.ENETUNREACH


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


@contextmanager
def echo_server(netns: str | None = None) -> Iterator[int]:
    """An echo server on 127.0.0.1 of ``netns``; yields its port."""
    process = subprocess.Popen(
        _python(netns, _ECHO), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        _stop(process)


def ssh(sshd: Sshd, *args: str) -> list[str]:
    return ["ssh", "-p", str(sshd.port), *sshd.ssh_options(), *args, sshd.destination()]


@contextmanager
def forward(sshd: Sshd, spec: Sequence[str], netns: str | None = None) -> Iterator[int | None]:
    """An ``ssh -N`` session to ``sshd`` from ``netns`` with the forward ``spec``. For a
    ``-R`` with port 0, yields the port sshd allocated (read from ssh's stderr), else None."""
    argv = ssh(sshd, "-N", "-o", "ExitOnForwardFailure=yes", *spec)
    process = subprocess.Popen(
        in_netns(netns, argv), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        allocated = None
        if spec[0] == "-R" and spec[1].startswith("0:"):
            allocated = _allocated(process)
        yield allocated
    finally:
        _stop(process)


def _allocated(process: subprocess.Popen[bytes]) -> int:
    assert process.stderr is not None
    deadline = time.monotonic() + FORWARD_WAIT
    said = b""
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([process.stderr], [], [], left)
        if not ready:
            break
        line = process.stderr.readline()
        if not line:
            break  # ssh exited
        said += line
        if found := _ALLOCATED.search(line):
            return int(found.group(1))
    raise AssertionError(f"ssh allocated no remote port; it said: {said!r}")


# --- the fixture's refusals -------------------------------------------------------------------


def test_without_sshd_the_fixture_says_what_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness.sshd, "SSHD", tmp_path / "no-sshd")
    with (
        pytest.raises(SshdUnavailable, match=r"make test.*openssh-server"),
        running_sshd(tmp_path / "sshd"),
    ):
        pass


def _fake_sshd(folder: Path, body: str) -> Path:
    fake = folder / "fake-sshd"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    return fake


def test_an_sshd_that_exits_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_sshd(tmp_path, 'echo "fake sshd: bad configuration" >&2; exit 1')
    monkeypatch.setattr(harness.sshd, "SSHD", fake)
    with (
        pytest.raises(SshdFailed, match=r"exited with status 1(.|\n)*bad configuration"),
        running_sshd(tmp_path / "sshd"),
    ):
        pass


def test_a_taken_port_is_tried_again_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = tmp_path / "tries"
    fake = _fake_sshd(tmp_path, f"echo try >> {tries}; echo 'Address already in use' >&2; exit 255")
    monkeypatch.setattr(harness.sshd, "SSHD", fake)
    with (
        pytest.raises(SshdFailed, match=f"no free port in {PORT_ATTEMPTS} tries"),
        running_sshd(tmp_path / "sshd"),
    ):
        pass
    assert tries.read_text().count("try") == PORT_ATTEMPTS


def test_an_sshd_that_never_accepts_is_stopped_after_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    fake = _fake_sshd(tmp_path, f"echo $$ > {pid_file}; echo 'Server listening on'; exec sleep 60")
    monkeypatch.setattr(harness.sshd, "SSHD", fake)
    monkeypatch.setattr(harness.sshd, "START_WAIT", 1.0)
    with (
        pytest.raises(SshdFailed, match=r"did not accept a session within 1\.0 s"),
        running_sshd(tmp_path / "sshd"),
    ):
        pass
    assert not Path(f"/proc/{pid_file.read_text().strip()}").exists()


# --- a real sshd on loopback -------------------------------------------------------------------


@pytest.mark.slow
def test_a_remote_command_runs_with_its_stdin_stdout_stderr_and_status(tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    with running_sshd(tmp_path / "sshd") as sshd:
        assert sshd.port > 0 and sshd.user and sshd.netns is None
        assert sshd.destination() == f"{sshd.user}@127.0.0.1"
        cat = subprocess.run([*ssh(sshd), "cat"], input=data, capture_output=True, timeout=60)
        assert cat.returncode == 0, cat.stderr
        assert cat.stdout == data
        said = subprocess.run(
            [*ssh(sshd), "echo out; echo err >&2; exit 7"], capture_output=True, timeout=60
        )
        assert (said.returncode, said.stdout, said.stderr) == (7, b"out\n", b"err\n")
        port = sshd.port
    assert refused(port, "127.0.0.1", None)  # stopped at exit


@pytest.mark.slow
def test_at_exit_the_sessions_and_their_commands_are_stopped_too(tmp_path: Path) -> None:
    with running_sshd(tmp_path / "sshd") as sshd:
        session = subprocess.Popen(
            [*ssh(sshd), "echo $$; exec sleep 300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert session.stdout is not None
        command = int(session.stdout.readline())  # the remote command's pid, on this machine
        assert state_of(command) not in ("", "Z")
    try:
        assert session.wait(timeout=10) != 0  # the session ended under it
        # Killed; its new parent (pid 1) may take a moment to reap it, or never reap it.
        deadline = time.monotonic() + 10
        while state_of(command) not in ("", "Z") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert state_of(command) in ("", "Z")
    finally:
        _stop(session)
        assert session.stdin is not None
        session.stdin.close()


@pytest.mark.slow
def test_the_host_key_is_checked_strictly(tmp_path: Path) -> None:
    with running_sshd(tmp_path / "sshd") as sshd:
        sshd.known_hosts.write_text(f"[127.0.0.1]:{sshd.port} " + _other_host_key(tmp_path))
        done = subprocess.run([*ssh(sshd), "true"], capture_output=True, timeout=60)
    assert done.returncode == 255
    assert b"HOST IDENTIFICATION HAS CHANGED" in done.stderr


def _other_host_key(folder: Path) -> str:
    key = folder / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n"


@pytest.mark.slow
def test_local_and_remote_forwards_carry_bytes_intact(tmp_path: Path) -> None:
    with running_sshd(tmp_path / "sshd") as sshd, echo_server() as target:
        local = free_port("127.0.0.1")
        with forward(sshd, ["-L", f"127.0.0.1:{local}:127.0.0.1:{target}"]):
            assert echoed(local, seed=1) == expected(1)
            # -R back to the local forward: the path the transport gives a connector.
            with forward(sshd, ["-R", f"0:127.0.0.1:{local}"]) as remote:
                assert remote is not None and remote not in (local, target)
                assert echoed(remote, seed=2) == expected(2)


# --- network namespaces, an sshd in each, reached from here only --------------------------------


@contextmanager
def nodes_or_skip(count: int = 2) -> Iterator[list[Namespace]]:
    with namespace_nodes("alpha-sshd", count) as nodes:
        if nodes is None:
            pytest.skip("ip netns add is not permitted here (needs root or CAP_SYS_ADMIN)")
        yield nodes


@pytest.mark.slow
def test_across_namespaces_the_tunnels_are_the_only_way(tmp_path: Path) -> None:
    with (
        nodes_or_skip() as (a, b),
        running_sshd(tmp_path / "a", host=a.address, netns=a.name) as sshd_a,
        running_sshd(tmp_path / "b", host=b.address, netns=b.name) as sshd_b,
        echo_server(a.name) as target,  # on a's loopback only
    ):
        # From b, nothing of a can be reached: not its loopback, its address or its sshd.
        assert refused(target, "127.0.0.1", b.name)
        assert unroutable(a.address, b.name) and unroutable(a.gateway, b.name)
        assert unroutable(b.address, a.name)
        # Here -> sshd in a -> a's loopback: a local forward opened from here.
        local = free_port("127.0.0.1")
        with forward(sshd_a, ["-L", f"127.0.0.1:{local}:127.0.0.1:{target}"]):
            assert echoed(local, seed=3) == expected(3)
            # b's loopback -> sshd in b -> here -> sshd in a -> a's loopback: the route the
            # transport gives a connector in b to a listener in a.
            with forward(sshd_b, ["-R", f"0:127.0.0.1:{local}"]) as remote:
                assert remote is not None
                assert echoed(remote, seed=4, netns=b.name) == expected(4)


def _namespaces() -> set[str]:
    """The names ``ip netns list`` shows (each line is ``NAME`` or ``NAME (id: N)``)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}


@pytest.mark.slow
def _links() -> set[str]:
    """The names of this namespace's network links (``ip -o link``: ``N: NAME[@PEER]: ...``)."""
    listed = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return {line.split(": ")[1].split("@")[0] for line in listed.stdout.splitlines()}


@pytest.mark.slow
def test_the_namespaces_and_links_are_gone_after_the_fixture(tmp_path: Path) -> None:
    before = _links()
    with nodes_or_skip(3) as nodes:
        names = {node.name for node in nodes}
        assert names <= _namespaces() and len(names) == 3
        assert all(str(os.getpid()) in name for name in names)
        assert len(_links() - before) == 3  # one veth end here per namespace
    assert not names & _namespaces()
    assert not any(Path(f"/run/netns/{name}").exists() for name in names)
    assert _links() == before  # at once, not when the kernel gets round to it
    # Also when the test fails inside, with an sshd still running in one of them.
    with (
        pytest.raises(ZeroDivisionError),
        nodes_or_skip() as (c, d),
        running_sshd(tmp_path / "c", host=c.address, netns=c.name),
    ):
        1 / 0  # noqa: B018
    assert not {c.name, d.name} & _namespaces()
    assert _links() == before


@pytest.mark.slow
def test_sets_in_one_process_have_their_own_names_and_addresses() -> None:
    with nodes_or_skip() as first, nodes_or_skip() as second:
        seen = [word for node in (*first, *second) for word in (node.name, node.address)]
        seen += [node.gateway for node in (*first, *second)]
        assert len(set(seen)) == len(seen)
        for node in (*first, *second):
            assert socket.inet_aton(node.address) and node.address.startswith("10.")


def test_a_set_is_one_to_sixteen_namespaces() -> None:
    for count in (0, 17):
        with pytest.raises(ValueError, match="1 to 16"), namespace_nodes("alpha-sshd", count):
            pass
