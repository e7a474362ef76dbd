"""Overrides (``alpha.compiler.plan_overrides``) and ``membership.roles``: an overridden plan is
the plan as if the value were written in its file, identity included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.plan import parse_plan
from alpha.compiler.plan_overrides import apply_overrides, override, overrides_of
from alpha.compiler.work import run_identity
from alpha.errors import PlanInvalid
from tests.support import PLANS, raises_exactly

GROUP8 = 'group = "(group (stride 0 1 8))"'
# The shipped digits plan says `roles = 8`; these tests start from it written with its group.
DIGITS = (PLANS / "digits.toml").read_text(encoding="utf-8").replace("roles = 8", GROUP8)
assert GROUP8 in DIGITS


def _with(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    return text


def test_roles_is_the_same_membership_as_the_group() -> None:
    by_group = parse_plan(DIGITS)
    by_roles = parse_plan(_with(DIGITS, (GROUP8, "roles = 8")))
    assert by_roles.group == by_group.group and by_roles.participants == 8
    assert run_identity(by_roles) == run_identity(by_group)


def test_roles_and_group_that_agree_are_taken() -> None:
    plan = parse_plan(_with(DIGITS, (GROUP8, f"{GROUP8}\nroles = 8")))
    assert plan.participants == 8


def test_roles_and_group_that_disagree_are_refused_naming_both() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, _with(DIGITS, (GROUP8, f"{GROUP8}\nroles = 4")))
    assert error.field == "membership.roles"
    assert "membership.roles = 4" in str(error) and "membership.group" in str(error)


def test_neither_roles_nor_group_is_refused() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, _with(DIGITS, (GROUP8, "")))
    assert error.field == "membership.group" and "membership.roles" in str(error)


def test_a_bad_roles_value_is_refused() -> None:
    for value in ("0", "true", '"8"'):
        error = raises_exactly(PlanInvalid, parse_plan, _with(DIGITS, (GROUP8, f"roles = {value}")))
        assert error.field == "membership.roles"


def _file_writing(rounds: int, fanout: int, roles: int) -> str:
    return _with(
        DIGITS,
        ("rounds = 30", f"rounds = {rounds}"),
        ("fanout = 2", f"fanout = {fanout}"),
        (GROUP8, f"roles = {roles}"),
    )


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 50), st.integers(1, 9), st.integers(1, 16))
def test_an_overridden_plan_has_the_identity_of_the_file_that_writes_it(
    rounds: int, fanout: int, roles: int
) -> None:
    given_ = overrides_of(
        [("--roles", str(roles)), ("--fanout", str(fanout)), ("--set", f"run.rounds={rounds}")]
    )
    overridden = parse_plan(DIGITS, overrides=given_)
    written = parse_plan(_file_writing(rounds, fanout, roles))
    assert run_identity(overridden) == run_identity(written)
    assert (overridden.participants, overridden.tree, overridden.rounds) == (
        written.participants,
        written.tree,
        written.rounds,
    )
    assert overridden.overrides == given_ and written.overrides == ()
    assert overridden.text_sha256 == parse_plan(DIGITS).text_sha256  # the file's, unchanged


def test_an_override_that_changes_the_plan_changes_its_identity() -> None:
    plain = run_identity(parse_plan(DIGITS))
    rate = run_identity(parse_plan(DIGITS, overrides=overrides_of([("--set", "learner.rate=0.1")])))
    roles = run_identity(parse_plan(DIGITS, overrides=overrides_of([("--roles", "4")])))
    fanout = run_identity(parse_plan(DIGITS, overrides=overrides_of([("--fanout", "3")])))
    assert rate.learner != plain.learner
    assert roles.membership != plain.membership and roles.contract != plain.contract
    assert fanout.contract != plain.contract and fanout.membership == plain.membership


def test_values_are_toml_and_a_bare_word_is_a_string() -> None:
    assert override("--set", "a.b=5").value == 5
    assert override("--set", "a.b=0.5").value == 0.5
    assert override("--set", "a.b=true").value is True
    assert override("--set", 'a.b="x y"').value == "x y"
    assert override("--set", "a.b=[3, 4]").value == [3, 4]
    assert override("--set", "a.b=adam").value == "adam"
    assert override("--set", "a.b=127.0.0.1").value == "127.0.0.1"
    assert override("--set", 'addresses.edges."0-1"=127.0.0.2').parts == (
        "addresses",
        "edges",
        "0-1",
    )


def test_an_override_that_does_not_read_is_refused_naming_it() -> None:
    for option, text in (
        ("--set", "learner"),
        ("--set", "=5"),
        ("--set", "a b=5"),
        ("--set", "a.b=x y"),
        ("--set", "a.b=1979-05-27"),
        ("--set", "a.b=1\nc = 2"),
        ("--set", "a.b\nc=1"),
    ):
        error = raises_exactly(PlanInvalid, override, option, text)
        assert str(error).startswith(f"{option} {text}: "), str(error)


def test_set_later_wins_and_tables_are_made() -> None:
    root: dict[str, object] = {"run": {"rounds": 3}}
    apply_overrides(root, overrides_of([("--rounds", "4"), ("--set", "run.rounds=5")]))
    apply_overrides(root, overrides_of([("--set", "learner.momentum=0.9")]))
    assert root == {"run": {"rounds": 5}, "learner": {"momentum": 0.9}}


def test_a_wrong_override_is_refused_as_a_wrong_key_naming_the_option() -> None:
    cases = {
        ("--set", "run.roundz=5"): "--set run.roundz=5: run.roundz: unknown key 'roundz' in "
        "[run]; did you mean 'rounds'? (its keys are name, rounds, epoch)",
        ("--set", "learnr.rate=0.1"): "--set learnr.rate=0.1: learnr: unknown table [learnr]; "
        "did you mean [learner]?",
        ("--rounds", "0"): "--rounds 0: run.rounds: must be in 1..",
        ("--roles", "x"): "--roles x: membership.roles: must be an integer",
        ("--set", "run.name.x=1"): "--set run.name.x=1: run.name: is a string",
    }
    for (option, text), start in cases.items():
        error = raises_exactly(
            PlanInvalid,
            parse_plan,
            DIGITS,
            source="p.toml",
            overrides=overrides_of([(option, text)]),
        )
        assert str(error).startswith(start), str(error)
        assert error.where == f"{option} {text}"


def test_roles_from_the_command_line_replace_the_plans_group() -> None:
    plan = parse_plan(DIGITS, overrides=overrides_of([("--set", "membership.roles=3")]))
    assert plan.participants == 3
    group = overrides_of([("--set", 'membership.group="(group (stride 0 1 2))"')])
    with_roles = _with(DIGITS, (GROUP8, "roles = 8"))
    assert parse_plan(with_roles, overrides=group).participants == 2
