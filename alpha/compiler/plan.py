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

This module is the schema: the tables in documentation order and what each field may hold. The
generic readers of one field (an integer in a range, one of some strings, an IPv4 address, a
sub-table, the refusal of an unknown key) are in :mod:`alpha.compiler._fields`.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from alpha.checked import int_in
from alpha.compiler._fields import (
    Table,
    float_at,
    int_at,
    ipv4,
    one_of,
    optional_int_at,
    refuse_unknown,
    required_table,
    shown,
    str_at,
    table_at,
)
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.core.identity import DELIVERIES, DTYPES, OPERATIONS, TOPOLOGIES
from alpha.core.membership import (
    MAX_EPOCH,
    MAX_IDENTITY_BYTES,
    MAX_ROLES,
    ParticipantGroup,
    group,
    parse_group,
)
from alpha.core.targets import TARGETS  # the machine targets; the first is the default
from alpha.core.topology import ParticipantTree, pair, star
from alpha.errors import (
    AdmissionError,
    GroupSyntaxError,
    PlanInvalid,
    RoleDescriptionInvalid,
    RoleOutOfRange,
    TopologyError,
)
from alpha.files import read_regular_file
from alpha.learner.optimizer import (
    OPTIMIZER_CONSTANTS,
    OPTIMIZERS,
    SGD,
    Optimizer,
    constant_refusal,
)
from alpha.schedule.operations import SELECTORS
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
    "Plan",
    "Segment",
    "load_plan",
    "parse_plan",
]

# --- bounds and allowed values ------------------------------------------------------------

#: Rounds are the count of the protocol's outer repeat, which travels as a u64, but every
#: round spends one version of each slot's per-slot counter; 2**32 - 1 keeps a run's versions far
#: inside the u64 version space even with several transfers per slot and round, and is more
#: rounds than any run needs.
MAX_ROUNDS: Final = 2**32 - 1

#: A run's name names directories, artifacts and log lines; 64 characters of [a-z0-9._-] are
#: enough to be descriptive and keep every path and line short and shell-safe.
MAX_NAME_CHARS: Final = 64
_NAME: Final = re.compile(r"[a-z0-9._-]+")

#: The topology shapes: star and pair are trees of a fixed fan-out, named for the reader.
SHAPES: Final = TOPOLOGIES

#: The work of a round: the demonstration's checked sum, or a learner's update.
WORK_KINDS: Final = ("sum-check", "learn")

#: Elements per region of the sum check. 2**28 float64 elements are 2 GiB per region per role;
#: past that a plan is a mistake, and the bound keeps it from asking every participant for an
#: absurd buffer.
MAX_WORK_SIZE: Final = 2**28
_DEFAULT_WORK_SIZE: Final = 1024

#: The per-round agreed choice's selector: none, or any selector implemented in
#: ``schedule.operations`` (``const-2`` among them, to show a word out of range refused at run
#: time).
CHOICES: Final = ("none", *SELECTORS)

#: What a learner partitions among its roles (``docs/learner.md``, "Partitioned state").
PARTITIONS: Final = ("none", "optimizer", "gradients", "parameters")

#: Logical contributors: each is a data shard and a contribution every round; 4096 of them
#: each send a contribution toward role 0, which folds them all.
MAX_CONTRIBUTORS: Final = 4096

#: Learner models, and the data sets a learner can read (shipped in alpha/data/, docs/data.md).
LEARNER_KINDS: Final = ("mlp", "linear")
DATASETS: Final = ("digits",)

#: An MLP's hidden width. 4096 units over the digits' 64 features are far more than the data can
#: use; the bound keeps a typo from allocating a huge state in every role.
MAX_HIDDEN: Final = 4096
_DEFAULT_HIDDEN: Final = 32

#: Samples per role per round. A batch is an array in every role every round; 2**20 samples of
#: 64 float64 features are 512 MiB, past which a plan is wrong rather than ambitious.
MAX_BATCH: Final = 2**20
_DEFAULT_BATCH: Final = 32

