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


@dataclass(frozen=True)
class _Frames:
    """One run's compared frame records, in key order, as columns."""

    keys: np.ndarray  # (n, 3) uint64: role << 32 | peer; kind << 34 | slot << 1 | received; version
    records: np.ndarray  # RECORD_DTYPE, same order
    roles: np.ndarray  # uint64, same order


def _frames(traces: Mapping[int, Trace]) -> _Frames:
    parts = []
    roles = []
    for role, trace in sorted(traces.items()):
        found = trace.records
        chosen = found[
            np.isin(found["event"], (Event.SEND, Event.RECEIVE))
            & np.isin(found["kind"], COMPARED_KINDS)
        ]
        parts.append(chosen)
        roles.append(np.full(len(chosen), role, dtype=np.uint64))
    records = np.concatenate(parts)
    owner = np.concatenate(roles)
    received = (records["event"] == Event.RECEIVE).astype(np.uint64)
    keys = np.empty((len(records), 3), dtype=np.uint64)
    keys[:, 0] = (owner << np.uint64(32)) | records["peer"].astype(np.uint64)
    keys[:, 1] = (
        (records["kind"].astype(np.uint64) << np.uint64(34))
        | (records["slot"].astype(np.uint64) << np.uint64(1))
        | received
    )
    keys[:, 2] = records["version"]
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
    return _Frames(keys[order], records[order], owner[order])


_KEY: Final = np.dtype([("role_peer", "<u8"), ("kind_slot", "<u8"), ("version", "<u8")])


