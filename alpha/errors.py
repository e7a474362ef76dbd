"""The one exception tree of Alpha.

Every refusal Alpha makes is an instance of exactly one leaf class below
:class:`AlphaError`, so that callers and tests can name the cause precisely.
Directly below :class:`AlphaError` are two families, and every other class is in
exactly one of them:

- :class:`InputInvalid`: what was typed or built is wrong (a command line, a
  plan, a group, a tree, a role description, an artifact); nothing ran.
- :class:`RunFailed`: something ran and failed (a refused frame, an exhausted
  budget, a lost peer, an aborted round, an unknown commit).

A family carries the process exit code of its members as ``exit_code``
(``docs/exit-codes.md``), so the command line reads the code off the class
instead of keeping its own list. Inside the families, smaller ones group the
causes of one layer (membership admission, the participant tree, the frame
codec, ...). Each class's docstring says when it is raised and what an operator
should do about it; each message names the offending part.

Later layers add their families here, so the whole tree reads in one file.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from alpha.exitcodes import EXIT_FAILURE, EXIT_USAGE

__all__ = [
    "AbortInvalid",
    "AdmissionError",
    "AlphaError",
    "ArtifactExposed",
    "ArtifactInvalid",
    "BudgetExhausted",
    "CheckFailed",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointFolderHeld",
    "CheckpointWriteFailed",
    "ChoiceAuthorityInvalid",
    "ChoiceUninformed",
    "CommitInvalid",
    "CommitUnknown",
    "ContractBroken",
    "ContractInvalid",
    "Corrupted",
    "CoverageBroken",
    "DeployInvalid",
    "DescriptorLimitTooLow",
    "DisseminationInvalid",
    "DoubleRearm",
    "EmptySelection",
    "EmulationUnavailable",
    "FanoutInvalid",
    "FolderInUse",
    "Forged",
    "FrameError",
    "FrameIncomplete",
    "FrameMisuse",
    "FrameRefused",
    "FrameSpecInvalid",
    "GenerationExists",
    "GenerationForeign",
    "GenerationNotFound",
    "GpuUnavailable",
    "GroupFieldInvalid",
    "GroupSyntaxError",
    "IdentityError",
    "IdentityMismatch",
    "IdentityPartInvalid",
    "IndexBudgetExceeded",
    "InputInvalid",
    "JobCancelled",
    "JobTimeLimit",
    "KeyScheduleInvalid",
    "LauncherLost",
    "LearnerInputInvalid",
    "LearnerModuleInvalid",
    "LearnerStateInvalid",
    "LossNotFinite",
    "NoRealization",
    "NodeUnreachable",
    "NoncanonicalWord",
    "NotAMember",
    "OperationUnimplemented",
    "OverlappingParts",
    "ParticipantOutOfRange",
    "PeerLost",
    "PlanInvalid",
    "PortMissing",
    "PortTaken",
    "ProgressRecordInvalid",
    "ProtocolFailure",
    "ProtocolRejected",
    "RegionInvalid",
    "RegionRefused",
    "RepeatBoundExceeded",
    "Replayed",
    "RoleDescriptionInvalid",
    "RoleOutOfRange",
    "RoleOutsideUniverse",
    "RoundAborted",
    "RoundFailed",
    "RunFailed",
    "SelectorNotAtAuthority",
    "SelectorOutOfRange",
    "SelfTransfer",
    "SkippedVersion",
    "SlotFault",
    "SlurmJobEnded",
    "SlurmUnavailable",
    "TargetMismatch",
    "TopologyError",
    "TraceInvalid",
    "TraceMismatch",
    "TrailingBytes",
    "TreeSizeInvalid",
    "Truncated",
    "UsageError",
    "VersionOverflow",
    "WarmStarterLost",
    "WarmStarterStalled",
    "WrongEdge",
    "WrongFrame",
]


class AlphaError(Exception):
    """Base of every error Alpha raises on purpose. Never raised itself: every error is in
    :class:`InputInvalid` or :class:`RunFailed`."""

    #: The exit code of a command that stops on this error (``docs/exit-codes.md``). Each
    #: family sets its own; a command reads it off the error's class.
    exit_code: ClassVar[int] = EXIT_FAILURE


class InputInvalid(AlphaError):
    """What was typed or built is wrong: a command-line argument, a plan, a participant group
    or tree, a run identity's inputs, a role description, a protocol, an artifact or its
    target. It is found before anything runs, so nothing ran; fix the input named in the
    message and run the command again. Exit code 2 (``EXIT_USAGE``)."""

    exit_code: ClassVar[int] = EXIT_USAGE


class RunFailed(AlphaError):
    """Something Alpha started ran and failed: a frame was refused, a wait ran out, a peer
    was lost, a round was aborted, a participant or its launcher failed, or the run's commit
    is missing or unknown. The input was fine as far as it could be checked; the message
    names the role and what to look at. Exit code 1 (``EXIT_FAILURE``)."""

    exit_code: ClassVar[int] = EXIT_FAILURE


class UsageError(InputInvalid, ValueError):
    """A command-line argument or option is wrong; the message names it."""


# --- membership -------------------------------------------------------------


class GroupSyntaxError(InputInvalid, ValueError):
    """The textual form of a participant group does not parse.

    The message gives the position of the first token that does not fit and
    what was expected there.
    """


class AdmissionError(InputInvalid, ValueError):
    """A participant group was refused at admission; the subclass names why."""


class EmptySelection(AdmissionError):
    """The selection (or one of its parts: a stride or repeat of count 0, an
    empty join) selects no role at all."""


class OverlappingParts(AdmissionError):
    """Two parts select a common role, or parts are not in ascending order:
    a join whose parts are out of order, a repeat whose copies overlap or
    interleave, a stride whose step does not advance."""


class RoleOutsideUniverse(AdmissionError):
    """A selected role is below 0, at or past the universe, or the arithmetic
    that computes it passes the documented role width."""


class IndexBudgetExceeded(AdmissionError):
    """The selection needs more index nodes than its budget allows."""


class GroupFieldInvalid(AdmissionError):
    """A group's epoch or identity is outside its documented range (epoch in
    ``0..2**64-1``, identity at most ``MAX_IDENTITY_BYTES`` bytes)."""


class NotAMember(InputInvalid, LookupError):
    """A role was looked up in a group whose selection does not contain it."""


# --- topology ---------------------------------------------------------------


class TopologyError(InputInvalid, ValueError):
    """A participant tree was asked for something that cannot exist."""


class TreeSizeInvalid(TopologyError):
    """A participant tree needs at least one role."""


class FanoutInvalid(TopologyError):
    """A participant tree needs a fan-out of at least one."""


class RoleOutOfRange(TopologyError, LookupError):
    """A role outside ``0..n-1`` was asked of an ``n``-role tree."""


class CoverageBroken(TopologyError):
    """A node's children do not exactly cover its subtree (``certify``)."""


