"""One table of every frame kind (``alpha.wire.frame.KINDS``): its slot and its extent rule,
the one builder of the fixed kinds' specs (``control_spec``), and docs/frames.md's table."""

from __future__ import annotations

import re

import pytest

from alpha.core.identity import DIGEST_SIZE
from alpha.errors import FrameSpecInvalid
from alpha.runtime.edge import hello_spec
from alpha.wire.abort import AbortCause, encode_cause
from alpha.wire.frame import (
    ABORT_EXTENT,
    ABORT_SLOT,
    COMPLETION_SLOT,
    FIELDS,
    HELLO_SLOT,
    KINDS,
    WORD_BYTES,
    FrameKind,
    FrameSpec,
    KindRule,
    abort_spec,
    control_spec,
)
from tests.support import IDENTITY, raises_exactly
from tests.support.imports import ROOT

FIXED = [kind for kind, rule in KINDS.items() if rule.slot is not None and rule.extent is not None]
SCHEDULED = [kind for kind in FrameKind if kind not in FIXED]


def test_the_table_has_one_rule_per_kind_in_order() -> None:
    assert list(KINDS) == list(FrameKind)
    assert all(isinstance(rule, KindRule) and KINDS[rule.kind] is rule for rule in KINDS.values())
    with pytest.raises(TypeError):
        KINDS[FrameKind.DATA] = KINDS[FrameKind.HELLO]  # type: ignore[index]


def test_the_table_holds_the_agreed_slots_and_extents() -> None:
    rows = {kind.name: (rule.slot, rule.extent) for kind, rule in KINDS.items()}
    assert rows == {
        "HELLO": (HELLO_SLOT, 0),
        "DATA": (None, None),
        "CHOICE": (None, WORD_BYTES),
        "ABORT": (ABORT_SLOT, ABORT_EXTENT),
        "END": (COMPLETION_SLOT, 0),
        "DONE": (COMPLETION_SLOT, DIGEST_SIZE),
        "COMMIT": (COMPLETION_SLOT, DIGEST_SIZE),
    }
    assert (HELLO_SLOT, ABORT_SLOT, COMPLETION_SLOT, ABORT_EXTENT, WORD_BYTES) == (0, 0, 0, 512, 8)


@pytest.mark.parametrize("kind", FIXED, ids=lambda kind: kind.name)
def test_control_spec_builds_each_fixed_kind_from_the_table(kind: FrameKind) -> None:
    spec = control_spec(IDENTITY, kind, 3, 1)
    rule = KINDS[kind]
    assert spec == FrameSpec(IDENTITY, kind, 3, 1, rule.slot or 0, rule.extent or 0)


@pytest.mark.parametrize("kind", SCHEDULED, ids=lambda kind: kind.name)
def test_control_spec_refuses_a_kind_the_schedule_numbers(kind: FrameKind) -> None:
    error = raises_exactly(FrameSpecInvalid, control_spec, IDENTITY, kind, 3, 1)
    assert "from the schedule" in str(error)


def test_control_spec_refuses_what_is_not_a_kind() -> None:
    error = raises_exactly(FrameSpecInvalid, control_spec, IDENTITY, 4, 3, 1)
    assert "from the schedule" in str(error)


def test_the_hello_and_abort_specs_are_the_tables() -> None:
    assert hello_spec(IDENTITY, 2, 0) == control_spec(IDENTITY, FrameKind.HELLO, 2, 0)
    assert abort_spec(IDENTITY, 2, 0) == control_spec(IDENTITY, FrameKind.ABORT, 2, 0)
    cause = AbortCause(2, "Corrupted", (0, 2), 3, "a damaged frame")
    assert len(encode_cause(cause)) == KINDS[FrameKind.ABORT].extent


def test_the_kind_field_names_every_kind() -> None:
    meaning = next(entry.meaning for entry in FIELDS if entry.name == "kind")
    for kind in FrameKind:
        assert f"{kind.value} {kind.name.lower()}" in meaning


def test_the_format_field_names_layout_2() -> None:
    meaning = next(entry.meaning for entry in FIELDS if entry.name == "format")
    assert "2" in meaning and "1" not in meaning


def _documented() -> dict[str, tuple[str, str, str]]:
    """docs/frames.md's kinds table: kind -> (value, slot, extent), as written."""
    text = (ROOT / "docs" / "frames.md").read_text()
    section = text[text.index("## Kinds") : text.index("## ABORT frames")]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and re.fullmatch(r"[A-Z]+", cells[0]):
            rows[cells[0]] = (cells[1], cells[2], cells[3])
    return rows


def test_docs_frames_md_shows_the_table() -> None:
    rows = _documented()
    assert list(rows) == [kind.name for kind in FrameKind]
    for kind, rule in KINDS.items():
        value, slot, extent = rows[kind.name]
        assert value == str(kind.value)
        assert slot == (str(rule.slot) if rule.slot is not None else slot)
        assert not slot.isdigit() or rule.slot is not None
        assert extent == (str(rule.extent) if rule.extent is not None else extent)
        assert not extent.isdigit() or rule.extent is not None
