"""The command line: describe commands, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from alpha.app.cli import EXIT_OK, EXIT_USAGE, main
from alpha.app.compile import describe_role
from alpha.compiler.work_sum_check import exchange_plan
from alpha.errors import UsageError
from alpha.files import output_folder
from tests.support import ALPHA, PLANS, SECRET, run_alpha

REGULAR = "(group (repeat 625 320 (repeat 8 40 (repeat 2 20 (stride 0 1 20)))))"


def test_describe_group_prints_size_index_nodes_and_digest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["describe", "group", REGULAR, "--json"]) == EXIT_OK
    facts = json.loads(capsys.readouterr().out)
    assert facts["size"] == 200_000
    assert facts["index_nodes"] == 4
    assert facts["universe"] == 200_000
    assert len(bytes.fromhex(facts["digest"])) == 32
    assert facts["group"] == REGULAR


def test_describe_group_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "group", "(group (stride 0 1 8))", "--universe", "10"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "size         8" in out
    assert "index nodes  1" in out
    assert "universe     10" in out


def test_describe_tree_with_role(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "tree", "200000", "64", "--role", "0", "--json"]) == EXIT_OK
    facts = json.loads(capsys.readouterr().out)
    assert facts["depth"] == 3
    assert facts["level_sizes"][0] == 1
    assert facts["level_sizes"][1] == 64
    assert sum(facts["level_sizes"]) == 200_000
    assert len(facts["role"]["children"]) == 64
    assert facts["role"]["parent"] is None
    assert facts["role"]["subtree"] == [0, 199_999]


def test_describe_tree_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "tree", "13", "3", "--role", "6"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "depth        2" in out
    assert "parent       5" in out
    assert "path         0 -> 5 -> 6" in out


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["describe", "group", "(group (stride 0 1 0))"], "stride"),
        (["describe", "group", "(group (stride 0 1"], "expected"),
        (["describe", "group", "(group (stride 0 1 8))", "--universe", "4"], "universe"),
        (["describe", "group", "(group (stride 0 1 8))", "--universe", "x"], "--universe"),
        (["describe", "tree", "0", "3"], "0"),
        (["describe", "tree", "10", "0"], "fan"),
        (["describe", "tree", "10", "3", "--role", "10"], "10"),
        (["describe", "tree", "10"], "F"),
        (["describe", "shape"], "shape"),
    ],
)
def test_bad_arguments_print_one_line_and_exit_2(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("alpha")
    assert names.lower() in lines[0].lower()


def test_real_process_exit_code_and_no_traceback() -> None:
    bad = run_alpha("describe", "tree", "-5", "2")
    assert bad.returncode == EXIT_USAGE
    assert "Traceback" not in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    good = run_alpha("describe", "tree", "9", "2", "--role", "3")
    assert good.returncode == EXIT_OK, good.stderr
    assert "depth" in good.stdout


def test_an_output_folder_that_cannot_be_made_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    for folder in (blocker, blocker / "below"):
        with pytest.raises(UsageError):
            output_folder(folder)
    plans = PLANS
    for argv in (
        ["compile", str(plans / "pair.toml"), "-o", str(blocker)],
        ["run", str(plans / "digits.toml"), "--dir", str(blocker / "run")],
        ["exchange", "2", "1", "--dir", str(blocker)],
    ):
        assert main(argv) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith("alpha: error: cannot use ") and err.count("\n") == 1
    assert blocker.read_text() == "not a folder\n"


def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path) -> None:
    import signal

    plans = PLANS
    plan = tmp_path / "long.toml"
    plan.write_text((plans / "digits.toml").read_text().replace("rounds = 30", "rounds = 100000"))
    process = subprocess.Popen(
        [*ALPHA, "replicate", str(plan)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal, whatever this test's own parent ignores.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    first = process.stderr.readline()
    assert "round 1/100000" in first, first  # training, in the middle of its work
    process.send_signal(signal.SIGINT)
    out, err = process.communicate()
    assert process.returncode == 130  # 128 + SIGINT, as shells expect
    assert out == "" and err.splitlines()[-1] == "replicate: interrupted (SIGINT)"
    assert "Traceback" not in err


def test_launch_of_a_folder_of_role_descriptions_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Role descriptions alone are not launchable: a run is what `alpha compile` wrote.
    plan = exchange_plan(3, 2)
    for role in range(plan.participants):
        (tmp_path / f"role-{role:06d}.json").write_text(
            describe_role(plan, role, secret=SECRET).to_json()
        )
    assert main(["launch", str(tmp_path)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"alpha: error: {tmp_path} has no run.json; compile the plan into it first\n"
    )
    assert not (tmp_path / "logs").exists(), "nothing ran"


@pytest.mark.slow
def test_exchange_compiles_launches_and_checks_every_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["exchange", "3", "2", "--payload", "100"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "exchange: 2 of 2 edge(s) established once and checked both ways"
    )
    # A compiled run in the default folder, launchable again with `alpha launch`.
    folder = tmp_path / "runs" / "exchange-3-2"
    assert sorted(p.name for p in folder.glob("role-*")) == [f"role-{r:06d}.pyz" for r in range(3)]
    assert sorted(p.name for p in (folder / "reports").iterdir()) == [
        "commit.json",
        *(f"role-{r:06d}.json" for r in range(3)),
    ]
    record = json.loads((folder / "reports" / "commit.json").read_text())
    assert (record["participants"], record["rounds"]) == (3, 1)
    assert json.loads((folder / "run.json").read_text())["name"] == "exchange-3-2"
    assert main(["launch", str(folder)]) == EXIT_OK