# --- frames -----------------------------------------------------------------
#
# Two families under FrameError, as h11 tells a LocalProtocolError from a RemoteProtocolError:
# FrameRefused is a peer's fault (the bytes it sent are not what this slot was built to accept);
# FrameMisuse is this program's own (it built a spec, drove a reception, armed a slot or spent a
# counter wrongly), and no peer byte is involved. SlotFault carries the fields of a fault at one
# slot of one edge, and is shared by every FrameRefused and by the misuses that have a slot.


class FrameError(RunFailed):
    """A frame did not pass between two participants. Never raised itself: every frame error
    is either a :class:`FrameRefused` (the peer's bytes) or a :class:`FrameMisuse` (this
    participant's own program), and a handler that must tell a peer's fault from a local bug
    catches one of those."""


class SlotFault(FrameError):
    """A frame error at one slot of one edge, with the fields an operator needs. Never raised
    itself: its leaves are the :class:`FrameRefused` causes and the slot misuses
    (:class:`DoubleRearm`, :class:`VersionOverflow`).

    Every one carries ``role`` (this participant), ``peer`` (the other end), ``edge``
    (``(sender, receiver)``), ``slot`` (the scheduled transfer), ``version`` (the version the
    slot stood at), ``field`` (the frame field at fault) and ``expected`` and ``received``
    values of that field. A receive slot that raised one stays refused with it. On the
    receiving side ``role`` is the receiver and ``peer`` the sender; on the sending side
    (``VersionOverflow`` from a send slot) ``role`` is the sender and ``peer`` the receiver.
    """

    #: What an operator should do about this cause; subclasses override it.
    advice = "check that both participants were compiled from the same plan"

    #: For ``IdentityMismatch``: the identity parts that differ, in wire order
    #: (``learner``, ``contract``, ``membership``); empty for every other cause.
    parts: tuple[str, ...] = ()

    def __init__(
        self,
        detail: str,
        *,
        role: int,
        peer: int,
        slot: int,
        version: int,
        field: str,
        expected: object = None,
        received: object = None,
        edge: tuple[int, int] | None = None,
    ) -> None:
        self.detail = detail
        self.role = role
        self.peer = peer
        self.slot = slot
        self.version = version
        self.field = field
        self.expected = expected
        self.received = received
        self._edge = (peer, role) if edge is None else edge
        sender, receiver = self._edge
        super().__init__(
            f"role {role}: frame on edge {sender}->{receiver}, slot {slot}, version {version} "
            f"refused: {detail}; {self.advice}"
        )

    @property
    def edge(self) -> tuple[int, int]:
        """The edge as ``(sender, receiver)``."""
        return self._edge

    def recast(self, cls: type[SlotFault], detail: str) -> SlotFault:
        """A refusal of class ``cls`` saying ``detail``, with every other field of this one."""
        again = cls(
            detail,
            role=self.role,
            peer=self.peer,
            slot=self.slot,
            version=self.version,
            field=self.field,
            expected=self.expected,
            received=self.received,
            edge=self._edge,
        )
        again.parts = self.parts
        return again


