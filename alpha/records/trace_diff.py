"""Where two traced runs of one plan part: the first frame whose payload differs
(``alpha observe diff``, ``docs/trace.md``).

Frames are aligned by what names them in the schedule, never by time: the role that recorded
it, the direction (sent or received), the peer, the kind, the slot and the version. Only the
frames of the computation are compared, DATA and CHOICE: their payloads are the schedule's
values, the same bits in every run of the plan. Hellos and ENDs carry nothing, and DONE,
COMMIT and ABORT carry digests of reports and causes (process ids, ports, times), which differ
between any two runs.

A record one run has and the other lacks is a difference only where the other's trace of that
role is whole (not cut at its limit, nothing overwritten): past a ``first`` trace's limit
nothing is known. The first difference is the one of the earliest round; within it, a frame a
role *sent* before any frame it received in that round differed (the role computed it from
equal inputs: where the runs part), before the frames that only carry the difference on; then
by role and the order the role recorded them (a run that stopped: its first missing record).

Pure: the traces' arrays in, a value out; vectorised (``np.lexsort`` and elementwise
comparisons), so two traces of millions of frames compare in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

import numpy as np

from alpha.errors import TraceMismatch
from alpha.records.trace import NONE_U32, Event, detail_names
from alpha.records.trace_table import Trace

__all__ = ["COMPARED_KINDS", "Divergence", "FrameSide", "TraceDiff", "diff_traces"]

COMPARED_KINDS: Final = (2, 3)
"""The frame kinds compared (``alpha.wire.frame.FrameKind``): DATA and CHOICE."""

_KIND_NAMES: Final = {
    1: "HELLO",
    2: "DATA",
    3: "CHOICE",
    4: "ABORT",
    5: "END",
    6: "DONE",
    7: "COMMIT",
}


@final
@dataclass(frozen=True, slots=True)
class FrameSide:
    """What one run's record of a frame says.

    Attributes:
        kind: the frame kind's name; ``extent``: its payload bytes; ``digest``: its payload
            digest (hex); ``round``: the round it was in (counted from 0, as the runtime's
            messages count; None outside the rounds); ``seq``: its place in its role's trace.
        before: the last local operation its role ran before it (``name on 'region'``), or
            "" when none is in the trace.
    """

    kind: str
    extent: int
    digest: str
    round: int | None
    seq: int
    before: str = ""


@final
@dataclass(frozen=True, slots=True)
class Divergence:
    """The first frame where two runs part.

    Attributes:
        round: its round (from 0); ``role``: the role whose record it is; ``direction``:
            ``"sent"`` or ``"received"``; ``peer``: the other end; ``sender`` and
            ``receiver``: the frame's edge and direction; ``kind``, ``slot``, ``version``:
            the frame's name in the schedule.
        a, b: each run's record (None: that run has none).
        why: what differs: ``"digest"``, ``"extent"``, ``"round"``, or ``"absent in A"`` /
            ``"absent in B"``.
        origin: the role computed it from inputs that were equal in both runs (no frame it
            received earlier in the round differed): the runs part here, not downstream.
        refused: a run lacking it refused it there (its class), "" otherwise.
    """

    round: int | None
    role: int
    direction: str
    peer: int
    sender: int
    receiver: int
    kind: str
    slot: int
    version: int
    a: FrameSide | None
    b: FrameSide | None
    why: str
    origin: bool
    refused: str = ""


@final
@dataclass(frozen=True, slots=True)
class TraceDiff:
    """The comparison of two traced runs.

    Attributes:
        compared: frame records both runs hold (DATA and CHOICE), compared field by field.
        differing: records that differ, or that one run lacks where its trace is whole.
        first: the first difference, or None when the runs are equal.
        partial: roles whose trace, in either run, is not whole (cut at its limit, or
            overwritten): records one run lacks there are not counted.
    """

    compared: int
    differing: int
    first: Divergence | None
    partial: tuple[int, ...] = ()

    @property
    def equal(self) -> bool:
        return self.first is None


# The columns of a frame record the comparison reads; a record's 96 bytes are never copied.
_COLUMNS: Final = ("event", "peer", "kind", "slot", "version", "extent", "round", "seq")
# What names a frame record in the schedule: equal in both runs, in the same order, is the
# common case (a role's schedule runs in one order), aligned by position without a sort.
_NAMING: Final = ("event", "peer", "kind", "slot", "version")


@dataclass(frozen=True)
class _Frames:
    """One run's compared frame records as columns: roles ascending, each role's records in
    the order it wrote them (or, once :meth:`by_key`, in key order)."""

    role: np.ndarray  # uint64
    columns: dict[str, np.ndarray]
    digest: np.ndarray  # (n, 4) uint64: the payload digest's words

    def __len__(self) -> int:
        return len(self.role)

    def take(self, order: np.ndarray) -> _Frames:
        return _Frames(
            self.role[order],
            {name: column[order] for name, column in self.columns.items()},
            self.digest[order],
        )

    def keys(self) -> np.ndarray:
        """(n, 3) uint64: role << 32 | peer; kind << 34 | slot << 1 | received; version."""
        cols = self.columns
        keys = np.empty((len(self), 3), dtype=np.uint64)
        keys[:, 0] = (self.role << np.uint64(32)) | cols["peer"].astype(np.uint64)
        keys[:, 1] = (
            (cols["kind"].astype(np.uint64) << np.uint64(34))
            | (cols["slot"].astype(np.uint64) << np.uint64(1))
            | (cols["event"] == Event.RECEIVE).astype(np.uint64)
        )
        keys[:, 2] = cols["version"]
        return keys

    def by_key(self) -> tuple[_Frames, np.ndarray]:
        keys = self.keys()
        order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
        return self.take(order), keys[order]


def _frames(traces: Mapping[int, Trace]) -> _Frames:
    roles, digests = [], []
    columns: dict[str, list[np.ndarray]] = {name: [] for name in _COLUMNS}
    for role, trace in sorted(traces.items()):
        found = trace.records
        chosen = np.flatnonzero(
            np.isin(found["event"], (Event.SEND, Event.RECEIVE))
            & np.isin(found["kind"], COMPARED_KINDS)
        )
        for name in _COLUMNS:
            columns[name].append(found[name][chosen])
        # A field of a structured array is strided: gathered, then viewed as words.
        digests.append(found["detail"][chosen].view(np.uint64).reshape(len(chosen), 4))
        roles.append(np.full(len(chosen), role, dtype=np.uint64))
    return _Frames(
        np.concatenate(roles),
        {name: np.concatenate(parts) for name, parts in columns.items()},
        np.concatenate(digests),
    )


_KEY: Final = np.dtype([("role_peer", "<u8"), ("kind_slot", "<u8"), ("version", "<u8")])


def _matched(
    a: _Frames, b: _Frames
) -> tuple[_Frames, _Frames, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The two runs' frames (reordered when they must be sorted to align), then the indices
    of the records both hold (in A, in B, pairwise), those only A holds and those only B
    holds."""
    none = np.empty(0, dtype=np.intp)
    if (
        len(a) == len(b)
        and np.array_equal(a.role, b.role)
        and all(np.array_equal(a.columns[n], b.columns[n]) for n in _NAMING)
    ):
        both = np.arange(len(a))
        return a, b, both, both, none, none
    a, ka = a.by_key()
    b, kb = b.by_key()
    if ka.shape == kb.shape and np.array_equal(ka, kb):
        both = np.arange(len(a))
        return a, b, both, both, none, none
    sa = np.ascontiguousarray(ka).view(_KEY).ravel()
    sb = np.ascontiguousarray(kb).view(_KEY).ravel()
    _, in_a, in_b = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
    only_a = np.setdiff1d(np.arange(len(sa)), in_a, assume_unique=True)
    only_b = np.setdiff1d(np.arange(len(sb)), in_b, assume_unique=True)
    return a, b, in_a, in_b, only_a, only_b


