"""The gates: one fault each, on a real run, and the refusal it must meet.

Every gate here runs the pair plan below (two roles, one edge, three rounds of the sum check)
with a relay on its one edge. Frames are counted per direction from the hello (index 0):
toward role 1 ("down") the hello, one total per round, END and COMMIT; toward role 0 ("up")
the hello, one contribution per round and DONE. Each gate names the role that must refuse,
or the roles of which one must (a silent edge is found by whichever end's budget runs out
first). Docs: ``docs/gates.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from alpha.frame import FrameKind
from harness.relay import Fault

__all__ = ["GATES", "PAIR_PLAN", "RECEIVE", "START", "Gate"]

# The runs' own budgets: small, so that a silent peer costs seconds. Bounds the code enforces.
RECEIVE: Final = 4.0
START: Final = 8.0

PAIR_PLAN: Final = f"""
[run]
name = "gate-pair"
rounds = 3
[membership]
group = "(group (stride 0 1 2))"
[topology]
shape = "pair"
[budgets]
accept = 30.0
receive = {RECEIVE}
start = {START}
[work]
kind = "sum-check"
size = 16
"""

EDGE: Final = (0, 1)  # (listener, connector): the pair's one edge

# Byte offsets in a frame (docs/frames.md).
_MAGIC, _KIND, _IDENTITY, _SENDER, _VERSION_LOW, _PAYLOAD = 0, 5, 8, 107, 123, 133


@dataclass(frozen=True)
class Gate:
    """One fault on the pair's edge, and the refusal it must meet."""

    name: str
    fault: Fault
    expected: str  # the refusal's class
    at: tuple[int, ...]  # the role that must refuse, or the roles of which one must
    meaning: str

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


GATES: Final[tuple[Gate, ...]] = (
    Gate(
        "frames.replay",
        Fault("replay", "up", 2),
        "Replayed",
        (0,),
        "round 0's contribution again where round 1's is due",
    ),
    Gate(
        "frames.skipped-version",
        Fault("corrupt", "up", 1, offset=_VERSION_LOW),
        "SkippedVersion",
        (0,),
        "a contribution whose version runs ahead of the receiver's counter",
    ),
    Gate(
        "frames.corrupt-header",
        Fault("corrupt", "up", 1, offset=_MAGIC),
        "WrongFrame",
        (0,),
        "a damaged magic byte in a contribution's header",
    ),
    Gate(
        "frames.corrupt-payload",
        Fault("corrupt", "down", 2, offset=_PAYLOAD),
        "Corrupted",
        (1,),
        "a damaged byte in a total's payload",
    ),
    Gate(
        "frames.corrupt-trailer",
        Fault("corrupt", "up", 3, offset=-1),
        "Corrupted",
        (0,),
        "a damaged byte in the last contribution's SHA-256 trailer",
    ),
    Gate(
        "frames.truncation",
        Fault("truncate", "up", 2, offset=100),
        "Truncated",
        (0, 1),
        "the connection cut inside a contribution's header",
    ),
    Gate(
        "frames.trailing-bytes",
        Fault("insert", "down", FrameKind.END),
        "TrailingBytes",
        (1,),
        "bytes after the schedule's last frame toward role 1",
    ),
    Gate(
        "frames.trailing-after-last",
        Fault("append", "up", FrameKind.DONE),
        "TrailingBytes",
        (0,),
        "bytes after role 1's last frame of all (its DONE)",
    ),
    Gate(
        "frames.last-frame-twice",
        Fault("replay", "up", FrameKind.DONE),
        "TrailingBytes",
        (0,),
        "the last contribution sent twice",
    ),
    Gate(
        "frames.wrong-edge",
        Fault("corrupt", "up", 1, offset=_SENDER),
        "WrongEdge",
        (0,),
        "a contribution that names another sender",
    ),
    Gate(
        "frames.wrong-kind",
        Fault("corrupt", "down", 1, offset=_KIND),
        "WrongFrame",
        (1,),
        "a total whose kind byte names no kind of frame",
    ),
    Gate(
        "frames.foreign-identity",
        Fault("corrupt", "up", 0, offset=_IDENTITY),
        "IdentityMismatch",
        (0,),
        "a hello bound to another run identity",
    ),
    Gate(
        "connection.silent-peer",
        Fault("stall", "up", 1),
        "BudgetExhausted",
        (0, 1),
        "role 1 greets, then nothing of it arrives",
    ),
    Gate(
        "connection.dropped-first-frame",
        Fault("drop", "up", 1),
        "BudgetExhausted",
        (0, 1),
        "role 1's first contribution is lost",
    ),
    Gate(
        "connection.reset",
        Fault("reset", "up", 2),
        "PeerLost",
        (0, 1),
        "the connection reset in the middle of the run",
    ),
)
