"""The learner, one kind of work (``work.kind = "learn"``): the data-parallel learner as a
global protocol, its part of the run identity, and the learner-side value its roles are built
from (pure).

What compiling a ``learn`` plan needs and a participant does not: this module reads the plan
(``alpha.compiler.plan``), builds protocol forms to check and project, and hands the run-time
learner a :class:`alpha.learner.state.LearnerSetup` (:func:`learner_setup`) instead of the plan.
The role's state and the operations that step it are in ``alpha.learner.state``, which
participants load. The registry of every kind of work is ``alpha.compiler.work``.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import PurePath
from typing import Final

from alpha.checkpoint.manifest import owner_ranges
from alpha.compiler.datasets import dataset_file, dataset_of
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
from alpha.compiler.learner_module import learner_program
from alpha.compiler.plan import LearnerSpec, Plan
from alpha.core.digests import learner_digest
from alpha.core.targets import HOSTS
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid
from alpha.learner.data import Dataset
from alpha.learner.model import CLASSES, FEATURES, STATS, Model, initial_parameters
from alpha.learner.optimizer import SGD
from alpha.learner.state import LearnerSetup, LearnerState, state_specs
from alpha.schedule.learner_regions import CHECKPOINT as K
from alpha.schedule.learner_regions import CONTRIBUTIONS as C
from alpha.schedule.learner_regions import DIGEST_BYTES
from alpha.schedule.learner_regions import GRADIENT as G
from alpha.schedule.learner_regions import PARAMETERS as W
from alpha.schedule.learner_regions import STORE as P
from alpha.schedule.operations import LEARNER_OPS

__all__ = [
    "GPU_TARGET",
    "LEARNER_PROGRAM",
    "learn_identity",
    "learner_digest_of",
    "learner_operations",
    "learner_protocol",
    "learner_setup",
    "model_of",
    "plan_identity",
    "require_learner",
]

LEARNER_PROGRAM: Final = "alpha.digits-sgd/1"
"""The learner digest's program name: a change of the learner's meaning changes this."""

_KERNELS: Final = ("contribute",)
"""The learner operations that have GPU kernels (for the MLP only); the others are staged."""

GPU_TARGET: Final = "cuda"
"""The target a role's operations must be realized for when the plan binds it a GPU. The MLP's
contribution has kernels (``alpha.learner.gpu``); initialising, updating and observing run on
the GPU role's host, which stages the contribution and uploads the parameters again. The linear
model has no kernels, so binding it a GPU is a compile error naming ``contribute``: never a
silent fallback to the host."""

_STAGED: Final = HOSTS | {GPU_TARGET}


def model_of(plan: Plan) -> Model:
    """The model a plan's learner trains, in the plan's dtype.

    Raises:
        PlanInvalid: the plan has no learner, or its module is not found or read.
        ContractBroken: its module's source breaks the numerical contract.
        LearnerModuleInvalid: its module does not load or its layout is not one.
    """
    if plan.learner is None:
        raise PlanInvalid(
            f"{plan.name} is a sum check, not a learner: only a plan with work.kind = "
            '"learn" trains (alpha compile and alpha launch run this one)',
            field="work.kind",
        )
    learner = plan.learner
    shape = (FEATURES, CLASSES)
    if dataset_file(plan) is not None:
        found = dataset_of(plan)
        shape = (found.features, found.classes)
    if learner.kind != "module":
        hidden = learner.hidden if learner.kind == "mlp" else None
        return Model.shipped(hidden, plan.dtype, *shape)
    return Model(learner_program(plan), plan.dtype, *shape, options=learner.options)


def learner_setup(plan: Plan) -> LearnerSetup:
    """What every learner role of ``plan`` needs of it (``alpha.learner.state``): the model,
    its numbers, the partition and the GPU bindings; the run-time learner never reads a plan.

    Raises:
        PlanInvalid: the plan has no learner.
    """
    model = model_of(plan)
    learner = plan.learner
    assert learner is not None  # model_of refuses a plan without one
    return LearnerSetup(
        model=model,
        seed=learner.seed,
        rate=learner.rate,
        batch=learner.batch,
        holdout=learner.holdout,
        participants=plan.participants,
        optimizer=learner.optimizer,
        partition=learner.partition,
        contributors=learner.contributors,
        gpus=plan.gpus,
    )


def learner_operations(model: Model) -> dict[str, Operation]:
    """The learner's operations (implemented in ``alpha.schedule.operations``) and where each is
    realized, for ``model``."""
    # The GPU kernels are the shipped MLP's, for the digits' 64 features and 10 classes.
    gpu = model.hidden is not None and (model.features, model.classes) == (FEATURES, CLASSES)
    kernels = _STAGED if gpu else HOSTS
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
        W: Region(W, plan.dtype, model.size),
        G: Region(G, plan.dtype, model.contribution_size),
    }
    partition = "none" if plan.learner is None else plan.learner.partition
    observe = Local(Roles((0,)), "observe", G)
    before: tuple[Form, ...] = (Local(Everyone(), "init", W),)
    after: tuple[Form, ...] = ()
    logical = plan.learner is not None and plan.learner.contributors is not None
    if partition == "none" and logical:
        steps: tuple[Form, ...] = (
            *_logical_total(plan, model, regions),
            *_flood(plan.tree, 0, G),
            Local(Everyone(), "update", G),
            observe,
        )
    elif partition == "none":
        steps = (
            Local(Everyone(), "contribute", G),
            Combine(G, "all"),
            Local(Everyone(), "update", G),
            observe,
        )
    elif partition != "parameters":
        steps = (*_partitioned(plan, model, partition, regions), observe)
    else:
        steps = _partitioned(plan, model, partition, regions)
        before += (Local(Everyone(), "keep_own", P), Local(Everyone(), "release", W))
        after = (Local(Everyone(), "load_own", P), *_gather(plan))
    return Protocol(
        participants=plan.participants,
        tree=plan.tree,
        regions=regions,
        operations=learner_operations(model),
        body=Seq((*before, *_rounds(plan, count, Seq(steps), regions), *after)),
        targets=Targets(plan.default_target, _with_gpus(plan)),
    )


def _rounds(plan: Plan, count: int, round_form: Form, regions: dict[str, Region]) -> list[Form]:
    """``count`` rounds of ``round_form``; with a segment that publishes every ``every``
    rounds, a generation's steps after each ``every`` rounds but the last (whose generation
    the commit point publishes): ``Repeat(G, Seq(Repeat(every, round), *checkpoint))`` then
    the rounds left. The loop of loops only groups rounds (``docs/protocol.md``)."""
    every = None if plan.segment is None or plan.segment.save is None else plan.segment.every
    if every is None or every >= count:
        return [Repeat(count, count, round_form)]
    within = (count - 1) // every  # generations before the last round
    left = count - within * every  # 1..every
    group = Seq((Repeat(every, every, round_form), *_checkpoint(plan, regions)))
    return [Repeat(within, within, group), Repeat(left, left, round_form)]


def _checkpoint(plan: Plan, regions: dict[str, Region]) -> list[Form]:
    """A generation's commit step within the run (``docs/checkpoints.md``): every owner writes
    its ranges of the state, fsynced, and its owner manifest's SHA-256 into its entry of
    ``k``; each role's subtree of entries (a contiguous range: roles are in preorder) goes to
    its parent once its children's have come, deepest first; role 0, every entry in,
    publishes the generation. No generation is published before every owner said it wrote."""
    tree, n = plan.tree, plan.participants
    regions[K] = Region(K, "uint8", n * DIGEST_BYTES)
    steps: list[Form] = [Local(Everyone(), "save", K)]
    for role in reversed(range(1, n)):
        below = tree.subtree(role)
        name = f"{K}@{role}"
        regions[name] = Region(
            name, "uint8", len(below) * DIGEST_BYTES, K, below.start * DIGEST_BYTES
        )
        parent = tree.parent(role)
        assert parent is not None  # only role 0 has none
        steps.append(Transfer(role, parent, name))
    steps.append(Local(Roles((0,)), "publish", K))
    return steps


def _logical_total(plan: Plan, model: Model, regions: dict[str, Region]) -> list[Form]:
    """Logical contributors' total, at role 0: every role computes the contributions of those
    it hosts (rows ``c@k`` of ``c``), each travels up the tree path to role 0, which folds
    them in the logical tree's order into ``g`` (``docs/learner.md``)."""
    assert plan.learner is not None and plan.learner.contributors is not None
    contributors = plan.learner.contributors
    width = model.contribution_size
    regions[C] = Region(C, plan.dtype, contributors * width)
    steps: list[Form] = [Local(Everyone(), "contribute_logical", C)]
    for host, (first, last) in enumerate(owner_ranges(contributors, plan.participants)):
        for k in range(first, last):
            regions[f"{C}@{k}"] = Region(f"{C}@{k}", plan.dtype, width, C, k * width)
            steps += _toward_root(plan.tree, host, f"{C}@{k}")
    return [*steps, Local(Roles((0,)), "fold_logical", G)]


