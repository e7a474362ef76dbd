"""``alpha plans`` and shipped plans by name (alpha/app/plans.py): the list, show and copy, and
``alpha run NAME`` / ``alpha compile NAME`` taking a shipped plan where no such file exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alpha.app.cli import main
from alpha.app.compile import ALL_ROLES_LIMIT, parse_roles, require_buildable
from alpha.app.plans import resolve_plan, shipped_plans
from alpha.errors import UsageError
from tests.support import PLANS, raises_exactly, run_alpha

SHIPPED = sorted(path.stem for path in PLANS.glob("*.toml"))


def test_the_shipped_plans_are_the_package_datas() -> None:
    assert list(shipped_plans()) == SHIPPED
    assert {"digits", "pair", "tree"} <= set(SHIPPED)


def test_alpha_plans_lists_each_shipped_plan_with_what_it_is_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plans"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == SHIPPED
    pair = next(line for line in lines if line.startswith("pair "))
    assert pair.endswith("The smallest run: two roles on one edge, four rounds of the sum check "
                         "over 256-element regions.")  # fmt: skip


def test_alpha_plans_show_prints_the_plan_as_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plans", "show", "pair"]) == 0
    assert capsys.readouterr().out == (PLANS / "pair.toml").read_text()


def test_alpha_plans_copy_writes_the_plan_and_never_over_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "mine.toml"
    assert main(["plans", "copy", "digits", str(target)]) == 0
    assert target.read_bytes() == (PLANS / "digits.toml").read_bytes()
    assert f"wrote {target}" in capsys.readouterr().out
    target.write_text("# edited\n")
    assert main(["plans", "copy", "digits", str(target)]) == 2
    assert f"alpha: error: {target} exists" in capsys.readouterr().err
    assert target.read_text() == "# edited\n"  # nothing lost
    assert main(["plans", "copy", "pair", str(tmp_path)]) == 0  # into a folder: its own name
    assert (tmp_path / "pair.toml").read_bytes() == (PLANS / "pair.toml").read_bytes()


def test_an_unknown_shipped_plan_is_named_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plans", "show", "pari"]) == 2
    err = capsys.readouterr().err
    assert "no shipped plan named 'pari'" in err and "did you mean 'pair'?" in err


def test_a_plan_argument_is_a_file_first_then_a_shipped_plans_name(tmp_path: Path) -> None:
    # A file of that name wins over a shipped plan; so does anything that looks like a path.
    own = tmp_path / "digits"
    own.write_text("")
    assert resolve_plan(str(own)) == own
    assert resolve_plan("runs/none.toml") == Path("runs/none.toml")
    assert resolve_plan("digits").samefile(PLANS / "digits.toml")
    error = raises_exactly(UsageError, resolve_plan, "digts")
    assert "no plan file 'digts'" in str(error) and "did you mean 'digits'?" in str(error)


@pytest.mark.slow
def test_alpha_compile_takes_a_shipped_plan_by_name(tmp_path: Path) -> None:
    done = run_alpha("compile", "pair", "-o", str(tmp_path / "out"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"] == "pair"
    assert sorted(p.name for p in (tmp_path / "out").glob("role-*.pyz")) == [
        "role-000000.pyz",
        "role-000001.pyz",
    ]


# --- one role limit for every command that builds every role -----------------------------------


def test_exchange_past_the_role_limit_is_refused_before_a_byte_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["exchange", str(ALL_ROLES_LIMIT + 1), "64", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"exchange: {ALL_ROLES_LIMIT + 1:,} roles is more than the {ALL_ROLES_LIMIT:,}" in err
    assert not out.exists()


def test_run_past_the_role_limit_is_refused_before_a_byte_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = ALL_ROLES_LIMIT + 1
    out = tmp_path / "out"
    assert main(["run", "digits", "--roles", str(big), "-o", str(out)]) == 2
    assert f"run: {big:,} roles is more than the {ALL_ROLES_LIMIT:,}" in capsys.readouterr().err
    assert not out.exists()


def test_the_limit_is_the_one_compile_applies_without_roles() -> None:
    error = raises_exactly(UsageError, require_buildable, ALL_ROLES_LIMIT + 1, "x")
    assert "x: " in str(error)
    require_buildable(ALL_ROLES_LIMIT, "x")  # at the limit: built
    parse_roles(None, ALL_ROLES_LIMIT)
    raises_exactly(UsageError, parse_roles, None, ALL_ROLES_LIMIT + 1)
