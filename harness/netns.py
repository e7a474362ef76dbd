"""A network namespace of the harness's own, and a TCP segment damaged or a connection reset
inside it, for gates and benchmarks that break the wire of a whole ``alpha run``
(``gates/recovery.py``, ``bench/chaos.py``).

An ``alpha run`` whose participants talk over 127.0.0.1 has no relay to put a fault in. So the
run goes in a network namespace made for it (:func:`isolated`: ``unshare --net``, its own
``lo`` brought up), where an nftables rule may rewrite bytes of one segment of one connection
between two participants (:func:`corrupt_segment`): loopback does not verify TCP checksums, so
the bytes arrive changed and the receiver refuses the frame. ``tc ... netem corrupt`` would be
the usual tool, but the kernel of this project's machines has no ``sch_netem``; nftables'
payload statement works there, and changes exactly one segment (``limit ... burst 1``) where
netem would change a share of them.

Nothing here touches the host's network: every command but the namespace's own start runs
through ``nsenter -t PID -n`` into the namespace of a process this harness started, and
:func:`enter` refuses a process whose namespace is this process's own. No address outside
127.0.0.0/8 is used. :func:`unavailable` says why a host cannot make a fault (no root, no
``unshare``, no nftables, a kernel that cannot destroy a socket), for a gate to skip with the
reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal, final

__all__ = [
    "CORRUPT_WORD",
    "TABLE",
    "TOOLS",
    "Connection",
    "Probed",
    "ProbedReset",
    "WireFault",
    "connections",
    "corrupt_segment",
    "enter",
    "isolated",
    "probe",
    "probe_reset",
    "reset_connection",
    "unavailable",
]

TABLE: Final = "alpha_harness"
"""The nftables table the harness adds, in its own namespace only, and removes."""

CORRUPT_WORD: Final = 0x5AA55AA5
"""The four bytes written over a segment's: unlike any run of bytes a frame is likely to hold
there, so the segment is changed whatever it carried."""

TOOLS: Final = ("unshare", "ip", "nsenter", "ss", "nft")
"""The programs this module runs (util-linux, iproute2, nftables)."""

WireFault = Literal["corrupt", "reset"]
"""A fault made on the wire: a segment rewritten (:func:`corrupt_segment`), or a connection
destroyed (:func:`reset_connection`)."""

_NEEDS: Final[dict[WireFault, tuple[str, ...]]] = {
    "corrupt": TOOLS,
    "reset": ("unshare", "ip", "nsenter", "ss"),  # no nftables rule
}

POLL: Final = 0.005
"""Seconds between two reads of the rule's counter: a segment passes within milliseconds of a
frame being sent, and each read is one ``nft`` process."""

# ss -tnpH state established: "RECV SEND LOCAL PEER users:((...,pid=P,fd=F),...)".
_SS_ROW: Final = re.compile(
    r"(127\.\d+\.\d+\.\d+):(\d+)\s+(127\.\d+\.\d+\.\d+):(\d+)\s+users:\(\((.*)\)\)"
)
_PID: Final = re.compile(r"pid=(\d+)")
_COUNTER: Final = re.compile(r"counter packets (\d+)")


def isolated(argv: Sequence[str]) -> list[str]:
    """``argv`` as a command that runs it in a new network namespace with its own ``lo`` up:
    ``exec``'d, so the started process's pid is the namespace's (for :func:`enter`)."""
    return ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]


def enter(namespace: int) -> list[str]:
    """The prefix that runs a command in the network namespace of process ``namespace``.

    Raises:
        ValueError: that namespace is this process's own (the host's, or whichever this
            process runs in): nothing here may change it.
        ProcessLookupError: no such process.
    """
    try:
        theirs = os.readlink(f"/proc/{namespace}/ns/net")
    except FileNotFoundError as error:
        raise ProcessLookupError(f"no process {namespace}") from error
    if theirs == os.readlink("/proc/self/ns/net"):
        raise ValueError(f"process {namespace} shares this process's network namespace")
    return ["nsenter", "-t", str(namespace), "-n"]


@final
@dataclass(frozen=True, slots=True)
class Connection:
    """An established TCP connection inside a namespace, both ends on 127.0.0.0/8: the port
    and pid of the end that sends the segments a rule on it changes, and of the other."""

    port: int
    pid: int
    peer_port: int
    peer_pid: int


