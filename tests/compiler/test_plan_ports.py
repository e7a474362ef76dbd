"""``[addresses] ports`` and a plan placed on nodes (``Plan.placement``, set by ``alpha run
--slurm``): each edge listens on its listener's node at a port of the range, every role's
description says so, and nothing else of the run changes (docs/plans.md, docs/slurm.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from alpha.app.compile import compile_plan, compiled_identity, describe_role, parse_roles
from alpha.artifact.verified import verified_roles
from alpha.compiler.plan import Plan, parse_plan
from alpha.core.placement import NodePlacement, PortRange
from alpha.errors import TopologyError
from tests.support import SECRET, raises_exactly

TEXT = """
[run]
name = "placed"
rounds = 2
[membership]
roles = 8
[topology]
fanout = 2
[addresses]
ports = "23000-23006"
"""
NODES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


def placed(offset: int = 0) -> Plan:
    plan = parse_plan(TEXT)
    assert plan.ports == PortRange(23000, 23006)  # 7 ports for 7 edges: the most it needs
    return dataclasses.replace(plan, placement=NodePlacement(NODES, 8, plan.ports, offset))


def test_a_plan_names_its_port_range_or_none() -> None:
    assert parse_plan(TEXT.replace('ports = "23000-23006"', "")).ports is None


def test_an_edge_listens_on_its_listeners_node_at_a_port_of_the_range() -> None:
    plan = placed(offset=5)
    tree = plan.tree
    for high in range(1, 8):
        low = tree.parent(high)
        assert low is not None
        assert plan.address(low, high) == NODES[low // 3]  # blocks of 3: 0-2, 3-5, 6-7
        assert plan.port(low, high) == 23000 + (5 + high - 1) % 7
    raises_exactly(TopologyError, plan.port, 0, 2)  # no edge: 2's parent is 1
    assert parse_plan(TEXT).port(0, 1) is None  # unplaced: an ephemeral, announced port


def test_both_ends_of_each_edge_are_described_alike() -> None:
    plan = placed()
    descriptions = [describe_role(plan, role, secret=SECRET) for role in range(8)]
    for description in descriptions:
        for edge in description.edges:
            other = next(e for e in descriptions[edge.peer].edges if e.peer == description.role)
            assert (edge.address, edge.port) == (other.address, other.port)
            assert edge.port is not None
    # The placement is where the run runs, not what it computes: the identity is the same.
    assert compiled_identity(plan) == compiled_identity(parse_plan(TEXT))


def test_a_compiled_placed_run_relays_no_port(tmp_path: Path) -> None:
    plan = placed()
    compile_plan(plan, tmp_path, parse_roles("all", 8))
    roles, _ = verified_roles(tmp_path)
    assert [(role.lower, role.higher) for role in roles] == [((), ())] * 8
    unplaced = tmp_path / "unplaced"
    compile_plan(parse_plan(TEXT), unplaced, parse_roles("all", 8))
    relayed, _ = verified_roles(unplaced)
    assert relayed[1].lower == (0,) and relayed[1].higher == (2, 4)