class FrameRefused(SlotFault):
    """A frame, or the stream that carries it, is not what this receive slot was built to
    accept: a peer's fault, never this program's. The subclass names the cause. A refused
    slot stays refused."""


class FrameMisuse(FrameError):
    """This participant's own program misused its frame codec: a spec that does not fit the
    layout, a payload that does not fit its spec, a reception driven out of order, a slot
    armed twice, a counter spent. No peer byte is involved, so it is a bug (or, for a spent
    counter, a run longer than its counters), never a frame a peer sent."""


class FrameSpecInvalid(FrameMisuse, ValueError):
    """A frame slot or a payload to send does not fit the frame layout: a
    field wider than its width, an extent past ``MAX_EXTENT``, or a payload
    whose length differs from the slot's extent. A bug in the caller or the
    plan, never in a peer."""


class FrameIncomplete(FrameMisuse, RuntimeError):
    """A reception was asked for its payload, or fed, in a state that does not
    allow it (before its trailer checked, or after it finished). A bug in the
    caller, never in a peer."""


class DoubleRearm(FrameMisuse, SlotFault):
    """A receive slot was armed again for the version it already expects: this participant's
    own schedule misused the slot, whatever its peer sent. The slot stays refused."""

    advice = "the local schedule armed one receive twice; this is a bug in the schedule"


class VersionOverflow(FrameMisuse, SlotFault):
    """This participant's own version counter would pass its maximum, on a send slot
    (preparing a frame) or a receive slot (arming it); it never wraps. Not a peer's fault: a
    peer's frame whose version runs ahead is :class:`SkippedVersion`."""

    advice = "the slot's version counter is spent; start a new run (a new epoch)"


class WrongFrame(FrameRefused):
    """The bytes are not an Alpha frame (layout 2) of the expected kind: the magic,
    the format version, the kind or the reserved bytes differ."""

    advice = "the peer is not an Alpha participant of this format, or sent another kind of frame"


class WrongEdge(FrameRefused):
    """The frame names another sender, receiver or slot than this receive
    expects: it was routed to the wrong edge or scheduled transfer."""

    advice = "the peer's schedule differs from this one; recompile both from one plan"


class IdentityMismatch(FrameRefused):
    """The frame's run identity differs; ``parts`` names which of learner,
    numerical contract and membership differ."""

    advice = "the peer was built for another learner, contract or membership; recompile both"


class Replayed(FrameRefused):
    """The frame's version is below the one expected: an old frame again."""

    advice = "a frame was replayed or duplicated; the round must be aborted"


class SkippedVersion(FrameRefused):
    """The frame's version is above the one expected: frames were lost or
    the peer ran ahead."""

    advice = "a frame was lost or the peer ran ahead; the round must be aborted"


class Corrupted(FrameRefused):
    """The SHA-256 trailer does not match the header and payload received."""

    advice = "bytes were damaged in transit; the round must be aborted"


class Forged(FrameRefused):
    """The keyed trailer (frame layout 3, an HMAC-SHA256 under the edge and direction's key)
    does not match the header and payload received: the frame was not made with this edge's
    key, whatever its bytes say. Checked before any payload byte is exposed and before any
    counter moves."""

    advice = "the frame was not made with this edge's key; the round must be aborted"


class Truncated(FrameRefused):
    """The stream ended inside a frame, or a frame declares fewer payload
    bytes than the slot's extent."""

    advice = "the peer stopped or the connection broke mid-frame; the round must be aborted"


class AbortInvalid(FrameRefused):
    """An ABORT frame passed every frame check, but the cause it carries is not in the
    canonical layout of ``docs/frames.md`` (lengths, padding, text)."""

    advice = "the peer is not an Alpha participant of this version; the run stops all the same"


class TrailingBytes(FrameRefused):
    """Bytes follow the last scheduled frame, or a frame declares more
    payload bytes than the slot's extent."""

    advice = "the peer sent more than the schedule allows; recompile both from one plan"


# --- identity ---------------------------------------------------------------


class IdentityError(InputInvalid, ValueError):
    """A run identity or one of its digests cannot be made from the values
    given; the subclass names why."""


class ContractInvalid(IdentityError):
    """A numerical contract is outside its allowed values (dtype, operation,
    topology, delivery, participants, fan-out, or a star or pair whose shape
    does not fit); the message names the field and what is allowed."""


