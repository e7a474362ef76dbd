"""``alpha observe trace`` and ``alpha observe diff`` refusals, and ``--trace`` where the roles
run elsewhere (docs/trace.md, docs/cli.md): each exits 2 with one line naming what is wrong,
before anything runs. The commands on real traced runs: tests/system/test_traced_runs.py."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from alpha.app.cli import main
from alpha.app.trace_command import round_window
from alpha.exitcodes import EXIT_USAGE
from alpha.records.folder import TRACE_DIR, trace_name


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "digits", "--trace", "--deploy", "nodes.toml"],
        ["run", "digits", "--trace", "--slurm"],
        ["launch", ".", "--trace", "--deploy", "nodes.toml"],
    ],
)
def test_trace_is_for_roles_this_host_starts(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    assert "--trace traces roles this host starts" in _error(capsys)


def test_a_folder_without_traces_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["observe", "trace", str(tmp_path)]) == EXIT_USAGE
    assert "holds no trace" in _error(capsys)
    (tmp_path / TRACE_DIR).mkdir()
    (tmp_path / TRACE_DIR / trace_name(0)).write_bytes(b"not a trace" * 20)
    assert main(["observe", "trace", str(tmp_path)]) == EXIT_USAGE
    assert "is not a trace" in _error(capsys)
    other = tmp_path / "other"
    other.mkdir()
    assert main(["observe", "diff", str(tmp_path), str(other)]) == EXIT_USAGE
    assert "is not a trace" in _error(capsys)
    assert main(["observe", "diff", str(tmp_path), str(tmp_path)]) == EXIT_USAGE
    assert "one folder" in _error(capsys)


def test_a_window_of_rounds() -> None:
    assert round_window("3") == (3, 3)
    assert round_window("0:2") == (0, 2)
    for text in ("", "a", "2:1", "-1:2", "1:x"):
        with pytest.raises(argparse.ArgumentTypeError):
            round_window(text)
