"""The run identity: what a peer must share with us before its frames mean anything.

Three SHA-256 digests, each over a canonical byte encoding, bind a run:

* the **learner** digest binds the learner's program (its code identity), its
  configuration, its initial state, its rate and its samples; a compiled run's
  learner part also binds the code that computes the run (:func:`code_digest`
  of the sources every artifact carries, joined in by :func:`bind_code`), so
  artifacts built from different sources refuse each other;
* the **contract** digest binds the numerical contract: dtype, operation, the
  combine tree (participant count ``n`` and fan-out ``F``, after normalization)
  and delivery. Together these fix the floating-point order of every combine;
* the **membership** digest is the participant group's own digest (universe,
  epoch, identity, selection): :meth:`ParticipantGroup.digest`.

A :class:`RunIdentity` holds the three and travels in every frame (96 bytes, in
the order of :data:`IDENTITY_PARTS`), so a peer built for a different learner,
rate, contract, combine tree or membership is refused on its first frame, and
:meth:`RunIdentity.differing_parts` says which part disagrees.

Every encoding is fixed byte by byte (big-endian widths, little-endian array
data, floats by their IEEE-754 binary64 bits), so the digests are the same on
any CPU. ``docs/identity.md`` gives the encodings and known answers.

The wire value lives in :mod:`alpha.core._run_identity`, the digests and their encodings in
:mod:`alpha.core._digests`; this module is their public name, and its ``__all__`` is the API.
"""

from __future__ import annotations

from alpha.core._digests import (
    CODE_BOUND_LEARNER_DOMAIN,
    CODE_DOMAIN,
    CONTRACT_DOMAIN,
    DELIVERIES,
    DTYPES,
    LEARNER_DOMAIN,
    OPERATIONS,
    TOPOLOGIES,
    bind_code,
    canonical_fanout,
    code_digest,
    contract_digest,
    learner_digest,
    membership_digest,
)
from alpha.core._run_identity import IDENTITY_PART_SIZE, IDENTITY_PARTS, IDENTITY_SIZE, RunIdentity

__all__ = [
    "CODE_BOUND_LEARNER_DOMAIN",
    "CODE_DOMAIN",
    "CONTRACT_DOMAIN",
    "DELIVERIES",
    "DTYPES",
    "IDENTITY_PARTS",
    "IDENTITY_PART_SIZE",
    "IDENTITY_SIZE",
    "LEARNER_DOMAIN",
    "OPERATIONS",
    "TOPOLOGIES",
    "RunIdentity",
    "bind_code",
    "canonical_fanout",
    "code_digest",
    "contract_digest",
    "learner_digest",
    "membership_digest",
]
