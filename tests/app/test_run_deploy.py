"""``alpha run --deploy`` before anything runs (alpha.app._remote_run): a wrong deployment, or
``--ssh-option`` without one, is one line before any folder is made; before each attempt a
node that does not answer is replaced by the next spare that does, each replacement one line.
The runs themselves are tests/system/test_remote_run.py's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from alpha.app import _remote_run
from alpha.app._remote_run import Deployed
from alpha.app.cli import main
from alpha.errors import NodeUnreachable
from alpha.exitcodes import EXIT_USAGE
from alpha.launch.deploy import Node, parse_deployment
from tests.support import plan_text


def _nodes(prefix: str, count: int) -> list[dict[str, object]]:
    return [
        {
            "pod_id": f"{prefix}-{k}",
            "host": f"10.0.0.{k + 1}" if prefix == "node" else f"10.0.1.{k + 1}",
            "port": 22,
            "ssh_key": "/keys/id_ed25519",
            "minor": 0,
        }
        for k in range(count)
    ]


def _deployment(nodes: int, spares: int = 0) -> str:
    return json.dumps(
        {
            "transport": "ssh-tunnel",
            "remote_root": "/tmp/alpha-run-deploy",
            "nodes": _nodes("node", nodes),
            "spares": _nodes("spare", spares),
        }
    )


def _plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        plan_text(
            "deployed",
            roles=3,
            rounds=2,
            topology={"shape": "tree", "fanout": 2},
            work={"kind": "learn"},
            learner={"kind": "linear", "rate": 0.05, "batch": 8},
        )
    )
    return path


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_wrong_deployment_or_an_ssh_option_without_one_is_refused_before_any_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, out = _plan(tmp_path), tmp_path / "run"
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--ssh-option=-v"])
    assert line == "alpha: error: run: --ssh-option is for ssh calls, which only --deploy makes"
    two = tmp_path / "two.json"
    two.write_text(_deployment(2))
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--deploy", str(two)])
    assert line.startswith("alpha: error: nodes: ") and "lists 2 node(s), but the run has 3" in line
    bad = tmp_path / "bad.json"
    bad.write_text(_deployment(3, 1).replace('"port": 22', '"port": 0'))
    line = _refused(capsys, ["run", str(plan), "-o", str(out), "--deploy", str(bad)])
    assert line.startswith("alpha: error: nodes[0].port: ")
    assert not out.exists()


def _answers(gone: dict[str, str]) -> tuple[list[list[str]], object]:
    """A stand-in for probe_nodes: every node answers but those ``gone`` names (pod_id: why);
    also the pod_ids of each call, in order."""
    asked: list[list[str]] = []

    def probe(nodes: Sequence[Node], extra: Sequence[str] = ()) -> dict[Node, str | None]:
        asked.append([node.pod_id for node in nodes])
        return {node: gone.get(node.pod_id) for node in nodes}

    return asked, probe


def test_a_gone_node_is_replaced_by_the_next_spare_that_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployed = Deployed(parse_deployment(_deployment(3, 2)), "d.json")
    asked, probe = _answers({"node-1": "ssh: refused", "spare-0": "ssh: timed out"})
    monkeypatch.setattr(_remote_run, "probe_nodes", probe)
    said: list[str] = []
    placed = deployed.place(drop=False, say=said.append)
    assert [node.pod_id for node in placed.nodes] == ["node-0", "spare-1", "node-2"]
    # The nodes in use at once; each spare asked before it is used.
    assert asked == [["node-0", "node-1", "node-2"], ["spare-0"], ["spare-1"]]
    assert said == [
        "node node-1 does not answer (ssh: refused); spare spare-0 takes role 1",
        "node spare-0 does not answer (ssh: timed out); spare spare-1 takes role 1",
    ]
    # The next attempt starts from where this one placed its roles.
    asked.clear()
    assert deployed.place(drop=False, say=said.append) == placed
    assert asked == [["node-0", "spare-1", "node-2"]]


def test_with_no_spare_left_the_placement_is_kept_and_the_node_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployed = Deployed(parse_deployment(_deployment(3)), "d.json")
    before = deployed.placement
    _, probe = _answers({"node-2": "ssh: refused"})
    monkeypatch.setattr(_remote_run, "probe_nodes", probe)
    with pytest.raises(NodeUnreachable) as caught:
        deployed.place(drop=False, say=print)
    assert type(caught.value) is NodeUnreachable
    assert str(caught.value).startswith("node node-2 (10.0.0.3 port 22) does not answer")
    assert deployed.placement == before
    said: list[str] = []
    placed = deployed.place(drop=True, say=said.append)
    assert [node.pod_id for node in placed.nodes] == ["node-0", "node-1"]
    assert said == [
        "node node-2 does not answer (ssh: refused) and no spare is left: the attempt runs on "
        "2 role(s), without role 2 (recovery.lost_role = 'drop')"
    ]


def test_the_summary_names_the_nodes_of_each_attempt() -> None:
    from alpha.app.run import RunSummary, _summary_rows
    from alpha.compiler.plan import parse_plan

    plan = parse_plan(
        plan_text(
            "deployed",
            roles=2,
            rounds=2,
            topology={"shape": "tree", "fanout": 2},
            work={"kind": "learn"},
            learner={"kind": "linear", "rate": 0.05},
        )
    )
    attempts: list[dict[str, object]] = [
        {"attempt": 0, "failure": "lost", "nodes": ["node-0", "node-1"]},
        {"attempt": 1, "failure": "", "nodes": ["node-0", "spare-0"]},
    ]
    summary = RunSummary(True, "ab", "ab", 0.5, 1.0, None, attempts=attempts)
    rows = dict(_summary_rows(plan, summary))
    assert rows["nodes of attempt 0"] == "node-0 node-1"
    assert rows["nodes of attempt 1"] == "node-0 spare-0"
    summary.attempts = attempts[:1]
    assert dict(_summary_rows(plan, summary))["nodes"] == "node-0 node-1"
    summary.attempts = [{"attempt": 0, "failure": "", "nodes": None}]  # on this host
    assert "nodes" not in dict(_summary_rows(plan, summary))