def _round(value: int) -> int | None:
    return None if value == NONE_U32 else value


def _last_operation(trace: Trace, seq: int) -> str:
    """The last local operation ``trace``'s role recorded before record ``seq``."""
    records = trace.records
    first = int(records["seq"][0]) if len(records) else 0
    earlier = records[: max(0, seq - first)]
    ops = np.flatnonzero(earlier["event"] == Event.OPERATION)
    if not len(ops):
        return ""
    names = detail_names(bytes(earlier["detail"][ops[-1]]))
    return f"{names[0]} on {names[1]!r}" if len(names) > 1 else (names[0] if names else "")


def _side(frames: _Frames, i: int, trace: Trace) -> FrameSide:
    cols = frames.columns
    seq, kind = int(cols["seq"][i]), int(cols["kind"][i])
    return FrameSide(
        kind=_KIND_NAMES.get(kind, str(kind)),
        extent=int(cols["extent"][i]),
        digest=frames.digest[i].tobytes().hex(),
        round=_round(int(cols["round"][i])),
        seq=seq,
        before=_last_operation(trace, seq),
    )


def _refused_at(trace: Trace, peer: int, kind: int, slot: int, version: int) -> str:
    """The class of a refusal ``trace``'s role recorded for that frame, or ""."""
    records = trace.records
    hit = np.flatnonzero(
        (records["event"] == Event.REFUSED)
        & (records["peer"] == peer)
        & (records["kind"] == kind)
        & (records["slot"] == slot)
        & (records["version"] == version)
    )
    if not len(hit):
        return ""
    names = detail_names(bytes(records["detail"][hit[0]]))
    return names[0] if names else "refused"


