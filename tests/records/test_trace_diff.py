"""Where two traced runs part (alpha/records/trace_diff.py, docs/trace.md), on traces made here:
frames are aligned by role, direction, peer, kind, slot and version, never by time; the first
difference is the earliest round's, a frame its role computed from equal inputs before one
that carries a difference on; a frame one run lacks counts only where the other's trace of
that role is whole; DONE, COMMIT and hellos are never compared."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from alpha.errors import TraceMismatch
from alpha.records.trace import (
    NONE_U32,
    Event,
    Phase,
    TraceBounds,
    TraceHeader,
    TraceRecord,
    encode_header,
    encode_record,
    names_detail,
)
from alpha.records.trace_diff import diff_traces
from alpha.records.trace_table import Trace, read_trace

PLAN_IDENTITY = hashlib.sha256(b"one plan").digest()
# A star of three roles, two rounds: each leaf sends its contribution to 0, 0 sends the total
# back. A step: (role, event, peer, round, value) in the order the role records it.
Step = tuple[int, Event, int, int, str]


def _steps(contribution: dict[tuple[int, int], str] | None = None) -> list[Step]:
    contribution = contribution or {}
    steps: list[Step] = []
    for round_ in range(2):
        parts = {leaf: contribution.get((leaf, round_), f"c{leaf}.{round_}") for leaf in (1, 2)}
        total = "+".join(parts.values())
        for leaf in (1, 2):
            steps.append((leaf, Event.SEND, 0, round_, parts[leaf]))
            steps.append((0, Event.RECEIVE, leaf, round_, parts[leaf]))
        for leaf in (1, 2):
            steps.append((0, Event.SEND, leaf, round_, total))
            steps.append((leaf, Event.RECEIVE, 0, round_, total))
    return steps


def _traces(
    steps: list[Step], limit: int = 1000, extra: dict[int, list[TraceRecord]] | None = None
) -> dict[int, Trace]:
    """Each role's trace of ``steps`` (each DATA frame's slot 1, version its round; the
    digest that of its value), time running backwards so that no test can lean on it."""
    by_role: dict[int, list[TraceRecord]] = {0: [], 1: [], 2: []}
    clock = 10**9
    for role, event, peer, round_, value in steps:
        clock -= 1000
        records = by_role[role]
        if event == Event.OPERATION:
            records.append(
                TraceRecord(
                    len(records),
                    clock,
                    clock + 10,
                    event,
                    0,
                    Phase.RUNNING,
                    0,
                    NONE_U32,
                    NONE_U32,
                    round_,
                    0,
                    0,
                    names_detail(value, "g"),
                )
            )
            continue
        records.append(
            TraceRecord(
                len(records),
                clock,
                clock + 10,
                event,
                2,
                Phase.RUNNING,
                0,
                peer,
                1,
                round_,
                round_,
                64,
                hashlib.sha256(value.encode()).digest(),
            )
        )
    for role, more in (extra or {}).items():
        for record in more:
            by_role[role].append(dataclasses.replace(record, seq=len(by_role[role])))
    out = {}
    for role, records in by_role.items():
        header = TraceHeader(role, 3, PLAN_IDENTITY, "sha256", TraceBounds(limit, "first"), 0, 0)
        data = encode_header(header) + b"".join(encode_record(r) for r in records[:limit])
        out[role] = read_trace(data)
    return out


def test_two_equal_runs_are_equal_whatever_their_times() -> None:
    a, b = _traces(_steps()), _traces(_steps())
    shifted = {
        role: dataclasses.replace(t, records=_shift(t.records, 123_456)) for role, t in b.items()
    }
    diff = diff_traces(a, shifted)
    assert diff.equal and diff.differing == 0 and diff.compared == 16


def test_frames_are_aligned_by_their_names_not_by_the_order_they_came_in() -> None:
    # Role 0 took its two contributions in the other order (receives run at once from 1 MiB).
    steps = _steps()
    swapped = list(steps)
    first, second = (n for n, s in enumerate(steps) if s[:2] == (0, Event.RECEIVE) and s[3] == 0)
    swapped[first], swapped[second] = swapped[second], swapped[first]
    assert diff_traces(_traces(steps), _traces(swapped)).equal
    changed = _traces([s if n != first else (*s[:4], "other") for n, s in enumerate(swapped)])
    found = diff_traces(_traces(steps), changed).first
    assert found is not None and (found.role, found.direction, found.peer) == (0, "received", 2)


def _shift(records: np.ndarray, by: int) -> np.ndarray:
    moved = records.copy()
    moved["start"] += by
    moved["end"] += by
    return moved


def test_the_first_difference_is_the_role_that_computed_it_not_those_it_reached() -> None:
    a = _traces(_steps())
    b = _traces(_steps({(2, 1): "changed"}))
    diff = diff_traces(a, b)
    first = diff.first
    assert first is not None
    # Round 1: role 2's contribution, role 0's receive of it, and role 0's two totals differ;
    # the first named is role 2's send, which it computed from equal inputs.
    assert (first.round, first.role, first.direction, first.sender, first.receiver) == (
        1, 2, "sent", 2, 0,
    )  # fmt: skip
    assert first.why == "digest" and first.origin
    assert first.a is not None and first.b is not None and first.a.digest != first.b.digest
    assert diff.differing == 6  # 2 -> 0 sent and received, two totals sent and received


def test_a_difference_in_an_earlier_round_comes_first() -> None:
    a = _traces(_steps())
    b = _traces(_steps({(2, 1): "late", (1, 0): "early"}))
    first = diff_traces(a, b).first
    assert first is not None and (first.round, first.role) == (0, 1)


def test_a_frame_one_run_lacks_is_a_difference_where_its_trace_is_whole() -> None:
    a = _traces(_steps())
    cut = [step for step in _steps() if not (step[0] == 0 and step[3] == 1)]  # role 0 stopped
    first = diff_traces(a, _traces(cut)).first
    assert first is not None and first.why == "absent in B" and first.round == 1
    assert (first.role, first.direction) == (0, "received")  # its first missing record


def test_past_a_first_traces_limit_nothing_is_known() -> None:
    a = _traces(_steps())
    b = _traces(_steps(), limit=3)  # each role kept its first 3 records
    diff = diff_traces(a, b)
    assert diff.equal and diff.partial == (0, 1, 2)
    b = _traces(_steps({(1, 0): "x"}), limit=3)
    assert not diff_traces(a, b).equal  # a difference within the limit still counts


def test_frames_of_the_completion_are_not_compared() -> None:
    done = TraceRecord(
        0, 0, 1, Event.SEND, 6, Phase.COMPLETING, 0, 0, 0, 1, 0, 32, bytes(range(32))
    )
    other = dataclasses.replace(done, detail=bytes(32))
    a = _traces(_steps(), extra={1: [done]})
    b = _traces(_steps(), extra={1: [other]})
    assert diff_traces(a, b).equal


def test_runs_of_other_identities_or_roles_are_refused() -> None:
    a = _traces(_steps())
    other = dict(a)
    header = dataclasses.replace(a[0].header, identity=bytes(32))
    other[0] = dataclasses.replace(a[0], header=header)
    with pytest.raises(TraceMismatch, match="identit"):
        diff_traces(a, other)
    fewer = {role: trace for role, trace in a.items() if role != 2}
    with pytest.raises(TraceMismatch, match="roles"):
        diff_traces(a, fewer)
    with pytest.raises(TraceMismatch):
        diff_traces(a, {})


def test_each_side_says_the_operation_its_role_ran_before_the_frame() -> None:
    def with_operation(steps: list[Step]) -> list[Step]:
        at = next(n for n, s in enumerate(steps) if s[:2] == (2, Event.SEND) and s[3] == 1)
        return [*steps[:at], (2, Event.OPERATION, NONE_U32, 1, "contribute"), *steps[at:]]

    a = _traces(with_operation(_steps()))
    b = _traces(with_operation(_steps({(2, 1): "changed"})))
    first = diff_traces(a, b).first
    assert first is not None and first.a is not None and first.b is not None
    assert first.a.before == first.b.before == "contribute on 'g'"