#: The held-out share of the data set. More than half held out leaves the learner less to learn
#: from than it is judged on.
MAX_HOLDOUT: Final = 0.5
_DEFAULT_HOLDOUT: Final = 0.2

#: A learner's seed goes into the learner digest as an unsigned 64-bit value.
MAX_SEED: Final = 2**64 - 1

#: A GPU UUID as nvidia-smi prints it is 40 characters (``GPU-`` and 36 of hex and dashes); 64
#: leaves room for other vendors' forms and keeps a pasted log line from passing as one.
MAX_GPU_UUID_CHARS: Final = 64
_GPU_UUID: Final = re.compile(r"GPU-[0-9a-fA-F][0-9a-fA-F-]*")

#: A role in a key (``"0-1"``, ``"3"``) is canonical decimal: no sign, no leading zero, and at
#: most 10 digits, the width of the largest role (2**32 - 1), so one role has one spelling and
#: int() never meets a huge string.
_ROLE_TEXT: Final = r"(?:0|[1-9][0-9]{0,9})"
_ROLE_KEY: Final = re.compile(_ROLE_TEXT)
_EDGE_KEY: Final = re.compile(f"({_ROLE_TEXT})-({_ROLE_TEXT})")

# The keys each table knows, in documentation order; messages list them in this order.
_TABLES: Final = (
    "run",
    "membership",
    "topology",
    "contract",
    "budgets",
    "addresses",
    "targets",
    "work",
    "learner",
    "gpu",
    "checkpoint",
)
_RUN_KEYS: Final = ("name", "rounds", "epoch")
_MEMBERSHIP_KEYS: Final = ("group", "universe", "identity")
# The group identity as the plan writes it: hex digits, two per byte, either case.
_HEX_BYTES: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")
_TOPOLOGY_KEYS: Final = ("shape", "fanout")
_CONTRACT_KEYS: Final = ("dtype", "delivery", "operation")
_BUDGET_KEYS: Final = tuple(Budgets.__dataclass_fields__)
_ADDRESSES_KEYS: Final = ("default", "edges")
_TARGETS_KEYS: Final = ("default", *TARGETS)
_WORK_KEYS: Final = ("kind", "size", "choice")
_SUM_CHECK_KEYS: Final = ("size", "choice")
_LEARNER_KEYS: Final = (
    "kind",
    "hidden",
    "rate",
    "seed",
    "dataset",
    "batch",
    "holdout",
    "optimizer",
    "momentum",
    "beta1",
    "beta2",
    "epsilon",
    "partition",
    "contributors",
)
# The optimizers' constants, in documentation order; each is a key of [learner].
_OPTIMIZER_KEYS: Final = ("momentum", "beta1", "beta2", "epsilon")
_GPU_KEYS: Final = ("roles",)
_CHECKPOINT_KEYS: Final = ("every", "folder", "keep", "may_change")
#: The fields of a plan's identity a generation records (``docs/checkpoints.md``) that a
#: resume may change on purpose when ``checkpoint.may_change`` lists them. The learner's
#: model, the contract and the state's layout are not among them: the state would not fit.
MAY_CHANGE: Final = (
    "run",
    "membership",
    "topology",
    "optimizer",
    "rate",
    "seed",
    "batch",
    "holdout",
    "contributors",
    "data",
)
_DEFAULT_KEEP: Final = 2
#: Generations kept in a checkpoint folder: more than this many is a plan that means "all",
#: which a run that publishes every round would turn into a full disk.
MAX_KEEP: Final = 1000
MAX_FOLDER_CHARS: Final = 4096


