"""Plans: the TOML a user writes, read into one frozen :class:`Plan` value.

A plan names the run, its membership (a textual participant group), the participant tree, the
numerical contract, the budgets, the addresses of edges, the target of each role, the work each
round does (a sum check or a learner) and optional GPU bindings. ``parse_plan(text)`` reads one;
``load_plan(path)`` reads a file and is the only function here that does I/O.

Reading is strict: every table and key is known, every value is checked against its documented
type and range, and each refusal is a :class:`alpha.errors.PlanInvalid` whose ``field`` names the
dotted field at fault (``topology.fanout``, ``budgets.receive``, ``addresses.edges.0-1``) and
whose message says what was found and what is allowed. A misspelt key is refused, never ignored.

Reading costs O(size of the plan text), never O(number of roles): the group and the tree are
compact, and per-role facts (an edge's address, a role's target) are looked up in the entries the
plan lists, so a plan of two million roles reads at once. Every field is documented in
``docs/plans.md``.

This module holds the :class:`Plan` value and the top-level read: the tables in
documentation order, each read by its own module (one reader per table, beside the values and
bounds of its fields): ``plan_run`` ([run]), ``plan_membership`` ([membership], [topology]),
``plan_contract`` ([contract]), ``plan_budgets`` ([budgets]), ``plan_placement``
([addresses], [targets], [gpu]), ``plan_work`` ([work]), ``plan_learner`` ([learner]),
``plan_checkpoint`` ([checkpoint]), ``plan_recovery`` ([recovery]) and ``plan_trace``
([trace]). Their public names are
re-exported here. The generic readers of one field (an integer in a range, one of some
strings, an IPv4 address, a sub-table, the refusal of an unknown key) are in
:mod:`alpha.compiler._fields`. Adding a table is a module of its own, its name in ``_TABLES``
and one call in :func:`parse_plan`.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from alpha.checked import int_in
from alpha.compiler._fields import refuse_unknown, table_at
from alpha.compiler.plan_budgets import BUDGET_KEYS, read_budgets
from alpha.compiler.plan_checkpoint import (
    CHECKPOINT_KEYS,
    DEFAULT_KEEP,
    MAX_KEEP,
    MAY_CHANGE,
    CheckpointSpec,
    read_checkpoint,
)
from alpha.compiler.plan_contract import CONTRACT_KEYS, read_contract
from alpha.compiler.plan_learner import (
    DATASETS,
    LEARNER_KEYS,
    LEARNER_KINDS,
    MAX_BATCH,
    MAX_CONTRIBUTORS,
    MAX_HIDDEN,
    MAX_HOLDOUT,
    PARTITIONS,
    LearnerSpec,
    read_learner,
)
from alpha.compiler.plan_lines import field_line
from alpha.compiler.plan_membership import (
    MEMBERSHIP_KEYS,
    SHAPES,
    TOPOLOGY_KEYS,
    read_membership,
    read_topology,
)
from alpha.compiler.plan_overrides import Override, apply_overrides, origin_of, overrides_of
from alpha.compiler.plan_placement import (
    ADDRESSES_KEYS,
    GPU_KEYS,
    MAX_GPU_UUID_CHARS,
    TARGETS,
    TARGETS_KEYS,
    read_addresses,
    read_gpu,
    read_ports,
    read_targets,
    read_transport,
)
from alpha.compiler.plan_recovery import (
    MAX_RESTARTS,
    RECOVERY_KEYS,
    RecoverySpec,
    read_recovery,
)
from alpha.compiler.plan_run import MAX_NAME_CHARS, MAX_ROUNDS, RUN_KEYS, read_run
from alpha.compiler.plan_trace import TRACE_KEYS, read_trace
from alpha.compiler.plan_work import CHOICES, MAX_WORK_SIZE, WORK_KEYS, WORK_KINDS, read_work
from alpha.core.budgets import Budgets
from alpha.core.membership import ParticipantGroup
from alpha.core.placement import NodePlacement, PortRange
from alpha.core.sealing import KEYED_INTEGRITY
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid, RoleOutOfRange, TopologyError
from alpha.files import read_regular_file
from alpha.learner.data import MAX_SEED
from alpha.records.trace import TraceBounds
from alpha.schedule.role import DEFAULT_ADDRESS

if TYPE_CHECKING:  # the type only: this module does no I/O beyond load_plan's one read
    from os import PathLike

__all__ = [
    "CHOICES",
    "DATASETS",
    "DEFAULT_ADDRESS",
    "LEARNER_KINDS",
    "MAX_BATCH",
    "MAX_CONTRIBUTORS",
    "MAX_GPU_UUID_CHARS",
    "MAX_HIDDEN",
    "MAX_HOLDOUT",
    "MAX_KEEP",
    "MAX_NAME_CHARS",
    "MAX_PLAN_BYTES",
    "MAX_RESTARTS",
    "MAX_ROUNDS",
    "MAX_SEED",
    "MAX_WORK_SIZE",
    "MAY_CHANGE",
    "PARTITIONS",
    "SHAPES",
    "TARGETS",
    "WORK_KINDS",
    "CheckpointSpec",
    "LearnerSpec",
    "Override",
    "Plan",
    "RecoverySpec",
    "Segment",
    "load_plan",
    "overrides_of",
    "parse_plan",
]

# Every table in documentation order, with the keys it knows (each table's module owns them;
# messages list them in this order). The private names are the schema's as tests/test_plan.py
# reads them, to hold every key to docs/plans.md.
_RUN_KEYS: Final = RUN_KEYS
_MEMBERSHIP_KEYS: Final = MEMBERSHIP_KEYS
_TOPOLOGY_KEYS: Final = TOPOLOGY_KEYS
_CONTRACT_KEYS: Final = CONTRACT_KEYS
_BUDGET_KEYS: Final = BUDGET_KEYS
_ADDRESSES_KEYS: Final = ADDRESSES_KEYS
_TARGETS_KEYS: Final = TARGETS_KEYS
_WORK_KEYS: Final = WORK_KEYS
_LEARNER_KEYS: Final = LEARNER_KEYS
_GPU_KEYS: Final = GPU_KEYS
_CHECKPOINT_KEYS: Final = CHECKPOINT_KEYS
_RECOVERY_KEYS: Final = RECOVERY_KEYS
_TRACE_KEYS: Final = TRACE_KEYS
_TABLE_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "run": _RUN_KEYS,
    "membership": _MEMBERSHIP_KEYS,
    "topology": _TOPOLOGY_KEYS,
    "contract": _CONTRACT_KEYS,
    "budgets": _BUDGET_KEYS,
    "addresses": _ADDRESSES_KEYS,
    "targets": _TARGETS_KEYS,
    "work": _WORK_KEYS,
    "learner": _LEARNER_KEYS,
    "gpu": _GPU_KEYS,
    "checkpoint": _CHECKPOINT_KEYS,
    "recovery": _RECOVERY_KEYS,
    "trace": _TRACE_KEYS,
}
_TABLES: Final = tuple(_TABLE_KEYS)


@final
@dataclass(frozen=True, slots=True)
class Segment:
    """The part of a run one launch runs, set by ``alpha run`` (never read from a plan's
    text): the rounds before it (``first``; the plan's ``rounds`` is where it ends), the
    generation it resumes from, and where it publishes its own. Every field enters the run
    identity, so two segments, or two attempts at one (their nonces differ), refuse each
    other's frames.

    Attributes:
        first: rounds done before the segment, 0..rounds-1.
        resume: the generation folder it starts from (an absolute path), or None.
        resume_sha256: that generation's root manifest digest (hex), or None.
        save: the checkpoint folder it publishes into (an absolute path), or None.
        nonce: 8 hex digits naming this attempt's generation, with ``save``.
        keep: generations kept after publishing, with ``save``.
        record: what the generation it publishes records of the plan (canonical JSON: the
            plan's identity fields and digest, the run's name, what changed on resume);
            ``""`` for nothing. It is no part of the run identity's math.
        every: with ``save``, the rounds between the generations it publishes within the
            launch (at the commit point of each, without stopping; the last at the run's
            commit point), or None for one generation, at the end.
    """

    first: int = 0
    resume: str | None = None
    resume_sha256: str | None = None
    save: str | None = None
    nonce: str | None = None
    keep: int = DEFAULT_KEEP
    record: str = ""
    every: int | None = None


@final
@dataclass(frozen=True, slots=True)
class Plan:
    """One plan, read and checked: everything the compiler needs, nothing per role listed.

    Attributes:
        name: the run's name.
        rounds: rounds to run, 1..MAX_ROUNDS.
        epoch: the run's epoch, 0..MAX_EPOCH; it is also the group's epoch.
        group: the admitted membership; its members are the roles ``0..participants-1``.
        group_text: the group's text as the plan wrote it (``str(group)`` is canonical).
        participants: the number of roles, ``len(group)``.
        tree: the participant tree (a star and a pair are trees).
        shape: ``"tree"``, ``"star"`` or ``"pair"``, as the plan named it.
        dtype, delivery, operation: the numerical contract.
        integrity, payload_digest: how frames are sealed (``[contract]``, docs/security.md):
            ``"hmac-sha256"`` (keyed, the default) or ``"sha256"``; ``"sha256"`` (the
            default) or ``"blake3"``.
        budgets: every wait's bound.
        default_address: the IPv4 address of every edge not listed in ``edge_addresses``.
        edge_addresses: ``((low, high), address)`` per listed edge, ascending by edge.
        transport: ``"auto"`` (shared memory for edges the launcher runs on one host) or
            ``"tcp"`` (``[addresses] transport``).
        ports: the range every edge's port is fixed from when the roles run on nodes
            (``[addresses] ports``), or None: the default range there, ephemeral ports here.
        placement: where each role runs and what each edge listens on, when ``alpha run
            --slurm`` spreads the roles over an allocation's nodes (set by it, never read from
            the text, like ``segment``; no part of the run identity), or None: every edge
            listens on its plan address, on an ephemeral port it announces.
        default_target: the target of every role not listed in ``target_roles``.
        target_roles: ``(target, roles)`` per listed target, in TARGETS order, roles ascending.
        work_kind: ``"sum-check"`` or ``"learn"``.
        work_size: elements per region of the sum check; None for ``learn``.
        choice: the sum check's choice selector; None for ``learn``.
        learner: the learner, for ``learn``; None for ``sum-check``.
        gpus: ``(role, GPU UUID)`` per bound role, ascending by role.
        checkpoint: the ``[checkpoint]`` table of a learn plan, or None.
        recovery: the ``[recovery]`` table of a learn plan, or None (no restarts).
        trace: the ``[trace]`` table's bounds, or None (a traced run's defaults); no part of
            the run identity.
        segment: the part of the run one launch runs (set by ``alpha run``), or None.
        source: where the text came from (a path, or ``"<plan>"``).
        text_sha256: the hex SHA-256 of the plan's text in UTF-8 (before any override).
        overrides: the values set from the command line, in the order given, applied to the
            text's table before it was checked (so every field above already holds them).

    Equality compares every attribute above; the lookup tables behind :meth:`address` and
    :meth:`target` are derived from them and take no part.

    Raises:
        Nothing: values are checked when a plan is read; construct through :func:`parse_plan`.
    """

    name: str
    rounds: int
    epoch: int
    group: ParticipantGroup
    group_text: str
    participants: int
    tree: ParticipantTree
    shape: str
    dtype: str
    delivery: str
    operation: str
    budgets: Budgets
    default_address: str
    edge_addresses: tuple[tuple[tuple[int, int], str], ...]
    default_target: str
    target_roles: tuple[tuple[str, tuple[int, ...]], ...]
    work_kind: str
    work_size: int | None
    choice: str | None
    learner: LearnerSpec | None
    gpus: tuple[tuple[int, str], ...]
    source: str
    text_sha256: str
    checkpoint: CheckpointSpec | None = None
    recovery: RecoverySpec | None = None
    trace: TraceBounds | None = None
    segment: Segment | None = None
    overrides: tuple[Override, ...] = ()
    integrity: str = KEYED_INTEGRITY
    payload_digest: str = "sha256"
    transport: str = "auto"
    ports: PortRange | None = None
    placement: NodePlacement | None = None
    # Derived lookups, O(listed entries) to build; excluded from equality, hashing and repr.
    _address_of: Mapping[tuple[int, int], str] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _target_of: Mapping[int, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_address_of", dict(self.edge_addresses))
        object.__setattr__(
            self,
            "_target_of",
            {role: target for target, roles in self.target_roles for role in roles},
        )

    def address(self, low: int, high: int) -> str:
        """The IPv4 address of the edge ``low``-``high`` (``low`` is ``high``'s parent).

        The address ``low`` listens on and ``high`` connects to: with a :attr:`placement`,
        that of ``low``'s node; else the one listed in ``[addresses.edges]``, else the
        default. O(tree depth).

        Raises:
            RoleOutOfRange: ``high`` is not a role ``0..participants-1``.
            TopologyError: ``low`` is not ``high``'s parent, so the pair is not an edge.
        """
        parent = self.tree.parent(high)
        if isinstance(low, bool) or parent is None or low != parent:
            raise TopologyError(
                f"roles {low!r} and {high!r} are not an edge of this plan's tree: an edge is "
                f"(parent, child), and the parent of {high} is {parent}"
            )
        if self.placement is not None:
            return self.placement.address_of(low)
        return self._address_of.get((low, high), self.default_address)

    def port(self, low: int, high: int) -> int | None:
        """The port fixed for the edge ``low``-``high`` by the :attr:`placement`, or None
        (without one: the listener binds an ephemeral port and announces it).

        Raises:
            RoleOutOfRange, TopologyError: as :meth:`address`.
        """
        self.address(low, high)  # the same refusal of a pair that is not an edge
        return None if self.placement is None else self.placement.port_of(high)

    def target(self, role: int) -> str:
        """The target (``"x86_64"`` or ``"aarch64"``) ``role``'s artifact is built for. O(1).

        Raises:
            RoleOutOfRange: ``role`` is not an int in ``0..participants-1`` (bools refused).
        """
        if not int_in(role, 0, self.participants - 1):
            raise RoleOutOfRange(
                f"a role of this {self.participants}-role plan is an int in "
                f"0..{self.participants - 1}, got {role!r}"
            )
        return self._target_of.get(role, self.default_target)

    def targets_present(self) -> frozenset[str]:
        """The targets at least one role is built for. O(number of listed roles).

        Raises:
            Nothing.
        """
        listed = sum(len(roles) for _, roles in self.target_roles)
        present = {target for target, roles in self.target_roles if roles}
        if listed < self.participants:
            present.add(self.default_target)
        return frozenset(present)


# --- the public readers -------------------------------------------------------------------


def parse_plan(text: str, *, source: str = "<plan>", overrides: Sequence[Override] = ()) -> Plan:
    """Read and check a plan from its TOML text, with ``overrides`` (values set from the
    command line, :mod:`alpha.compiler.plan_overrides`) applied to its table first, so an
    overridden plan is checked, and is, as if the values were written in the text.

    Tables are read in documentation order (run, membership, topology, contract, budgets,
    addresses, targets, work, learner, gpu, checkpoint, recovery, trace), each first for
    unknown keys and then field by field in documentation order; the first refusal met is
    raised. A refusal says where its field was written (``where``): the override it came from
    (``--set run.rounds=0``), else the source and line of its key (``PLAN.toml:3``, found by
    :func:`alpha.compiler.plan_lines.field_line`; the source alone when no line is found). A
    plan read from text (the source ``"<plan>"``) gets the ``line`` but no ``where``. O(size
    of ``text``).

    Raises:
        TypeError: ``text`` or ``source`` is not a str.
        PlanInvalid: the text is not valid TOML or not valid Unicode (``field`` is ``""``; a
            TOML message gives the line and column), or a table or key is unknown, a required
            one missing, or a value of the wrong type or out of its allowed range (``field``
            names it, e.g. ``topology.fanout``).
    """
    try:
        return _parse_plan(text, source, tuple(overrides))
    except PlanInvalid as error:
        if error.where or not error.field:
            raise
        came = origin_of(error.field, overrides)
        if came is not None:
            raise PlanInvalid(error.message, field=error.field, where=came.origin) from None
        line = field_line(text, error.field)
        where = "" if source == "<plan>" else source if line is None else f"{source}:{line}"
        raise PlanInvalid(error.message, field=error.field, where=where, line=line) from None


def _parse_plan(text: str, source: str, overrides: tuple[Override, ...]) -> Plan:
    """:func:`parse_plan`, its refusals not yet placed."""
    if not isinstance(text, str) or not isinstance(source, str):
        raise TypeError("a plan's text and source must be str")
    try:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError as error:
        raise PlanInvalid(f"{source} is not valid Unicode text: {error}") from None
    try:
        root = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer too long to convert
        raise PlanInvalid(f"{source} is not valid TOML: {error}") from None
    apply_overrides(root, overrides)
    refuse_unknown(root, "", _TABLES)
    for name in _TABLES:
        table_at(root, name)  # every table present is a table, before any is read
    name, rounds, epoch = read_run(root)
    membership = read_membership(root, epoch)
    n = len(membership.group)
    shape, tree = read_topology(root, n)
    dtype, delivery, operation, integrity, payload_digest = read_contract(root)
    budgets = read_budgets(root)
    default_address, edge_addresses = read_addresses(root, tree)
    transport = read_transport(root)
    ports = read_ports(root, n)
    default_target, target_roles = read_targets(root, n)
    work_kind, work_size, choice = read_work(root)
    learner = read_learner(root, work_kind, dtype)
    gpus = read_gpu(root, n)
    checkpoint = read_checkpoint(root, work_kind, rounds)
    recovery = read_recovery(root, work_kind, None if learner is None else learner.contributors)
    trace = read_trace(root)
    return Plan(
        name=name,
        rounds=rounds,
        epoch=epoch,
        group=membership.group,
        group_text=membership.text,
        participants=n,
        tree=tree,
        shape=shape,
        dtype=dtype,
        delivery=delivery,
        operation=operation,
        integrity=integrity,
        payload_digest=payload_digest,
        budgets=budgets,
        default_address=default_address,
        edge_addresses=edge_addresses,
        transport=transport,
        ports=ports,
        default_target=default_target,
        target_roles=target_roles,
        work_kind=work_kind,
        work_size=work_size,
        choice=choice,
        learner=learner,
        gpus=gpus,
        source=source,
        text_sha256=digest,
        checkpoint=checkpoint,
        recovery=recovery,
        trace=trace,
        overrides=overrides,
    )


#: The largest plan file :func:`load_plan` reads. A plan is a few hundred bytes; its longest
#: tables list exceptions one line each (an edge's address, a role's target or GPU, ~30 bytes),
#: so 1 MiB holds some 30,000 of them. A bigger file is not a plan (a log, a data set, a
#: device named by mistake), and the bound keeps `alpha compile` from reading it all.
MAX_PLAN_BYTES: Final = 1 << 20


def load_plan(path: str | PathLike[str], *, overrides: Sequence[Override] = ()) -> Plan:
    """Read the plan file at ``path`` (UTF-8 TOML); its ``source`` is the path. ``overrides``
    are applied as :func:`parse_plan` applies them.

    Only a regular file of at most :data:`MAX_PLAN_BYTES` is read: a FIFO is refused without
    waiting for a writer, and a device such as ``/dev/zero`` without reading a byte.

    Raises:
        PlanInvalid: the file cannot be read, is not a regular file or is larger than
            :data:`MAX_PLAN_BYTES` (``field`` is ``""``, the message names the path and the
            cause), is not UTF-8, or :func:`parse_plan` refuses its text.
    """
    source = path if isinstance(path, str) else path.__fspath__()
    try:
        data = read_regular_file(source, MAX_PLAN_BYTES)
    except OSError as error:
        raise PlanInvalid(
            f"cannot read the plan {source}: {error.strerror or error}; name a plan file "
            f"(TOML, at most {MAX_PLAN_BYTES} bytes, see docs/plans.md)"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanInvalid(f"{source} is not UTF-8 text: {error}") from None
    return parse_plan(text, source=source, overrides=overrides)