class IdentityPartInvalid(IdentityError):
    """A run identity part is not exactly 32 bytes, or an encoded identity is
    not exactly 96 bytes; the message names the part."""


class LearnerInputInvalid(IdentityError):
    """A learner-digest input has no canonical encoding: a string with a lone
    surrogate, a configuration that contains itself, or a rate beyond a
    double's range."""


# --- keys -------------------------------------------------------------------


class KeyScheduleInvalid(InputInvalid, ValueError):
    """An input of the key schedule (``alpha.core.keys``) is not one it derives keys from: a
    run secret that is not exactly 32 bytes, an identity that is not the 96 bytes of a run
    identity, a role outside ``0..2**32-1`` (a negative one included), an edge from a role to
    itself, a peer on the wrong side of its role, or an HKDF input out of range. The message
    names the input; no key was made."""


# --- runtime ----------------------------------------------------------------


class LearnerStateInvalid(InputInvalid, ValueError):
    """A learner's state is not one this learner can use: an optimizer of an unknown kind or
    with a constant missing, extra or out of range (in the model's dtype included), state
    arrays with a name missing or extra or of the wrong shape or dtype, or a starting point
    whose parameters or round do not fit the plan. The message names what is wrong; nothing
    was changed."""


class LearnerModuleInvalid(InputInvalid, ValueError):
    """A learner module (``docs/learners.md``) cannot be used: its file cannot be read, it does
    not compile or run, a function of the interface is missing, or what one returned is not
    what the interface says (a layout of no array, a shape that is not positive ints). The
    message names the module and what is wrong; fix the module and compile again."""

    def __init__(self, module: str, message: str) -> None:
        self.module = module
        super().__init__(f"learner module {module}: {message}")


class ContractBroken(LearnerModuleInvalid):
    """A learner module's source uses an operation outside contract arithmetic (a BLAS product
    such as ``@`` or ``np.dot``, a reduction whose order numpy chooses such as ``np.sum``, a
    transcendental such as ``np.exp``, randomness but the seeded one Alpha hands over), so its
    run could differ between hosts. ``path``, ``line`` and ``operation`` say where and what;
    use the operations of ``alpha.learner.contract`` instead (``docs/learners.md``)."""

    def __init__(self, path: str, line: int, operation: str, why: str) -> None:
        self.path = path
        self.line = line
        self.operation = operation
        LearnerModuleInvalid.__init__(self, path, f"line {line}: {operation}: {why}")


class RoleDescriptionInvalid(InputInvalid, ValueError):
    """A role description (what one participant is built to do) is missing a
    field or has a wrong value; the message names the field."""


class BudgetExhausted(RunFailed):
    """A bounded wait ran out: connecting, reading a peer's port, accepting,
    receiving a frame, or the session-wide deadline.

    Carries ``role`` (the participant that waited), ``peer`` (the role it
    waited for, or None for a wait on no one peer), ``step`` (what it was
    doing), ``budget`` (the budget's name) and ``seconds`` (its size).
    """

    def __init__(
        self,
        *,
        role: int,
        peer: int | None,
        step: str,
        budget: str,
        seconds: float,
        when: str = "",
    ) -> None:
        self.role = role
        self.peer = peer
        self.step = step
        self.budget = budget
        self.seconds = seconds
        self.when = when
        who = "" if peer is None else f" for role {peer}"
        check = (
            f"check that role {peer} started, is running and is reachable"
            if peer is not None
            else "check the roles it waits for"
        )
        at = f" ({when})" if when else ""
        super().__init__(
            f"role {role} waited{who} past its {budget} budget ({seconds:g} s) while it was "
            f"{step}{at}; {check}, or raise budgets.{budget} in the plan"
        )


class PeerLost(RunFailed):
    """The connection to a peer broke (reset, refused after it was up, or
    closed where the schedule expects more); the run aborts."""

    def __init__(self, *, role: int, peer: int, step: str, cause: str, when: str = "") -> None:
        self.role = role
        self.peer = peer
        self.step = step
        self.when = when
        at = f" ({when})" if when else ""
        super().__init__(
            f"role {role} lost its connection to role {peer} while it was {step}{at}: "
            f"{cause}; see role {peer}'s log for why it stopped"
        )


class RegionRefused(RunFailed):
    """A shared-memory region of an edge direction (``docs/frames.md``) cannot be made or
    opened, or is not the one the schedule makes: missing, another user's or open to others,
    of another size or marker, or out of room; the run aborts. Carries ``role``, ``peer``, the
    direction (``sender``, ``receiver``), the file (``path``) and ``why``."""

    def __init__(
        self, *, role: int, peer: int, sender: int, receiver: int, path: str, why: str
    ) -> None:
        self.role = role
        self.peer = peer
        self.sender = sender
        self.receiver = receiver
        self.path = path
        self.why = why
        super().__init__(
            f"role {role} cannot use the shared-memory region of edge {sender}->{receiver} "
            f"({path}): {why}; to run this plan over TCP alone, set "
            '[addresses] transport = "tcp"'
        )