# --- the values ---------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class LearnerSpec:
    """The ``[learner]`` table of a plan whose work is ``learn``.

    Attributes:
        kind: ``"mlp"`` or ``"linear"``.
        hidden: the MLP's hidden width (1..MAX_HIDDEN); None for a linear model.
        rate: the learning rate, a finite float above 0.
        seed: the seed of initial state and sampling, 0..MAX_SEED.
        dataset: the data set's name (``"digits"``).
        batch: samples each role contributes per round, 1..MAX_BATCH.
        holdout: the share of the data set held out for evaluation, in (0, MAX_HOLDOUT].
        optimizer: the optimizer and its constants (``SGD`` unless the plan names another);
            its constants are checked in the plan's dtype too.
        partition: what is partitioned among the roles (``PARTITIONS``): ``"none"``, the
            optimizer's state (``"optimizer"``), or also the combined gradient
            (``"gradients"``), or also the parameters (``"parameters"``).
        contributors: the logical contributors whose contributions each round sums, whatever
            the number of roles that host them; None: one per role.

    Raises:
        Nothing: values are checked when a plan is read; construct through :func:`parse_plan`.
    """

    kind: str
    hidden: int | None
    rate: float
    seed: int
    dataset: str
    batch: int
    holdout: float
    optimizer: Optimizer = SGD
    partition: str = "none"
    contributors: int | None = None