def _gather(plan: Plan) -> list[Form]:
    """Every range ``w@r`` from its owner to every role along the tree."""
    out: list[Form] = []
    for role in range(plan.participants):
        out += _flood(plan.tree, role, f"{W}@{role}")
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
        regions[f"{W}@{role}"] = Region(f"{W}@{role}", dtype, stop - start, W, start)
        if partition != "optimizer":
            regions[f"{G}@{role}"] = Region(f"{G}@{role}", dtype, stop - start, G, start)
    steps: list[Form] = []
    if partition == "parameters":
        # The whole parameters exist only while they are used: gathered from their owners
        # for the contribution, released after, gathered to role 0 alone to observe.
        regions[W] = Region(W, dtype, size, transient=True)
        regions[P] = Region(P, dtype, ranges[0][1] - ranges[0][0])
        steps += [Local(Everyone(), "load_own", P), *_gather(plan)]
    if logical:
        steps += _logical_total(plan, model, regions)
    else:
        steps.append(Local(Everyone(), "contribute", G))
    if partition == "parameters":
        steps.append(Local(Everyone(), "release", W))
    if partition == "optimizer":
        steps += _flood(tree, 0, G) if logical else [Combine(G, "all")]
    else:
        regions[f"{G}@stats"] = Region(f"{G}@stats", dtype, STATS, G, size)
        if not logical:  # with logical contributors role 0 holds the whole total already
            steps += [Combine(f"{G}@{role}", "one") for role in range(n)]
        for role in range(1, n):
            steps += _from_root(tree, role, f"{G}@{role}")
        if not logical:
            steps.append(Combine(f"{G}@stats", "one"))
    steps.append(Local(Everyone(), "update", G))
    if partition != "parameters":
        steps += _gather(plan)
        return tuple(steps)
    steps.append(Local(Everyone(), "load_own", P))
    for role in range(1, n):
        steps += _toward_root(tree, role, f"{W}@{role}")
    steps += [Local(Roles((0,)), "observe", G), Local(Everyone(), "release", W)]
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