class RoundFailed(RunFailed):
    """A round stopped: a value agreed or computed in it is wrong at this role (the subclass
    names which), or a peer aborted it (:class:`RoundAborted`). Either way the run stops
    everywhere without committing (``docs/failure.md``)."""


class RoundAborted(RoundFailed):
    """A peer sent an ABORT frame: a role of the run failed, and the run stops everywhere
    without committing. Carries the original cause, whichever role it struck first:
    ``origin`` (the role that failed), ``cause`` (its class name), ``edge`` (the edge at
    fault, or None), ``round`` (the round, or None outside the rounds) and ``detail`` (its
    one-line message); ``role`` is this participant and ``peer`` the one the frame came from.
    """

    def __init__(
        self,
        *,
        role: int,
        peer: int,
        origin: int,
        cause: str,
        edge: tuple[int, int] | None,
        round: int | None,
        detail: str,
    ) -> None:
        self.role = role
        self.peer = peer
        self.origin = origin
        self.cause = cause
        self.edge = edge
        self.round = round
        self.detail = detail
        via = "" if peer == origin else f" (relayed by role {peer})"
        where = "" if edge is None else f" on edge {edge[0]}-{edge[1]}"
        when = "" if round is None else f" in round {round}"
        super().__init__(
            f"role {role}: the run was aborted by role {origin}{via}: {cause}{where}{when}: "
            f"{detail}; see role {origin}'s log"
        )

    @staticmethod
    def origin_in(text: str) -> tuple[int, str] | None:
        """The origin role and the original cause's class that a RoundAborted message in
        ``text`` names (a participant's failure line quotes it), or None when it holds none:
        the one reading of the message this class writes."""
        found = _ABORTED_BY.search(text)
        return None if found is None else (int(found[1]), found[2])


# RoundAborted's message: "the run was aborted by role ORIGIN (relayed by role PEER): CLASS".
_ABORTED_BY: Final = re.compile(
    r"the run was aborted by role (\d+)(?: \(relayed by role \d+\))?: ([A-Za-z_]\w*)"
)


class CommitInvalid(RunFailed, ValueError):
    """A commit record, or the reports it names, is not what the run committed: the record
    is malformed, or a report is missing, extra or changed since the commit."""


class ProgressRecordInvalid(RunFailed, ValueError):
    """A line of a progress file (``docs/progress.md``) is not a record role 0 writes: not
    JSON, another kind, a field missing, extra or out of range, not in canonical form, or a
    line too long. The run itself is not at fault; the file was written by something else or
    damaged, and the message names it."""


class CommitUnknown(RunFailed):
    """A role reported its completion up the tree but could not learn whether the run
    committed (its parent vanished or went silent before the commit reached it). It exits
    non-zero and leaves its report staged, never final; the run's commit record, written by
    role 0, says whether the run counts."""


class NodeUnreachable(RunFailed):
    """A deployment's node cannot be reached or written over SSH, or an SSH forward did not
    come up within its bound; the message names the node and quotes ssh. For ``alpha run
    --deploy``, also a node that does not answer before an attempt when no spare is left to
    take its roles: bring the node back, add a spare to the deployment file's ``spares``, or
    let the run go on with fewer roles (``[recovery] lost_role = "drop"``, docs/deploy.md)."""


class PortTaken(RunFailed):
    """A port fixed at compile time for one of this role's listeners (``alpha run --slurm``,
    docs/slurm.md) is held by another socket on its node's address: another job's
    participant, a service of the node, or a participant of an earlier launch still running
    there. The next attempt of a run takes the next block of the plan's range
    (``[addresses] ports``); a range no other job of the cluster uses avoids it.

    Carries ``role``, ``peer`` (the higher role the listener was for), ``address`` and
    ``port``."""

    def __init__(self, *, role: int, peer: int, address: str, port: int) -> None:
        self.role, self.peer, self.address, self.port = role, peer, address, port
        super().__init__(
            f"role {role} cannot listen for role {peer} at {address}:{port}: another socket "
            "holds that port (another job, a service of the node, or a participant still "
            "running there); give the plan a range no one else uses ([addresses] ports)"
        )


class SlurmJobEnded(RunFailed):
    """Slurm ended the job or the job step the roles ran in, and no attempt can run in it
    any more: the message says how (``alpha run --slurm``, docs/slurm.md). Never raised
    itself: the subclass names why."""


class JobCancelled(SlurmJobEnded):
    """The job or its step was cancelled (``scancel``, by its user or an administrator): the
    run stops, as it does for Ctrl-C, and is not restarted."""


