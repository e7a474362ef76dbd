"""The classes of failure ``alpha run --restarts`` retries and does not (docs/recovery.md):
every error of Alpha's in exactly one class, and a launch's first failure read from what the
launcher saw and the failed role's one line."""

from __future__ import annotations

import inspect
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha import errors
from alpha.errors import AlphaError, InputInvalid, PortMissing
from alpha.launch.outcome import RoleOutcome
from alpha.launch.recovery import FAILURE_CLASSES, RETRIED, classify, classify_error
from alpha.wire.console import failed_line

ALPHA_ERRORS = sorted(
    name
    for name, value in vars(errors).items()
    if inspect.isclass(value) and issubclass(value, AlphaError) and value is not AlphaError
)


@pytest.mark.parametrize("name", ALPHA_ERRORS)
def test_every_error_of_alphas_is_in_one_class(name: str) -> None:
    kind = classify_error(name)
    assert kind in FAILURE_CLASSES
    if issubclass(getattr(errors, name), InputInvalid):
        assert kind == "usage"  # a wrong input fails again, whatever attempt runs it


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("PeerLost", "lost"),
        ("LauncherLost", "lost"),
        ("NodeUnreachable", "lost"),
        ("PortMissing", "lost"),
        ("PortTaken", "lost"),  # the next attempt takes the next block of ports
        ("JobCancelled", "cancelled"),  # scancel: the run stays stopped
        ("JobTimeLimit", "cancelled"),  # no time is left in the allocation
        ("SlurmUnavailable", "usage"),
        ("Corrupted", "refused"),
        ("Forged", "refused"),
        ("Truncated", "refused"),
        ("Replayed", "refused"),
        ("WrongFrame", "refused"),
        ("RegionRefused", "refused"),
        ("BudgetExhausted", "budget"),
        ("LossNotFinite", "divergence"),
        ("PlanInvalid", "usage"),
        ("ArtifactInvalid", "usage"),
        ("CheckpointCorrupt", "usage"),
        ("CheckFailed", "error"),
        ("FrameIncomplete", "error"),
        ("CommitInvalid", "error"),
        ("CheckpointWriteFailed", "error"),
        ("ZeroDivisionError", "error"),  # not one of Alpha's: a bug, which recurs
        ("NoSuchName", "error"),
    ],
)
def test_each_class_by_the_exact_error(name: str, kind: str) -> None:
    assert classify_error(name) == kind
    assert (kind in RETRIED) == (kind in ("lost", "refused", "budget"))


def _logged(role: int, what: str, code: int = 1) -> RoleOutcome:
    return RoleOutcome(role, code, cause=failed_line(role, what), logged=True)


def test_a_roles_one_line_names_its_class() -> None:
    found = classify(_logged(3, "BudgetExhausted: no frame from role 1 within 5 s"))
    assert (found.kind, found.name, found.retried) == ("budget", "BudgetExhausted", True)
    found = classify(_logged(1, "LossNotFinite: the loss is nan in round 4"))
    assert (found.kind, found.retried) == ("divergence", False)


def test_an_abort_is_classed_by_its_origins_cause() -> None:
    aborted = errors.RoundAborted(
        role=2, peer=0, origin=1, cause="Corrupted", edge=(0, 1), round=3, detail="bad"
    )
    found = classify(_logged(2, errors.error_line(aborted)))
    assert (found.kind, found.name) == ("refused", "Corrupted")
    relayed = errors.RoundAborted(
        role=3, peer=1, origin=0, cause="LossNotFinite", edge=None, round=3, detail="nan"
    )
    assert classify(_logged(3, errors.error_line(relayed))).kind == "divergence"


def test_what_the_launcher_saw_without_a_line() -> None:
    killed = RoleOutcome(2, -signal.SIGKILL, cause="role 2 was killed by SIGKILL")
    assert classify(killed).kind == "lost"
    stopped = RoleOutcome(2, -signal.SIGKILL, cause="role 2 was stopped", stopped=True)
    assert classify(stopped).kind == "lost"
    assert classify(RoleOutcome(2, None, cause="status lost")).kind == "lost"
    assert classify(RoleOutcome(2, 2, cause="exited with code 2")).kind == "usage"
    assert classify(RoleOutcome(2, 1, cause="exited with code 1")).kind == "lost"
    own = RoleOutcome(1, 1, cause="no port", error=PortMissing("stdin ended"))
    assert (classify(own).kind, classify(own).name) == ("lost", "PortMissing")


def test_a_launch_with_no_failed_role_that_did_not_commit_is_not_retried() -> None:
    found = classify(None, "the run did not commit: a report is missing")
    assert (found.kind, found.retried) == ("error", False)


@given(
    role=st.integers(0, 10**6),
    peer=st.integers(0, 10**6),
    origin=st.integers(0, 10**6),
    cause=st.sampled_from(sorted(n for n in errors.__all__ if n != "RoundAborted")),
    detail=st.text(max_size=40),
)
def test_the_origin_an_abort_names_is_read_back_from_its_own_message(
    role: int, peer: int, origin: int, cause: str, detail: str
) -> None:
    aborted = errors.RoundAborted(
        role=role, peer=peer, origin=origin, cause=cause, edge=None, round=None, detail=detail
    )
    line = failed_line(role, errors.error_line(aborted))
    assert errors.RoundAborted.origin_in(line) == (origin, cause)
    assert errors.RoundAborted.origin_in(failed_line(role, f"{cause}: {detail}")) is None
