"""Deployment files (alpha.launch.deploy): the format, every refusal by its field, the command
that checks one, and how a spare takes a gone node's roles."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.app.cli import main
from alpha.errors import DeployInvalid, NodeUnreachable
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from alpha.launch.deploy import Node, Placement, load_deployment, parse_deployment, replace_gone

GOOD: dict[str, Any] = {
    "transport": "ssh-tunnel",
    "remote_root": "/tmp/alpha-hybrid-your-unique-run",
    "nodes": [
        {
            "pod_id": "owned-coordinator-pod",
            "host": "root@10.0.0.1",
            "port": 12345,
            "ssh_key": "/keys/id_ed25519",
            "minor": 0,
        },
        {
            "pod_id": "owned-worker-pod",
            "host": "worker.example",
            "port": 23456,
            "ssh_key": "/keys/id_ed25519",
            "minor": 2,
        },
    ],
}


def test_a_deployment_is_read_in_role_order_and_reversing_swaps_the_machines() -> None:
    deployment = parse_deployment(json.dumps(GOOD))
    assert deployment.transport == "ssh-tunnel"
    assert deployment.node(0) == Node("owned-coordinator-pod", "root@10.0.0.1", 12345,
                                      "/keys/id_ed25519", 0)  # fmt: skip
    reversed_ = copy.deepcopy(GOOD)
    reversed_["nodes"].reverse()
    swapped = parse_deployment(json.dumps(reversed_))
    assert swapped.node(0) == deployment.node(1) and swapped.node(1) == deployment.node(0)
    deployment.require_roles(2)
    with pytest.raises(DeployInvalid) as caught:
        deployment.require_roles(3)
    assert caught.value.field == "nodes"


def _spare(index: int) -> dict[str, Any]:
    return {
        "pod_id": f"spare-{index}",
        "host": f"10.0.1.{index + 1}",
        "port": 22,
        "ssh_key": "/keys/id_ed25519",
        "minor": 0,
    }


WITH_SPARES: dict[str, Any] = {**GOOD, "spares": [_spare(0), _spare(1)]}


def _with(path: str, value: object, base: dict[str, Any] = GOOD) -> str:
    data = copy.deepcopy(base)
    target: Any = data
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is KeyError:
        del target[int(last) if last.isdigit() else last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("transport", "tcp", "transport"),
        ("transport", KeyError, "transport"),
        ("remote_root", "relative/run", "remote_root"),
        ("remote_root", "/tmp/../etc", "remote_root"),
        ("remote_root", "/", "remote_root"),
        ("nodes", [], "nodes"),
        ("nodes.1", "worker", "nodes[1]"),
        ("nodes.1.port", 0, "nodes[1].port"),
        ("nodes.1.port", 65536, "nodes[1].port"),
        ("nodes.1.port", "22", "nodes[1].port"),
        ("nodes.0.host", "-oProxyCommand=touch /tmp/x", "nodes[0].host"),
        ("nodes.0.host", "root@host name", "nodes[0].host"),
        ("nodes.0.host", "", "nodes[0].host"),
        ("nodes.0.pod_id", "-pod", "nodes[0].pod_id"),
        ("nodes.0.ssh_key", "id_ed25519", "nodes[0].ssh_key"),
        ("nodes.0.minor", -1, "nodes[0].minor"),
        ("nodes.0.minor", True, "nodes[0].minor"),
        ("nodes.0.extra", 1, "nodes[0].extra"),
        ("nodes.0.minor", KeyError, "nodes[0].minor"),
        ("coordinator", "x", "coordinator"),
    ],
)
def test_every_wrong_field_is_named(path: str, value: object, field: str) -> None:
    with pytest.raises(DeployInvalid) as caught:
        parse_deployment(_with(path, value))
    assert type(caught.value) is DeployInvalid
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_spares_are_optional_and_read_in_their_order() -> None:
    assert parse_deployment(json.dumps(GOOD)).spares == ()
    assert parse_deployment(json.dumps({**GOOD, "spares": []})).spares == ()
    spares = parse_deployment(json.dumps(WITH_SPARES)).spares
    assert spares == (
        Node("spare-0", "10.0.1.1", 22, "/keys/id_ed25519", 0),
        Node("spare-1", "10.0.1.2", 22, "/keys/id_ed25519", 0),
    )


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spares", "spare-0", "spares"),
        ("spares", {}, "spares"),
        ("spares", None, "spares"),
        ("spares.0", "worker", "spares[0]"),
        ("spares.1.port", 0, "spares[1].port"),
        ("spares.0.port", 65536, "spares[0].port"),
        ("spares.0.host", "-oProxyCommand=touch /tmp/x", "spares[0].host"),
        ("spares.0.host", "root@host name", "spares[0].host"),
        ("spares.0.pod_id", "-pod", "spares[0].pod_id"),
        ("spares.0.ssh_key", "id_ed25519", "spares[0].ssh_key"),
        ("spares.0.minor", True, "spares[0].minor"),
        ("spares.0.extra", 1, "spares[0].extra"),
        ("spares.1.minor", KeyError, "spares[1].minor"),
        # A spare is named by its pod_id alone in what a run prints: no two may share one.
        ("spares.0.pod_id", "owned-worker-pod", "spares[0].pod_id"),
        ("spares.1.pod_id", "spare-0", "spares[1].pod_id"),
    ],
)
def test_every_wrong_spare_field_is_named(path: str, value: object, field: str) -> None:
    with pytest.raises(DeployInvalid) as caught:
        parse_deployment(_with(path, value, WITH_SPARES))
    assert type(caught.value) is DeployInvalid
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def _node(name: str) -> Node:
    return Node(name, "10.0.0.9", 22, "/keys/id_ed25519", 0)


A, B, C, S0, S1 = (_node(name) for name in ("a", "b", "c", "spare-0", "spare-1"))


def test_a_spare_takes_every_role_of_a_gone_node_and_spares_go_in_order() -> None:
    placement = Placement((A, B, C, B), (S0, S1))
    assert placement.in_use() == (A, B, C)
    replaced = replace_gone(placement, B, "ssh: refused", drop=True)
    assert replaced.spare == S0 and replaced.roles == (1, 3)
    assert replaced.placement == Placement((A, S0, C, S0), (S1,))
    again = replace_gone(replaced.placement, S0, "ssh: refused", drop=False)
    assert (again.spare, again.roles) == (S1, (1, 3))
    assert again.placement == Placement((A, S1, C, S1), ())


def test_with_no_spare_left_drop_runs_the_remaining_roles_on_their_nodes_in_order() -> None:
    replaced = replace_gone(Placement((A, B, C), ()), B, "ssh: refused", drop=True)
    assert replaced.spare is None and replaced.roles == (1,)
    assert replaced.placement == Placement((A, C), ())
    with pytest.raises(NodeUnreachable) as caught:
        replace_gone(Placement((A, A), ()), A, "ssh: refused", drop=True)
    assert type(caught.value) is NodeUnreachable and "no other node is left" in str(caught.value)


def test_with_no_spare_left_and_no_drop_the_gone_node_is_one_clear_error() -> None:
    with pytest.raises(NodeUnreachable) as caught:
        replace_gone(
            Placement((A, B, B), ()),
            B,
            "ssh: connect to host: refused",
            drop=False,
            source="d.json",
        )
    assert type(caught.value) is NodeUnreachable
    assert str(caught.value).startswith(
        "node b (10.0.0.9 port 22) does not answer (ssh: connect to host: refused) and no spare "
        'is left to take roles 1, 2: add a node to "spares" in d.json (docs/deploy.md)'
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)
FIELDS = ["transport", "remote_root", "nodes", "nodes.0", "nodes.1.port", "nodes.0.host",
          "nodes.1.pod_id", "nodes.0.ssh_key", "nodes.1.minor"]  # fmt: skip


@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_with_deploy_invalid(text: str) -> None:
    with contextlib.suppress(DeployInvalid):
        parse_deployment(text)


@given(st.sampled_from(FIELDS), JSON)
def test_any_value_anywhere_is_read_or_refused_at_its_field(path: str, value: object) -> None:
    try:
        parse_deployment(_with(path, value))
    except DeployInvalid as error:
        wanted = path.replace(".0", "[0]").replace(".1", "[1]")
        assert error.field.startswith(wanted), (error.field, wanted)


SPARE_FIELDS = ["spares", "spares.0", "spares.1.port", "spares.0.host", "spares.1.pod_id",
                "spares.0.ssh_key", "spares.1.minor"]  # fmt: skip


@given(st.sampled_from(SPARE_FIELDS), JSON)
def test_any_value_in_a_spare_is_read_or_refused_at_its_field(path: str, value: object) -> None:
    try:
        parse_deployment(_with(path, value, WITH_SPARES))
    except DeployInvalid as error:
        wanted = path.replace(".0", "[0]").replace(".1", "[1]")
        assert error.field.startswith(wanted), (error.field, wanted)


@given(st.from_regex(r"-[A-Za-z]{1,10}.*", fullmatch=True))
def test_a_host_that_could_be_an_ssh_option_is_refused(host: str) -> None:
    with pytest.raises(DeployInvalid) as caught:
        parse_deployment(_with("nodes.0.host", host))
    assert caught.value.field == "nodes[0].host"


def test_the_describe_command_checks_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "deploy.json"
    good.write_text(json.dumps(GOOD))
    assert main(["describe", "deploy", str(good), "--json"]) == EXIT_OK
    facts = json.loads(capsys.readouterr().out)
    assert [r["pod_id"] for r in facts["roles"]] == ["owned-coordinator-pod", "owned-worker-pod"]
    assert facts["spares"] == []
    assert load_deployment(good).nodes[1].minor == 2
    bad = tmp_path / "bad.json"
    bad.write_text(_with("nodes.1.port", 0))
    assert main(["describe", "deploy", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("alpha: error: nodes[1].port: ") and "\n" not in err
    assert main(["describe", "deploy", "/dev/zero"]) == EXIT_USAGE
    assert "not a regular file" in capsys.readouterr().err


def test_the_describe_command_lists_the_spares_in_their_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps(WITH_SPARES))
    assert main(["describe", "deploy", str(path), "--json"]) == EXIT_OK
    assert [s["pod_id"] for s in json.loads(capsys.readouterr().out)["spares"]] == [
        "spare-0",
        "spare-1",
    ]
    assert main(["describe", "deploy", str(path)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines[-2:]] == [
        ["spare", "0", "spare-0"],
        ["spare", "1", "spare-1"],
    ]
