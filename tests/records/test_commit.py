"""Completion digests and the commit record (the values of the run's one commit point)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.topology import ParticipantTree
from alpha.errors import CommitInvalid
from alpha.records.commit import CommitRecord, check_reports, subtree_digest

REPORTS = st.lists(st.binary(max_size=64), min_size=1, max_size=20)


def _record(tree: ParticipantTree, reports: dict[int, bytes]) -> CommitRecord:
    digests: dict[int, bytes] = {}
    for role in reversed(range(tree.n)):
        digests[role] = subtree_digest(reports[role], [digests[c] for c in tree.children(role)])
    return CommitRecord("ab" * 96, tree.n, digests[0].hex(), 3)


@given(REPORTS, st.integers(1, 4))
def test_the_committed_reports_pass_and_any_change_is_refused(
    texts: list[bytes], fanout: int
) -> None:
    tree = ParticipantTree(len(texts), fanout)
    reports = dict(enumerate(texts))
    record = _record(tree, reports)
    check_reports(record, reports, tree.children)
    for role in reports:
        changed = dict(reports)
        changed[role] = texts[role] + b" "
        with pytest.raises(CommitInvalid):
            check_reports(record, changed, tree.children)
    with pytest.raises(CommitInvalid):
        check_reports(record, {r: t for r, t in reports.items() if r}, tree.children)
    with pytest.raises(CommitInvalid):
        check_reports(record, {**reports, len(texts): b""}, tree.children)


def test_the_order_of_children_is_part_of_the_digest() -> None:
    a, b = subtree_digest(b"a", []), subtree_digest(b"b", [])
    assert subtree_digest(b"r", [a, b]) != subtree_digest(b"r", [b, a])
    with pytest.raises(CommitInvalid):
        subtree_digest(b"r", [b"short"])


@given(st.integers(0, 10**6), st.integers(0, 10**9), st.binary(min_size=32, max_size=32))
def test_a_record_round_trips_and_only_its_canonical_bytes_decode(
    participants: int, rounds: int, digest: bytes
) -> None:
    record = CommitRecord("00" * 96, participants, digest.hex(), rounds)
    data = record.encode()
    assert CommitRecord.decode(data) == record
    with pytest.raises(CommitInvalid):
        CommitRecord.decode(data.replace(b'"rounds"', b' "rounds"'))


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b"{}", b'{"format": "alpha-commit/2"}', b"\xff", b'{"format": "alpha-commit/1"}'],
)
def test_a_malformed_record_is_refused(data: bytes) -> None:
    with pytest.raises(CommitInvalid):
        CommitRecord.decode(data)