class JobTimeLimit(JobCancelled):
    """The job reached its time limit and Slurm cancelled it: there is no time left in the
    allocation for another attempt. Ask for a longer ``--time``, or run from the latest
    checkpoint in a new allocation (``--resume``)."""


class PortMissing(RunFailed):
    """A participant's stdin ended before the launcher gave it the port of a
    lower peer: the launcher stopped, or the participant was started by hand
    without its ports."""


class LauncherLost(RunFailed):
    """The launcher that started this participant is gone (killed or crashed):
    no one relays ports, collects outcomes or stops the run any more, so the
    participant stops at once instead of finishing a run no one watches.

    Carries ``launcher`` (the launcher's pid) and ``parent`` (the
    participant's parent pid when it noticed); ``how`` says how it noticed, when not by its
    parent (its stdout's reader was gone while it announced its ports).
    """

    def __init__(self, *, launcher: int, parent: int, how: str = "") -> None:
        self.launcher = launcher
        self.parent = parent
        how = how or f"its parent is now pid {parent}"
        super().__init__(
            f"the launcher (pid {launcher}) that started this participant is gone ({how}), "
            "so the participant stopped; see the launcher's own output for why it ended, then "
            "start the run again with `alpha launch`"
        )


# --- the global protocol ----------------------------------------------------


class ProtocolFailure(InputInvalid):
    """One reason a global protocol cannot be projected; the subclass names it
    and the message names the roles and the form. ``form`` is the path of the
    offending form in the protocol (e.g. ``body.1.repeat.choice.arm0``)."""

    def __init__(self, message: str, *, form: str = "") -> None:
        self.form = form
        super().__init__(f"{form}: {message}" if form else message)


class ParticipantOutOfRange(ProtocolFailure):
    """A participant, sender or receiver is not a role of the run."""


class SelfTransfer(ProtocolFailure):
    """A transfer sends from a role to itself."""


class RepeatBoundExceeded(ProtocolFailure):
    """A repeat's count passes its declared bound, or nested repeats together
    pass the plan's bound on total iterations (overflow included)."""


class NoRealization(ProtocolFailure):
    """A local operation or transfer cannot be realized: the operation is not
    provided for a role's target, a region is unknown, or a transfer runs over
    a pair of roles that is not an edge of the run."""


class RegionInvalid(ProtocolFailure):
    """A region view names no region, a view, or one of another dtype, or does not lie
    inside the region it views."""


class OperationUnimplemented(ProtocolFailure):
    """A local operation or selector the protocol declares has no implementation
    in this Alpha (``alpha.schedule.operations``): its participants could not run it.
    Implement it there, or stop naming it."""


class ChoiceAuthorityInvalid(ProtocolFailure):
    """A choice's authority is out of range or not a member of the run."""


class SelectorNotAtAuthority(ProtocolFailure):
    """A choice's selector is not an operation computed at the authority (it is
    unknown, not a selector, or not provided for the authority's target)."""


class DisseminationInvalid(ProtocolFailure):
    """A choice's dissemination tree introduces a receiver twice, leaves a
    receiver unreachable from the authority, or routes over a pair that is not
    an edge."""


class ChoiceUninformed(ProtocolFailure):
    """A participant that acts differently in the two arms of a choice is not
    informed of the arm taken (neither the authority nor a receiver)."""


class ProtocolRejected(InputInvalid, ValueError):
    """A protocol failed its checks; ``failures`` holds every refusal found,
    not only the first."""

    def __init__(self, failures: tuple[ProtocolFailure, ...]) -> None:
        self.failures = failures
        lines = "; ".join(f"{type(f).__name__}: {f}" for f in failures)
        super().__init__(f"the protocol has {len(failures)} problem(s): {lines}")


# --- agreed choices and rounds ----------------------------------------------


class SelectorOutOfRange(RoundFailed):
    """A choice's selector evaluated to something other than 0 or 1 at its
    authority; the round is aborted."""


class NoncanonicalWord(RoundFailed):
    """A choice word that passed the frame checks is not the canonical
    encoding of 0 or 1; the round is aborted."""


class CheckFailed(RoundFailed):
    """A value computed by the run differs from the one the plan says it must
    be (the demonstration's sum check); the round is aborted."""


class LossNotFinite(RoundFailed):
    """The learner diverged: the training loss of ``round`` (counted from 1) is not a finite
    number at ``role``. The round is aborted and nothing is committed; the run's history up to
    that round is kept (``docs/learner.md``)."""

    def __init__(self, *, role: int, round: int, loss: float) -> None:
        self.role = role
        self.round = round
        self.loss = loss
        super().__init__(
            f"role {role}: the training loss of round {round} is {loss}: the learner diverged "
            "(a lower learner.rate usually helps); nothing is committed"
        )


# --- plans and artifacts ----------------------------------------------------