@final
@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    """The ``[checkpoint]`` table of a learn plan (``docs/checkpoints.md``).

    Attributes:
        every: rounds between generations, 1..``run.rounds``.
        folder: the checkpoint folder; ``""`` for ``runs/NAME/checkpoints``.
        keep: published generations kept, 1..MAX_KEEP.
        may_change: fields of the plan's identity (``MAY_CHANGE``) a resume may change from
            the generation's; sorted, each once.
    """

    every: int
    folder: str
    keep: int
    may_change: tuple[str, ...] = ()


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
    """

    first: int = 0
    resume: str | None = None
    resume_sha256: str | None = None
    save: str | None = None
    nonce: str | None = None
    keep: int = _DEFAULT_KEEP
    record: str = ""


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
        budgets: every wait's bound.
        default_address: the IPv4 address of every edge not listed in ``edge_addresses``.
        edge_addresses: ``((low, high), address)`` per listed edge, ascending by edge.
        default_target: the target of every role not listed in ``target_roles``.
        target_roles: ``(target, roles)`` per listed target, in TARGETS order, roles ascending.
        work_kind: ``"sum-check"`` or ``"learn"``.
        work_size: elements per region of the sum check; None for ``learn``.
        choice: the sum check's choice selector; None for ``learn``.
        learner: the learner, for ``learn``; None for ``sum-check``.
        gpus: ``(role, GPU UUID)`` per bound role, ascending by role.
        checkpoint: the ``[checkpoint]`` table of a learn plan, or None.
        segment: the part of the run one launch runs (set by ``alpha run``), or None.
        source: where the text came from (a path, or ``"<plan>"``).
        text_sha256: the hex SHA-256 of the plan's text in UTF-8.

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
    segment: Segment | None = None
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

        The address ``low`` listens on and ``high`` connects to: the one listed in
        ``[addresses.edges]``, else the default. O(tree depth).

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
        return self._address_of.get((low, high), self.default_address)

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


# --- reading tables -----------------------------------------------------------------------

_EdgeAddress = tuple[tuple[int, int], str]


@final
@dataclass(frozen=True, slots=True)
class _Membership:
    group: ParticipantGroup
    text: str


def _read_run(root: Table) -> tuple[str, int, int]:
    run = required_table(root, "run")
    refuse_unknown(run, "run", _RUN_KEYS)
    name = str_at(run, "run.name")
    if len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        raise PlanInvalid(
            f"must be 1..{MAX_NAME_CHARS} characters of a-z, 0-9, '.', '_' and '-', got {name!r}",
            field="run.name",
        )
    rounds = int_at(run, "run.rounds", low=1, high=MAX_ROUNDS)
    epoch = int_at(run, "run.epoch", low=0, high=MAX_EPOCH, default=0)
    return name, rounds, epoch


def _read_membership(root: Table, epoch: int) -> _Membership:
    table = required_table(root, "membership")
    refuse_unknown(table, "membership", _MEMBERSHIP_KEYS)
    text = str_at(table, "membership.group")
    try:
        admitted = parse_group(text, epoch=epoch)
    except (GroupSyntaxError, AdmissionError) as error:
        raise PlanInvalid(str(error), field="membership.group") from None
    n = len(admitted)
    if admitted.first != 0 or admitted.last != n - 1:
        raise PlanInvalid(
            f"the run's roles are the group's members and must be exactly 0..n-1; this group "
            f"selects {n} role(s) from {admitted.first} to {admitted.last}, not 0..{n - 1}",
            field="membership.group",
        )
    universe = optional_int_at(table, "membership.universe", low=n, high=MAX_ROLES)
    identity = _group_identity(table)
    if (universe is not None and universe != admitted.universe) or identity:
        # In range by the checks above, so admission cannot refuse it.
        admitted = group(
            admitted.selection,
            universe=admitted.universe if universe is None else universe,
            epoch=epoch,
            identity=identity,
        )
    return _Membership(admitted, text)


def _group_identity(table: Table) -> bytes:
    """The bytes of ``membership.identity`` (empty when absent): the group's identity, which
    enters the membership digest, so two runs of the same group can be kept apart.

    Raises:
        PlanInvalid: not a string of hex digits, two per byte, at most
            ``MAX_IDENTITY_BYTES`` bytes.
    """
    value = table.get("identity", "")
    if (
        not isinstance(value, str)
        or not _HEX_BYTES.fullmatch(value)
        or len(value) > 2 * MAX_IDENTITY_BYTES
    ):
        raise PlanInvalid(
            f"must be a string of hex digits, two per byte, at most {MAX_IDENTITY_BYTES} bytes "
            f"(MAX_IDENTITY_BYTES), got {shown(value)}",
            field="membership.identity",
        )
    return bytes.fromhex(value)


def _read_topology(root: Table, n: int) -> tuple[str, ParticipantTree]:
    table = table_at(root, "topology") or {}
    refuse_unknown(table, "topology", _TOPOLOGY_KEYS)
    shape = one_of(table, "topology.shape", SHAPES, default="tree")
    fanout = optional_int_at(table, "topology.fanout", low=1, high=MAX_ROLES)
    try:
        if shape == "tree":
            if fanout is None:
                raise PlanInvalid(
                    "is required for shape 'tree': an integer of at least 1",
                    field="topology.fanout",
                )
            return shape, ParticipantTree(n, fanout)
        if shape == "star":
            spokes = max(1, n - 1)  # star(1) is the lone root, fan-out 1
            if fanout is not None and fanout != spokes:
                raise PlanInvalid(
                    f"a star of {n} role(s) has fan-out {spokes} (n - 1); leave it out or set "
                    f"it to {spokes}, got {fanout}",
                    field="topology.fanout",
                )
            return shape, star(n)
        if n != 2:
            raise PlanInvalid(
                f"shape 'pair' needs exactly 2 roles; membership.group selects {n}",
                field="topology.shape",
            )
        if fanout is not None and fanout != 1:
            raise PlanInvalid(
                f"a pair has fan-out 1; leave it out or set it to 1, got {fanout}",
                field="topology.fanout",
            )
        return shape, pair()
    except TopologyError as error:
        raise PlanInvalid(str(error), field="topology.fanout") from None


def _read_contract(root: Table) -> tuple[str, str, str]:
    table = table_at(root, "contract") or {}
    refuse_unknown(table, "contract", _CONTRACT_KEYS)
    return (
        one_of(table, "contract.dtype", DTYPES, default="float32"),
        one_of(table, "contract.delivery", DELIVERIES, default="all"),
        one_of(table, "contract.operation", OPERATIONS, default="sum"),
    )


def _read_budgets(root: Table) -> Budgets:
    table = table_at(root, "budgets")
    if table is None:
        return DEFAULT_BUDGETS
    if "connect" in table:  # the whole connect wait is derived; say how to set it
        raise PlanInvalid(
            "the connect wait is connect_attempts x connect_interval; set those two instead",
            field="budgets.connect",
        )
    refuse_unknown(table, "budgets", _BUDGET_KEYS)
    values: dict[str, object] = {}
    for key, value in table.items():
        if key != "connect_attempts" and type(value) is int:
            value = float(value)  # TOML `accept = 10` means 10 seconds, like 10.0
        try:
            Budgets(**{key: value})  # type: ignore[arg-type]  # Budgets checks the type
        except RoleDescriptionInvalid as error:
            dotted = f"budgets.{key}"
            message = str(error).removeprefix(f"{dotted} ")
            raise PlanInvalid(message, field=dotted) from None
        values[key] = value
    return Budgets(**values)  # type: ignore[arg-type]  # every value checked above


def _read_addresses(root: Table, tree: ParticipantTree) -> tuple[str, tuple[_EdgeAddress, ...]]:
    table = table_at(root, "addresses") or {}
    refuse_unknown(table, "addresses", _ADDRESSES_KEYS)
    default = ipv4(table.get("default", DEFAULT_ADDRESS), "addresses.default")
    edges = table_at(table, "addresses.edges") or {}
    listed: list[_EdgeAddress] = []
    for key, value in edges.items():
        dotted = f"addresses.edges.{key}"
        match = _EDGE_KEY.fullmatch(key)
        if match is None:
            raise PlanInvalid(
                'an edge key is LOW-HIGH in canonical decimal, e.g. "0-1"', field=dotted
            )
        low, high = int(match[1]), int(match[2])
        if not low < high < tree.n or tree.parent(high) != low:
            raise PlanInvalid(
                f"{key} is not an edge of the {tree.n}-role tree: an edge is LOW-HIGH where LOW "
                f"is HIGH's parent and HIGH is a role 1..{tree.n - 1}",
                field=dotted,
            )
        listed.append(((low, high), ipv4(value, dotted)))
    return default, tuple(sorted(listed))


def _read_targets(root: Table, n: int) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    table = table_at(root, "targets") or {}
    refuse_unknown(table, "targets", _TARGETS_KEYS)
    default = one_of(table, "targets.default", TARGETS, default=TARGETS[0])
    seen: dict[int, str] = {}
    lists: list[tuple[str, tuple[int, ...]]] = []
    for target in TARGETS:
        if target not in table:
            continue
        dotted = f"targets.{target}"
        roles = table[target]
        if not isinstance(roles, list):
            raise PlanInvalid(
                f"must be an array of roles in 0..{n - 1}, got {shown(roles)}", field=dotted
            )
        for role in roles:
            if not int_in(role, 0, n - 1):
                raise PlanInvalid(
                    f"lists roles, each an integer in 0..{n - 1}; got {shown(role)}",
                    field=dotted,
                )
            if role in seen:
                where = "twice" if seen[role] == target else f"here and in targets.{seen[role]}"
                raise PlanInvalid(
                    f"role {role} is listed {where}; a role has one target", field=dotted
                )
            seen[role] = target
        lists.append((target, tuple(sorted(roles))))
    return default, tuple(lists)


def _read_work(root: Table) -> tuple[str, int | None, str | None]:
    table = table_at(root, "work") or {}
    refuse_unknown(table, "work", _WORK_KEYS)
    kind = one_of(table, "work.kind", WORK_KINDS, default="sum-check")
    if kind != "sum-check":
        for key in _SUM_CHECK_KEYS:
            if key in table:
                raise PlanInvalid(
                    f"is a field of work.kind = 'sum-check' only; this plan's work is {kind!r}",
                    field=f"work.{key}",
                )
        return kind, None, None
    size = int_at(table, "work.size", low=1, high=MAX_WORK_SIZE, default=_DEFAULT_WORK_SIZE)
    choice = one_of(table, "work.choice", CHOICES, default="none")
    return kind, size, choice


def _read_learner(root: Table, work_kind: str, dtype: str) -> LearnerSpec | None:
    table = table_at(root, "learner")
    if work_kind != "learn":
        if table is not None:
            raise PlanInvalid(
                f"a [learner] table needs work.kind = 'learn'; this plan's work is {work_kind!r}",
                field="learner",
            )
        return None
    if table is None:
        raise PlanInvalid("work.kind = 'learn' needs a [learner] table", field="learner")
    refuse_unknown(table, "learner", _LEARNER_KEYS)
    kind = one_of(table, "learner.kind", LEARNER_KINDS, default="mlp")
    hidden: int | None = None
    if kind == "mlp":
        hidden = int_at(table, "learner.hidden", low=1, high=MAX_HIDDEN, default=_DEFAULT_HIDDEN)
    elif "hidden" in table:
        raise PlanInvalid(
            f"is a field of learner.kind = 'mlp' only; this learner is {kind!r}",
            field="learner.hidden",
        )
    return LearnerSpec(
        kind=kind,
        hidden=hidden,
        rate=float_at(table, "learner.rate"),
        seed=int_at(table, "learner.seed", low=0, high=MAX_SEED, default=0),
        dataset=one_of(table, "learner.dataset", DATASETS, default=DATASETS[0]),
        batch=int_at(table, "learner.batch", low=1, high=MAX_BATCH, default=_DEFAULT_BATCH),
        holdout=float_at(table, "learner.holdout", high=MAX_HOLDOUT, default=_DEFAULT_HOLDOUT),
        optimizer=_read_optimizer(table, dtype),
        partition=one_of(table, "learner.partition", PARTITIONS, default="none"),
        contributors=optional_int_at(table, "learner.contributors", low=1, high=MAX_CONTRIBUTORS),
    )


def _read_optimizer(table: Table, dtype: str) -> Optimizer:
    """The optimizer of a [learner] table; a constant of another optimizer is refused, and
    each constant is checked as read and again as converted to the plan's ``dtype``."""
    kind = one_of(table, "learner.optimizer", OPTIMIZERS, default=SGD.kind)
    constants: dict[str, float] = {}
    for key in _OPTIMIZER_KEYS:
        dotted = f"learner.{key}"
        if key not in OPTIMIZER_CONSTANTS[kind]:
            if key in table:
                owner = next(name for name in OPTIMIZERS if key in OPTIMIZER_CONSTANTS[name])
                raise PlanInvalid(
                    f"is a field of learner.optimizer = {owner!r} only; this learner's "
                    f"optimizer is {kind!r}",
                    field=dotted,
                )
            continue
        if key not in table:
            continue
        value = table[key]
        allowed = "a finite number above 0" if key == "epsilon" else "a number in [0, 1)"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlanInvalid(f"must be {allowed}, got {shown(value)}", field=dotted)
        why = constant_refusal(key, value, dtype)
        if why is not None:
            raise PlanInvalid(why, field=dotted)
        constants[key] = float(value)
    return Optimizer.of(kind, **constants)


