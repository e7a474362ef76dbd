"""Roles placed on an allocation's nodes in contiguous blocks, each edge on its listener's
node at a port fixed from a range (``alpha.core.placement``, docs/slurm.md): the laws of the
rule, and its refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.placement import (
    DEFAULT_PORTS,
    MAX_PORT,
    MIN_PORT,
    NodePlacement,
    PortRange,
    port_offset,
)
from alpha.core.topology import ParticipantTree
from alpha.errors import PlanInvalid, RoleOutOfRange
from tests.support import raises_exactly


def addresses(count: int) -> tuple[str, ...]:
    return tuple(f"127.0.0.{k + 2}" for k in range(count))


@st.composite
def placements(draw: st.DrawFn) -> NodePlacement:
    roles = draw(st.integers(1, 300))
    nodes = draw(st.integers(1, 12))
    low = draw(st.integers(MIN_PORT, MAX_PORT - max(roles - 1, 0)))
    high = draw(st.integers(low + max(roles - 2, 0), MAX_PORT))
    ports = PortRange(low, high)
    offset = port_offset(draw(st.integers(0, 10**7)), draw(st.integers(0, 50)), roles, ports.span)
    return NodePlacement(addresses(nodes), roles, ports, offset)


@given(placements())
def test_every_role_runs_on_one_node_in_contiguous_blocks_in_role_order(
    placement: NodePlacement,
) -> None:
    nodes = [placement.node_of(role) for role in range(placement.roles)]
    assert nodes == sorted(nodes)  # role order
    assert nodes[0] == 0 and nodes[-1] == placement.nodes_used - 1  # no node skipped
    assert placement.nodes_used <= len(placement.addresses)
    held = [list(placement.roles_of(node)) for node in range(len(placement.addresses))]
    assert [role for each in held for role in each] == list(range(placement.roles))  # in order
    assert all(len(each) == placement.block for each in held[: placement.nodes_used - 1])
    assert all(not each for each in held[placement.nodes_used :])
    for role in range(placement.roles):
        assert placement.address_of(role) == placement.addresses[nodes[role]]


@given(placements())
def test_the_ports_of_one_launch_are_distinct_and_inside_the_range(
    placement: NodePlacement,
) -> None:
    ports = [placement.port_of(high) for high in range(1, placement.roles)]
    assert len(set(ports)) == len(ports)
    assert all(placement.ports.low <= port <= placement.ports.high for port in ports)


@given(
    st.integers(2, 200),
    st.integers(0, 10**7),
    st.integers(0, 100),
    st.integers(0, 5000),
)
def test_the_next_attempt_and_the_next_job_take_the_next_block(
    roles: int, job: int, attempt: int, spare: int
) -> None:
    # A range of at least two blocks: consecutive launches never share a port.
    ports = PortRange(20000, 20000 + 2 * (roles - 1) + spare - 1)
    here = NodePlacement(("127.0.0.2",), roles, ports, port_offset(job, attempt, roles, ports.span))
    for later in (
        port_offset(job, attempt + 1, roles, ports.span),
        port_offset(job + 1, attempt, roles, ports.span),
    ):
        there = NodePlacement(("127.0.0.2",), roles, ports, later)
        mine = {here.port_of(high) for high in range(1, roles)}
        assert mine.isdisjoint(there.port_of(high) for high in range(1, roles))


def test_eight_roles_on_three_nodes() -> None:
    placement = NodePlacement(addresses(3), 8, PortRange(23000, 23999), 105)
    assert placement.block == 3 and placement.nodes_used == 3
    assert [placement.node_of(role) for role in range(8)] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert [placement.port_of(high) for high in (1, 2, 7)] == [23105, 23106, 23111]
    tree = ParticipantTree(8, 2)
    # An edge listens on its parent's node: the edge 0-4 crosses from node 0's address.
    assert placement.address_of(tree.parent(4) or 0) == "127.0.0.2"


def test_fewer_roles_than_nodes_leave_the_last_nodes_empty() -> None:
    placement = NodePlacement(addresses(5), 2, DEFAULT_PORTS)
    assert placement.block == 1 and placement.nodes_used == 2
    assert list(placement.roles_of(4)) == []


def test_the_range_must_hold_one_port_per_edge() -> None:
    NodePlacement(addresses(1), 11, PortRange(30000, 30009))  # 10 edges, 10 ports: max
    error = raises_exactly(PlanInvalid, NodePlacement, addresses(1), 12, PortRange(30000, 30009))
    assert error.field == "addresses.ports"
    assert "holds 10 port(s), and a run of 12 roles listens on 11" in str(error)


@pytest.mark.parametrize(
    ("low", "high"),
    [(MIN_PORT - 1, 30000), (30000, MAX_PORT + 1), (0, 10), (30001, 30000), (True, 30000)],
)
def test_a_range_outside_the_unprivileged_ports_or_reversed_is_refused(low: int, high: int) -> None:
    error = raises_exactly(PlanInvalid, PortRange, low, high)
    assert error.field == "addresses.ports"


def test_the_bounds_of_a_range() -> None:
    assert PortRange(MIN_PORT, MAX_PORT).span == MAX_PORT - MIN_PORT + 1
    assert str(PortRange(MIN_PORT, MIN_PORT)) == "1024-1024"


@pytest.mark.parametrize("address", ["node12", "10.0.0.300", "::1", ""])
def test_a_node_address_must_be_ipv4(address: str) -> None:
    error = raises_exactly(PlanInvalid, NodePlacement, ("127.0.0.2", address), 4)
    assert error.field == "addresses"


def test_no_node_no_role_and_an_offset_outside_the_range_are_refused() -> None:
    assert raises_exactly(PlanInvalid, NodePlacement, (), 4).field == "addresses"
    assert raises_exactly(PlanInvalid, NodePlacement, addresses(1), 0).field == "run"
    ports = PortRange(30000, 30009)
    NodePlacement(addresses(1), 2, ports, 9)
    error = raises_exactly(PlanInvalid, NodePlacement, addresses(1), 2, ports, 10)
    assert error.field == "addresses.ports"


def test_a_role_outside_the_run_has_no_node_and_the_root_no_port() -> None:
    placement = NodePlacement(addresses(2), 4)
    raises_exactly(RoleOutOfRange, placement.node_of, 4)
    raises_exactly(RoleOutOfRange, placement.node_of, -1)
    raises_exactly(RoleOutOfRange, placement.port_of, 0)
    raises_exactly(RoleOutOfRange, placement.port_of, 4)


def test_an_offset_needs_a_job_an_attempt_a_role_and_a_port() -> None:
    assert port_offset(0, 0, 1, 1) == 0
    for args in ((-1, 0, 2, 10), (0, -1, 2, 10), (0, 0, 0, 10), (0, 0, 2, 0)):
        with pytest.raises(ValueError):
            port_offset(*args)
