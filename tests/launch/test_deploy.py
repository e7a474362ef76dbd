"""Deployment files (alpha.launch.deploy): the format, every refusal by its field, and the command
that checks one."""

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
from alpha.errors import DeployInvalid
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from alpha.launch.deploy import Node, load_deployment, parse_deployment

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


def _with(path: str, value: object) -> str:
    data = copy.deepcopy(GOOD)
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
    assert load_deployment(good).nodes[1].minor == 2
    bad = tmp_path / "bad.json"
    bad.write_text(_with("nodes.1.port", 0))
    assert main(["describe", "deploy", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("alpha: error: nodes[1].port: ") and "\n" not in err
    assert main(["describe", "deploy", "/dev/zero"]) == EXIT_USAGE
    assert "not a regular file" in capsys.readouterr().err