class FolderInUse(InputInvalid):
    """Another Alpha command holds the folder this one was told to write (``-o``): two runs in
    one folder would overwrite each other's artifacts, logs and reports."""

    def __init__(self, folder: str, holder: str) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(
            f"{folder} is in use by {holder}: wait for it to end, or pass another folder with -o"
        )


class DescriptorLimitTooLow(InputInvalid):
    """The hard limit on this process's open files is below what starting the launch's roles
    at once needs: it would run out of descriptors halfway, so nothing is started."""

    def __init__(self, roles: int, needed: int, hard: int) -> None:
        self.roles = roles
        self.needed = needed
        self.hard = hard
        super().__init__(
            f"starting {roles} roles at once needs at least {needed} open files in the launcher, "
            f"and its hard limit (RLIMIT_NOFILE) is {hard}: raise it (`ulimit -Hn {needed}` as "
            "root, `LimitNOFILE=` for a service, or /etc/security/limits.conf), or launch fewer "
            "roles"
        )


class PlanInvalid(InputInvalid, ValueError):
    """A plan is not valid TOML or a field is missing or wrong; ``field`` names
    it (e.g. ``topology.fanout``). ``where`` says where the field was written, when known:
    ``PLAN.toml:3`` (the file and line of its key), or the command-line override it came from
    (``--set run.rounds=0``); ``line`` is that line, or None."""

    def __init__(
        self, message: str, *, field: str = "", where: str = "", line: int | None = None
    ) -> None:
        self.field = field
        self.message = message
        self.where = where
        self.line = line
        text = f"{field}: {message}" if field else message
        super().__init__(f"{where}: {text}" if where else text)


class SlurmUnavailable(InputInvalid):
    """``alpha run --slurm`` cannot run here: a Slurm command (``srun``, ``scontrol``,
    ``salloc``) is missing or fails, there is no allocation and no ``--slurm-option`` to make
    one, or the allocation's nodes cannot be read (each named with what Slurm said);
    nothing ran (docs/slurm.md)."""


class DeployInvalid(InputInvalid, ValueError):
    """A deployment file is unreadable, not JSON, or a field is missing, unknown or wrong;
    ``field`` names it (e.g. ``nodes[1].port``)."""

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ArtifactInvalid(InputInvalid, ValueError):
    """A role artifact (role-NNNNNN.pyz) or its run.json is unreadable or not
    one Alpha built."""


class ArtifactExposed(ArtifactInvalid):
    """A keyed artifact (it holds its edges' keys) is not its user's alone: another user owns
    it, or its mode lets another user read it. ``alpha launch`` starts no role of such a
    folder (docs/security.md)."""


class TargetMismatch(InputInvalid):
    """A role artifact was started on a machine of another target than the one
    it was built for (x86_64 or aarch64)."""


class EmulationUnavailable(InputInvalid, RuntimeError):
    """A run holds roles built for another target than this machine's, and this machine
    cannot run them yet (qemu-aarch64 missing, the AArch64 sysroot not built); refused before
    any role starts. The message names what is missing and the command that provides it."""


# --- checkpoints --------------------------------------------------------------


class CheckpointCorrupt(InputInvalid, ValueError):
    """A checkpoint's pointer, a manifest or a shard is missing, truncated, damaged or not
    one Alpha wrote; ``shard`` names the shard when one is at fault. Nothing is loaded from
    it (``docs/checkpoints.md``)."""

    def __init__(self, message: str, *, shard: str = "") -> None:
        self.shard = shard
        super().__init__(message)


class GenerationExists(RunFailed):
    """A run tried to publish a checkpoint generation that is already published: a
    generation is immutable and published once."""


class CheckpointError(RunFailed):
    """A checkpoint could not be written while a run ran; the subclass names why. The round
    aborts everywhere with this cause and nothing of it is published (``docs/checkpoints.md``)."""


class CheckpointWriteFailed(CheckpointError):
    """The system refused a write of a checkpoint: ``path`` could not be staged, published,
    pointed to or pruned (``action``) for the reason ``errno`` gives (``reason``, its
    ``os.strerror`` words: "No space left on device", "Read-only file system", ...). Free the
    space or fix the folder's permissions, then resume from the latest generation."""

    def __init__(
        self, *, path: str, action: str, errno: int, reason: str, detail: str = ""
    ) -> None:
        self.path = path
        self.action = action
        self.errno = errno
        self.reason = reason
        more = f" ({detail})" if detail else ""
        super().__init__(f"cannot {action} {path}: {self.reason}{more}")


class CheckpointFolderHeld(InputInvalid):
    """Another run holds the checkpoint folder (``docs/checkpoints.md``): two runs writing one
    folder would prune and point over each other. ``holder`` names it (pid, host, run, since
    when); wait for it to end, or give this run another ``checkpoint.folder``."""

    def __init__(self, folder: str, holder: str) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(
            f"checkpoint folder {folder} is held by {holder}: wait for that run to end, or "
            "give this plan another checkpoint.folder"
        )


