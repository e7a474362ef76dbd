"""The gates: one fault each, on a real run, and the refusal it must meet.

A gate runs one of these scenarios (a compiled plan and what runs it):

- ``pair``: two roles, one edge, three rounds of the sum check. Frames are counted per
  direction from the hello (index 0): toward role 1 ("down") the hello, one total per round,
  END and COMMIT; toward role 0 ("up") the hello, one contribution per round and DONE.
- ``chain``: three roles in a chain (0 - 1 - 2), four rounds of the sum check with an agreed
  choice each round (role 0 decides the round's parity; role 1 relays the word to role 2).
  Role 1 is built for AArch64 and runs under QEMU; its control run must compute bit for bit
  what the same role computes natively.
- ``learn``: four roles (role 0 and its three children) train the digits learner for two
  rounds. Role 3 has the same peers under fan-out 3 and fan-out 2, so a participant of another
  plan can take its place.
- ``lchain``: three roles in a chain train the digits learner in float32 for two rounds, role 1
  built for AArch64: its control run must compute the all-native run's bits. The learn
  scenarios' control runs must also end on the digests pinned in ``PINNED``, computed by an
  independently written learner and fold (``gates/reference_fold.py``).
- ``fan`` (role 0 and two children, an agreed choice), ``unkeyed`` (``pair`` on frame
  layout 2, where a damaged frame is ``Corrupted``) and ``spair`` (``pair`` with payloads that
  move through shared-memory regions, each DATA frame's doorbell on TCP), below. Every plan
  but ``unkeyed``'s is keyed (layout 3): a changed keyed frame is ``Forged``, however its
  trailer was recomputed.

The fault is one of: a relay on an edge that breaks one frame; an adversarial participant (the
honest artifact rebuilt with one behaviour changed, ``harness.adversary.BEHAVIOURS``); a
participant of another run (a plan with one field changed, or other code); a role absent,
late, stopped or killed; a stranger on a listener. Each gate names the role that must refuse,
or the roles of which one must (a silent edge is found by whichever end's budget runs out
first). Docs: ``docs/gates.md``.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from alpha.compiler import parse_plan
from alpha.wire import HEADER_SIZE, FrameKind
from gates.reference_fold import Learn
from harness.relay import Fault, as_commit
from harness.runs import Interrupt

__all__ = [
    "GATES",
    "PINNED",
    "REFERENCES",
    "SCENARIOS",
    "SCENARIO_PLANS",
    "Gate",
    "Scenario",
    "scenario_plan",
]

SCENARIO_PLANS: Final = Path(__file__).resolve().parents[1] / "fixtures" / "gates"
"""The scenarios' plans: files of the checkout's ``fixtures/gates/`` beside ``gates/``
(``fixtures/README.md``), read once, when this module is imported."""


def scenario_plan(name: str) -> str:
    """The text of the scenario plan ``fixtures/gates/<name>``, as the file holds it."""
    return (SCENARIO_PLANS / name).read_text()


@dataclass(frozen=True)
class Scenario:
    """A plan the gates run, its budgets (the code's own bounds), and its relayed edge."""

    name: str
    plan: str
    roles: int
    start: float
    receive: float
    edge: tuple[int, int]  # (listener, connector): where relay faults go
    emulated: tuple[int, ...] = ()  # roles built for AArch64 (run under QEMU)
    # The edges share memory (one launcher runs both roles on this host; DATA payloads of
    # SHARED_MIN bytes or more): the relay frames each such DATA frame as its doorbell, and
    # the control run must show payload bytes moved through regions (`shared_bytes`).
    shared: bool = False

    @property
    def bound(self) -> float:
        """The longest any one wait may take: a refusal must come within this of its fault."""
        return self.start + self.receive

    def budget(self, name: str) -> float:
        """The size in seconds of the budget ``name`` (``accept``, ``start``, ``receive``,
        ``connect``, ...) in this scenario's plan, its default where the plan sets none.

        Raises:
            KeyError: no budget has that name, or (``deadline``) the plan sets none.
        """
        value = getattr(parse_plan(self.plan, source=self.name).budgets, name, None)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise KeyError(f"scenario {self.name} has no {name} budget")
        return float(value)


PAIR: Final = Scenario(
    "pair",
    scenario_plan("pair.toml"),
    roles=2,
    start=8.0,
    receive=4.0,
    edge=(0, 1),
)

CHAIN: Final = Scenario(
    "chain",
    scenario_plan("chain.toml"),
    roles=3,
    start=60.0,
    receive=15.0,
    edge=(1, 2),
    emulated=(1,),
)

LEARN: Final = Scenario(
    "learn",
    scenario_plan("learn.toml"),
    roles=4,
    start=30.0,
    receive=10.0,
    edge=(0, 3),
)

# The chain on a floating-point learner (issue 22): the digits learner's float32 contributions
# folded along 2 -> 1 -> 0, with role 1 built for AArch64; its control must compute the
# all-native run's bits and the independent reference's (PINNED).
CHAIN_LEARN: Final = Scenario(
    "lchain",
    scenario_plan("lchain.toml"),
    roles=3,
    start=60.0,
    receive=15.0,
    edge=(1, 2),
    emulated=(1,),
)

# The pair on layout 2 (`[contract] integrity = "sha256"`): its SHA-256 trailer detects a
# damaged frame (`Corrupted`) and authenticates no one, so a rehashed frame passes it.
UNKEYED: Final = Scenario(
    "unkeyed",
    scenario_plan("unkeyed.toml"),
    roles=2,
    start=8.0,
    receive=4.0,
    edge=(0, 1),
)

# The pair on the shared-memory transport (issue 26): payloads of 128 KiB (32768 words), each
# DATA frame's payload through the edge's region, its header and trailer on TCP (the doorbell).
SHARED_PAIR: Final = Scenario(
    "spair",
    scenario_plan("spair.toml"),
    roles=2,
    start=8.0,
    receive=4.0,
    edge=(0, 1),
    shared=True,
)

SCENARIOS: Final = {
    scenario.name: scenario for scenario in (PAIR, CHAIN, LEARN, CHAIN_LEARN, UNKEYED, SHARED_PAIR)
}

# Byte offsets in a frame (docs/frames.md).
_MAGIC, _KIND, _IDENTITY, _SENDER, _VERSION_LOW, _PAYLOAD = 0, 5, 8, 107, 123, 133


@dataclass(frozen=True)
class Gate:
    """One fault, and the refusal it must meet (``"commit"``: the run must commit)."""

    name: str
    expected: str  # the refusal's class, or "commit"
    at: tuple[int, ...]  # the role that must refuse, or the roles of which one must
    meaning: str
    scenario: Scenario = PAIR
    fault: Fault | None = None  # a relay fault on the scenario's edge
    adversaries: Mapping[int, str] = field(default_factory=dict)  # role -> behaviour
    foreign: tuple[int, str, str] | None = None  # (role, text, replacement) in the plan
    program: int | None = None  # a role compiled from other code
    absent: frozenset[int] = frozenset()
    delays: Mapping[int, float] = field(default_factory=dict)
    stranger: int | None = None  # a role whose listener a stranger connects to first
    interrupt: Interrupt | None = None  # a signal sent when the relay's call fault fires
    budget: str | None = None  # for BudgetExhausted: the budget the refusal must name
    # The refusal must come from a role the fault did not replace (`replaced`): an honest
    # role among `at` refuses with the expected class by itself. False only where the check
    # a gate proves is the replaced role's own (its local misuse caught in its own process).
    honest: bool = True
    # Where the refusing role refuses before any of its edges exists (its artifact refused by
    # its own loader), no frame can carry the cause to its peers: each other live role must
    # instead name this (class, budget), the absence it sees. None: they name the original
    # cause, as everywhere else.
    unreached: tuple[str, str] | None = None
    # A role started from another compile of the same plan (its own run secret: the same
    # identity, other edge keys), as an artifact copied from another run of the plan is.
    recompiled: int | None = None
    # The stranger (`stranger`) sends a hello right in every header field with a trailer
    # under a key of its own (`harness.adversary.keyless_hello`), not an HTTP request.
    keyless: bool = False
    # A fault on an ABORT strikes a frame that a failing role sends: (role, class) of the
    # refusal that makes it fail (an adversary's doing). That refusal must come first; the
    # expected one then comes at `at`, from the relay's act, within its bound.
    after: tuple[int, str] | None = None
    # For `CommitUnknown` (a child that refused the frame where its COMMIT is due cannot learn
    # whether the run committed): the class of the refusal it met, whose advice its message
    # must carry. Its report stays staged, never final.
    through: str | None = None
    # The fault strikes after the commit point: role 0 wrote the commit record before the
    # COMMIT left. Every role outside `at` then ends 0 with its report published; the roles
    # of `at` fail, their reports staged, never final.
    committed: bool = False

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def disabled(self) -> frozenset[int]:
        """Roles the fault takes out (never started, stopped or killed): they cannot refuse,
        and are not asked to fail by themselves."""
        out = set(self.absent)
        if self.interrupt is not None:
            out.add(self.interrupt.role)
        return frozenset(out)

    @property
    def replaced(self) -> frozenset[int]:
        """Roles whose artifact the fault replaced (an adversary, a participant of another
        plan or of other code): a refusal of theirs proves nothing about an honest peer."""
        out = set(self.adversaries)
        if self.foreign is not None:
            out.add(self.foreign[0])
        if self.program is not None:
            out.add(self.program)
        if self.recompiled is not None:
            out.add(self.recompiled)
        return frozenset(out)

    def fault_text(self) -> str:
        """The fault in a few words, for the table."""
        parts = []
        if self.fault is not None:
            fault = self.fault
            at = fault.frame.name if isinstance(fault.frame, FrameKind) else f"frame {fault.frame}"
            edge = "-".join(map(str, self.scenario.edge))
            what: str = fault.kind
            if self.interrupt is not None:
                what = f"{self.interrupt.signal.name} role {self.interrupt.role}"
            parts.append(f"{what} at {fault.direction} {at} on {edge}")
        for role, behaviour in sorted(self.adversaries.items()):
            parts.append(f"role {role} {behaviour}")
        if self.foreign is not None:
            role, _, replacement = self.foreign
            parts.append(f"role {role} of a plan with {replacement.splitlines()[-1]}")
        if self.program is not None:
            parts.append(f"role {self.program} from other code")
        if self.recompiled is not None:
            parts.append(f"role {self.recompiled} of another compile of the plan")
        parts += [f"role {role} absent" for role in sorted(self.absent)]
        parts += [f"role {role} {s:g} s late" for role, s in sorted(self.delays.items())]
        if self.stranger is not None:
            sends = "a keyless hello" if self.keyless else "HTTP"
            parts.append(f"a stranger on role {self.stranger}'s listener ({sends})")
        return "; ".join(parts)


def _frames() -> tuple[Gate, ...]:
    return (
        Gate(
            "frames.replay",
            "Replayed",
            (0,),
            "round 0's contribution again where round 1's is due",
            fault=Fault("replay", "up", 2),
        ),
        Gate(
            "frames.skipped-version",
            "SkippedVersion",
            (0,),
            "a contribution whose version runs ahead of the receiver's counter",
            fault=Fault("corrupt", "up", 1, offset=_VERSION_LOW),
        ),
        Gate(
            "frames.double-rearm",
            "DoubleRearm",
            (1,),
            "role 1 arms a receive slot twice for the same frame",
            adversaries={1: "double-rearm"},
            honest=False,  # the adversary's own runtime refuses its own schedule's misuse
        ),
        Gate(
            "frames.overflow",
            "VersionOverflow",
            (0, 1),
            "both roles' counters start two frames before 2^64 - 1: the third frame of a slot "
            "is refused, never wrapped",
            adversaries={0: "near-overflow", 1: "near-overflow"},
            honest=False,  # both roles are adversaries: no honest role is left to refuse
        ),
        Gate(
            "frames.corrupt-header",
            "WrongFrame",
            (0,),
            "a damaged magic byte in a contribution's header",
            fault=Fault("corrupt", "up", 1, offset=_MAGIC),
        ),
        # A keyed frame's MAC fails on damage as on forgery: the receiver cannot tell them
        # apart, so a damaged keyed frame is Forged (layout 2's Corrupted: `frames.*-unkeyed`).
        Gate(
            "frames.corrupt-payload",
            "Forged",
            (1,),
            "a damaged byte in a total's payload (keyed: damage and forgery look alike)",
            fault=Fault("corrupt", "down", 2, offset=_PAYLOAD),
        ),
        Gate(
            "frames.corrupt-trailer",
            "Forged",
            (0,),
            "a damaged byte in the last contribution's keyed trailer",
            fault=Fault("corrupt", "up", 3, offset=-1),
        ),
        Gate(
            "frames.truncation",
            "Truncated",
            (0,),
            "the stream toward role 0 ends inside a contribution's header",
            fault=Fault("truncate", "up", 2, offset=100),
        ),
        Gate(
            "frames.trailing-bytes",
            "TrailingBytes",
            (1,),
            "bytes after the schedule's last frame toward role 1",
            fault=Fault("insert", "down", FrameKind.END),
        ),
        Gate(
            "frames.trailing-after-last",
            "TrailingBytes",
            (0,),
            "bytes after role 1's last frame of all (its DONE)",
            fault=Fault("append", "up", FrameKind.DONE),
        ),
        Gate(
            "frames.last-frame-twice",
            "TrailingBytes",
            (0,),
            "the last contribution sent twice",
            fault=Fault("replay", "up", FrameKind.DONE),
        ),
        Gate(
            "frames.swapped",
            "WrongFrame",
            (1,),
            "round 2's total and END swapped: END arrives where the total is due",
            fault=Fault("swap", "down", 3),
        ),
        Gate(
            "frames.wrong-edge",
            "WrongEdge",
            (0,),
            "a contribution that names another sender",
            fault=Fault("corrupt", "up", 1, offset=_SENDER),
        ),
        Gate(
            "frames.wrong-kind",
            "WrongFrame",
            (1,),
            "a total whose kind byte names no kind of frame",
            fault=Fault("corrupt", "down", 1, offset=_KIND),
        ),
        Gate(
            "frames.foreign-identity",
            "IdentityMismatch",
            (0,),
            "a hello bound to another run identity",
            fault=Fault("corrupt", "up", 0, offset=_IDENTITY),
        ),
    )


def _identity() -> tuple[Gate, ...]:
    def foreign(name: str, text: str, replacement: str, meaning: str) -> Gate:
        return Gate(
            f"identity.{name}",
            "IdentityMismatch",
            (0, 3),
            meaning,
            scenario=LEARN,
            foreign=(3, text, replacement),
        )

    return (
        foreign("learner", "hidden = 16", "hidden = 24", "role 3 built for another model width"),
        foreign("rate", "rate = 0.15", "rate = 0.3", "role 3 built for another learning rate"),
        foreign(
            "contract",
            'dtype = "float32"',
            'dtype = "float64"',
            "role 3 built for another numerical contract (float64)",
        ),
        foreign("tree", "fanout = 3", "fanout = 2", "role 3 built for another combine tree"),
        foreign(
            "membership",
            'group = "(group (stride 0 1 4))"',
            'group = "(group (stride 0 1 4))"\nidentity = "a5"',
            "role 3 built for another membership (other group identity bytes)",
        ),
        Gate(
            "identity.program",
            "IdentityMismatch",
            (0, 3),
            "role 3 built from sources that differ by one comment (another code digest)",
            scenario=LEARN,
            program=3,
        ),
    )


def _connection() -> tuple[Gate, ...]:
    return (
        Gate(
            "connection.absent-peer",
            "BudgetExhausted",
            (0,),
            "role 1 never starts: role 0's accept budget runs out",
            absent=frozenset({1}),
            budget="accept",
        ),
        Gate(
            "connection.late-peer",
            "commit",
            (),
            "role 1 starts 3 s late, within role 0's accept budget: the run must commit",
            delays={1: 3.0},
        ),
        Gate(
            "connection.trickle",
            "commit",
            (),
            "role 1's first contribution trickles in a byte every 5 ms (about 1.1 s), inside "
            "the 4 s receive budget: a slow link is not a fault, the run must commit",
            fault=Fault("trickle", "up", 1, seconds=0.005),
        ),
        Gate(
            "connection.stranger",
            "WrongFrame",
            (0,),
            "a stranger connects to role 0's listener before role 1 and sends HTTP",
            stranger=0,
        ),
        Gate(
            "connection.silent-peer",
            "BudgetExhausted",
            (0, 1),
            "role 1 greets, then nothing of it arrives",
            fault=Fault("stall", "up", 1),
            budget="start",  # the first frame after the hellos never comes
        ),
        Gate(
            "connection.stopped-peer",
            "BudgetExhausted",
            (0,),
            "role 1 is stopped (SIGSTOP) as role 0's hello reaches it",
            fault=Fault("call", "down", 0),
            interrupt=Interrupt(1, signal.SIGSTOP),
            budget="start",
        ),
        Gate(
            "connection.dropped-first-frame",
            "BudgetExhausted",
            (0, 1),
            "role 1's first contribution is lost",
            fault=Fault("drop", "up", 1),
            budget="start",  # the first frame after the hellos never comes
        ),
        Gate(
            "connection.reset",
            "PeerLost",
            (0, 1),
            "the connection reset in the middle of the run",
            fault=Fault("reset", "up", 2),
        ),
    )


def _choice() -> tuple[Gate, ...]:
    return (
        Gate(
            "choice.inverted",
            "WrongEdge",
            (1,),
            "role 2 takes the arm opposite to the agreed word; emulated role 1 refuses its "
            "contribution, bound to the other arm's slot",
            scenario=CHAIN,
            adversaries={2: "inverted-choice"},
        ),
        Gate(
            "choice.independent-forwarder",
            "WrongFrame",
            (1,),
            "emulated role 1 decides the parity itself instead of relaying role 0's word; the "
            "unread word is refused where the total is due",
            scenario=CHAIN,
            adversaries={1: "independent-forwarder"},
            honest=False,  # the adversary refuses the word it did not read; no honest role does
        ),
        Gate(
            "choice.noncanonical-word",
            "NoncanonicalWord",
            (1,),
            "role 0 sends the word 1 little-endian; emulated role 1 refuses it",
            scenario=CHAIN,
            adversaries={0: "noncanonical-word"},
        ),
        Gate(
            "choice.mismatched-binding",
            "WrongFrame",
            (1,),
            "role 0 binds the word to a data frame; emulated role 1 refuses it",
            scenario=CHAIN,
            adversaries={0: "mismatched-binding"},
        ),
    )


def _failure() -> tuple[Gate, ...]:
    return (
        Gate(
            "failure.killed-mid-round",
            "PeerLost",
            (0,),
            "role 1 is killed (SIGKILL) in round 1, as round 1's total reaches it",
            fault=Fault("call", "down", 2),
            interrupt=Interrupt(1, signal.SIGKILL),
        ),
    )


# --- A gate for each check (issue 22) ---------------------------------------------------------
# Each of these fails when the one product check it names is removed (docs/gates.md lists the
# removals tried). The refusing role runs the product's own code for that check.

_RECEIVER: Final = _SENDER + 1  # the receiver field's first byte (offset 108)

REFERENCES: Final[Mapping[str, Learn]] = {
    "learn": Learn(hidden=16, rate=0.15, seed=7, batch=16, rounds=2, roles=4,
                   children={0: (1, 2, 3)}),
    "lchain": Learn(hidden=16, rate=0.15, seed=7, batch=16, rounds=2, roles=3,
                         children={0: (1,), 1: (2,)}),
}  # fmt: skip
"""The learn scenarios as the independent reference (``gates/reference_fold.py``) is told
them: the plans' numbers, and each tree as an explicit map of children."""

PINNED: Final[Mapping[str, Mapping[str, str]]] = {
    "learn": {
        "g": "a453a18ce4d35524a6453d742a5bac5b18a678488773cd546f992523569f57f5",
        "w": "b35cf0520cc68f6547805849e4536059cfeb59116cbed47153d4980ce3d9f949",
    },
    "lchain": {
        "g": "14adcf509dd6f4b6999110f3bc4e842d0ef505f053ac9111911ed7b085896716",
        "w": "d476d58c4f5fc8d30b8d72255ffd36c06e0f576bc9ef48f48ad67deedca99262",
    },
}
"""Every role's final region digests in a learn scenario's control run, as the independent
reference computes them (``tests/gates/test_gates.py`` checks it still does): the control fails
on any other bits, so a changed fold order, split or learner step is caught even where the
product's replicated learner changes with it."""


def _checks() -> tuple[Gate, ...]:
    return (
        Gate(
            "frames.wrong-receiver",
            "WrongEdge",
            (3,),
            "role 0's first frame to role 3 after the hello arrives with its receiver field "
            "naming role 2, a sibling: a frame meant for another role",
            scenario=LEARN,
            fault=Fault("overwrite", "down", 1, data=(2).to_bytes(4, "big"), offset=_RECEIVER),
        ),
        Gate(
            "connection.receive-budget",
            "BudgetExhausted",
            (0,),
            "role 1 sends its first contribution, then nothing for two receive budgets: "
            "role 0's receive budget (4 s) runs out waiting for the second",
            adversaries={1: "stall-after-first"},
            budget="receive",
        ),
        Gate(
            "artifact.damaged-member",
            "ArtifactInvalid",
            (1,),
            "role 1's artifact with one stored member (role.json) changed and its CRC-32 "
            "recomputed, so the zip reads cleanly: its loader's SHA-256 check refuses it before "
            "anything runs",
            adversaries={1: "damaged-member"},
            honest=False,  # the damaged artifact's own loader refuses it: no peer is involved
            unreached=("BudgetExhausted", "accept"),  # role 0 waits out role 1, who never came
        ),
        Gate(
            "artifact.tampered-runtime",
            "ArtifactInvalid",
            (1,),
            "role 1's artifact unchanged, beside a runtime of the package with one line added "
            "under the name of the shared runtime it binds (whole and consistent: its manifest "
            "lists its members): role 1's loader finds its SHA-256 is not the one it binds and "
            "refuses before any of the runtime's code runs",
            adversaries={1: "tampered-runtime"},
            honest=False,  # role 1's own loader refuses its runtime: no peer is involved
            unreached=("BudgetExhausted", "accept"),  # role 0 waits out role 1, who never came
        ),
        Gate(
            "frames.overflow-receive-side",
            "VersionOverflow",
            (0,),
            "role 1 sends past its counter's maximum (its own check removed); role 0, whose "
            "receive counters stand two frames before 2^64 - 1, must refuse the third frame of "
            "a slot on its receive side",
            adversaries={0: "aged-receiver", 1: "overflowing-sender"},
            # The refusing role starts its receive counters near the top (the only way to
            # reach them in a run); the check that refuses is the product's own.
            honest=False,
        ),
        Gate(
            "frames.overflow-send-side",
            "VersionOverflow",
            (1,),
            "role 0 would accept past its counter's maximum (its own check removed); role 1, "
            "whose send counters stand two frames before 2^64 - 1, must refuse to send the "
            "third frame of a slot",
            adversaries={0: "overflowing-receiver", 1: "aged-sender"},
            honest=False,  # as above, on the send side
        ),
        Gate(
            "choice.lying-forwarder",
            "WrongEdge",
            (0,),
            "emulated role 1 reads role 0's word but relays and follows the other one; native "
            "role 0 refuses role 1's contribution, bound to the other arm's slot",
            scenario=CHAIN,
            adversaries={1: "lying-forwarder"},
        ),
        Gate(
            "frames.corrupt-emulated",
            "Forged",
            (1,),
            "a damaged byte in role 2's float32 contribution toward emulated role 1 (AArch64), "
            "whose keyed trailer refuses it",
            scenario=CHAIN_LEARN,
            fault=Fault("corrupt", "up", 1, offset=_PAYLOAD),
        ),
    )


# --- an ABORT seen wherever it waits (issue 22) -----------------------------------------------

FAN: Final = Scenario(
    "fan",
    scenario_plan("fan.toml"),
    roles=3,
    start=12.0,
    receive=4.0,
    edge=(0, 1),
)
"""Role 0 and its children 1 and 2, the sum check with an agreed choice. Each round role 0
sends the word to 1 and 2, then reads role 1's contribution before role 2's: while it waits
on a silent role 1 (its start budget, 12 s), role 2's contribution lies unread at role 0, and
role 2, which heard the word, waits for the total on its receive budget (4 s): its ABORT
arrives behind that contribution."""
SCENARIOS[FAN.name] = FAN


def _abort_watch() -> tuple[Gate, ...]:
    return (
        Gate(
            "failure.abort-behind-data",
            "BudgetExhausted",
            (2,),
            "role 0's word to role 1 is lost: role 1 waits for it and role 0 for role 1's "
            "contribution, on their start budgets; role 2's receive budget runs out first, "
            "and its ABORT, queued at role 0 behind role 2's unread contribution, must stop "
            "role 0 at once, and role 0's ABORT role 1",
            scenario=FAN,
            fault=Fault("drop", "down", 1),
            budget="receive",
        ),
        Gate(
            "connection.greets-then-silent",
            "BudgetExhausted",
            (1, 2),
            "role 1 greets, then nothing of it reaches role 0, which waits on its start "
            "budget; the receive budgets of roles 1 and 2 run out, and role 2's ABORT, behind "
            "its unread contribution, must stop role 0 at once",
            scenario=FAN,
            fault=Fault("stall", "up", 1),
            budget="receive",
        ),
        Gate(
            "connection.impostor-hello",
            "BudgetExhausted",
            (1, 2),
            "a stranger sends role 0 role 1's exact hello, then nothing; role 1 gets no hello "
            "(its receive budget runs out), role 0 waits on its start budget, and role 2's "
            "ABORT, behind its unread contribution, must stop role 0 at once",
            scenario=FAN,
            fault=Fault("impersonate", "up", 0),
            budget="receive",
        ),
    )


# --- authenticated frames and admission (issue 25) ------------------------------------------
# Every scenario plan is keyed (layout 3) but `unkeyed`. A rehash changes a frame and
# recomputes its trailer as an attacker without the edge's key can (harness.relay.rehashed):
# the frame passes every check but the MAC.

_OWN_KEY: Final = bytes(range(0xC0, 0xE0))  # a key of the attacker's own, 32 bytes
_LAST_PAYLOAD_BYTE: Final = -33  # from the frame's end: the byte before the 32-byte trailer
_CAUSE_NAME: Final = HEADER_SIZE + 21  # an ABORT's cause class name (docs/frames.md)
_FORGED_COMMIT: Final = bytes.fromhex("5a" * 32)  # the digest the forged COMMIT carries


def _keys() -> tuple[Gate, ...]:
    return (
        Gate(
            "frames.corrupt-payload-unkeyed",
            "Corrupted",
            (1,),
            "a damaged byte in a total's payload, on layout 2: its SHA-256 trailer finds it",
            scenario=UNKEYED,
            fault=Fault("corrupt", "down", 2, offset=_PAYLOAD),
        ),
        Gate(
            "frames.corrupt-trailer-unkeyed",
            "Corrupted",
            (0,),
            "a damaged byte in the last contribution's SHA-256 trailer, on layout 2",
            scenario=UNKEYED,
            fault=Fault("corrupt", "up", 3, offset=-1),
        ),
        Gate(
            "forgery.rehash-data",
            "Forged",
            (0,),
            "round 0's contribution with its last byte's low bit flipped and its trailer "
            "recomputed (the SHA-256 seal over header and payload digest)",
            fault=Fault("rehash", "up", 1, data=b"\x01", offset=_LAST_PAYLOAD_BYTE),
        ),
        Gate(
            "forgery.rehash-choice",
            "Forged",
            (1,),
            "role 0's choice word to role 1 with its low bit flipped (the other arm) and its "
            "trailer an HMAC under the relay's own key",
            scenario=FAN,
            fault=Fault(
                "rehash",
                "down",
                FrameKind.CHOICE,
                data=b"\x01",
                offset=_LAST_PAYLOAD_BYTE,
                key=_OWN_KEY,
            ),
        ),
        Gate(
            "forgery.rehash-abort",
            "Forged",
            (0,),
            "role 1 fails at once (its own DoubleRearm) and its ABORT's cause text is "
            "rewritten (DoubleRearm to doubleRearm) and rehashed on the way to role 0",
            adversaries={1: "double-rearm"},
            fault=Fault("rehash", "up", FrameKind.ABORT, data=b"\x20", offset=_CAUSE_NAME),
            after=(1, "DoubleRearm"),
        ),
        Gate(
            "forgery.abort-as-commit",
            "CommitUnknown",
            (1,),
            "role 2 sends its DONE twice, so role 0 aborts (TrailingBytes) where role 1 waits "
            "for the COMMIT; its ABORT to role 1 is rewritten into a COMMIT (kind, extent, "
            "payload) and rehashed: role 1 refuses it, cannot learn whether the run committed, "
            "and publishes no report",
            scenario=FAN,
            adversaries={2: "done-twice"},
            fault=Fault("rehash", "down", FrameKind.ABORT, rewrite=as_commit(_FORGED_COMMIT)),
            after=(0, "TrailingBytes"),
            through="Forged",
        ),
        Gate(
            "forgery.rehash-done",
            "Forged",
            (0,),
            "role 1's DONE with a byte of its completion digest changed and rehashed: role 0 "
            "refuses it before the commit point",
            fault=Fault("rehash", "up", FrameKind.DONE, data=b"\x01", offset=_PAYLOAD),
        ),
        Gate(
            "forgery.rehash-commit",
            "CommitUnknown",
            (1,),
            "role 0's COMMIT with a byte of its digest changed and rehashed: role 0 committed "
            "(its record is the commit point, written before the COMMIT left) and ends 0; "
            "role 1 refuses the COMMIT, cannot learn whether the run committed, and keeps its "
            "report staged, never final",
            fault=Fault("rehash", "down", FrameKind.COMMIT, data=b"\x01", offset=_PAYLOAD),
            through="Forged",
            committed=True,
        ),
        Gate(
            "admission.keyless-stranger",
            "Forged",
            (0,),
            "a stranger that holds the plan but no key connects to role 0's listener before "
            "role 1 and sends role 1's hello, right in every header field (the identity "
            "computed from the plan and the code), its trailer under a key of its own",
            stranger=0,
            keyless=True,
        ),
        Gate(
            "admission.other-compile",
            "Forged",
            (0, 1),
            "role 1 started from another compile of the same plan (an artifact copied from "
            "another run of it): the same identity, other edge keys; its hello is refused",
            recompiled=1,
        ),
        Gate(
            "admission.unkeyed-peer",
            "WrongFrame",
            (0, 1),
            'role 1 built from the same plan with integrity = "sha256" (layout 2): role 0 '
            "refuses its hello at the format byte, and role 1 role 0's keyed ABORT likewise",
            foreign=(1, "size = 16", 'size = 16\n[contract]\nintegrity = "sha256"'),
        ),
    )


# --- the shared-memory transport (issue 26) -----------------------------------------------
# On `spair` a DATA frame is a doorbell on TCP (header and trailer back to back: the relay
# frames it so, `Scenario.shared`) and its payload lies in the receiver's region.

_DOORBELL_TRAILER: Final = HEADER_SIZE + 8  # inside the trailer, right after the header


def _shared() -> tuple[Gate, ...]:
    return (
        Gate(
            "shared.corrupt-header",
            "WrongFrame",
            (0,),
            "a damaged magic byte in a contribution's doorbell",
            scenario=SHARED_PAIR,
            fault=Fault("corrupt", "up", 1, offset=_MAGIC),
        ),
        Gate(
            "shared.replay",
            "Replayed",
            (0,),
            "round 0's contribution's doorbell again where round 1's is due",
            scenario=SHARED_PAIR,
            fault=Fault("replay", "up", 2),
        ),
        Gate(
            "shared.corrupt-trailer",
            "Forged",
            (0,),
            "a damaged byte in the last contribution's doorbell trailer",
            scenario=SHARED_PAIR,
            fault=Fault("corrupt", "up", 3, offset=-1),
        ),
        Gate(
            "shared.truncation",
            "Truncated",
            (0,),
            "the stream toward role 0 ends inside a contribution's doorbell trailer, after its "
            "payload was copied out of the region",
            scenario=SHARED_PAIR,
            fault=Fault("truncate", "up", 2, offset=_DOORBELL_TRAILER),
        ),
        Gate(
            "shared.rewritten-payload",
            "Forged",
            (0,),
            "role 1 flips a byte of its contribution in its outgoing region after the frame's "
            "trailer was computed: role 0 copies out what the trailer does not seal",
            scenario=SHARED_PAIR,
            adversaries={1: "region-rewritten"},
        ),
        Gate(
            "shared.cut-short",
            "Truncated",
            (0,),
            "role 1 cuts its outgoing region short inside the contribution it wrote, before "
            "its doorbell: role 0's copy reads short",
            scenario=SHARED_PAIR,
            adversaries={1: "region-cut-short"},
        ),
        Gate(
            "shared.short-region",
            "RegionRefused",
            (0,),
            "role 1 makes its incoming region one page short of the schedule's layout: role "
            "0, its sender, refuses it on opening",
            scenario=SHARED_PAIR,
            adversaries={1: "region-page-short"},
        ),
        Gate(
            "shared.foreign-marker",
            "RegionRefused",
            (0,),
            "role 1 marks its incoming region with another layout digest: role 0, its sender, "
            "refuses it on opening",
            scenario=SHARED_PAIR,
            adversaries={1: "region-foreign-marker"},
        ),
        Gate(
            "shared.killed-mid-round",
            "PeerLost",
            (0,),
            "role 1 is killed (SIGKILL) in round 1, as round 1's total's doorbell reaches it",
            scenario=SHARED_PAIR,
            fault=Fault("call", "down", 2),
            interrupt=Interrupt(1, signal.SIGKILL),
        ),
    )


def _checkpoints() -> tuple[Gate, ...]:
    # Defined in gates/checkpoints.py, which builds on Gate and Scenario above.
    from gates.checkpoints import gates

    return gates()


def _recovery() -> tuple[Gate, ...]:
    # Defined in gates/recovery.py: whole runs of `alpha run --restarts`.
    from gates.recovery import gates

    return gates()


GATES: Final[tuple[Gate, ...]] = (
    *_frames(),
    *_identity(),
    *_connection(),
    *_choice(),
    *_failure(),
    *_checks(),
    *_checkpoints(),
    *_abort_watch(),
    *_keys(),
    *_shared(),
    *_recovery(),
)
"""Every gate, in the order they run and are listed."""
