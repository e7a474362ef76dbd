"""An artifact's ``trace`` bounds (docs/artifacts.md, docs/trace.md): the plan's ``[trace]`` in
every role's payload, the defaults without it, and a wrong one refused with the payload's other
fields, naming it, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from alpha.app.compile import compile_plan
from alpha.artifact.payload import check_payload_fields, read_artifact, trace_bounds
from alpha.compiler.plan import parse_plan
from alpha.errors import ArtifactInvalid
from alpha.records.trace import MAX_TRACE_LIMIT, TraceBounds
from tests.support import plan_text


def test_the_plans_bounds_are_in_every_roles_payload(tmp_path: Path) -> None:
    text = plan_text("t", roles=2, rounds=1, topology={"shape": "pair"})
    compile_plan(parse_plan(text + "[trace]\nlimit = 64\nmode = 'ring'\n"), tmp_path / "a", [0, 1])
    compile_plan(parse_plan(text), tmp_path / "b", [0, 1])
    for role in (0, 1):
        bounded = read_artifact(tmp_path / "a" / f"role-00000{role}.pyz")
        assert trace_bounds(bounded, "here") == TraceBounds(64, "ring")
        plain = read_artifact(tmp_path / "b" / f"role-00000{role}.pyz")
        assert "trace" not in plain and trace_bounds(plain, "here") == TraceBounds()


@pytest.mark.parametrize(
    "entry",
    [
        {"limit": 0, "mode": "first"},
        {"limit": MAX_TRACE_LIMIT + 1, "mode": "first"},
        {"limit": True, "mode": "first"},
        {"limit": 8, "mode": "last"},
        {"limit": 8},
        {"limit": 8, "mode": "first", "more": 1},
        [8, "first"],
    ],
)
def test_a_wrong_trace_table_is_refused_naming_it(entry: object) -> None:
    payload = {
        "format": "alpha-artifact/1",
        "role": 0,
        "target": "x86_64",
        "description": {},
        "trace": entry,
    }
    with pytest.raises(ArtifactInvalid, match="trace"):
        check_payload_fields(payload, "role.json")
