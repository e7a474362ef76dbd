"""The data-parallel learner as a global protocol, and its part of the run identity (pure).

What compiling a ``learn`` plan needs and a participant does not: this module reads the plan
(``alpha.compiler.plan``) and builds protocol forms to check and project. The role's state and the
operations that step it are in ``alpha.learner.program``, which participants load.
"""

from __future__ import annotations

import itertools
from typing import Final

from alpha.checkpoint.store import owner_ranges
from alpha.compiler.forms import (
    Combine,
    Everyone,
    Form,
    Local,
    Operation,
    Protocol,
    Region,
    Repeat,
    Roles,
    Seq,
    Targets,
    Transfer,
)
from alpha.compiler.plan import TARGETS, LearnerSpec, Plan
from alpha.core.digests import learner_digest
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid
from alpha.learner.data import Digits
from alpha.learner.model import STATS, Model, initial_parameters
from alpha.learner.optimizer import SGD
from alpha.learner.program import model_of
from alpha.schedule.operations import LEARNER_OPS

__all__ = [
    "GPU_TARGET",
    "LEARNER_PROGRAM",
    "learner_digest_of",
    "learner_operations",
    "learner_protocol",
    "require_learner",
]

LEARNER_PROGRAM: Final = "alpha.digits-sgd/1"
"""The learner digest's program name: a change of the learner's meaning changes this."""

_HOSTS: Final = frozenset(TARGETS)

_KERNELS: Final = ("contribute",)
"""The learner operations that have GPU kernels (for the MLP only); the others are staged."""

GPU_TARGET: Final = "cuda"
"""The target a role's operations must be realized for when the plan binds it a GPU. The MLP's
contribution has kernels (``alpha.learner.gpu``); initialising, updating and observing run on
the GPU role's host, which stages the contribution and uploads the parameters again. The linear
model has no kernels, so binding it a GPU is a compile error naming ``contribute``: never a
silent fallback to the host."""

_STAGED: Final = _HOSTS | {GPU_TARGET}


def learner_operations(model: Model) -> dict[str, Operation]:
    """The learner's operations (implemented in ``alpha.schedule.operations``) and where each is
    realized, for ``model``."""
    kernels = _STAGED if model.hidden is not None else _HOSTS
    return {
        name: Operation(name, "local", kernels if name in _KERNELS else _STAGED)
        for name in LEARNER_OPS
    }


def learner_protocol(plan: Plan) -> Protocol:
    """The global protocol of a ``learn`` plan.

    Raises:
        PlanInvalid: the plan has no learner, or asks for delivery to one owner (every role
            steps its own copy of the parameters, so every role needs the total).
    """
    model = model_of(plan)
    if plan.delivery != "all":
        raise PlanInvalid(
            "the learner steps every role's own parameters, so every role needs the combined "
            'gradient: use delivery = "all"',
            field="contract.delivery",
        )
    # A segment of a checkpointed run runs its own rounds: those after the generation it
    # resumes from, up to the plan's rounds (docs/checkpoints.md).
    first = 0 if plan.segment is None else plan.segment.first
    if not 0 <= first < plan.rounds:
        raise PlanInvalid(
            f"a segment starting after round {first} has no round left of {plan.rounds}",
            field="run.rounds",
        )
    count = plan.rounds - first
    regions = {
        "w": Region("w", plan.dtype, model.size),
        "g": Region("g", plan.dtype, model.contribution_size),
    }
    partition = "none" if plan.learner is None else plan.learner.partition
    observe = Local(Roles((0,)), "observe", "g")
    before: tuple[Form, ...] = (Local(Everyone(), "init", "w"),)
    after: tuple[Form, ...] = ()
    logical = plan.learner is not None and plan.learner.contributors is not None
    if partition == "none" and logical:
        steps: tuple[Form, ...] = (
            *_logical_total(plan, model, regions),
            *_flood(plan.tree, 0, "g"),
            Local(Everyone(), "update", "g"),
            observe,
        )
    elif partition == "none":
        steps = (
            Local(Everyone(), "contribute", "g"),
            Combine("g", "all"),
            Local(Everyone(), "update", "g"),
            observe,
        )
    elif partition != "parameters":
        steps = (*_partitioned(plan, model, partition, regions), observe)
    else:
        steps = _partitioned(plan, model, partition, regions)
        before += (Local(Everyone(), "keep_own", "p"), Local(Everyone(), "release", "w"))
        after = (Local(Everyone(), "load_own", "p"), *_gather(plan))
    return Protocol(
        participants=plan.participants,
        tree=plan.tree,
        regions=regions,
        operations=learner_operations(model),
        body=Seq((*before, Repeat(count, count, Seq(steps)), *after)),
        targets=Targets(plan.default_target, _with_gpus(plan)),
    )


