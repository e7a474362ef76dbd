"""A compile leaves no temporary of an artifact behind: neither one an earlier compile, killed
outright, left in its folder, nor the one being written when a signal landed between its
making and its writer's guard (alpha.files.write_atomically)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alpha.app.compile import compile_plan, parse_roles
from alpha.app.interrupted import Interrupted
from alpha.compiler.plan import load_plan
from alpha.files import temporaries_of
from tests.support import PLANS


def test_a_compile_removes_the_temporaries_an_earlier_one_left(tmp_path: Path) -> None:
    plan = load_plan(PLANS / "pair.toml")
    folder = tmp_path / "run"
    folder.mkdir()
    left = [folder / ".role-000001.pyz.k2j4h1.tmp", folder / ".runtime-ab.pyz.x9.tmp"]
    for path in left:
        path.write_bytes(b"half an artifact")
    mine = folder / ".notes.txt.tmp"  # not an artifact's: not the compile's to remove
    mine.write_text("keep")
    compile_plan(plan, folder, parse_roles("all", plan.participants))
    assert not any(path.exists() for path in left)
    assert mine.read_text() == "keep"
    assert (folder / "run.json").is_file()


def test_an_interrupt_that_finds_a_temporary_of_this_build_removes_it(tmp_path: Path) -> None:
    plan = load_plan(PLANS / "pair.toml")
    folder = tmp_path / "run"

    def interrupted(done: int, total: int) -> None:
        if done == 1:
            # What the signal leaves when it lands between mkstemp and the writer's guard.
            (folder / ".role-000001.pyz.a1b2c3.tmp").write_bytes(b"half an artifact")
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as raised:
        compile_plan(plan, folder, parse_roles("all", plan.participants), progress=interrupted)
    assert type(raised.value) is Interrupted
    assert not folder.exists() or temporaries_of(folder, "role-*.pyz") == []
    assert not (folder / "run.json").exists()