def learn_identity(plan: Plan, digits: Dataset | None) -> bytes:
    """The learner part of a ``learn`` plan's run identity, over ``digits`` or, when None, the
    shipped data set (read here).

    Raises:
        PlanInvalid: whatever ``require_learner`` refuses.
    """
    return learner_digest_of(plan, digits or dataset_of(plan))


def learner_digest_of(plan: Plan, digits: Dataset) -> bytes:
    """The learner part of a ``learn`` plan's run identity: the learner's program,
    configuration, initial parameters, rate and data (``work.run_identity`` adds the
    contract and the membership).

    The configuration binds the optimizer and its constants as ``optimizer = {"kind": ...,
    constant: value, ...}``; for plain SGD the key is left out, so an SGD run keeps the
    identity it had before optimizers existed. A segment of a checkpointed run binds
    ``segment = {"first", "resume_sha256", "nonce"}``, and ``every`` when it publishes
    generations within the launch (``docs/checkpoints.md``).

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
        "dataset": _dataset_name(learner),
        "participants": plan.participants,
    }
    if learner.dataset_sha256:
        config["dataset_sha256"] = learner.dataset_sha256
    if learner.optimizer != SGD:
        config["optimizer"] = {"kind": learner.optimizer.kind, **learner.optimizer.constants}
    if learner.partition != "none":
        config["partition"] = learner.partition
    if learner.contributors is not None:
        config["contributors"] = learner.contributors
    if learner.kind == "module":
        # The module's text is the learner's code: its digest is in the identity, as the
        # bundled package's is (docs/identity.md); so are the options it is handed.
        program = learner_program(plan)
        config["module"] = {"name": program.name, "sha256": program.sha256}
        config["options"] = dict(learner.options)
    segment = plan.segment
    if segment is not None:
        # Where the segment starts (the generation's root manifest binds the whole state it
        # resumes from) and which attempt it is; where it publishes is no part of the math.
        bound: dict[str, object] = {
            "first": segment.first,
            "resume_sha256": segment.resume_sha256,
            "nonce": segment.nonce,
        }
        if segment.every is not None and segment.save is not None:
            bound["every"] = segment.every  # generations within the launch: its schedule's
        config["segment"] = bound
    return learner_digest(
        program=LEARNER_PROGRAM,
        config=config,
        initial_state=[initial_parameters(model_of(plan), learner.seed)],
        rate=learner.rate,
        samples=[digits.x, digits.labels],
    )


def _dataset_name(learner: LearnerSpec) -> str:
    """The data set as an identity names it: the shipped name, or a file's name (not the path
    the plan reaches it by: its pinned digest says which file it is)."""
    return learner.dataset if not learner.dataset_sha256 else PurePath(learner.dataset).name


def _plain(value: object) -> object:
    """An option's value as JSON holds it (a tuple as a list)."""
    return list(value) if isinstance(value, tuple) else value