def _logical_total(plan: Plan, model: Model, regions: dict[str, Region]) -> list[Form]:
    """Logical contributors' total, at role 0: every role computes the contributions of those
    it hosts (rows ``c@k`` of ``c``), each travels up the tree path to role 0, which folds
    them in the logical tree's order into ``g`` (``docs/learner.md``)."""
    assert plan.learner is not None and plan.learner.contributors is not None
    contributors = plan.learner.contributors
    width = model.contribution_size
    regions["c"] = Region("c", plan.dtype, contributors * width)
    steps: list[Form] = [Local(Everyone(), "contribute_logical", "c")]
    for host, (first, last) in enumerate(owner_ranges(contributors, plan.participants)):
        for k in range(first, last):
            regions[f"c@{k}"] = Region(f"c@{k}", plan.dtype, width, "c", k * width)
            steps += _toward_root(plan.tree, host, f"c@{k}")
    return [*steps, Local(Roles((0,)), "fold_logical", "g")]


def _gather(plan: Plan) -> list[Form]:
    """Every range ``w@r`` from its owner to every role along the tree."""
    out: list[Form] = []
    for role in range(plan.participants):
        out += _flood(plan.tree, role, f"w@{role}")
    return out


def _partitioned(
    plan: Plan, model: Model, partition: str, regions: dict[str, Region]
) -> tuple[Form, ...]:
    """A round whose optimizer state (and, with ``gradients``, combined gradient) is
    partitioned: role ``r`` owns the parameter range ``w@r`` and steps only it, then every
    range travels from its owner to every role (the gather). With ``gradients`` each range of
    the gradient is combined to the root alone (the same folds in the same order as the whole
    combine, so the same bits) and sent down the tree path to its owner; the statistics are
    combined to role 0, which observes them.

    Raises:
        PlanInvalid: more roles than parameters: a role would own nothing.

    With logical contributors the total is folded at role 0 (:func:`_logical_total`) and
    sent whole to every role (``optimizer``) or by range to each owner.
    """
    tree, n, dtype, size = plan.tree, plan.participants, plan.dtype, model.size
    logical = plan.learner is not None and plan.learner.contributors is not None
    if n > size:
        raise PlanInvalid(
            f"{n} roles cannot each own a range of {size} parameters: partition = "
            f"{partition!r} needs at most {size} roles",
            field="learner.partition",
        )
    ranges = owner_ranges(size, n)
    for role, (start, stop) in enumerate(ranges):
        regions[f"w@{role}"] = Region(f"w@{role}", dtype, stop - start, "w", start)
        if partition != "optimizer":
            regions[f"g@{role}"] = Region(f"g@{role}", dtype, stop - start, "g", start)
    steps: list[Form] = []
    if partition == "parameters":
        # The whole parameters exist only while they are used: gathered from their owners
        # for the contribution, released after, gathered to role 0 alone to observe.
        regions["w"] = Region("w", dtype, size, transient=True)
        regions["p"] = Region("p", dtype, ranges[0][1] - ranges[0][0])
        steps += [Local(Everyone(), "load_own", "p"), *_gather(plan)]
    if logical:
        steps += _logical_total(plan, model, regions)
    else:
        steps.append(Local(Everyone(), "contribute", "g"))
    if partition == "parameters":
        steps.append(Local(Everyone(), "release", "w"))
    if partition == "optimizer":
        steps += _flood(tree, 0, "g") if logical else [Combine("g", "all")]
    else:
        regions["g@stats"] = Region("g@stats", dtype, STATS, "g", size)
        if not logical:  # with logical contributors role 0 holds the whole total already
            steps += [Combine(f"g@{role}", "one") for role in range(n)]
        for role in range(1, n):
            steps += _from_root(tree, role, f"g@{role}")
        if not logical:
            steps.append(Combine("g@stats", "one"))
    steps.append(Local(Everyone(), "update", "g"))
    if partition != "parameters":
        steps += _gather(plan)
        return tuple(steps)
    steps.append(Local(Everyone(), "load_own", "p"))
    for role in range(1, n):
        steps += _toward_root(tree, role, f"w@{role}")
    steps += [Local(Roles((0,)), "observe", "g"), Local(Everyone(), "release", "w")]
    return tuple(steps)