def _read_gpu(root: Table, n: int) -> tuple[tuple[int, str], ...]:
    table = table_at(root, "gpu")
    if table is None:
        return ()
    refuse_unknown(table, "gpu", _GPU_KEYS)
    roles = table_at(table, "gpu.roles") or {}
    bound: list[tuple[int, str]] = []
    for key, value in roles.items():
        dotted = f"gpu.roles.{key}"
        if _ROLE_KEY.fullmatch(key) is None or not int(key) < n:
            raise PlanInvalid(
                f'a key of [gpu.roles] is a role in 0..{n - 1} in canonical decimal, e.g. "3"',
                field=dotted,
            )
        if (
            not isinstance(value, str)
            or len(value) > MAX_GPU_UUID_CHARS
            or _GPU_UUID.fullmatch(value) is None
        ):
            raise PlanInvalid(
                f"must be a GPU UUID: 'GPU-' then hex digits and dashes, at most "
                f"{MAX_GPU_UUID_CHARS} characters, got {shown(value)}",
                field=dotted,
            )
        bound.append((int(key), value))
    return tuple(sorted(bound))


def _read_checkpoint(root: Table, work_kind: str, rounds: int) -> CheckpointSpec | None:
    table = table_at(root, "checkpoint")
    if table is None:
        return None
    refuse_unknown(table, "checkpoint", _CHECKPOINT_KEYS)
    if work_kind != "learn":
        raise PlanInvalid(
            "only a learner has state to checkpoint: remove [checkpoint] or use "
            'work.kind = "learn"',
            field="checkpoint",
        )
    every = int_at(table, "checkpoint.every", low=1, high=rounds)
    folder = str_at(table, "checkpoint.folder", default="")
    if len(folder) > MAX_FOLDER_CHARS or "\0" in folder:
        raise PlanInvalid(
            f"must be a path of at most {MAX_FOLDER_CHARS} characters", field="checkpoint.folder"
        )
    keep = int_at(table, "checkpoint.keep", low=1, high=MAX_KEEP, default=_DEFAULT_KEEP)
    listed = table.get("may_change", [])
    if not isinstance(listed, list) or not all(isinstance(v, str) for v in listed):
        raise PlanInvalid(
            f"must be a list of field names among {list(MAY_CHANGE)}, got {shown(listed)}",
            field="checkpoint.may_change",
        )
    unknown = [name for name in listed if name not in MAY_CHANGE]
    if unknown or len(set(listed)) != len(listed):
        raise PlanInvalid(
            f"{shown(unknown[0]) if unknown else 'a field listed twice'} is not a field a "
            f"resume may change: list each of {list(MAY_CHANGE)} at most once",
            field="checkpoint.may_change",
        )
    return CheckpointSpec(every=every, folder=folder, keep=keep, may_change=tuple(sorted(listed)))


