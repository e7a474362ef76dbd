"""The kinds of work a plan can ask for (``work.kind``), and from a plan to its global protocol
and run identity through them (pure).

Each kind of work has its own module, which builds its global protocol and its part of the run
identity: the sum check (``alpha.compiler.work_sum_check``) and the learner
(``alpha.compiler.work_learn``). :data:`WORKS` is the one registry: adding a kind of work is a
module of its own, one entry here and its name in ``alpha.compiler.plan.WORK_KINDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, final

from alpha.compiler.forms import Protocol
from alpha.compiler.plan import Plan
from alpha.compiler.work_learn import learn_identity, learner_protocol
from alpha.compiler.work_sum_check import sum_check_identity, sum_check_protocol
from alpha.core.digests import contract_digest, membership_digest
from alpha.core.identity import RunIdentity
from alpha.errors import PlanInvalid
from alpha.learner.data import Dataset

__all__ = [
    "WORKS",
    "Work",
    "contract_digest_of",
    "protocol_for",
    "run_identity",
    "work_of",
]


@final
@dataclass(frozen=True, slots=True)
class Work:
    """One kind of work a plan can ask for (``work.kind``), in one place: its global protocol
    (whose operations name only operations implemented in ``alpha.schedule.operations``, with
    where each is realized) and the learner part of its run identity."""

    kind: str
    protocol: Callable[[Plan], Protocol]
    identity: Callable[[Plan, Dataset | None], bytes]


WORKS: Final[Mapping[str, Work]] = {
    "sum-check": Work("sum-check", sum_check_protocol, sum_check_identity),
    "learn": Work("learn", learner_protocol, learn_identity),
}
"""Every kind of work, by ``work.kind``; ``alpha.compiler.plan.WORK_KINDS`` names exactly these."""


def work_of(plan: Plan) -> Work:
    """The kind of work ``plan`` asks for.

    Raises:
        PlanInvalid: the plan's work is of no known kind.
    """
    work = WORKS.get(plan.work_kind)
    if work is None:
        raise PlanInvalid(
            f"no work of kind {plan.work_kind!r}; known: {', '.join(WORKS)}", field="work.kind"
        )
    return work


def protocol_for(plan: Plan) -> Protocol:
    """The global protocol of a plan: its work's (``work.kind``).

    Raises:
        PlanInvalid: the plan's work is of no known kind, or its protocol refuses the plan
            (``work_sum_check.sum_check_protocol``, ``work_learn.learner_protocol``).
    """
    return work_of(plan).protocol(plan)


def contract_digest_of(plan: Plan) -> bytes:
    """The contract's digest of ``plan``: dtype, operation, topology and order, and how its
    frames are sealed."""
    return contract_digest(
        dtype=plan.dtype,
        operation=plan.operation,
        topology=plan.shape,
        participants=plan.participants,
        fanout=plan.tree.fanout,
        delivery=plan.delivery,
        integrity=plan.integrity,
        payload_digest=plan.payload_digest,
    )


def run_identity(plan: Plan, digits: Dataset | None = None) -> RunIdentity:
    """The identity every frame of ``plan``'s run carries: its work's learner part (a
    learner's includes its data: ``digits``, or the shipped data set read here), the contract
    and the membership.

    Raises:
        PlanInvalid: the plan's work is of no known kind.
    """
    return RunIdentity(
        learner=work_of(plan).identity(plan, digits),
        contract=contract_digest_of(plan),
        membership=membership_digest(plan.group),
    )
