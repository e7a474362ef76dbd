"""Partitioned learner state (``[learner] partition``): each role owns one range of the
parameters and holds the optimizer's state for it alone; with ``gradients`` it also receives
only its range of the combined gradient. Every mode equals the replicated learner bit for bit,
and its checkpoints, written by the owners of each range, restore on another owner count."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

from alpha.app.run import run_plan
from alpha.checkpoint.store import open_generation, owner_ranges
from alpha.compiler import check
from alpha.compiler.forms import Region
from alpha.compiler.plan import parse_plan
from alpha.compiler.projection import project
from alpha.compiler.replicate import Start, replicate
from alpha.compiler.work_learn import learner_protocol, learner_setup, model_of
from alpha.errors import PlanInvalid, ProtocolRejected, RegionInvalid
from alpha.learner.data import load_digits
from alpha.learner.state import LearnerState
from alpha.schedule.local import decode, encode
from tests.support import plans

TOPOLOGIES: dict[str, tuple[dict[str, object], int]] = {
    "pair": ({"shape": "pair"}, 2),
    "star-5": ({"shape": "star"}, 5),
    "tree-7": ({"shape": "tree", "fanout": 2}, 7),
}


def plan_text(
    topology: str,
    *,
    partition: str,
    dtype: str = "float32",
    optimizer: str = "adam",
    rounds: int = 3,
    roles: int | None = None,
    checkpoint: str = "",
) -> str:
    shape, n = TOPOLOGIES[topology]
    return plans.plan_text(
        f"part-{topology}",
        roles=roles or n,
        rounds=rounds,
        topology=shape,
        contract={"dtype": dtype},
        budgets={"accept": 30.0, "receive": 10.0, "start": 30.0},
        work={"kind": "learn"},
        learner={
            "hidden": 8,
            "rate": 0.01,
            "batch": 8,
            "optimizer": optimizer,
            "partition": partition,
        },
        extra=checkpoint,
    )


@pytest.mark.parametrize("partition", ["optimizer", "gradients", "parameters"])
def test_each_role_holds_the_optimizer_state_of_its_range_alone(partition: str) -> None:
    plan = parse_plan(plan_text("tree-7", partition=partition))
    digits = load_digits()
    size = model_of(plan).size
    states = [LearnerState.for_role(learner_setup(plan), digits, role) for role in range(7)]
    ranges = owner_ranges(size, 7)
    for role, state in enumerate(states):
        assert state.own == ranges[role]
        assert state.optimizer_state.arrays["m"].size == ranges[role][1] - ranges[role][0]
        assert state.optimizer_state.arrays["p1"].size == 1
    assert sum(s.optimizer_state.arrays["v"].size for s in states) == size
    whole = LearnerState.for_role(
        learner_setup(parse_plan(plan_text("tree-7", partition="none"))), digits, 0
    )
    assert whole.optimizer_state.arrays["m"].size == size


def test_the_partitioned_protocols_check_and_project() -> None:
    for partition in ("optimizer", "gradients", "parameters"):
        protocol = learner_protocol(parse_plan(plan_text("tree-7", partition=partition)))
        assert check(protocol) == []
        for role in range(7):
            schedule = project(protocol, role)
            assert decode(encode(schedule)) == schedule
    # One more role than parameters would leave a role with nothing to own.
    text = (
        plan_text("star-5", partition="optimizer")
        .replace("(stride 0 1 5)", "(stride 0 1 700)")
        .replace("hidden = 8", "")
    )
    plan = parse_plan(text.replace("[learner]", '[learner]\nkind = "linear"'))
    with pytest.raises(PlanInvalid) as caught:
        learner_protocol(plan)
    assert caught.value.field == "learner.partition"


def test_a_region_view_must_lie_inside_a_region_of_its_dtype() -> None:
    import dataclasses

    protocol = learner_protocol(parse_plan(plan_text("pair", partition="optimizer")))
    for bad in (
        Region("w@9", protocol.regions["w"].dtype, 4, "nowhere", 0),
        Region("w@9", "float64", 4, "w", 0),
        Region("w@9", protocol.regions["w"].dtype, 4, "w", protocol.regions["w"].count - 3),
        Region("w@9", protocol.regions["w"].dtype, 1, "w@0", 0),
    ):
        regions = {**protocol.regions, bad.name: bad}
        failures = check(dataclasses.replace(protocol, regions=regions))
        assert [type(f) for f in failures] == [RegionInvalid], bad
    with pytest.raises(ProtocolRejected):
        from alpha.compiler import require_valid

        require_valid(dataclasses.replace(protocol, regions={**protocol.regions, bad.name: bad}))


@pytest.mark.slow
@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("partition", ["optimizer", "gradients", "parameters"])
def test_every_partition_equals_the_replicated_learner_bit_for_bit(
    partition: str, dtype: str, topology: str, tmp_path: Path
) -> None:
    optimizer = "adam" if dtype == "float32" else "momentum"
    plan = parse_plan(plan_text(topology, partition=partition, dtype=dtype, optimizer=optimizer))
    summary = run_plan(plan, tmp_path / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    assert summary.distributed == summary.replicated
    # The same learner unpartitioned reaches the same bits: partitioning changes who
    # computes each element, never how.
    plain = parse_plan(plan_text(topology, partition="none", dtype=dtype, optimizer=optimizer))
    assert replicate(plain, load_digits()).digest == summary.distributed


@pytest.mark.slow
def test_a_partitioned_checkpoint_is_written_by_each_ranges_owner_and_restores_on_others(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ckpt"
    checkpoint = f'[checkpoint]\nevery = 2\nfolder = "{folder}"\n'
    plan = parse_plan(plan_text("tree-7", partition="parameters", rounds=2, checkpoint=checkpoint))
    summary = run_plan(plan, tmp_path / "run", out=io.StringIO())
    assert summary.ok, summary.cause
    generation = open_generation(folder)
    size = model_of(plan).size
    for name in ("w", "m", "v"):
        assert [(s.start, s.stop) for s in generation.shards[name]] == owner_ranges(size, 7)
    assert len(generation.shards["p1"]) == 1
    # Resume on 5 roles (star), partitioning the optimizer only; and on 3, unpartitioned.
    arrays = generation.load()
    start = Start(2, arrays.pop("w"), arrays)
    for topology, partition, roles in (
        ("star-5", "optimizer", 5),
        ("tree-7", "none", 3),
        ("tree-7", "parameters", 4),
    ):
        # Another name, membership and tree on purpose: the plan says so (docs/checkpoints.md).
        allowed = (
            f'[checkpoint]\nevery = 2\nfolder = "{tmp_path / topology}-{roles}-ckpt"\n'
            'may_change = ["run", "membership", "topology"]\n'
        )
        later = parse_plan(
            plan_text(topology, partition=partition, rounds=4, roles=roles, checkpoint=allowed)
        )
        resumed = run_plan(later, tmp_path / f"{topology}", out=io.StringIO(), resume=folder)
        assert resumed.ok, resumed.cause
        assert resumed.replicated == replicate(later, load_digits(), start=start).digest
        assert np.isfinite(resumed.holdout_accuracy)


def _resident_bytes(array: np.ndarray) -> int:
    """The resident bytes of the pages ``array``'s buffer spans, page by page from
    /proc/self/pagemap (bit 63 of each page's entry: present in memory). Exactly these pages:
    the kernel may merge the array's mapping with a neighbour of the same kind, whose pages
    a mapping-wide count (smaps ``Rss``) would add."""
    page = os.sysconf("SC_PAGE_SIZE")
    address = array.__array_interface__["data"][0]
    first, last = address // page, (address + array.nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first * 8)
        entries = pagemap.read((last - first + 1) * 8)
    present = sum(
        1
        for index in range(0, len(entries), 8)
        if int.from_bytes(entries[index : index + 8], "little") >> 63
    )
    return present * page


def test_releasing_a_transient_region_gives_its_pages_back() -> None:
    from alpha.runtime.interpreter import transient_array
    from alpha.schedule.operations import release

    w = transient_array(1 << 20, "float32")  # 4 MiB in a mapping of its own
    assert _resident_bytes(w) == 0
    w[:] = 1.5
    assert _resident_bytes(w) >= 4 << 20
    view = w[1000:2000]  # a range of it, as a region view is
    release(view)  # through a view, the whole mapping goes
    assert _resident_bytes(w) == 0
    assert not w.any()  # reads as zeros until written again
    w[:10] = 2.0
    assert w[:10].tolist() == [2.0] * 10


@pytest.mark.slow
@pytest.mark.parametrize("partition", ["none", "optimizer", "gradients", "parameters"])
def test_logical_contributors_give_the_same_bits_on_any_number_of_roles(
    partition: str, tmp_path: Path
) -> None:
    digests = set()
    for roles in (2, 5):
        text = plan_text("star-5", partition=partition, roles=roles).replace(
            'partition = "', 'contributors = 4\npartition = "'
        )
        summary = run_plan(parse_plan(text), tmp_path / f"run-{roles}", out=io.StringIO())
        assert summary.ok, summary.cause
        assert summary.distributed == summary.replicated
        digests.add(summary.distributed)
    assert len(digests) == 1
