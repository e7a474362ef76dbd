"""Plans: the shipped plans, every field's defaults and refusals, lookups, scale, round trips."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import pickle
import re
import time
import tracemalloc
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import alpha.compiler.plan as plan_module
from alpha.compiler.plan import (
    CHOICES,
    MAX_BATCH,
    MAX_GPU_UUID_CHARS,
    MAX_HIDDEN,
    MAX_NAME_CHARS,
    MAX_PLAN_BYTES,
    MAX_ROUNDS,
    MAX_SEED,
    MAX_WORK_SIZE,
    TARGETS,
    LearnerSpec,
    Plan,
    load_plan,
    parse_plan,
)
from alpha.core.budgets import DEFAULT_BUDGETS, Budgets
from alpha.core.membership import MAX_EPOCH, MAX_ROLES
from alpha.core.membership_text import parse_group
from alpha.core.topology import ParticipantTree, pair, star
from alpha.errors import PlanInvalid, RoleOutOfRange, TopologyError
from alpha.learner.optimizer import (
    DEFAULT_BETA1,
    DEFAULT_BETA2,
    DEFAULT_EPSILON,
    DEFAULT_MOMENTUM,
    OPTIMIZER_CONSTANTS,
    OPTIMIZERS,
    SGD,
    Optimizer,
)
from tests.support import PLANS, ROOT, run_alpha, toml_value

FIXTURES = PLANS
DOCS = ROOT / "docs" / "plans.md"

# --- rendering plans ----------------------------------------------------------------------

Tables = dict[str, dict[str, Any]]

#: Marks a key to remove from the base plan.
MISSING = object()


def render(tables: Tables) -> str:
    """TOML text for ``{table: {key: value}}``; a dict value becomes a sub-table."""
    # Top-level keys come first: after a [header] a key belongs to that table.
    lines = [f"{name} = {toml_value(v)}" for name, v in tables.items() if not isinstance(v, dict)]
    for name, table in tables.items():
        if not isinstance(table, dict):
            continue
        lines.append(f"[{name}]")
        subtables = {k: v for k, v in table.items() if isinstance(v, dict)}
        for key, value in table.items():
            if key not in subtables:
                lines.append(f"{json.dumps(key)} = {toml_value(value)}")
        for key, sub in subtables.items():
            lines.append(f"[{name}.{json.dumps(key)}]")
            lines.extend(f"{json.dumps(k)} = {toml_value(v)}" for k, v in sub.items())
    return "\n".join(lines) + "\n"


def base() -> Tables:
    """The smallest valid plan: 8 roles, a tree of fan-out 2 (edges 0-1 0-5 1-2 1-4 2-3 5-6
    5-7)."""
    return {
        "run": {"name": "t", "rounds": 3},
        "membership": {"group": "(group (stride 0 1 8))"},
        "topology": {"fanout": 2},
    }


def with_edits(edits: dict[tuple[str, ...], Any], start: Tables | None = None) -> str:
    """The base plan with ``{(table, key, ...): value}`` applied (MISSING removes)."""
    tables = base() if start is None else start
    for path, value in edits.items():
        target: dict[str, Any] = tables
        for part in path[:-1]:
            target = target.setdefault(part, {})
        if value is MISSING:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return render(tables)


LEARN: dict[tuple[str, ...], Any] = {("work", "kind"): "learn", ("learner", "rate"): 0.1}
MOMENTUM: dict[tuple[str, ...], Any] = {**LEARN, ("learner", "optimizer"): "momentum"}
ADAM: dict[tuple[str, ...], Any] = {**LEARN, ("learner", "optimizer"): "adam"}


def refused(text: str) -> PlanInvalid:
    """The PlanInvalid parse_plan raises for ``text`` (exactly that class)."""
    with pytest.raises(PlanInvalid) as info:
        parse_plan(text)
    assert type(info.value) is PlanInvalid
    return info.value


# --- the shipped plans (alpha/data/plans/) ------------------------------------------------


def test_pair_fixture() -> None:
    plan = load_plan(FIXTURES / "pair.toml")
    assert (plan.name, plan.participants, plan.shape, plan.tree) == ("pair", 2, "pair", pair())
    assert (plan.rounds, plan.work_kind, plan.work_size, plan.choice) == (
        4,
        "sum-check",
        256,
        "none",
    )


def test_star_fixture() -> None:
    plan = load_plan(FIXTURES / "star.toml")
    assert (plan.participants, plan.shape, plan.tree) == (5, "star", star(5))
    assert plan.tree.children(0) == (1, 2, 3, 4)


def test_tree_fixture() -> None:
    plan = load_plan(FIXTURES / "tree.toml")
    assert (plan.participants, plan.shape, plan.tree) == (13, "tree", ParticipantTree(13, 3))
    assert plan.choice == "parity"


def test_tree_200k_fixture() -> None:
    plan = load_plan(FIXTURES / "tree-200k.toml")
    assert (plan.participants, plan.rounds, plan.tree) == (
        200_000,
        200_000,
        ParticipantTree(200_000, 64),
    )
    assert plan.group.index_nodes == 4


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.toml")), ids=lambda p: p.name)
def test_every_fixture_has_a_header_and_reads(path: pathlib.Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# ")  # the comment header says what it is for
    plan = load_plan(path)
    assert plan.source == str(path)
    assert plan.text_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert plan == parse_plan(text, source=str(path))


def test_load_plan_takes_a_str_path_too() -> None:
    path = FIXTURES / "pair.toml"
    assert load_plan(str(path)) == load_plan(path)


def test_load_plan_refuses_a_missing_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(PlanInvalid) as info:
        load_plan(tmp_path / "absent.toml")
    assert type(info.value) is PlanInvalid
    assert info.value.field == ""
    assert "absent.toml" in str(info.value)


def test_load_plan_refuses_a_file_that_is_not_utf8(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(render(base()).replace('"t"', '"\xe9"').encode("latin-1"))
    with pytest.raises(PlanInvalid) as info:
        load_plan(path)
    assert type(info.value) is PlanInvalid
    assert info.value.field == ""
    assert "UTF-8" in str(info.value)


def unreadable(path: str | pathlib.Path) -> PlanInvalid:
    """The PlanInvalid load_plan raises for ``path`` (exactly that class, no field)."""
    with pytest.raises(PlanInvalid) as info:
        load_plan(path)
    assert type(info.value) is PlanInvalid
    assert info.value.field == ""
    assert str(path) in str(info.value)
    return info.value


def test_load_plan_refuses_a_device_without_reading_it() -> None:
    # /dev/zero never ends: reading it whole would take the machine's memory.
    assert "a character device, not a regular file" in str(unreadable("/dev/zero"))


def test_load_plan_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)  # no writer: a blocking open would wait forever
    assert "a FIFO, not a regular file" in str(unreadable(fifo))


def test_load_plan_refuses_a_directory(tmp_path: pathlib.Path) -> None:
    assert "a directory, not a regular file" in str(unreadable(tmp_path))


def _padded(tmp_path: pathlib.Path, size: int) -> pathlib.Path:
    """The base plan, filled up with a TOML comment to exactly ``size`` bytes."""
    text = render(base()).encode() + b"\n#"
    path = tmp_path / "padded.toml"
    path.write_bytes(text + b"x" * (size - len(text)))
    assert path.stat().st_size == size
    return path


def test_load_plan_reads_a_plan_of_max_plan_bytes(tmp_path: pathlib.Path) -> None:
    path = _padded(tmp_path, MAX_PLAN_BYTES)
    assert load_plan(path) == parse_plan(path.read_text(), source=str(path))


def test_load_plan_refuses_a_plan_of_max_plan_bytes_plus_one(tmp_path: pathlib.Path) -> None:
    message = str(unreadable(_padded(tmp_path, MAX_PLAN_BYTES + 1)))
    assert f"more than {MAX_PLAN_BYTES} bytes" in message


def test_alpha_compile_refuses_dev_zero_in_one_line_and_exit_2(tmp_path: pathlib.Path) -> None:
    done = run_alpha("compile", "/dev/zero", "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith("alpha: error: cannot read the plan /dev/zero: ")
    assert len(done.stderr.splitlines()) == 1


def test_the_docs_example_reads() -> None:
    example = re.search(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert example is not None
    plan = parse_plan(example[1])
    assert plan.work_kind == "learn"
    assert plan.learner == LearnerSpec("mlp", 32, 0.05, 7, "digits", 32, 0.2)
    assert plan.address(0, 1) == "127.0.0.2"
    assert plan.target(3) == "aarch64"
    assert plan.gpus == ((2, "GPU-5c3a1f0e-8d2b-4c6a-9e7f-0123456789ab"),)


@pytest.mark.parametrize(
    ("table", "keys"),
    [
        ("run", plan_module._RUN_KEYS),
        ("membership", plan_module._MEMBERSHIP_KEYS),
        ("topology", plan_module._TOPOLOGY_KEYS),
        ("contract", plan_module._CONTRACT_KEYS),
        ("budgets", plan_module._BUDGET_KEYS),
        ("addresses", plan_module._ADDRESSES_KEYS),
        ("targets", plan_module._TARGETS_KEYS),
        ("work", plan_module._WORK_KEYS),
        ("learner", plan_module._LEARNER_KEYS),
        ("gpu", plan_module._GPU_KEYS),
        ("trace", plan_module._TRACE_KEYS),
    ],
)
def test_every_key_is_documented(table: str, keys: tuple[str, ...]) -> None:
    docs = DOCS.read_text(encoding="utf-8")
    section = docs.split(f"## `[{table}]`", 1)[1].split("\n## ", 1)[0]
    for key in keys:
        assert f"| `{key}` |" in section, f"{table}.{key} is not in docs/plans.md"


# --- defaults -----------------------------------------------------------------------------


def test_defaults() -> None:
    text = render(base())
    plan = parse_plan(text)
    assert plan.epoch == 0
    assert plan.group == parse_group("(group (stride 0 1 8))")
    assert plan.group.universe == 8
    assert plan.group_text == "(group (stride 0 1 8))"
    assert (plan.shape, plan.tree) == ("tree", ParticipantTree(8, 2))
    assert (plan.dtype, plan.delivery, plan.operation) == ("float32", "all", "sum")
    assert plan.budgets == DEFAULT_BUDGETS
    assert (plan.default_address, plan.edge_addresses) == ("127.0.0.1", ())
    assert (plan.default_target, plan.target_roles) == ("x86_64", ())
    assert (plan.work_kind, plan.work_size, plan.choice, plan.learner) == (
        "sum-check",
        1024,
        "none",
        None,
    )
    assert plan.gpus == ()
    assert plan.source == "<plan>"
    assert plan.text_sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_learner_defaults() -> None:
    plan = parse_plan(with_edits(LEARN))
    assert plan.learner == LearnerSpec(
        kind="mlp", hidden=32, rate=0.1, seed=0, dataset="digits", batch=32, holdout=0.2
    )
    assert (plan.work_size, plan.choice) == (None, None)


def test_optimizer_defaults() -> None:
    def optimizer_of(edits: dict[tuple[str, ...], Any]) -> Optimizer:
        learner = parse_plan(with_edits(edits)).learner
        assert learner is not None
        return learner.optimizer

    assert optimizer_of(LEARN) == SGD == Optimizer("sgd")
    assert optimizer_of(MOMENTUM) == Optimizer("momentum", momentum=0.9)
    assert optimizer_of(ADAM) == Optimizer("adam", beta1=0.9, beta2=0.999, epsilon=1e-8)
    assert optimizer_of({**ADAM, ("learner", "beta2"): 0.99, ("learner", "epsilon"): 1}) == (
        Optimizer("adam", beta1=0.9, beta2=0.99, epsilon=1.0)
    )
    assert optimizer_of({**MOMENTUM, ("learner", "momentum"): 0}) == Optimizer("momentum", 0.0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("momentum", 0.0),
        ("momentum", 0.99999),
        ("beta1", 0),
        ("beta2", 0.9999999),
        ("epsilon", 1e300),
        ("epsilon", 5e-324),
    ],
)
def test_optimizer_constants_at_their_bounds_read_in_float64(key: str, value: Any) -> None:
    edits = MOMENTUM if key == "momentum" else ADAM
    parse_plan(with_edits({**edits, ("contract", "dtype"): "float64", ("learner", key): value}))


def test_a_constant_that_rounds_out_of_range_in_float32_says_so() -> None:
    text = with_edits({**ADAM, ("learner", "beta1"): 0.99999999})
    message = str(refused(text))
    assert "below 1 in float32" in message and "1.0" in message
    float64 = with_edits(
        {**ADAM, ("contract", "dtype"): "float64", ("learner", "beta1"): 0.99999999}
    )
    learner = parse_plan(float64).learner
    assert learner is not None and learner.optimizer.beta1 == 0.99999999


def test_a_key_of_another_optimizer_names_its_optimizer() -> None:
    message = str(refused(with_edits({**MOMENTUM, ("learner", "epsilon"): 1e-8})))
    assert message.startswith("learner.epsilon: is a field of learner.optimizer = 'adam' only")
    assert "'momentum'" in message


def test_linear_learner_has_no_hidden_width() -> None:
    plan = parse_plan(with_edits({**LEARN, ("learner", "kind"): "linear"}))
    assert plan.learner is not None
    assert (plan.learner.kind, plan.learner.hidden) == ("linear", None)


def test_star_and_pair_are_trees() -> None:
    assert parse_plan(
        with_edits({("topology", "shape"): "star", ("topology", "fanout"): 7})
    ).tree == (star(8))
    assert parse_plan(with_edits({("topology", "shape"): "star", ("topology", "fanout"): MISSING}))
    one = with_edits(
        {
            ("membership", "group"): "(group (stride 0 1 1))",
            ("topology", "shape"): "star",
            ("topology", "fanout"): 1,
        }
    )
    assert parse_plan(one).tree == star(1)
    two: dict[tuple[str, ...], Any] = {
        ("membership", "group"): "(group (stride 0 1 2))",
        ("topology", "shape"): "pair",
    }
    assert parse_plan(with_edits({**two, ("topology", "fanout"): MISSING})).tree == pair()
    assert parse_plan(with_edits({**two, ("topology", "fanout"): 1})).tree == pair()


def test_integer_seconds_read_as_floats() -> None:
    plan = parse_plan(with_edits({("budgets", "accept"): 10, ("budgets", "connect_attempts"): 3}))
    assert plan.budgets == Budgets(connect_attempts=3, accept=10.0)
    assert type(plan.budgets.accept) is float
    assert type(plan.budgets.connect_attempts) is int


def test_the_run_epoch_is_the_group_epoch() -> None:
    plan = parse_plan(with_edits({("run", "epoch"): 5}))
    assert plan.group.epoch == 5
    assert plan.group.digest() != parse_plan(render(base())).group.digest()


def test_a_universe_past_the_roles_is_kept() -> None:
    plan = parse_plan(with_edits({("membership", "universe"): 100}))
    assert (plan.group.universe, plan.participants) == (100, 8)


# --- bounds: at the maximum the plan reads ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("run", "name"), "a" * MAX_NAME_CHARS),
        (("run", "name"), "0.a_b-c"),
        (("run", "rounds"), MAX_ROUNDS),
        (("run", "epoch"), MAX_EPOCH),
        (("membership", "universe"), MAX_ROLES),
        (("membership", "universe"), 8),
        (("topology", "fanout"), MAX_ROLES),
        (("topology", "fanout"), 1),
        (("work", "size"), MAX_WORK_SIZE),
        (("work", "size"), 1),
        (("gpu", "roles", "7"), "GPU-" + "a" * (MAX_GPU_UUID_CHARS - 4)),
        (("addresses", "edges", "5-7"), "10.0.0.1"),
        (("targets", "aarch64"), [0, 7]),
        (("targets", "aarch64"), []),
    ],
)
def test_bounds_at_their_maximum_read(path: tuple[str, ...], value: Any) -> None:
    parse_plan(with_edits({path: value}))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hidden", MAX_HIDDEN),
        ("hidden", 1),
        ("seed", MAX_SEED),
        ("batch", MAX_BATCH),
        ("holdout", 0.5),
        ("holdout", 5e-324),
        ("rate", 1e308),
        ("rate", 1),
    ],
)
def test_learner_bounds_at_their_maximum_read(key: str, value: Any) -> None:
    parse_plan(with_edits({**LEARN, ("learner", key): value}))


@pytest.mark.parametrize("choice", CHOICES)
def test_every_choice_reads_const_2_included(choice: str) -> None:
    assert parse_plan(with_edits({("work", "choice"): choice})).choice == choice


# --- refusals -----------------------------------------------------------------------------

GROUP = ("membership", "group")

REFUSALS: list[tuple[str, dict[tuple[str, ...], Any], str]] = [
    # [run]
    ("name missing", {("run", "name"): MISSING}, "run.name"),
    ("name not a string", {("run", "name"): 3}, "run.name"),
    ("name empty", {("run", "name"): ""}, "run.name"),
    ("name upper case", {("run", "name"): "Tree"}, "run.name"),
    ("name with a space", {("run", "name"): "a b"}, "run.name"),
    ("name with a slash", {("run", "name"): "a/b"}, "run.name"),
    ("name too long", {("run", "name"): "a" * (MAX_NAME_CHARS + 1)}, "run.name"),
    ("rounds missing", {("run", "rounds"): MISSING}, "run.rounds"),
    ("rounds zero", {("run", "rounds"): 0}, "run.rounds"),
    ("rounds past max", {("run", "rounds"): MAX_ROUNDS + 1}, "run.rounds"),
    ("rounds at u64 max", {("run", "rounds"): 2**64 - 1}, "run.rounds"),
    ("rounds a float", {("run", "rounds"): 3.0}, "run.rounds"),
    ("rounds a bool", {("run", "rounds"): True}, "run.rounds"),
    ("rounds a string", {("run", "rounds"): "3"}, "run.rounds"),
    ("epoch negative", {("run", "epoch"): -1}, "run.epoch"),
    ("epoch past u64", {("run", "epoch"): MAX_EPOCH + 1}, "run.epoch"),
    ("epoch a float", {("run", "epoch"): 1.5}, "run.epoch"),
    ("run unknown key", {("run", "nmae"): "x"}, "run.nmae"),
    # [membership]
    ("group missing", {GROUP: MISSING}, "membership.group"),
    ("group not a string", {GROUP: 8}, "membership.group"),
    ("group syntax", {GROUP: "(group (stride 0 1 8)"}, "membership.group"),
    ("group signed", {GROUP: "(group (stride 0 -1 8))"}, "membership.group"),
    ("group empty", {GROUP: "(group (join))"}, "membership.group"),
    (
        "group overlapping",
        {GROUP: "(group (join (stride 0 1 4) (stride 2 1 4)))"},
        "membership.group",
    ),
    ("group too wide", {GROUP: f"(group (stride 0 1 {MAX_ROLES + 1}))"}, "membership.group"),
    ("group not from 0", {GROUP: "(group (stride 1 1 8))"}, "membership.group"),
    ("group with gaps", {GROUP: "(group (stride 0 2 8))"}, "membership.group"),
    ("universe below n", {("membership", "universe"): 7}, "membership.universe"),
    ("universe past max", {("membership", "universe"): MAX_ROLES + 1}, "membership.universe"),
    ("universe a string", {("membership", "universe"): "8"}, "membership.universe"),
    ("membership unknown key", {("membership", "epoch"): 0}, "membership.epoch"),
    # [topology]
    ("shape unknown", {("topology", "shape"): "ring"}, "topology.shape"),
    ("shape not a string", {("topology", "shape"): 1}, "topology.shape"),
    ("tree without fanout", {("topology", "fanout"): MISSING}, "topology.fanout"),
    ("fanout zero", {("topology", "fanout"): 0}, "topology.fanout"),
    ("fanout negative", {("topology", "fanout"): -2}, "topology.fanout"),
    ("fanout a bool", {("topology", "fanout"): True}, "topology.fanout"),
    ("fanout a float", {("topology", "fanout"): 2.0}, "topology.fanout"),
    ("fanout past max", {("topology", "fanout"): MAX_ROLES + 1}, "topology.fanout"),
    (
        "star with another fanout",
        {("topology", "shape"): "star", ("topology", "fanout"): 2},
        "topology.fanout",
    ),
    (
        "pair of 8",
        {("topology", "shape"): "pair", ("topology", "fanout"): MISSING},
        "topology.shape",
    ),
    (
        "pair with fanout 2",
        {GROUP: "(group (stride 0 1 2))", ("topology", "shape"): "pair", ("topology", "fanout"): 2},
        "topology.fanout",
    ),
    ("topology unknown key", {("topology", "fanuot"): 2}, "topology.fanuot"),
    # [contract]
    ("dtype unknown", {("contract", "dtype"): "float16"}, "contract.dtype"),
    ("dtype not a string", {("contract", "dtype"): 32}, "contract.dtype"),
    ("delivery unknown", {("contract", "delivery"): "some"}, "contract.delivery"),
    ("operation unknown", {("contract", "operation"): "max"}, "contract.operation"),
    ("contract unknown key", {("contract", "topology"): "tree"}, "contract.topology"),
    # [budgets]
    ("receive negative", {("budgets", "receive"): -1.0}, "budgets.receive"),
    ("receive zero", {("budgets", "receive"): 0}, "budgets.receive"),
    ("receive inf", {("budgets", "receive"): math.inf}, "budgets.receive"),
    ("receive nan", {("budgets", "receive"): math.nan}, "budgets.receive"),
    ("receive a string", {("budgets", "receive"): "30"}, "budgets.receive"),
    ("receive a bool", {("budgets", "receive"): True}, "budgets.receive"),
    ("deadline negative", {("budgets", "deadline"): -5}, "budgets.deadline"),
    ("attempts zero", {("budgets", "connect_attempts"): 0}, "budgets.connect_attempts"),
    ("attempts a float", {("budgets", "connect_attempts"): 1.5}, "budgets.connect_attempts"),
    ("attempts a bool", {("budgets", "connect_attempts"): True}, "budgets.connect_attempts"),
    ("connect is derived", {("budgets", "connect"): 10.0}, "budgets.connect"),
    ("budgets unknown key", {("budgets", "recieve"): 1.0}, "budgets.recieve"),
    # [addresses]
    ("default not IPv4", {("addresses", "default"): "1.2.3"}, "addresses.default"),
    ("default IPv6", {("addresses", "default"): "::1"}, "addresses.default"),
    ("default leading zero", {("addresses", "default"): "127.0.0.01"}, "addresses.default"),
    ("default not a string", {("addresses", "default"): 2130706433}, "addresses.default"),
    ("edges not a table", {("addresses", "edges"): "0-1"}, "addresses.edges"),
    ("edge key form", {("addresses", "edges", "0_1"): "10.0.0.1"}, "addresses.edges.0_1"),
    ("edge key reversed", {("addresses", "edges", "1-0"): "10.0.0.1"}, "addresses.edges.1-0"),
    ("edge key leading 0", {("addresses", "edges", "0-01"): "10.0.0.1"}, "addresses.edges.0-01"),
    ("edge key signed", {("addresses", "edges", "0-+1"): "10.0.0.1"}, "addresses.edges.0-+1"),
    ("edge not parent", {("addresses", "edges", "0-2"): "10.0.0.1"}, "addresses.edges.0-2"),
    ("edge to self", {("addresses", "edges", "1-1"): "10.0.0.1"}, "addresses.edges.1-1"),
    ("edge past n", {("addresses", "edges", "0-8"): "10.0.0.1"}, "addresses.edges.0-8"),
    (
        "edge huge",
        {("addresses", "edges", "0-99999999999"): "1.1.1.1"},
        "addresses.edges.0-99999999999",
    ),
    ("edge address bad", {("addresses", "edges", "0-1"): "localhost"}, "addresses.edges.0-1"),
    ("edge address type", {("addresses", "edges", "0-1"): 1}, "addresses.edges.0-1"),
    ("addresses unknown key", {("addresses", "edge"): {}}, "addresses.edge"),
    ("ports not a string", {("addresses", "ports"): 23000}, "addresses.ports"),
    ("ports one port", {("addresses", "ports"): "23000"}, "addresses.ports"),
    ("ports reversed", {("addresses", "ports"): "23999-23000"}, "addresses.ports"),
    ("ports privileged", {("addresses", "ports"): "80-1100"}, "addresses.ports"),
    ("ports past 65535", {("addresses", "ports"): "65000-65536"}, "addresses.ports"),
    ("ports leading zero", {("addresses", "ports"): "023000-23999"}, "addresses.ports"),
    ("ports spaced", {("addresses", "ports"): "23000 - 23999"}, "addresses.ports"),
    ("ports fewer than edges", {("addresses", "ports"): "23000-23005"}, "addresses.ports"),
    # [targets]
    ("target default unknown", {("targets", "default"): "riscv64"}, "targets.default"),
    ("target list unknown", {("targets", "riscv64"): [1]}, "targets.riscv64"),
    ("target list not array", {("targets", "aarch64"): 3}, "targets.aarch64"),
    ("target role past n", {("targets", "aarch64"): [8]}, "targets.aarch64"),
    ("target role negative", {("targets", "aarch64"): [-1]}, "targets.aarch64"),
    ("target role a bool", {("targets", "aarch64"): [True]}, "targets.aarch64"),
    ("target role a string", {("targets", "aarch64"): ["3"]}, "targets.aarch64"),
    ("target role twice", {("targets", "aarch64"): [3, 3]}, "targets.aarch64"),
    (
        "target role in two lists",
        {("targets", "x86_64"): [3], ("targets", "aarch64"): [4, 3]},
        "targets.aarch64",
    ),
    # [work]
    ("work kind unknown", {("work", "kind"): "train"}, "work.kind"),
    ("size zero", {("work", "size"): 0}, "work.size"),
    ("size past max", {("work", "size"): MAX_WORK_SIZE + 1}, "work.size"),
    ("size a float", {("work", "size"): 256.0}, "work.size"),
    ("choice unknown", {("work", "choice"): "const-3"}, "work.choice"),
    ("choice not a string", {("work", "choice"): 0}, "work.choice"),
    ("size with learn", {**LEARN, ("work", "size"): 8}, "work.size"),
    ("choice with learn", {**LEARN, ("work", "choice"): "none"}, "work.choice"),
    ("work unknown key", {("work", "sizes"): 8}, "work.sizes"),
    # [learner]
    ("learner without learn", {("learner", "rate"): 0.1}, "learner"),
    ("learn without learner", {("work", "kind"): "learn"}, "learner"),
    ("learner not a table", {("work", "kind"): "learn", ("learner",): 3}, "learner"),
    ("rate missing", {**LEARN, ("learner", "rate"): MISSING}, "learner.rate"),
    ("rate zero", {**LEARN, ("learner", "rate"): 0.0}, "learner.rate"),
    ("rate negative", {**LEARN, ("learner", "rate"): -0.1}, "learner.rate"),
    ("rate inf", {**LEARN, ("learner", "rate"): math.inf}, "learner.rate"),
    ("rate nan", {**LEARN, ("learner", "rate"): math.nan}, "learner.rate"),
    ("rate a string", {**LEARN, ("learner", "rate"): "0.1"}, "learner.rate"),
    ("rate a bool", {**LEARN, ("learner", "rate"): True}, "learner.rate"),
    ("learner kind unknown", {**LEARN, ("learner", "kind"): "cnn"}, "learner.kind"),
    ("hidden zero", {**LEARN, ("learner", "hidden"): 0}, "learner.hidden"),
    ("hidden past max", {**LEARN, ("learner", "hidden"): MAX_HIDDEN + 1}, "learner.hidden"),
    (
        "hidden with linear",
        {**LEARN, ("learner", "kind"): "linear", ("learner", "hidden"): 8},
        "learner.hidden",
    ),
    ("seed negative", {**LEARN, ("learner", "seed"): -1}, "learner.seed"),
    ("seed past u64", {**LEARN, ("learner", "seed"): MAX_SEED + 1}, "learner.seed"),
    ("dataset unknown", {**LEARN, ("learner", "dataset"): "mnist"}, "learner.dataset"),
    ("batch zero", {**LEARN, ("learner", "batch"): 0}, "learner.batch"),
    ("batch past max", {**LEARN, ("learner", "batch"): MAX_BATCH + 1}, "learner.batch"),
    ("holdout zero", {**LEARN, ("learner", "holdout"): 0}, "learner.holdout"),
    ("holdout past half", {**LEARN, ("learner", "holdout"): 0.5000001}, "learner.holdout"),
    ("holdout one", {**LEARN, ("learner", "holdout"): 1}, "learner.holdout"),
    ("holdout nan", {**LEARN, ("learner", "holdout"): math.nan}, "learner.holdout"),
    ("learner unknown key", {**LEARN, ("learner", "epochs"): 3}, "learner.epochs"),
    # [learner]'s optimizer
    ("optimizer unknown", {**LEARN, ("learner", "optimizer"): "rmsprop"}, "learner.optimizer"),
    ("optimizer not a string", {**LEARN, ("learner", "optimizer"): 1}, "learner.optimizer"),
    ("momentum for sgd", {**LEARN, ("learner", "momentum"): 0.9}, "learner.momentum"),
    ("beta1 for sgd", {**LEARN, ("learner", "beta1"): 0.9}, "learner.beta1"),
    ("epsilon for sgd", {**LEARN, ("learner", "epsilon"): 1e-8}, "learner.epsilon"),
    ("beta2 for momentum", {**MOMENTUM, ("learner", "beta2"): 0.99}, "learner.beta2"),
    ("momentum for adam", {**ADAM, ("learner", "momentum"): 0.9}, "learner.momentum"),
    ("momentum one", {**MOMENTUM, ("learner", "momentum"): 1.0}, "learner.momentum"),
    ("momentum negative", {**MOMENTUM, ("learner", "momentum"): -0.1}, "learner.momentum"),
    ("momentum a string", {**MOMENTUM, ("learner", "momentum"): "0.9"}, "learner.momentum"),
    ("momentum a bool", {**MOMENTUM, ("learner", "momentum"): False}, "learner.momentum"),
    ("beta1 one", {**ADAM, ("learner", "beta1"): 1}, "learner.beta1"),
    ("beta1 nan", {**ADAM, ("learner", "beta1"): math.nan}, "learner.beta1"),
    ("beta2 negative", {**ADAM, ("learner", "beta2"): -1e-9}, "learner.beta2"),
    ("beta2 past one", {**ADAM, ("learner", "beta2"): 1.5}, "learner.beta2"),
    # 1 - 1e-9 is below 1 as a double but is 1.0 in the contract's float32
    ("beta2 one in float32", {**ADAM, ("learner", "beta2"): 1 - 1e-9}, "learner.beta2"),
    ("epsilon zero", {**ADAM, ("learner", "epsilon"): 0.0}, "learner.epsilon"),
    ("epsilon negative", {**ADAM, ("learner", "epsilon"): -1e-8}, "learner.epsilon"),
    ("epsilon inf", {**ADAM, ("learner", "epsilon"): math.inf}, "learner.epsilon"),
    ("epsilon zero in float32", {**ADAM, ("learner", "epsilon"): 1e-50}, "learner.epsilon"),
    ("epsilon inf in float32", {**ADAM, ("learner", "epsilon"): 1e39}, "learner.epsilon"),
    # [gpu]
    ("gpu role past n", {("gpu", "roles", "8"): "GPU-ab"}, "gpu.roles.8"),
    ("gpu role leading 0", {("gpu", "roles", "01"): "GPU-ab"}, "gpu.roles.01"),
    ("gpu role a word", {("gpu", "roles", "one"): "GPU-ab"}, "gpu.roles.one"),
    ("gpu uuid lower prefix", {("gpu", "roles", "1"): "gpu-ab"}, "gpu.roles.1"),
    ("gpu uuid not hex", {("gpu", "roles", "1"): "GPU-xyz"}, "gpu.roles.1"),
    ("gpu uuid empty", {("gpu", "roles", "1"): "GPU-"}, "gpu.roles.1"),
    ("gpu uuid a number", {("gpu", "roles", "1"): 0}, "gpu.roles.1"),
    (
        "gpu uuid too long",
        {("gpu", "roles", "1"): "GPU-" + "a" * (MAX_GPU_UUID_CHARS - 3)},
        "gpu.roles.1",
    ),
    ("gpu roles not a table", {("gpu", "roles"): ["GPU-ab"]}, "gpu.roles"),
    ("gpu unknown key", {("gpu", "role"): {}}, "gpu.role"),
    # the plan itself
    ("run missing", {("run",): MISSING}, "run"),
    ("membership missing", {("membership",): MISSING}, "membership"),
    ("run not a table", {("run",): 3}, "run"),
    ("unknown table", {("topolgy", "fanout"): 2}, "topolgy"),
    ("top-level key", {("name",): "t"}, "name"),
]


@pytest.mark.parametrize(
    ("edits", "field"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_refusal_names_its_field(edits: dict[tuple[str, ...], Any], field: str) -> None:
    error = refused(with_edits(edits))
    assert error.field == field
    assert str(error).startswith(f"{field}: ")


def test_an_unknown_key_lists_the_known_ones() -> None:
    message = str(refused(with_edits({("topology", "fanuot"): 2})))
    assert "'fanuot'" in message and "shape, fanout" in message
    message = str(refused(with_edits({("topolgy", "fanout"): 2})))
    assert "[topolgy]" in message and "run, membership, topology" in message


def test_a_group_refusal_keeps_the_original_message() -> None:
    text = "(group (stride 0 1 8)"
    with pytest.raises(Exception) as original:
        parse_group(text)
    assert str(original.value) in str(refused(with_edits({GROUP: text})))


def test_a_group_not_from_zero_says_why() -> None:
    message = str(refused(with_edits({GROUP: "(group (stride 0 2 4))"})))
    assert "0..n-1" in message and "from 0 to 6" in message


def test_a_budget_refusal_names_the_budget_once() -> None:
    message = str(refused(with_edits({("budgets", "receive"): -1.0})))
    assert message.count("budgets.receive") == 1
    assert "positive" in message


def test_a_range_refusal_names_the_range() -> None:
    assert f"1..{MAX_ROUNDS}" in str(refused(with_edits({("run", "rounds"): 0})))
    assert "'float32', 'float64'" in str(refused(with_edits({("contract", "dtype"): "f16"})))


def test_toml_syntax_errors_give_the_line() -> None:
    error = refused('[run]\nname = "t"\nrounds = \n')
    assert error.field == ""
    assert "line 3" in str(error) and "not valid TOML" in str(error)


def test_a_table_declared_twice_is_a_toml_error() -> None:
    assert refused("[run]\nname = 't'\n[run]\nrounds = 3\n").field == ""


def test_an_integer_too_long_to_read_is_refused() -> None:
    error = refused("[run]\nrounds = " + "9" * 5000 + "\n")
    assert error.field == ""


def test_a_text_with_a_lone_surrogate_is_refused() -> None:
    assert refused(render(base()) + "# \ud800\n").field == ""


def test_the_first_refusal_in_documented_order_wins() -> None:
    both = with_edits({("run", "rounds"): 0, ("topology", "fanout"): 0})
    assert refused(both).field == "run.rounds"
    both = with_edits({("contract", "dtype"): "x", ("run", "nmae"): 1})
    assert refused(both).field == "run.nmae"


def test_parse_plan_wants_text() -> None:
    with pytest.raises(TypeError):
        parse_plan(b"[run]")  # type: ignore[arg-type]


# --- lookups ------------------------------------------------------------------------------


def lookup_plan() -> Plan:
    return parse_plan(
        with_edits(
            {
                ("addresses", "default"): "10.0.0.1",
                ("addresses", "edges", "5-7"): "10.0.0.57",
                ("addresses", "edges", "0-1"): "10.0.0.2",
                ("targets", "aarch64"): [6, 3],
                ("targets", "x86_64"): [0],
                ("gpu", "roles", "4"): "GPU-0b",
                ("gpu", "roles", "2"): "GPU-0a",
            }
        )
    )


def test_address_lookup() -> None:
    plan = lookup_plan()
    assert plan.edge_addresses == (((0, 1), "10.0.0.2"), ((5, 7), "10.0.0.57"))
    assert plan.address(0, 1) == "10.0.0.2"
    assert plan.address(5, 7) == "10.0.0.57"
    assert plan.address(0, 5) == "10.0.0.1"
    assert plan.address(2, 3) == "10.0.0.1"


@pytest.mark.parametrize(("low", "high"), [(1, 0), (0, 2), (3, 3), (0, 0), (True, 1), (-1, 1)])
def test_address_of_a_non_edge(low: int, high: int) -> None:
    with pytest.raises(TopologyError) as info:
        lookup_plan().address(low, high)
    assert type(info.value) is TopologyError


@pytest.mark.parametrize("high", [8, -1, True, "1"])
def test_address_of_a_role_out_of_range(high: Any) -> None:
    with pytest.raises(RoleOutOfRange) as info:
        lookup_plan().address(0, high)
    assert type(info.value) is RoleOutOfRange


def test_target_lookup() -> None:
    plan = lookup_plan()
    assert plan.target_roles == (("x86_64", (0,)), ("aarch64", (3, 6)))
    assert [plan.target(r) for r in range(8)] == ["x86_64"] * 3 + ["aarch64"] + ["x86_64"] * 2 + [
        "aarch64",
        "x86_64",
    ]
    assert plan.targets_present() == frozenset(TARGETS)
    assert plan.gpus == ((2, "GPU-0a"), (4, "GPU-0b"))


@pytest.mark.parametrize("role", [8, -1, True, 1.0, "1"])
def test_target_of_a_role_out_of_range(role: Any) -> None:
    with pytest.raises(RoleOutOfRange) as info:
        lookup_plan().target(role)
    assert type(info.value) is RoleOutOfRange


def test_targets_present() -> None:
    assert parse_plan(render(base())).targets_present() == {"x86_64"}
    every = with_edits({("targets", "aarch64"): list(range(8))})
    assert parse_plan(every).targets_present() == {"aarch64"}
    some = with_edits({("targets", "default"): "aarch64", ("targets", "x86_64"): [1]})
    assert parse_plan(some).targets_present() == {"aarch64", "x86_64"}
    empty = with_edits({("targets", "aarch64"): []})
    assert parse_plan(empty).targets_present() == {"x86_64"}


def test_plans_are_values() -> None:
    one, two = lookup_plan(), lookup_plan()
    assert one == two and hash(one) == hash(two)
    assert one != parse_plan(render(base()))
    with pytest.raises(AttributeError):
        one.rounds = 4  # type: ignore[misc]
    copy = pickle.loads(pickle.dumps(one))
    assert copy == one and copy.address(5, 7) == "10.0.0.57" and copy.target(6) == "aarch64"
    changed = dataclasses.replace(one, default_target="aarch64")
    assert changed.target(1) == "aarch64" and changed.target(0) == "x86_64"
    assert "_address_of" not in repr(one)


# --- scale --------------------------------------------------------------------------------

#: 2,000,000 roles with three index nodes: 100 copies of 1,000 copies of 20 roles.
GROUP_2M = "(group (repeat 100 20000 (repeat 1000 20 (stride 0 1 20))))"


def test_a_two_million_role_plan_reads_at_once() -> None:
    n = 2_000_000
    tree = ParticipantTree(n, 64)
    last = n - 1
    text = with_edits(
        {
            GROUP: GROUP_2M,
            ("topology", "fanout"): 64,
            ("run", "rounds"): 200_000,
            ("addresses", "edges", f"{tree.parent(last)}-{last}"): "10.9.9.9",
            ("targets", "aarch64"): [last, 1_234_567],
            ("gpu", "roles", str(last)): "GPU-ff",
        }
    )
    tracemalloc.start()
    started = time.perf_counter()
    plan = parse_plan(text)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # A list of 2,000,000 roles alone would take over 16 MB; a plan takes a few KB.
    assert peak < 1_000_000, f"parse_plan peaked at {peak} bytes"
    assert elapsed < 1.0, f"parse_plan took {elapsed:.3f} s"
    assert (plan.participants, plan.tree) == (n, tree)
    assert plan.address(tree.parent(last) or 0, last) == "10.9.9.9"
    assert plan.target(last) == "aarch64" and plan.target(last - 1) == "x86_64"
    assert plan.targets_present() == frozenset(TARGETS)


# --- round trip ---------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z0-9._-]{1,64}", fullmatch=True)
SECONDS = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
UUIDS = st.from_regex(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}", fullmatch=True)


@st.composite
def plans(draw: st.DrawFn) -> tuple[Tables, dict[str, Any]]:
    """A plan's tables from random valid values, and the attributes it must read back as.

    Every field with a default is either left out (the default expected) or given.
    """
    tables: Tables = {}
    expect: dict[str, Any] = {}

    def maybe(table: str, key: str, values: st.SearchStrategy[Any], default: Any) -> Any:
        if draw(st.booleans()):
            value = draw(values)
            tables.setdefault(table, {})[key] = value
            return value
        tables.setdefault(table, {})
        return default

    expect["name"], expect["rounds"] = draw(NAMES), draw(st.integers(1, MAX_ROUNDS))
    tables["run"] = {"name": expect["name"], "rounds": expect["rounds"]}
    expect["epoch"] = maybe("run", "epoch", st.integers(0, MAX_EPOCH), 0)

    copies, width = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    n = copies * width
    text = draw(
        st.sampled_from(
            [f"(group (repeat {copies} {width} (stride 0 1 {width})))", f"(group (stride 0 1 {n}))"]
        )
    )
    tables["membership"] = {"group": text}
    universe = maybe("membership", "universe", st.integers(n, MAX_ROLES), n)
    expect.update(group_text=text, participants=n)
    expect["group"] = parse_group(text, universe=universe, epoch=expect["epoch"])

    shapes = ["tree", "star"] + (["pair"] if n == 2 else [])
    shape = maybe("topology", "shape", st.sampled_from(shapes), "tree")
    if shape == "tree":
        fanout = tables["topology"]["fanout"] = draw(st.integers(1, n + 2))
        expect["tree"] = ParticipantTree(n, fanout)
    elif shape == "star":
        maybe("topology", "fanout", st.just(max(1, n - 1)), None)
        expect["tree"] = star(n)
    else:
        maybe("topology", "fanout", st.just(1), None)
        expect["tree"] = pair()
    expect["shape"] = shape

    expect["dtype"] = maybe("contract", "dtype", st.sampled_from(["float32", "float64"]), "float32")
    expect["delivery"] = maybe("contract", "delivery", st.sampled_from(["all", "one"]), "all")
    expect["operation"] = maybe("contract", "operation", st.just("sum"), "sum")

    budgets = {
        "connect_attempts": maybe("budgets", "connect_attempts", st.integers(1, 10**6), 100),
        **{
            key: maybe("budgets", key, SECONDS, getattr(DEFAULT_BUDGETS, key))
            for key in ("connect_interval", "accept", "receive", "deadline")
        },
    }
    expect["budgets"] = Budgets(**budgets)

    address = st.ip_addresses(v=4).map(str)
    expect["default_address"] = maybe("addresses", "default", address, "127.0.0.1")
    tree: ParticipantTree = expect["tree"]
    highs = draw(st.sets(st.integers(1, n - 1), max_size=4)) if n > 1 else set()
    edges = {(tree.parent(h), h): draw(address) for h in highs}
    if edges:
        tables["addresses"]["edges"] = {f"{low}-{high}": a for (low, high), a in edges.items()}
    expect["edge_addresses"] = tuple(sorted(edges.items()))

    expect["default_target"] = maybe("targets", "default", st.sampled_from(TARGETS), "x86_64")
    assigned = draw(st.dictionaries(st.integers(0, n - 1), st.sampled_from(TARGETS), max_size=6))
    lists: dict[str, list[int]] = {}
    for role, target in assigned.items():
        lists.setdefault(target, []).append(role)
    for target, roles in lists.items():
        tables["targets"][target] = draw(st.permutations(roles))
    expect["target_roles"] = tuple((t, tuple(sorted(lists[t]))) for t in TARGETS if t in lists)
    expect["target_of"] = assigned

    kind = maybe("work", "kind", st.sampled_from(["sum-check", "learn"]), "sum-check")
    expect["work_kind"] = kind
    if kind == "sum-check":
        expect["work_size"] = maybe("work", "size", st.integers(1, MAX_WORK_SIZE), 1024)
        expect["choice"] = maybe("work", "choice", st.sampled_from(CHOICES), "none")
        expect["learner"] = None
    else:
        expect["work_size"] = expect["choice"] = None
        tables["learner"] = {}
        learner_kind = maybe("learner", "kind", st.sampled_from(["mlp", "linear"]), "mlp")
        hidden = None
        if learner_kind == "mlp":
            hidden = maybe("learner", "hidden", st.integers(1, MAX_HIDDEN), 32)
        rate = tables["learner"]["rate"] = draw(
            st.floats(min_value=0, exclude_min=True, allow_infinity=False, allow_nan=False)
        )
        expect["learner"] = LearnerSpec(
            kind=learner_kind,
            hidden=hidden,
            rate=rate,
            seed=maybe("learner", "seed", st.integers(0, MAX_SEED), 0),
            dataset=maybe("learner", "dataset", st.just("digits"), "digits"),
            batch=maybe("learner", "batch", st.integers(1, MAX_BATCH), 32),
            holdout=maybe(
                "learner",
                "holdout",
                st.floats(min_value=0, max_value=0.5, exclude_min=True, allow_nan=False),
                0.2,
            ),
            optimizer=draw_optimizer(maybe, expect["dtype"]),
        )

    gpus: dict[int, str] = draw(st.dictionaries(st.integers(0, n - 1), UUIDS, max_size=3))
    empty_gpu_table = draw(st.booleans())
    if gpus or empty_gpu_table:
        tables["gpu"] = {"roles": {str(r): u for r, u in gpus.items()}}
    expect["gpus"] = tuple(sorted(gpus.items()))

    order = draw(st.permutations(list(tables)))  # table order in the text does not matter
    return {name: tables[name] for name in order}, expect


def draw_optimizer(maybe: Any, dtype: str) -> Optimizer:
    """An optimizer as a drawn plan gives it: the kind and each constant left out or drawn in
    its range (in ``dtype``)."""
    kind = maybe("learner", "optimizer", st.sampled_from(OPTIMIZERS), "sgd")
    width: Literal[32, 64] = 32 if dtype == "float32" else 64
    below_one = st.floats(0, 1, exclude_max=True, width=width)
    positive = st.floats(2.0**-100, 2.0**100, width=width)
    constants = {
        name: maybe("learner", name, positive if name == "epsilon" else below_one, default)
        for name, default in (
            ("momentum", DEFAULT_MOMENTUM),
            ("beta1", DEFAULT_BETA1),
            ("beta2", DEFAULT_BETA2),
            ("epsilon", DEFAULT_EPSILON),
        )
        if name in OPTIMIZER_CONSTANTS[kind]
    }
    return Optimizer(kind, **constants)


@settings(max_examples=150, deadline=None)
@given(plans())
def test_a_rendered_plan_reads_back_its_values(drawn: tuple[Tables, dict[str, Any]]) -> None:
    tables, expect = drawn
    text = render(tables)
    plan = parse_plan(text, source="drawn.toml")
    target_of = expect.pop("target_of")
    for attribute, value in expect.items():
        assert getattr(plan, attribute) == value, attribute
    assert plan.group.universe == expect["group"].universe
    assert plan.source == "drawn.toml"
    assert plan.text_sha256 == hashlib.sha256(text.encode()).hexdigest()
    for role, target in target_of.items():
        assert plan.target(role) == target
    for (low, high), address in expect["edge_addresses"]:
        assert plan.address(low, high) == address
    assert parse_plan(text, source="drawn.toml") == plan


def test_a_quoted_value_is_cut_at_its_bound() -> None:
    from alpha.compiler._fields import MAX_SHOWN, shown

    fits = "x" * (MAX_SHOWN - 2)  # repr adds two quotes: exactly MAX_SHOWN characters
    assert shown(fits) == f"a string ({fits!r})"
    longer = shown("x" * (MAX_SHOWN - 1))
    assert longer.endswith("...)") and len(longer) == len("a string ()") + MAX_SHOWN