def plan_identity(plan: Plan, digits: Dataset, state: LearnerState) -> dict[str, object]:
    """What a generation records of the plan that wrote it, field by field
    (``docs/checkpoints.md``): everything that decides what the state after a round is, and
    the run's name. A resume compares these with its own plan's. ``learner.partition`` is not
    among them: every partition computes the same bits (``docs/learner.md``)."""
    learner = plan.learner
    assert learner is not None
    data = hashlib.sha256(digits.x.tobytes() + digits.labels.tobytes()).hexdigest()
    kind: dict[str, object] = {
        "kind": learner.kind,
        "hidden": learner.hidden,
        "dataset": _dataset_name(learner),
    }
    if learner.kind == "module":
        program = learner_program(plan)
        kind["module"] = {"name": program.name, "sha256": program.sha256}
        kind["options"] = {name: _plain(value) for name, value in learner.options}
    return {
        "run": plan.name,
        "learner": kind,
        "contract": {"dtype": plan.dtype, "delivery": plan.delivery, "operation": plan.operation},
        "membership": {"group": str(plan.group), "epoch": plan.epoch},
        "topology": {"shape": plan.shape, "fanout": plan.tree.fanout},
        "optimizer": {"kind": learner.optimizer.kind, **learner.optimizer.constants},
        "state_layout": {
            name: {"shape": list(shape), "dtype": dtype}
            for name, (shape, dtype) in sorted(state_specs(state).items())
        },
        "rate": learner.rate,
        "seed": learner.seed,
        "batch": learner.batch,
        "holdout": learner.holdout,
        "contributors": learner.contributors,
        "data": data,
    }