def _check_comparable(a: Mapping[int, Trace], b: Mapping[int, Trace]) -> None:
    if not a or not b:
        raise TraceMismatch("a run with no trace cannot be compared: trace both runs (--trace)")
    if sorted(a) != sorted(b):
        raise TraceMismatch(
            f"the runs' traces are of other roles: A has {sorted(a)[:8]}, B {sorted(b)[:8]}"
        )
    identities = {trace.header.identity for trace in (*a.values(), *b.values())}
    if len(identities) != 1:
        raise TraceMismatch(
            "the runs have other run identities (another plan, learner, contract or "
            "membership): diff compares two runs of one plan"
        )
    digests = {trace.header.digest for trace in (*a.values(), *b.values())}
    if len(digests) != 1:
        raise TraceMismatch(f"the runs record other payload digests: {sorted(digests)}")


def diff_traces(a: Mapping[int, Trace], b: Mapping[int, Trace]) -> TraceDiff:
    """Compare run A's traces with run B's (each by role); see the module's rules.

    Raises:
        TraceMismatch: the runs cannot be compared: other roles, another run identity, or
            another payload digest.
    """
    _check_comparable(a, b)
    fa, fb, in_a, in_b, only_a, only_b = _matched(_frames(a), _frames(b))
    ca, cb = fa.columns, fb.columns
    differs = (
        (ca["extent"][in_a] != cb["extent"][in_b])
        | (ca["round"][in_a] != cb["round"][in_b])
        | np.any(fa.digest[in_a] != fb.digest[in_b], axis=1)
    )
    roles = sorted(a)
    lookup = np.zeros(max(roles) + 1, dtype=np.intp)
    lookup[roles] = np.arange(len(roles))
    whole_a = np.array([a[r].whole for r in roles])
    whole_b = np.array([b[r].whole for r in roles])
    # Present in A only: a difference where B's trace of that role is whole, and so on.
    lacking_b = only_a[whole_b[lookup[fa.role[only_a].astype(np.intp)]]]
    lacking_a = only_b[whole_a[lookup[fb.role[only_b].astype(np.intp)]]]
    partial = tuple(r for r in roles if not (a[r].whole and b[r].whole))
    differing = int(differs.sum()) + len(lacking_b) + len(lacking_a)
    if not differing:
        return TraceDiff(len(in_a), 0, None, partial)
    # The first round any difference is in, found over arrays; only its records go on. A
    # candidate is (role, received, seq in A or -1, seq in B or -1, index in A, index in B).
    pairs = np.flatnonzero(differs)
    found = (
        (in_a[pairs], in_b[pairs]),
        (lacking_b, np.full(len(lacking_b), -1)),
        (np.full(len(lacking_a), -1), lacking_a),
    )
    rounds = [
        np.where(at_a >= 0, ca["round"][np.maximum(at_a, 0)], cb["round"][np.maximum(at_b, 0)])
        for at_a, at_b in found
        if len(at_a)
    ]
    first_round = min(int(each.min()) for each in rounds)
    candidates: list[tuple[int, int, int, int, int, int]] = []
    for (at_a, at_b), round_of in zip((f for f in found if len(f[0])), rounds, strict=True):
        for i, j in zip(at_a[round_of == first_round], at_b[round_of == first_round], strict=True):
            frames, k = (fa, int(i)) if i >= 0 else (fb, int(j))
            received = int(frames.columns["event"][k] == Event.RECEIVE)
            candidates.append(
                (
                    int(frames.role[k]),
                    received,
                    int(ca["seq"][i]) if i >= 0 else -1,
                    int(cb["seq"][j]) if j >= 0 else -1,
                    int(i),
                    int(j),
                )
            )
    # A send is caused when its role received a differing frame earlier in that run.
    firsts: dict[tuple[int, int], int] = {}  # (role, side) -> the earliest differing receive
    for role, received, seq_a, seq_b, _, _ in candidates:
        for side, seq in ((0, seq_a), (1, seq_b)):
            if received and seq >= 0:
                firsts[(role, side)] = min(firsts.get((role, side), seq), seq)

    def caused(entry: tuple[int, int, int, int, int, int]) -> bool:
        role, received, seq_a, seq_b, _, _ = entry
        return bool(received) or any(
            seq >= 0 and firsts.get((role, side), seq) < seq
            for side, seq in ((0, seq_a), (1, seq_b))
        )

    def place(entry: tuple[int, int, int, int, int, int]) -> tuple[int, int, int]:
        # Uncaused first (only sends can be), then by role and the order it recorded them.
        role, _, seq_a, seq_b, _, _ = entry
        return (int(caused(entry)), role, seq_a if seq_a >= 0 else seq_b)

    chosen = min(candidates, key=place)
    role, received, _, _, i, j = chosen
    frames, k = (fa, i) if i >= 0 else (fb, j)
    cols = frames.columns
    peer, kind = int(cols["peer"][k]), int(cols["kind"][k])
    slot, version = int(cols["slot"][k]), int(cols["version"][k])
    if i < 0:
        why, refused = "absent in A", _refused_at(a[role], peer, kind, slot, version)
    elif j < 0:
        why, refused = "absent in B", _refused_at(b[role], peer, kind, slot, version)
    elif not np.array_equal(fa.digest[i], fb.digest[j]):
        why, refused = "digest", ""
    else:
        why = "extent" if ca["extent"][i] != cb["extent"][j] else "round"
        refused = ""
    first = Divergence(
        round=_round(first_round),
        role=role,
        direction="received" if received else "sent",
        peer=peer,
        sender=peer if received else role,
        receiver=role if received else peer,
        kind=_KIND_NAMES.get(kind, str(kind)),
        slot=slot,
        version=version,
        a=None if i < 0 else _side(fa, i, a[role]),
        b=None if j < 0 else _side(fb, j, b[role]),
        why=why,
        origin=not caused(chosen),
        refused=refused,
    )
    return TraceDiff(len(in_a), differing, first, partial)