class GenerationForeign(InputInvalid, ValueError):
    """A resume was given a generation written under another plan: ``fields`` maps each
    differing field of the plan's identity to ``(recorded, now)``. Resume with the plan that
    wrote it, or list the fields meant to change in ``checkpoint.may_change``."""

    def __init__(self, generation: str, fields: dict[str, tuple[object, object]]) -> None:
        self.generation = generation
        self.fields = fields
        listed = "; ".join(
            f"{name}: {was!r} there, {now!r} here" for name, (was, now) in fields.items()
        )
        super().__init__(
            f"checkpoint {generation} was written under another plan: {listed}; resume with the "
            f"plan that wrote it, or add {sorted(fields)} to checkpoint.may_change"
        )


class GenerationNotFound(InputInvalid, LookupError):
    """``alpha run --resume FOLDER --round R`` asked for a generation of round ``round`` that
    ``folder`` does not hold: ``available`` lists the rounds of the generations it does hold
    (``docs/checkpoints.md``). Pass one of them, or the generation's own folder."""

    def __init__(self, folder: str, round: int, available: tuple[int, ...]) -> None:
        self.folder = folder
        self.round = round
        self.available = available
        if available:
            rounds = ", ".join(str(each) for each in available)
            held = f"its generations are of rounds {rounds}: pass one of them to --round"
        else:
            held = "it holds no published generation"
        super().__init__(f"checkpoint folder {folder} has no generation of round {round}; {held}")


class TraceInvalid(InputInvalid, ValueError):
    """A trace file (``trace/role-NNNNNN.trace``, ``docs/trace.md``) is not one a participant
    writes: a header of another format or version, a record damaged anywhere but at its end (a
    last record cut short by a kill is not damage, and is ignored), records out of sequence,
    or no trace file where one was named. The message names the file and, for a record, its
    place. ``alpha observe`` reads traces; a run never does, so this is an input's fault."""


class TraceMismatch(InputInvalid, ValueError):
    """Two traced runs that ``alpha observe diff`` cannot compare: another run identity
    (another plan, or another learner, contract or membership), or another set of roles. A
    difference there is not a divergence of one computation; the message says which."""


class GpuUnavailable(RunFailed):
    """A role bound to a GPU cannot use it: PyCUDA is not installed, there is no CUDA driver,
    or no device has the bound UUID. The role fails; it never falls back to the host."""


# --- the warm starter ---------------------------------------------------------

_COLD_ADVICE = (
    "if it happens again, run with `alpha launch --cold`, which starts every role in an "
    "interpreter of its own"
)


class WarmStarterLost(RunFailed):
    """The warm starter (the interpreter ``alpha launch`` forks its roles from,
    ``docs/launch.md``) ended while the launch still needed it: it was killed or crashed.
    Before it said it was ready, every role starts in an interpreter of its own instead; later,
    the launcher stops every role it had started and the run fails.

    Carries ``pid`` (the starter's), ``how`` it ended, ``when`` (the launch's moment) and
    ``outcome`` (what the launcher did about it)."""

    def __init__(self, *, pid: int, how: str, when: str, outcome: str) -> None:
        self.pid = pid
        self.how = how
        self.when = when
        self.outcome = outcome
        super().__init__(f"the warm starter (pid {pid}) {how} {when}; {outcome}; {_COLD_ADVICE}")


class WarmStarterStalled(RunFailed):
    """The warm starter stopped answering while the launch waited for it: it was stopped
    (SIGSTOP, a debugger) or stuck past its bound. The launcher kills it; before it said it
    was ready, every role starts in an interpreter of its own instead; later, the launcher
    stops every role it had started and the run fails.

    Carries ``pid``, ``how`` it stalled, ``when`` and ``outcome``, as
    :class:`WarmStarterLost`."""

    def __init__(self, *, pid: int, how: str, when: str, outcome: str) -> None:
        self.pid = pid
        self.how = how
        self.when = when
        self.outcome = outcome
        super().__init__(f"the warm starter (pid {pid}) {how} {when}; {outcome}; {_COLD_ADVICE}")


# The two helpers below are not in __all__, which lists the exception tree and nothing else
# (tests/test_errors.py holds every name there to be a class of it).


def one_line(text: str) -> str:
    """``text`` on one line, as every log and error line of Alpha's prints a message: each run
    of whitespace (newlines included) one space, none at either end."""
    return " ".join(text.split())


def error_line(error: BaseException) -> str:
    """``error`` as one line: its class and its message (:func:`one_line`), ``Class: message``,
    as a participant's cause and the launcher's notes name it."""
    return f"{type(error).__name__}: {one_line(str(error))}"
