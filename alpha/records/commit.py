"""The commit point's values: completion digests and the commit record. Pure.

A run counts only once role 0 has published its commit record (``docs/failure.md``). Before
that, every role's completion travels up the participant tree in DONE frames, each carrying the
digest of the reports of the sender's whole subtree:

    subtree(r) = SHA-256(b"alpha/subtree/1" || SHA-256(report of r) || subtree(c1) || ...)

over r's children c1 < c2 < ... in order. Role 0's value covers every report of the run; the
commit record names it, so a reader can check that the reports it finds are exactly the
committed ones (:func:`check_reports`), and a report left from another run, or changed since,
is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, final

from alpha.checked import int_in
from alpha.core.identity import DIGEST_SIZE
from alpha.errors import CommitInvalid
from alpha.records.folder import COMMIT_NAME

__all__ = [
    "COMMIT_FORMAT",
    "COMMIT_NAME",
    "CommitRecord",
    "check_reports",
    "subtree_digest",
]

COMMIT_FORMAT: Final = "alpha-commit/1"
"""The ``format`` field of every commit record."""


_SUBTREE_TAG: Final = b"alpha/subtree/1"


def subtree_digest(report: bytes, children: Sequence[bytes]) -> bytes:
    """The completion digest of a role whose report is ``report`` and whose children sent
    ``children`` (their own completion digests, in child order)."""
    digest = hashlib.sha256(_SUBTREE_TAG)
    digest.update(hashlib.sha256(report).digest())
    for child in children:
        if len(child) != DIGEST_SIZE:
            raise CommitInvalid(f"a child's completion digest has {len(child)} bytes, not 32")
        digest.update(child)
    return digest.digest()


@final
@dataclass(frozen=True, slots=True)
class CommitRecord:
    """What role 0 publishes when the run commits.

    Attributes:
        identity: the run identity, hex (``alpha.core.identity``).
        participants: how many roles completed.
        reports: role 0's completion digest, hex: it covers every role's report.
        rounds: rounds the run completed.
    """

    identity: str
    participants: int
    reports: str
    rounds: int

    def encode(self) -> bytes:
        """The record's bytes; the COMMIT frames carry their SHA-256."""
        return (
            json.dumps(
                {
                    "format": COMMIT_FORMAT,
                    "identity": self.identity,
                    "participants": self.participants,
                    "reports": self.reports,
                    "rounds": self.rounds,
                },
                indent=1,
            )
            + "\n"
        ).encode()

    def digest(self) -> bytes:
        return hashlib.sha256(self.encode()).digest()

    @classmethod
    def decode(cls, data: bytes) -> CommitRecord:
        """
        Raises:
            CommitInvalid: ``data`` is not a commit record this module writes.
        """
        try:
            value = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CommitInvalid(f"the commit record is not JSON: {error}") from None
        if not isinstance(value, dict) or value.get("format") != COMMIT_FORMAT:
            raise CommitInvalid(f"the commit record's format is not {COMMIT_FORMAT!r}")
        fields = ["format", "identity", "participants", "reports", "rounds"]
        if sorted(value) != fields:
            raise CommitInvalid(f"the commit record's fields are not {fields}")
        for name in ("participants", "rounds"):
            number = value[name]
            if not int_in(number, 0):
                raise CommitInvalid(f"the commit record's {name} is not a count: {number!r}")
        for name in ("identity", "reports"):
            text = value[name]
            if not isinstance(text, str) or not all(c in "0123456789abcdef" for c in text):
                raise CommitInvalid(f"the commit record's {name} is not lower-case hex")
        record = cls(value["identity"], value["participants"], value["reports"], value["rounds"])
        if record.encode() != data:
            raise CommitInvalid("the commit record is not in its canonical form")
        return record


def check_reports(
    record: CommitRecord,
    reports: Mapping[int, bytes],
    children: Callable[[int], Sequence[int]],
) -> None:
    """Check that ``reports`` (each role's report bytes) are exactly the ones ``record``
    committed, given each role's children in the participant tree.

    Raises:
        CommitInvalid: a report is missing, extra, or differs from the committed one.
    """
    expected = set(range(record.participants))
    if set(reports) != expected:
        missing = sorted(expected - set(reports))
        extra = sorted(set(reports) - expected)
        raise CommitInvalid(
            f"the committed run has {record.participants} reports; missing roles {missing[:8]}, "
            f"extra roles {extra[:8]}"
        )
    # Children after parents in preorder, so a reverse sweep has every child's digest ready.
    digests: dict[int, bytes] = {}
    for role in reversed(range(record.participants)):
        digests[role] = subtree_digest(reports[role], [digests[c] for c in children(role)])
    if record.participants and digests[0].hex() != record.reports:
        raise CommitInvalid(
            "the reports found are not the ones the run committed (changed, or left from "
            "another run)"
        )
