"""Runs varied from the command line, on real processes: ``alpha run``, ``alpha replicate`` and
``alpha compile`` with ``--roles``, ``--fanout``, ``--rounds`` and ``--set``."""

from __future__ import annotations

import json
from pathlib import Path

from alpha.errors import PlanInvalid
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from tests.support import PLANS, run_alpha

OVERRIDES = ("--roles", "4", "--fanout", "3", "--rounds", "3")


def _digest_row(out: str, name: str) -> str:
    (row,) = [line for line in out.splitlines() if line.startswith(name)]
    return row.split()[-1]


def test_an_overridden_run_equals_its_replicated_learner_and_records_the_overrides(
    tmp_path: Path,
) -> None:
    done = run_alpha("run", *OVERRIDES, "-o", str(tmp_path / "run"))
    assert done.returncode == EXIT_OK, done.stderr
    assert "4 participants on a tree of fan-out 3, 3 rounds" in done.stderr
    assert "equal bit for bit   yes" in done.stdout
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert recorded["participants"] == 4
    assert recorded["overrides"] == [
        {"option": "--roles", "key": "membership.roles", "value": 4},
        {"option": "--fanout", "key": "topology.fanout", "value": 3},
        {"option": "--rounds", "key": "run.rounds", "value": 3},
    ]
    replicated = run_alpha("replicate", "digits", *OVERRIDES)
    assert replicated.returncode == EXIT_OK, replicated.stderr
    assert replicated.stdout.strip() == _digest_row(done.stdout, "final parameters")


def test_an_overridden_compile_has_the_identity_of_the_file_that_writes_it(
    tmp_path: Path,
) -> None:
    text = (PLANS / "digits.toml").read_text(encoding="utf-8")
    written = tmp_path / "written.toml"
    written.write_text(
        text.replace("rounds = 30", "rounds = 5")
        .replace("fanout = 2", "fanout = 3")
        .replace("roles = 8", "roles = 4")
        .replace("rate = 0.15", "rate = 0.1"),
        encoding="utf-8",
    )
    sets = ("--set", "membership.roles=4", "--fanout", "3", "--rounds", "5")
    sets += ("--set", "learner.rate=0.1")
    runs = {}
    for name, argv in (
        ("overridden", ("digits", *sets)),
        ("written", (str(written),)),
        ("plain", ("digits",)),
    ):
        done = run_alpha("compile", *argv, "--roles", "0", "-o", str(tmp_path / name))
        assert done.returncode == EXIT_OK, done.stderr
        runs[name] = json.loads((tmp_path / name / "run.json").read_text())
    assert runs["overridden"]["identity"] == runs["written"]["identity"]
    assert runs["overridden"]["identity"] != runs["plain"]["identity"]
    assert runs["written"]["overrides"] == runs["plain"]["overrides"] == []
    assert [each["key"] for each in runs["overridden"]["overrides"]] == [
        "membership.roles",
        "topology.fanout",
        "run.rounds",
        "learner.rate",
    ]


def test_a_wrong_set_is_refused_as_a_plan_error(tmp_path: Path) -> None:
    for command in (("run", "-o", str(tmp_path / "x")), ("replicate",), ("compile", "-o", "y")):
        done = run_alpha(command[0], "digits", *command[1:], "--set", "run.roundz=5")
        assert done.returncode == EXIT_USAGE, done.stderr
        assert done.stderr == (
            "alpha: error: --set run.roundz=5: run.roundz: unknown key 'roundz' in [run]; did "
            "you mean 'rounds'? (its keys are name, rounds, epoch)\n"
        )
    assert not (tmp_path / "x").exists()


def test_a_wrong_override_is_the_plan_error_class(tmp_path: Path) -> None:
    # In-process, the class itself: the same refusal the plan file's key would get.
    from alpha.app.run import main_replicate
    from tests.support import raises_exactly

    error = raises_exactly(PlanInvalid, main_replicate, "digits", overrides=[("--rounds", "0")])
    assert error.where == "--rounds 0" and error.field == "run.rounds"


def test_a_plan_error_names_the_file_and_line(tmp_path: Path) -> None:
    text = (PLANS / "digits.toml").read_text(encoding="utf-8")
    path = tmp_path / "plan.toml"
    path.write_text(text.replace("rounds = 30", "roundz = 30"), encoding="utf-8")
    done = run_alpha("run", str(path), "-o", str(tmp_path / "x"))
    line = text.splitlines().index("rounds = 30") + 1
    assert done.returncode == EXIT_USAGE
    assert done.stderr == (
        f"alpha: error: {path}:{line}: run.roundz: unknown key 'roundz' in [run]; did you mean "
        "'rounds'? (its keys are name, rounds, epoch)\n"
    )


def test_run_json_refuses_overrides_that_are_not_a_plans(tmp_path: Path) -> None:
    from alpha.artifact.run_json import read_run_json, write_run_json
    from alpha.errors import ArtifactInvalid
    from tests.support import raises_exactly

    done = run_alpha("compile", "digits", "--rounds", "2", "--roles", "0", "-o", str(tmp_path))
    assert done.returncode == EXIT_OK, done.stderr
    good = read_run_json(tmp_path)
    assert good["overrides"] == [{"option": "--rounds", "key": "run.rounds", "value": 2}]
    for bad in (
        {"overrides": {"run.rounds": 2}},
        {"overrides": [{"option": "--rounds", "key": "run.rounds"}]},
        {"overrides": [{"option": "--fast", "key": "run.rounds", "value": 2}]},
        {"overrides": [{"option": "--set", "key": "", "value": 2}]},
    ):
        raises_exactly(ArtifactInvalid, write_run_json, tmp_path / "other", {**good, **bad})