def connections(namespace: int, pids: Sequence[int] = ()) -> list[Connection]:
    """The established TCP connections in ``namespace``'s network namespace whose two ends
    are both held by a process (by one of ``pids`` when given), each once per direction,
    sorted by port.

    Raises:
        ValueError, ProcessLookupError: as :func:`enter`.
    """
    done = subprocess.run(
        [*enter(namespace), "ss", "-tnpH", "state", "established"],
        capture_output=True,
        text=True,
        check=False,
    )
    ends: dict[int, tuple[int, int]] = {}  # local port -> (peer port, pid)
    for line in done.stdout.splitlines():
        found = _SS_ROW.search(line)
        if found is None:
            continue
        owners = [int(pid) for pid in _PID.findall(found.group(5))]
        owners = [pid for pid in owners if not pids or pid in pids]
        if owners:
            ends[int(found.group(2))] = (int(found.group(4)), owners[0])
    found_pairs = [
        Connection(port, pid, peer, ends[peer][1])
        for port, (peer, pid) in ends.items()
        if peer in ends and ends[peer][0] == port
    ]
    return sorted(found_pairs, key=lambda c: c.port)


def corrupt_segment(
    namespace: int, connection: Connection, *, offset: int, longer: int, within: float
) -> float | None:
    """Rewrite four bytes at ``offset`` of the TCP payload of one segment ``connection.pid``
    sends on it, the first longer than ``longer`` bytes (the IP packet's length), within
    ``within`` seconds; then remove the rule. When the segment was changed
    (``time.monotonic()`` at the first read of the rule's counter that saw it), or None.

    Raises:
        ValueError: ``offset`` does not fit in a segment of ``longer`` bytes (the IP and
            TCP headers, 52 bytes with timestamps, and four bytes from ``offset``); as
            :func:`enter`.
        ProcessLookupError: as :func:`enter`.
        RuntimeError: nftables refused the rule.
    """
    if offset < 0 or longer < 52 + offset + 4:
        raise ValueError(f"four bytes at offset {offset} do not fit in {longer} bytes")
    prefix = enter(namespace)
    rule = (
        f"table ip {TABLE} {{ chain out {{ type filter hook output priority 0; "
        f"policy accept; ip saddr 127.0.0.0/8 ip daddr 127.0.0.0/8 "
        f"tcp sport {connection.port} tcp dport {connection.peer_port} "
        f"meta length > {longer} limit rate 1/minute burst 1 packets counter "
        f"@ih,{8 * offset},32 set {CORRUPT_WORD:#x}; }}; }}"
    )
    added = subprocess.run(
        [*prefix, "nft", "-f", "-"], input=rule, capture_output=True, text=True, check=False
    )
    if added.returncode:
        raise RuntimeError(f"nft refused the rule: {added.stderr.strip()}")
    ends = time.monotonic() + within
    try:
        while time.monotonic() < ends:
            listed = subprocess.run(
                [*prefix, "nft", "list", "table", "ip", TABLE],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            hit = _COUNTER.search(listed)
            if hit is not None and int(hit.group(1)) > 0:
                return time.monotonic()
            time.sleep(POLL)
        return None
    finally:
        subprocess.run([*prefix, "nft", "delete", "table", "ip", TABLE], capture_output=True)


def reset_connection(namespace: int, connection: Connection) -> bool:
    """Destroy ``connection.pid``'s end of ``connection`` (``ss -K``), so that its peer reads a
    reset. Whether it was destroyed: False when no such connection was left (it had closed,
    or this kernel cannot destroy a socket: ``ss -K`` then names none and says nothing).

    Raises:
        ValueError, ProcessLookupError: as :func:`enter`.
    """
    done = subprocess.run(
        [*enter(namespace), "ss", "-K", "src", "127.0.0.0/8", "sport", "=", str(connection.port),
         "dst", "127.0.0.0/8", "dport", "=", str(connection.peer_port)],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    # ss -K lists each socket it destroyed (with -H, no header line): its port, or nothing.
    return str(connection.port) in done.stdout


# A socket pair in a namespace: it prints its two ports, then sends CHUNK-byte chunks on one
# end every few milliseconds and reads them on the other, until a line comes on its stdin;
# then prints how many chunks it sent and how many arrived changed. At a second line it
# prints what the reading end reads next (its repr, or the error's): after the sending end was
# destroyed, a reset.
_PAIR: Final = r"""
import select, socket, sys, time
chunk = bytes(range(256)) * 4
stdin = select.poll(); stdin.register(sys.stdin, select.POLLIN)
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen()
client = socket.create_connection(listener.getsockname()); server, _ = listener.accept()
print(client.getsockname()[1], server.getsockname()[1], flush=True)
sent = changed = 0
ends = time.monotonic() + float(sys.argv[1])
while time.monotonic() < ends and not stdin.poll(5):
    client.sendall(chunk); sent += 1
    got = b""
    while len(got) < len(chunk):
        got += server.recv(len(chunk) - len(got))
    changed += got != chunk
print(sent, changed, flush=True)
sys.stdin.readline(); sys.stdin.readline()
server.settimeout(float(sys.argv[1]))
try:
    print(repr(server.recv(1)), flush=True)
except OSError as error:
    print(repr(error), flush=True)
"""


@contextmanager
def _pair(seconds: float) -> Iterator[tuple[subprocess.Popen[str], int, bool]]:
    """The socket pair of :data:`_PAIR` started in a namespace of its own (:func:`isolated`),
    sending for at most ``seconds``: the process, the port of its sending end, and whether
    its namespace is another than this process's. Killed on leaving.

    Raises:
        OSError: a program would not start; RuntimeError: the pair said nothing.
    """
    with subprocess.Popen(
        isolated([sys.executable, "-c", _PAIR, str(seconds)]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as pair:
        assert pair.stdout is not None
        try:
            ports = pair.stdout.readline().split()
            if len(ports) != 2:
                said = pair.stderr.read().strip() if pair.stderr else ""
                raise RuntimeError(f"the pair said nothing: {said}")
            other = os.readlink(f"/proc/{pair.pid}/ns/net") != os.readlink("/proc/self/ns/net")
            yield pair, int(ports[0]), other
        finally:
            pair.kill()


def _next_line(pair: subprocess.Popen[str]) -> str:
    """Send the pair a line (its next step), and read the line it answers, stripped."""
    assert pair.stdin is not None and pair.stdout is not None
    pair.stdin.write("\n")
    pair.stdin.flush()
    return pair.stdout.readline().strip()


@final
@dataclass(frozen=True, slots=True)
class Probed:
    """What :func:`probe` saw: the chunks sent and those that arrived changed, the pair's
    connections as :func:`connections` found them, whether the namespace was another than
    this process's, and the tables left in it after the rule was removed."""

    sent: int
    changed: int
    found: tuple[Connection, ...]
    applied: bool
    other_namespace: bool
    tables_left: str


def probe(seconds: float = 5.0) -> Probed:
    """A socket pair in a namespace of its own (:func:`isolated`), one segment of its chunks
    (1024 bytes each) damaged by :func:`corrupt_segment` at offset 16.

    Raises:
        OSError: a program would not start; RuntimeError: as :func:`corrupt_segment`, or
            the pair said nothing.
    """
    with _pair(seconds) as (pair, sending_port, other):
        found = tuple(connections(pair.pid, [pair.pid]))
        sending = [c for c in found if c.port == sending_port]
        applied = (
            bool(sending)
            and corrupt_segment(pair.pid, sending[0], offset=16, longer=200, within=seconds / 2)
            is not None
        )
        tables = subprocess.run(
            [*enter(pair.pid), "nft", "list", "tables"], capture_output=True, text=True
        ).stdout.strip()
        counts = _next_line(pair).split()
    sent, changed = (int(counts[0]), int(counts[1])) if len(counts) == 2 else (0, 0)
    return Probed(sent, changed, found, applied, other, tables)


@final
@dataclass(frozen=True, slots=True)
class ProbedReset:
    """What :func:`probe_reset` saw: the pair's connections as :func:`connections` found them,
    whether :func:`reset_connection` destroyed the sending end, what the reading end read
    next (a repr: ``ConnectionResetError(...)`` when the reset reached it), and whether the
    namespace was another than this process's."""

    found: tuple[Connection, ...]
    destroyed: bool
    read: str
    other_namespace: bool


def probe_reset(seconds: float = 2.0) -> ProbedReset:
    """A socket pair in a namespace of its own (:func:`isolated`), idle after one chunk or
    more, its sending end destroyed by :func:`reset_connection`; then what the other end
    reads, within ``seconds``.

    Raises:
        OSError: a program would not start; RuntimeError: the pair said nothing.
    """
    with _pair(seconds) as (pair, sending_port, other):
        found = tuple(connections(pair.pid, [pair.pid]))
        sending = [c for c in found if c.port == sending_port]
        _next_line(pair)  # the chunks stop: none is in flight when the end is destroyed
        destroyed = bool(sending) and reset_connection(pair.pid, sending[0])
        read = _next_line(pair)
    return ProbedReset(found, destroyed, read, other)


def unavailable(fault: WireFault = "corrupt") -> str:
    """Why ``fault`` cannot be made in a namespace of the harness's own here (a program
    missing, ``unshare --net`` not permitted; for ``"corrupt"`` nftables' payload statement
    refused or without effect, for ``"reset"`` no socket destroyed or its peer reading no
    reset), tried once on a socket pair (:func:`probe`, :func:`probe_reset`); ``""`` when it
    can."""
    missing = [tool for tool in _NEEDS[fault] if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    try:
        seen = probe() if fault == "corrupt" else probe_reset()
    except (OSError, RuntimeError, ValueError) as error:
        return f"a network namespace could not be used: {error}"
    if not seen.other_namespace:
        return "unshare --net left the pair in this process's namespace"
    if isinstance(seen, Probed):
        if not seen.applied or seen.changed == 0:
            return "the nftables rule changed no segment"
    elif not seen.destroyed:
        return "ss -K destroyed no connection"
    elif not seen.read.startswith("ConnectionResetError"):
        return f"the peer read {seen.read}"
    return ""
