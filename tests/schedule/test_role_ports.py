"""An edge's fixed port in a role description (docs/roles.md, docs/slurm.md): ``port`` round
trips through JSON on keyed and unkeyed edges, is absent for an announced (ephemeral) port,
and anything but an int in 1024..65535 is ``RoleDescriptionInvalid`` naming the edge."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.sealing import KEYED_INTEGRITY
from alpha.errors import RoleDescriptionInvalid
from alpha.schedule.role import MAX_FIXED_PORT, MIN_FIXED_PORT, Edge, RoleDescription
from tests.support import IDENTITY, raises_exactly

KEY = bytes(32)


def chain(port_low: int | None, port_high: int | None, keyed: bool) -> RoleDescription:
    """Role 1 of a chain 0-1-2."""
    keys = (KEY, KEY) if keyed else (None, None)
    return RoleDescription(
        role=1,
        participants=3,
        identity=IDENTITY,
        edges=(
            Edge(0, "127.0.0.2", *keys, port=port_low),
            Edge(2, "127.0.0.3", *keys, port=port_high),
        ),
        integrity=KEYED_INTEGRITY if keyed else "sha256",
    )


ports = st.one_of(st.none(), st.integers(MIN_FIXED_PORT, MAX_FIXED_PORT))


@given(ports, ports, st.booleans())
def test_a_fixed_port_round_trips_and_an_announced_one_is_absent(
    low: int | None, high: int | None, keyed: bool
) -> None:
    description = chain(low, high, keyed)
    data = description.to_dict()
    edges: list[dict[str, Any]] = data["edges"]  # type: ignore[assignment]
    assert [edge.get("port") for edge in edges] == [low, high]
    assert [("port" in edge) for edge in edges] == [low is not None, high is not None]
    assert RoleDescription.from_json(description.to_json()) == description


@pytest.mark.parametrize(
    "port", [MIN_FIXED_PORT - 1, 0, MAX_FIXED_PORT + 1, 2**64, True, 23000.0, "23000", -1]
)
def test_a_port_outside_the_unprivileged_range_is_refused(port: object) -> None:
    data = chain(None, None, keyed=False).to_dict()
    data["edges"][0]["port"] = port  # type: ignore[index]
    error = raises_exactly(RoleDescriptionInvalid, RoleDescription.from_dict, data)
    assert str(error).startswith("edges[peer=0].port must be an int in 1024..65535")


def test_the_bounds_of_a_fixed_port() -> None:
    assert chain(MIN_FIXED_PORT, MAX_FIXED_PORT, keyed=True).edges[1].port == MAX_FIXED_PORT
