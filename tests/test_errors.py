"""The exception tree: two families under ``AlphaError``, each carrying the exit code of its
members, and the command line exiting with that code (docs/exit-codes.md)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from alpha import errors
from alpha.app.cli import build_parser, main
from alpha.errors import (
    AlphaError,
    ArtifactInvalid,
    BudgetExhausted,
    CheckFailed,
    CommitUnknown,
    Corrupted,
    EmptySelection,
    GroupSyntaxError,
    InputInvalid,
    LauncherLost,
    LossNotFinite,
    PeerLost,
    PlanInvalid,
    RegionRefused,
    RoleDescriptionInvalid,
    RoleOutOfRange,
    RoundAborted,
    RoundFailed,
    RunFailed,
    TreeSizeInvalid,
    UsageError,
)
from alpha.exitcodes import EXIT_FAILURE, EXIT_USAGE
from alpha.schedule.role import Edge

FAMILIES: dict[type[AlphaError], int] = {InputInvalid: EXIT_USAGE, RunFailed: EXIT_FAILURE}

# The specification of the tree: each exported class and its family. Moving a class to the
# other family changes the exit code of every command that stops on it, so it shows here.
INPUT = {
    "InputInvalid",
    "UsageError",
    "GroupSyntaxError",
    "AdmissionError",
    "EmptySelection",
    "OverlappingParts",
    "RoleOutsideUniverse",
    "IndexBudgetExceeded",
    "GroupFieldInvalid",
    "NotAMember",
    "OperationUnimplemented",
    "TopologyError",
    "TreeSizeInvalid",
    "FanoutInvalid",
    "RoleOutOfRange",
    "CoverageBroken",
    "IdentityError",
    "ContractInvalid",
    "IdentityPartInvalid",
    "LearnerInputInvalid",
    "RoleDescriptionInvalid",
    "ProtocolFailure",
    "ParticipantOutOfRange",
    "SelfTransfer",
    "RepeatBoundExceeded",
    "NoRealization",
    "ChoiceAuthorityInvalid",
    "SelectorNotAtAuthority",
    "DisseminationInvalid",
    "ChoiceUninformed",
    "RegionInvalid",
    "ProtocolRejected",
    "PlanInvalid",
    "ArtifactInvalid",
    "ArtifactExposed",
    "TargetMismatch",
    "EmulationUnavailable",
    "CheckpointCorrupt",
    "LearnerStateInvalid",
    "LearnerModuleInvalid",
    "ContractBroken",
    "DeployInvalid",
    "SlurmUnavailable",
    "FolderInUse",
    "DescriptorLimitTooLow",
    "CheckpointFolderHeld",
    "GenerationForeign",
    "GenerationNotFound",
    "KeyScheduleInvalid",
    "TraceInvalid",
    "TraceMismatch",
}
RUN = {
    "RunFailed",
    "FrameSpecInvalid",
    "FrameError",
    "FrameMisuse",
    "FrameIncomplete",
    "FrameRefused",
    "SlotFault",
    "WrongFrame",
    "WrongEdge",
    "IdentityMismatch",
    "Replayed",
    "SkippedVersion",
    "DoubleRearm",
    "VersionOverflow",
    "Corrupted",
    "Forged",
    "Truncated",
    "AbortInvalid",
    "TrailingBytes",
    "BudgetExhausted",
    "PeerLost",
    "RegionRefused",
    "CommitInvalid",
    "CommitUnknown",
    "ProgressRecordInvalid",
    "NodeUnreachable",
    "PortTaken",
    "SlurmJobEnded",
    "JobCancelled",
    "JobTimeLimit",
    "PortMissing",
    "LauncherLost",
    "WarmStarterLost",
    "WarmStarterStalled",
    "GpuUnavailable",
    "GenerationExists",
    "RoundFailed",
    "RoundAborted",
    "SelectorOutOfRange",
    "NoncanonicalWord",
    "CheckFailed",
    "LossNotFinite",
    "CheckpointError",
    "CheckpointWriteFailed",
}
ROUND = {
    "RoundFailed",
    "RoundAborted",
    "SelectorOutOfRange",
    "NoncanonicalWord",
    "CheckFailed",
    "LossNotFinite",
}

# The built-in bases callers catch (``except ValueError``, ``pytest.raises(LookupError)``):
# the families sit between AlphaError and each class without changing these.
BUILTIN_BASES: dict[str, set[type[Exception]]] = {
    "UsageError": {ValueError},
    "EmulationUnavailable": {RuntimeError},
    "GroupSyntaxError": {ValueError},
    "AdmissionError": {ValueError},
    "NotAMember": {LookupError},
    "TopologyError": {ValueError},
    "RoleOutOfRange": {ValueError, LookupError},
    "FrameSpecInvalid": {ValueError},
    "FrameIncomplete": {RuntimeError},
    "IdentityError": {ValueError},
    "RoleDescriptionInvalid": {ValueError},
    "CommitInvalid": {ValueError},
    "ProgressRecordInvalid": {ValueError},
    "ProtocolRejected": {ValueError},
    "PlanInvalid": {ValueError},
    "ArtifactInvalid": {ValueError},
    "ArtifactExposed": {ValueError},
    "CheckpointCorrupt": {ValueError},
    "DeployInvalid": {ValueError},
    "LearnerStateInvalid": {ValueError},
    "LearnerModuleInvalid": {ValueError},
    "ContractBroken": {ValueError},
    "GenerationForeign": {ValueError},
    "GenerationNotFound": {LookupError},
    "KeyScheduleInvalid": {ValueError},
    "TraceInvalid": {ValueError},
    "TraceMismatch": {ValueError},
}


def exported() -> list[type[AlphaError]]:
    classes = [getattr(errors, name) for name in errors.__all__]
    assert all(issubclass(each, AlphaError) for each in classes)
    return [each for each in classes if each is not AlphaError]


def defined() -> list[type[AlphaError]]:
    """Every error class alpha/errors.py defines, exported or not."""
    return [
        each
        for each in vars(errors).values()
        if isinstance(each, type)
        and issubclass(each, AlphaError)
        and each.__module__ == errors.__name__
        and each is not AlphaError
    ]


def test_alpha_error_has_two_families_with_their_exit_codes() -> None:
    below = {each for each in defined() if each.__bases__ == (AlphaError,)}
    assert below == set(FAMILIES)
    assert InputInvalid.exit_code == EXIT_USAGE == 2
    assert RunFailed.exit_code == EXIT_FAILURE == 1
    assert issubclass(RoundFailed, RunFailed)


def test_the_table_names_every_exported_class_once() -> None:
    names = {each.__name__ for each in exported()}
    assert not INPUT & RUN
    assert names == INPUT | RUN


@pytest.mark.parametrize("cls", exported(), ids=lambda cls: cls.__name__)
def test_every_exported_class_is_in_its_family_and_has_its_exit_code(
    cls: type[AlphaError],
) -> None:
    family = InputInvalid if cls.__name__ in INPUT else RunFailed
    assert [each for each in FAMILIES if issubclass(cls, each)] == [family]
    assert cls.exit_code == FAMILIES[family]
    assert issubclass(cls, RoundFailed) == (cls.__name__ in ROUND)


@pytest.mark.parametrize("cls", defined(), ids=lambda cls: cls.__name__)
def test_every_defined_class_is_in_exactly_one_family(cls: type[AlphaError]) -> None:
    (family,) = [each for each in FAMILIES if issubclass(cls, each)]
    assert cls.exit_code == FAMILIES[family]
    if cls not in FAMILIES:
        assert "exit_code" not in vars(cls)  # a member never overrides its family's code


@pytest.mark.parametrize("cls", exported(), ids=lambda cls: cls.__name__)
def test_the_builtin_bases_stay(cls: type[AlphaError]) -> None:
    builtins = {
        base
        for base in cls.__mro__
        if base.__module__ == "builtins" and base not in (Exception, BaseException, object)
    }
    expected: set[type[Exception]] = set()
    for base in cls.__mro__:
        expected |= BUILTIN_BASES.get(base.__name__, set())
    assert builtins == expected


# --- the command line ---------------------------------------------------------------------


def raised_by(argv: list[str]) -> AlphaError:
    """What the command line handles when it runs ``argv``: main() parses, calls the handler
    and turns an AlphaError into one line and its family's exit code."""
    with pytest.raises(AlphaError) as caught:
        args = build_parser().parse_args(argv)
        args.handler(args)
    return caught.value


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("alpha: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "cls"),
    [
        (["describe", "group", "(bad"], GroupSyntaxError),
        (["describe", "group", "(group (stride 0 1 0))"], EmptySelection),
        (["describe", "tree", "0", "3"], TreeSizeInvalid),
        (["describe", "tree", "10", "3", "--role", "10"], RoleOutOfRange),
        (["describe", "tree", "10", "3", "--colour"], UsageError),
        (["compile", "no-such-plan.toml", "-o", "never-made"], PlanInvalid),
    ],
)
def test_an_input_error_from_a_real_command_exits_2(
    argv: list[str],
    cls: type[AlphaError],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert type(raised_by(argv)) is cls
    assert not Path("never-made").exists()
    capsys.readouterr()
    assert main(argv) == EXIT_USAGE
    one_line_error(capsys)


def test_a_launch_folder_that_is_not_a_run_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert type(raised_by(["launch", str(empty)])) is ArtifactInvalid  # no run.json
    compiled = tmp_path / "compiled"
    compiled.mkdir()
    (compiled / "run.json").write_text("{not json\n")
    assert type(raised_by(["launch", str(compiled)])) is ArtifactInvalid
    capsys.readouterr()
    for folder in (empty, compiled):
        assert main(["launch", str(folder)]) == EXIT_USAGE
        one_line_error(capsys)
    assert not (empty / "logs").exists() and not (compiled / "logs").exists()  # nothing ran


# No real command lets a run's failure reach main() as an error: `run`, `launch` and `exchange`
# turn a failed participant into EXIT_FAILURE themselves. So `replicate` is given a handler
# that stops on a real error of each part of the run family.
RUN_ERRORS = [
    Corrupted("the trailer differs", role=1, peer=0, slot=4, version=7, field="trailer"),
    BudgetExhausted(role=1, peer=0, step="receiving a frame", budget="receive", seconds=2.0),
    PeerLost(role=1, peer=0, step="sending its frame", cause="connection reset"),
    RegionRefused(role=1, peer=0, sender=1, receiver=0, path="/dev/shm/alpha-x", why="it is gone"),
    RoundAborted(
        role=1, peer=0, origin=2, cause="Corrupted", edge=(2, 0), round=3, detail="bad trailer"
    ),
    CheckFailed("role 1: round 2: the sum is 5, not 6"),
    LossNotFinite(role=0, round=20, loss=float("inf")),
    CommitUnknown("role 1 cannot learn whether the run committed"),
    LauncherLost(launcher=4242, parent=1),
]


@pytest.mark.parametrize("error", RUN_ERRORS, ids=lambda error: type(error).__name__)
def test_a_run_failure_exits_1_with_its_message(
    error: RunFailed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(plan_path: str, *, as_json: bool = False, overrides: object = None) -> int:
        raise error

    monkeypatch.setattr("alpha.app.run.main_replicate", fails)
    assert type(raised_by(["replicate", "plan.toml"])) is type(error)
    assert main(["replicate", "plan.toml"]) == EXIT_FAILURE
    assert one_line_error(capsys) == "alpha: error: " + " ".join(str(error).split())


def test_an_input_error_raised_anywhere_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The code comes from the class, not from a list of classes in the command line.
    def fails(plan_path: str, *, as_json: bool = False, overrides: object = None) -> int:
        raise errors.TargetMismatch("built for aarch64, started on x86_64")

    monkeypatch.setattr("alpha.app.run.main_replicate", fails)
    assert main(["replicate", "plan.toml"]) == EXIT_USAGE
    one_line_error(capsys)


# --- translations keep a cause the message does not carry ---------------------------------


def test_an_address_refusal_keeps_why_the_address_is_wrong() -> None:
    with pytest.raises(RoleDescriptionInvalid) as caught:
        Edge(peer=1, address="10.0.0.256")
    assert type(caught.value) is RoleDescriptionInvalid
    assert "'10.0.0.256'" in str(caught.value)
    assert type(caught.value.__cause__) is ipaddress.AddressValueError
    assert "256" in str(caught.value.__cause__)
