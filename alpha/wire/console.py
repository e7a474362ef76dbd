"""The bytes between the launcher and a participant, in one place: pure, over values and text.

A participant talks to its launcher through three streams and nothing else (decision 2):

- **stdout, the announcement**: the port of each of its listeners, :data:`PORT_BYTES` each,
  big-endian, in edge order (:func:`encode_ports`), and no other byte ever;
- **stdin, the ports it connects to**: its lower peers' ports, the same encoding, in its edge
  order, written by the launcher as each becomes known (:func:`decode_ports`);
- **stderr, its log**: lines ``role R: TEXT`` (:func:`role_line`). A failed participant ends
  its log with the failure-clock line (:func:`clock_line`, the monotonic time it failed at)
  and then its one-line cause; the launcher reads both from the log's tail
  (:func:`cause_of`) to tell which role failed first and why. The cause reads
  ``role R: failed: WHAT`` (:func:`failed_line`), WHAT usually ``Class: message``;
  :func:`failure_of` finds it in a log.

The writing (``os.write``, ``print``) and the reading (pipes, the log file) stay with the
participant and the launcher; this module holds what the bytes and lines are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = [
    "FAILURE_CLOCK",
    "MAX_PORT",
    "PORT_BYTES",
    "cause_of",
    "clock_line",
    "clock_of",
    "decode_ports",
    "encode_port",
    "encode_ports",
    "failed_line",
    "failure_of",
    "role_line",
]

PORT_BYTES: Final = 2
"""Each announced (and relayed) port is two bytes, big-endian: a TCP port number."""

MAX_PORT: Final = (1 << (8 * PORT_BYTES)) - 1
"""The largest port two bytes hold, and TCP's largest (65535)."""

FAILURE_CLOCK: Final = "failure-clock"
"""The word before the monotonic time of a failure, on the line a failing participant logs
just before its one-line cause: with it the launcher tells which role failed first."""

_FAILED: Final = "failed: "  # after ``role R: `` on the cause line

CLOCK_DIGITS: Final = 6
"""Decimals of the failure clock's seconds: microseconds, far finer than the wake-ups that
order two roles' failures (milliseconds)."""


def encode_port(port: int) -> bytes:
    """One port as :data:`PORT_BYTES` big-endian bytes.

    Raises:
        ValueError: ``port`` is not in 0..:data:`MAX_PORT`.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise ValueError(f"a port is an int in 0..{MAX_PORT}, got {port!r}")
    return port.to_bytes(PORT_BYTES, "big")


def encode_ports(ports: Iterable[int]) -> bytes:
    """The announcement (or the stdin feed) of ``ports``, in their order.

    Raises:
        ValueError: a port is not in 0..:data:`MAX_PORT`.
    """
    return b"".join(encode_port(port) for port in ports)


def decode_ports(data: bytes | bytearray | memoryview) -> tuple[int, ...]:
    """The ports ``data`` holds, in order: the inverse of :func:`encode_ports`.

    Raises:
        ValueError: ``data`` is not a whole number of ports.
    """
    if len(data) % PORT_BYTES:
        raise ValueError(f"{len(data)} bytes are not a whole number of {PORT_BYTES}-byte ports")
    view = bytes(data)
    return tuple(
        int.from_bytes(view[i : i + PORT_BYTES], "big") for i in range(0, len(view), PORT_BYTES)
    )


def role_line(role: object, text: str) -> str:
    """One line of a participant's log, as it writes it on stderr (without the newline)."""
    return f"role {role}: {text}"


def failed_line(role: object, what: str) -> str:
    """The one-line cause a failing participant logs last: ``role R: failed: WHAT``."""
    return role_line(role, f"{_FAILED}{what}")


def failure_of(log: str) -> str:
    """What the last :func:`failed_line` of ``log`` says after ``failed:``, or ``""`` when it has
    none."""
    marked = [line for line in log.splitlines() if f": {_FAILED}" in line]
    return marked[-1].split(f": {_FAILED}", 1)[1] if marked else ""


def clock_line(role: object, clock: float) -> str:
    """The line a failing participant logs just before its one-line cause: the time it failed
    at on the host's monotonic clock, to :data:`CLOCK_DIGITS` decimals."""
    return role_line(role, f"{FAILURE_CLOCK} {clock:.{CLOCK_DIGITS}f}")


def clock_of(line: str) -> float | None:
    """The failure time a :func:`clock_line` holds, or None when ``line`` is not one."""
    if f" {FAILURE_CLOCK} " not in line:
        return None
    try:
        return float(line.rsplit(" ", 1)[1])
    except ValueError:
        return None


def cause_of(tail: str) -> tuple[str, float | None]:
    """A failed participant's one-line cause (the last non-empty line of ``tail``, the end of
    its log, stripped) and the time it failed at, when the line before it is a
    :func:`clock_line`; ``("", None)`` for a log with no line."""
    lines = [line.strip() for line in tail.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "", None
    clock = clock_of(lines[-2]) if len(lines) >= 2 else None
    return lines[-1], clock
