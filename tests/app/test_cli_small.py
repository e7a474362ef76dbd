"""The command line's small promises (issue 24): a suggestion for an unknown word, gates chosen
by pattern, defaults and ``--json`` keys as the help and docs say, and a bad ``--resume`` or
``--roles`` told in one line for what it is."""

from __future__ import annotations

import pytest

from alpha.app.cli import main
from alpha.exitcodes import EXIT_USAGE


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
