"""The command line's small promises (issue 24): a suggestion for an unknown word, gates chosen
by pattern, defaults and ``--json`` keys as the help and docs say, and a bad ``--resume`` or
``--roles`` told in one line for what it is."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from alpha.app.cli import build_parser, main
from alpha.errors import UsageError
from alpha.exitcodes import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]


def _subparser(name: str) -> argparse.ArgumentParser:
    """The parser of the command ``name``."""
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[name]
    return found


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    (action,) = (a for a in parser._actions if flag in a.option_strings)
    return action


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line ``alpha ARGV`` prints on stderr, after checking it exits 2."""
    assert main(argv) == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured
    assert lines[0].startswith("alpha: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "word", "meant"),
    [
        (["rnu"], "rnu", "run"),
        (["complie", "x"], "complie", "compile"),
        (["describe", "tre", "3", "2"], "tre", "tree"),
        (["checkpoint", "verfy", "x"], "verfy", "verify"),
    ],
)
def test_an_unknown_command_is_told_the_nearest_one(
    capsys: pytest.CaptureFixture[str], argv: list[str], word: str, meant: str
) -> None:
    line = _error(capsys, argv)
    assert f"invalid choice: {word!r}; did you mean {meant!r}? (choose from " in line, line


def test_a_word_near_no_command_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, ["zzzz"])
    assert "invalid choice: 'zzzz'" in line and "did you mean" not in line


def test_a_gate_pattern_chooses_every_gate_it_matches_once_in_catalogue_order() -> None:
    from gates.catalogue import GATES
    from gates.run import select

    frames = [gate for gate in GATES if gate.family == "frames"]
    assert len(frames) > 1 and select(["frames.*"], None) == frames
    both = select(["connection.*", "*.late-peer", "frames.replay"], None)
    assert both == [g for g in GATES if g.family == "connection" or g.name == "frames.replay"]
    assert select(["frames.*"], (1, 2)) == frames[::2]


def test_an_unknown_gate_or_pattern_is_named_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gates.run import select

    with pytest.raises(KeyError) as info:
        select(["frames.*", "frams.*"], None)
    assert type(info.value) is KeyError
    assert info.value.args[0] == (
        "no gate matches the pattern 'frams.*' (`alpha observe gate --list` lists them); "
        "did you mean 'frames.*'?"
    )
    assert _error(capsys, ["observe", "gate", "frames.replya"]) == (
        "alpha: error: observe gate: no gate named 'frames.replya' (`alpha observe gate --list` "
        "lists them); did you mean 'frames.replay'?"
    )
    assert _error(capsys, ["observe", "gate", "zzz*"]) == (
        "alpha: error: observe gate: no gate matches the pattern 'zzz*' (`alpha observe gate "
        "--list` lists them)"
    )


def test_the_list_shows_what_a_pattern_chooses(capsys: pytest.CaptureFixture[str]) -> None:
    from gates.catalogue import GATES

    assert main(["observe", "gate", "identity.*", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [gate.name for gate in GATES if gate.family == "identity"]


def test_the_exchange_payload_default_is_the_one_the_docs_and_help_give() -> None:
    parser = _subparser("exchange")
    default = _option(parser, "--payload").default
    assert default == 4096  # what `alpha exchange N F` sends when given no --payload
    assert f"(default {default})" in parser.format_help()
    cli = (ROOT / "docs" / "cli.md").read_text()
    section = cli[cli.index("## `alpha exchange") :].split("\n## ")[0]
    assert re.findall(r"each way per edge \(default (\d+)\)", section) == [str(default)]
    launch = (ROOT / "docs" / "launch.md").read_text()
    assert re.findall(r"`alpha exchange`'s default (\d+)", launch) == [str(default)]
    readme = (ROOT / "README.md").read_text()
    assert re.findall(r"a checked (\d+)-byte payload", readme) == [str(default)]


def test_replicate_json_help_names_the_keys_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from alpha.app.run import DEFAULT_PLAN

    plan = tmp_path / "short.toml"
    plan.write_text(DEFAULT_PLAN.read_text().replace("rounds = 30", "rounds = 2"))
    assert main(["replicate", str(plan), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    help_text = " ".join(str(_option(_subparser("replicate"), "--json").help).split())
    named = re.findall(r"print (.*) as one JSON object", help_text)[0]
    assert sorted(re.split(r", | and ", named.replace(" (done)", ""))) == sorted(printed)


def test_a_resume_path_that_does_not_exist_is_told_so_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import alpha.app.run

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(alpha.app.run, "load_plan", must_not_run)
    folder, missing = tmp_path / "out", tmp_path / "nonexistent"
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nothing")
    for path in (missing, dangling):
        line = _error(capsys, ["run", "--resume", str(path), "-o", str(folder)])
        assert line == (
            f"alpha: error: run: argument --resume: {str(path)!r} does not exist; give a "
            "checkpoint folder or one of its generation folders (docs/checkpoints.md)"
        )
    assert not folder.exists()
    with pytest.raises(UsageError) as info:
        build_parser().parse_args(["run", "--resume", str(missing)])
    assert type(info.value) is UsageError


def test_a_reversed_roles_range_is_told_reversed_not_outside_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from alpha.app.compile import parse_roles
    from alpha.app.run import DEFAULT_PLAN

    folder = tmp_path / "out"
    plan = DEFAULT_PLAN.parent / "tree.toml"  # 13 roles
    line = _error(capsys, ["compile", str(plan), "-o", str(folder), "--roles", "0,5-2"])
    assert line == "alpha: error: --roles: '5-2' is a reversed range: its low end comes first (2-5)"
    assert not folder.exists()
    with pytest.raises(UsageError) as info:
        parse_roles("5-2", 13)
    assert type(info.value) is UsageError
    # A range in order is still checked against the run, at its ends.
    assert parse_roles("2-5,12", 13) == [2, 3, 4, 5, 12]
    with pytest.raises(UsageError, match=r"outside the run's roles 0\.\.12$"):
        parse_roles("2-13", 13)