def _from_root(tree: ParticipantTree, role: int, region: str) -> list[Form]:
    """``region`` from role 0 down the tree path to ``role``, one edge after another."""
    return [Transfer(a, b, region) for a, b in itertools.pairwise(tree.path(role))]


def _toward_root(tree: ParticipantTree, role: int, region: str) -> list[Form]:
    """``region`` from ``role`` up the tree path to role 0, one edge after another."""
    return [Transfer(b, a, region) for a, b in reversed(list(itertools.pairwise(tree.path(role))))]


def _flood(tree: ParticipantTree, source: int, region: str) -> list[Form]:
    """``region`` from ``source`` to every role, each tree edge carrying it once, outward."""
    out: list[Form] = []
    frontier, seen = [source], {source}
    while frontier:
        node = frontier.pop(0)
        parent = tree.parent(node)
        for peer in ((parent,) if parent is not None else ()) + tree.children(node):
            if peer not in seen:
                seen.add(peer)
                out.append(Transfer(node, peer, region))
                frontier.append(peer)
    return out


def _with_gpus(plan: Plan) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The plan's listed targets, with every GPU-bound role moved to ``GPU_TARGET``."""
    bound = tuple(role for role, _ in plan.gpus)
    if not bound:
        return plan.target_roles
    others = tuple(
        (target, tuple(r for r in roles if r not in bound)) for target, roles in plan.target_roles
    )
    return (*others, (GPU_TARGET, bound))


def require_learner(plan: Plan) -> LearnerSpec:
    """The plan's learner, once the plan is one that ``alpha compile`` would take as a learner.

    Raises:
        PlanInvalid: a sum-check plan (at ``work.kind``), or delivery to one owner (at
            ``contract.delivery``): whatever ``learner_protocol`` refuses.
    """
    learner_protocol(plan)
    assert plan.learner is not None, "learner_protocol refuses a plan without a learner"
    return plan.learner


def learner_digest_of(plan: Plan, digits: Digits) -> bytes:
    """The learner part of a ``learn`` plan's run identity: the learner's program,
    configuration, initial parameters, rate and data (``program.run_identity`` adds the
    contract and the membership).

    The configuration binds the optimizer and its constants as ``optimizer = {"kind": ...,
    constant: value, ...}``; for plain SGD the key is left out, so an SGD run keeps the
    identity it had before optimizers existed. A segment of a checkpointed run binds
    ``segment = {"first", "resume_sha256", "nonce"}`` (``docs/checkpoints.md``).

    Raises:
        PlanInvalid: whatever ``require_learner`` refuses.
    """
    learner = require_learner(plan)
    config: dict[str, object] = {
        "kind": learner.kind,
        "hidden": learner.hidden,
        "batch": learner.batch,
        "rounds": plan.rounds,
        "holdout": learner.holdout,
        "seed": learner.seed,
        "dataset": learner.dataset,
        "participants": plan.participants,
    }
    if learner.optimizer != SGD:
        config["optimizer"] = {"kind": learner.optimizer.kind, **learner.optimizer.constants}
    if learner.partition != "none":
        config["partition"] = learner.partition
    if learner.contributors is not None:
        config["contributors"] = learner.contributors
    segment = plan.segment
    if segment is not None:
        # Where the segment starts (the generation's root manifest binds the whole state it
        # resumes from) and which attempt it is; where it publishes is no part of the math.
        config["segment"] = {
            "first": segment.first,
            "resume_sha256": segment.resume_sha256,
            "nonce": segment.nonce,
        }
    return learner_digest(
        program=LEARNER_PROGRAM,
        config=config,
        initial_state=[initial_parameters(model_of(plan), learner.seed)],
        rate=learner.rate,
        samples=[digits.pixels, digits.labels],
    )