def _matched(a: _Frames, b: _Frames) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the records both runs hold (in A, in B, pairwise), then of those only A
    holds and those only B holds."""
    if a.keys.shape == b.keys.shape and np.array_equal(a.keys, b.keys):
        both = np.arange(len(a.keys))
        none = np.empty(0, dtype=np.intp)
        return both, both, none, none
    ka = np.ascontiguousarray(a.keys).view(_KEY).ravel()
    kb = np.ascontiguousarray(b.keys).view(_KEY).ravel()
    _, in_a, in_b = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    only_a = np.setdiff1d(np.arange(len(ka)), in_a, assume_unique=True)
    only_b = np.setdiff1d(np.arange(len(kb)), in_b, assume_unique=True)
    return in_a, in_b, only_a, only_b


def _digests(records: np.ndarray) -> np.ndarray:
    # A field of a structured array is strided: made contiguous before it is viewed as words.
    return np.ascontiguousarray(records["detail"]).view(np.uint64).reshape(len(records), 4)


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


def _side(record: np.void, trace: Trace) -> FrameSide:
    seq = int(record["seq"])
    return FrameSide(
        kind=_KIND_NAMES.get(int(record["kind"]), str(int(record["kind"]))),
        extent=int(record["extent"]),
        digest=bytes(record["detail"]).hex(),
        round=_round(int(record["round"])),
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
    fa, fb = _frames(a), _frames(b)
    in_a, in_b, only_a, only_b = _matched(fa, fb)
    ra, rb = fa.records[in_a], fb.records[in_b]
    differs = (
        (ra["extent"] != rb["extent"])
        | (ra["round"] != rb["round"])
        | np.any(_digests(ra) != _digests(rb), axis=1)
    )
    whole_a = np.array([a[r].whole for r in sorted(a)])
    whole_b = np.array([b[r].whole for r in sorted(b)])
    index = {role: n for n, role in enumerate(sorted(a))}
    positions = np.array([index[r] for r in sorted(a)])
    lookup = np.zeros(max(index) + 1 if index else 1, dtype=np.intp)
    lookup[list(index)] = positions

    def counted(roles: np.ndarray, whole: np.ndarray) -> np.ndarray:
        return whole[lookup[roles.astype(np.intp)]] if len(roles) else np.zeros(0, dtype=bool)

    # Present in A only: a difference where B's trace of that role is whole, and so on.
    lacking_b = only_a[counted(fa.roles[only_a], whole_b)]
    lacking_a = only_b[counted(fb.roles[only_b], whole_a)]
    partial = tuple(r for r in sorted(a) if not (a[r].whole and b[r].whole))
    differing = int(differs.sum()) + len(lacking_b) + len(lacking_a)
    if not differing:
        return TraceDiff(len(in_a), 0, None, partial)
    # The first round any difference is in, found over arrays; only its records go on.
    both_at = np.flatnonzero(differs)
    rounds = (
        ra["round"][both_at],
        fa.records["round"][lacking_b],
        fb.records["round"][lacking_a],
    )
    first_round = min(int(each.min()) for each in rounds if len(each))
    # Candidates: (round, role, received, seq in A or -1, seq in B or -1, source, index).
    candidates: list[tuple[int, int, int, int, int, str, int]] = []
    for source, found, at in (
        ("both", ra, both_at),
        ("a", fa.records, lacking_b),
        ("b", fb.records, lacking_a),
    ):
        for i in at[found["round"][at] == first_round]:
            i = int(i)
            if source == "both":
                rec, role = ra[i], int(fa.roles[in_a[i]])
                seqs = (int(ra["seq"][i]), int(rb["seq"][i]))
            elif source == "a":
                rec, role = fa.records[i], int(fa.roles[i])
                seqs = (int(rec["seq"]), -1)
            else:
                rec, role = fb.records[i], int(fb.roles[i])
                seqs = (-1, int(rec["seq"]))
            received = int(rec["event"] == Event.RECEIVE)
            candidates.append((first_round, role, received, seqs[0], seqs[1], source, i))
    # A send is caused when its role received a differing frame earlier in that run.
    firsts: dict[tuple[int, int], int] = {}  # (role, side) -> the earliest differing receive
    for _, role, received, seq_a, seq_b, _, _ in candidates:
        for side, seq in ((0, seq_a), (1, seq_b)):
            if received and seq >= 0:
                key = (role, side)
                firsts[key] = min(firsts.get(key, seq), seq)

    def caused(entry: tuple[int, int, int, int, int, str, int]) -> bool:
        _, role, received, seq_a, seq_b, _, _ = entry
        if received:
            return True
        return any(
            seq >= 0 and firsts.get((role, side), seq) < seq
            for side, seq in ((0, seq_a), (1, seq_b))
        )

    def place(entry: tuple[int, int, int, int, int, str, int]) -> tuple[int, int, int]:
        # Uncaused first (only sends can be), then by role and the order it recorded them.
        _, role, _, seq_a, seq_b, _, _ = entry
        return (int(caused(entry)), role, seq_a if seq_a >= 0 else seq_b)

    chosen = min(candidates, key=place)
    round_, role, received, _, _, source, i = chosen
    if source == "both":
        rec_a, rec_b = ra[i], rb[i]
        why = (
            "digest"
            if bytes(rec_a["detail"]) != bytes(rec_b["detail"])
            else "extent"
            if rec_a["extent"] != rec_b["extent"]
            else "round"
        )
    elif source == "a":
        rec_a, rec_b, why = fa.records[i], None, "absent in B"
    else:
        rec_a, rec_b, why = None, fb.records[i], "absent in A"
    rec = rec_a if rec_a is not None else rec_b
    assert rec is not None
    peer, kind = int(rec["peer"]), int(rec["kind"])
    slot, version = int(rec["slot"]), int(rec["version"])
    sender, receiver = (peer, role) if received else (role, peer)
    refused = ""
    if rec_a is None:
        refused = _refused_at(a[role], peer, kind, slot, version)
    elif rec_b is None:
        refused = _refused_at(b[role], peer, kind, slot, version)
    first = Divergence(
        round=_round(round_),
        role=role,
        direction="received" if received else "sent",
        peer=peer,
        sender=sender,
        receiver=receiver,
        kind=_KIND_NAMES.get(kind, str(kind)),
        slot=slot,
        version=version,
        a=None if rec_a is None else _side(rec_a, a[role]),
        b=None if rec_b is None else _side(rec_b, b[role]),
        why=why,
        origin=not caused(chosen),
        refused=refused,
    )
    return TraceDiff(len(in_a), differing, first, partial)
