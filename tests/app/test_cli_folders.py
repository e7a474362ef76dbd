"""The command line's folders, exits and JSON: one folder option spelled alike everywhere,
usage with no command, exit 130 on Ctrl-C, a folder held by one command at a time, nothing
half-written after an interrupt or a refusal, and ``--json`` on compile, launch and replicate.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import alpha.app.compile
from alpha.app.cli import build_parser, main
from alpha.app.run import DEFAULT_PLAN
from alpha.errors import FolderInUse
from alpha.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from alpha.files import LOCK_NAME, hold_folder
from harness.processes import running
from tests.support import ALPHA, ROOT

PAIR = DEFAULT_PLAN.parent / "pair.toml"  # a sum check of 2 roles, 4 rounds
COMMANDS = ("describe", "run", "replicate", "compile", "launch", "exchange", "checkpoint")


def _long_learner(tmp_path: Path) -> Path:
    """The default learner plan with enough rounds to be stopped in the middle (role 0 logs
    each round; a sum check logs none)."""
    plan = tmp_path / "long.toml"
    plan.write_text(DEFAULT_PLAN.read_text().replace("rounds = 30", "rounds = 100000"))
    return plan


def test_no_command_prints_the_whole_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: alpha")
    for command in COMMANDS:
        assert command in captured.err


@pytest.mark.parametrize("command", [["compile", "PLAN"], ["run"], ["exchange", "2", "1"]])
@pytest.mark.parametrize("spelling", ["-o", "--output", "--dir"])
def test_every_command_that_writes_a_folder_takes_it_under_the_same_names(
    command: list[str], spelling: str
) -> None:
    args = build_parser().parse_args([*command, spelling, "somewhere"])
    assert args.output == "somewhere"


@pytest.mark.parametrize("command", [["compile", str(PAIR)], ["run"], ["exchange", "2", "1"]])
def test_an_empty_folder_path_is_refused_and_nothing_is_written(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*command, "-o", ""]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "an empty path names no folder" in err
    assert list(tmp_path.iterdir()) == []


def test_a_refused_plan_leaves_no_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "bad.toml"
    plan.write_text(PAIR.read_text().replace('shape = "pair"', 'shape = "ring"'))
    assert main(["compile", str(plan), "-o", str(tmp_path / "out")]) == EXIT_USAGE
    assert "topology.shape" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _interrupt_after(count: int) -> object:
    def progress(done: int, total: int) -> None:
        if done == count:
            raise KeyboardInterrupt

    return progress


def test_an_interrupted_compile_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = DEFAULT_PLAN.parent / "tree.toml"
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(alpha.app.compile, "print_progress", _interrupt_after(2))
    assert main(["compile", str(tree), "-o", str(fresh)]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines()[-1] == (
        "compile: interrupted (SIGINT); removed the 3 file(s) this build wrote (artifacts and "
        "runtime); no run.json"
    )
    assert not fresh.exists(), "a folder the interrupted compile made is gone"

    # A compiled folder compiled again and interrupted: neither the old build (its run.json
    # would name artifacts that are gone) nor half the new one is left to launch.
    compiled = tmp_path / "compiled"
    monkeypatch.setattr(alpha.app.compile, "print_progress", lambda done, total: None)
    assert main(["compile", str(tree), "-o", str(compiled)]) == EXIT_OK
    (compiled / "notes.txt").write_text("the user's\n")
    monkeypatch.setattr(alpha.app.compile, "print_progress", _interrupt_after(2))
    assert main(["compile", str(tree), "-o", str(compiled)]) == EXIT_INTERRUPTED
    assert sorted(path.name for path in compiled.iterdir()) == [LOCK_NAME, "notes.txt"]
    capsys.readouterr()
    assert main(["launch", str(compiled)]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        f"alpha: error: {compiled} has no run.json; compile the plan into it first\n"
    )


def test_launch_names_a_compile_that_did_not_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Artifacts without run.json: what a compile killed outright (SIGKILL, a power cut) leaves.
    compiled = tmp_path / "compiled"
    assert main(["compile", str(PAIR), "-o", str(compiled)]) == EXIT_OK
    (compiled / "run.json").unlink()
    capsys.readouterr()
    assert main(["launch", str(compiled)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "has artifacts but no run.json: an alpha compile into it did not finish" in err
    assert not (compiled / "logs").exists(), "nothing ran"


def _holder(folder: Path) -> subprocess.Popen[str]:
    """Another process holding ``folder`` as an Alpha command does, until its stdin closes."""
    code = (
        "import sys; from pathlib import Path; from alpha.files import hold_folder\n"
        f"with hold_folder(Path({str(folder)!r}), 'alpha test'):\n"
        "    print('held', flush=True); sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _end(holder: subprocess.Popen[str]) -> None:
    holder.communicate()  # closes its stdin, which ends it if it is still running
    assert holder.returncode in (0, -signal.SIGKILL)


def test_a_folder_held_by_one_command_refuses_another_until_it_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    holder = _holder(folder)
    try:
        for argv in (
            ["compile", str(PAIR), "-o", str(folder)],
            ["run", "-o", str(folder)],
            ["exchange", "2", "1", "-o", str(folder)],
        ):
            assert main(argv) == EXIT_USAGE
            err = capsys.readouterr().err
            assert err == (
                f"alpha: error: {folder} is in use by alpha test (pid {holder.pid}): wait for "
                "it to end, or pass another folder with -o\n"
            )
        with pytest.raises(FolderInUse), hold_folder(folder, "this test"):
            pass
        assert [path.name for path in folder.iterdir()] == [LOCK_NAME], "nothing was written"
    finally:
        _end(holder)
    assert main(["compile", str(PAIR), "-o", str(folder)]) == EXIT_OK


def test_a_holder_killed_outright_leaves_the_folder_free(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    holder = _holder(folder)
    holder.kill()  # SIGKILL: no finally, no cleanup; the kernel drops the lock with the process
    _end(holder)
    with hold_folder(folder, "this test") as held:
        assert held == folder


def _when_round(log: Path, round_: int, within: float = 120.0) -> None:
    give_up = time.monotonic() + within
    while f"round {round_} " not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < give_up, f"no round {round_} in {log}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_launch_stopped_by_ctrl_c_exits_130_and_leaves_nothing_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compiled = tmp_path / "compiled"
    assert main(["compile", str(_long_learner(tmp_path)), "-o", str(compiled)]) == EXIT_OK
    launcher = subprocess.Popen(
        [*ALPHA, "launch", str(compiled), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal, whatever this test's own parent ignores.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _when_round(compiled / "logs" / "role-000000.log", 3)
        launcher.send_signal(signal.SIGINT)
        out, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
        launcher.wait()
    assert launcher.returncode == EXIT_INTERRUPTED == 130
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith("launch: interrupted (SIGINT); stopped all 8")
    assert "Traceback" not in err
    outcome = json.loads(out)
    assert (outcome["ok"], outcome["signal"], outcome["roles"]) == (False, "SIGINT", 8)
    assert running(compiled) == []
    assert not (compiled / "reports" / "commit.json").exists()


def test_compile_and_launch_print_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compiled = tmp_path / "compiled"
    assert main(["compile", str(PAIR), "-o", str(compiled), "--json"]) == EXIT_OK
    written = json.loads(capsys.readouterr().out)
    assert written["plan"] == "pair" and written["roles"] == [0, 1]
    assert written["participants"] == 2
    assert written["artifact_bytes"] == sum(p.stat().st_size for p in compiled.glob("*.pyz"))
    assert Path(written["run_json"]) == compiled / "run.json"
    assert main(["launch", str(compiled), "--json"]) == EXIT_OK
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["ok"] is True and outcome["first_failure"] is None
    assert outcome["roles"] == 2 and outcome["signal"] is None
    assert outcome["elapsed_s"] > 0


def test_replicate_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "short.toml"
    plan.write_text(DEFAULT_PLAN.read_text().replace("rounds = 30", "rounds = 3"))
    assert main(["replicate", str(plan)]) == EXIT_OK
    digest = capsys.readouterr().out.strip()
    assert main(["replicate", str(plan), "--json"]) == EXIT_OK
    found = json.loads(capsys.readouterr().out)
    assert found["digest"] == digest and found["rounds"] == 3


def test_the_lock_goes_with_its_process_not_its_file(tmp_path: Path) -> None:
    # The lock file stays; only a live holder makes the folder busy.
    folder = tmp_path / "run"
    with hold_folder(folder, "first"):
        (folder / "result").write_text("kept\n")
    assert (folder / LOCK_NAME).exists()
    with hold_folder(folder, "second"):
        assert (folder / LOCK_NAME).read_text() == f"second (pid {os.getpid()})\n"
