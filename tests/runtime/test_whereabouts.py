"""Every spent budget of a participant is built by its whereabouts, naming the role, the peer,
the step and the round alike (``Whereabouts.exhausted``)."""

from __future__ import annotations

import pytest

from alpha.errors import BudgetExhausted
from alpha.runtime.whereabouts import COMPLETING, RUNNING, Whereabouts


@pytest.mark.parametrize(
    ("phase", "round", "when"),
    [
        (None, None, "before the first round"),
        (RUNNING, 4, "round 4"),
        (COMPLETING, 29, "after round 29, completing the run"),
    ],
)
def test_a_spent_budget_names_the_role_peer_step_and_round(
    phase: str | None, round: int | None, when: str
) -> None:
    where = Whereabouts(3)
    if phase is not None:
        where.phase = phase
    where.round = round
    where.at("receiving 'w' from role 1", 1)
    error = where.exhausted("receive", 0.5, peer=1)
    assert type(error) is BudgetExhausted
    assert (error.role, error.peer, error.budget, error.seconds) == (3, 1, "receive", 0.5)
    assert (error.step, error.when) == ("receiving 'w' from role 1", when)
    assert str(error) == (
        f"role 3 waited for role 1 past its receive budget (0.5 s) while it was receiving 'w' "
        f"from role 1 ({when}); check that role 1 started, is running and is reachable, or "
        "raise budgets.receive in the plan"
    )


def test_a_wait_on_no_one_peer_or_at_another_step() -> None:
    where = Whereabouts(0)
    where.at("binding the listener for role 2")
    error = where.exhausted("deadline", 600.0, peer=None, step="announcing ports")
    assert (error.peer, error.step, error.budget) == (None, "announcing ports", "deadline")
    assert "waited past its deadline budget (600 s)" in str(error)
    assert where.step == "binding the listener for role 2", "building the refusal moves nothing"