# --- the public readers -------------------------------------------------------------------


def parse_plan(text: str, *, source: str = "<plan>") -> Plan:
    """Read and check a plan from its TOML text.

    Tables are read in documentation order (run, membership, topology, contract, budgets,
    addresses, targets, work, learner, gpu, checkpoint), each first for unknown keys and then
    field by field in documentation order; the first refusal met is raised. O(size of
    ``text``).

    Raises:
        TypeError: ``text`` or ``source`` is not a str.
        PlanInvalid: the text is not valid TOML or not valid Unicode (``field`` is ``""``; a
            TOML message gives the line and column), or a table or key is unknown, a required
            one missing, or a value of the wrong type or out of its allowed range (``field``
            names it, e.g. ``topology.fanout``).
    """
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
    refuse_unknown(root, "", _TABLES)
    for name in _TABLES:
        table_at(root, name)  # every table present is a table, before any is read
    name, rounds, epoch = _read_run(root)
    membership = _read_membership(root, epoch)
    n = len(membership.group)
    shape, tree = _read_topology(root, n)
    dtype, delivery, operation = _read_contract(root)
    budgets = _read_budgets(root)
    default_address, edge_addresses = _read_addresses(root, tree)
    default_target, target_roles = _read_targets(root, n)
    work_kind, work_size, choice = _read_work(root)
    learner = _read_learner(root, work_kind, dtype)
    gpus = _read_gpu(root, n)
    checkpoint = _read_checkpoint(root, work_kind, rounds)
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
        budgets=budgets,
        default_address=default_address,
        edge_addresses=edge_addresses,
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
    )


#: The largest plan file :func:`load_plan` reads. A plan is a few hundred bytes; its longest
#: tables list exceptions one line each (an edge's address, a role's target or GPU, ~30 bytes),
#: so 1 MiB holds some 30,000 of them. A bigger file is not a plan (a log, a data set, a
#: device named by mistake), and the bound keeps `alpha compile` from reading it all.
MAX_PLAN_BYTES: Final = 1 << 20


def load_plan(path: str | PathLike[str]) -> Plan:
    """Read the plan file at ``path`` (UTF-8 TOML); its ``source`` is the path.

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
    return parse_plan(text, source=source)
