"""The ssh-tunnel transport on a real OpenSSH sshd (harness/sshd.py): a learner run through
the tunnels equals the replicated learner bit for bit; a relay killed mid-run aborts every
role within its budgets with nothing committed; an unreachable node is one clear error."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from alpha.app.cli import main
from alpha.app.compile import compile_plan
from alpha.compiler.plan import Plan, parse_plan
from alpha.compiler.replicate import replicate
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.learner.data import load_digits
from alpha.records.commit import COMMIT_NAME
from alpha.records.reports import committed_reports
from harness.processes import running, state_of
from harness.sshd import Sshd, connect_error, namespace_nodes, running_sshd
from tests.support import ALPHA, deployment_file, left_running, ssh_options

pytestmark = pytest.mark.slow

PLAN = """
[run]
name = "remote-pair"
rounds = ROUNDS
[membership]
group = "(group (stride 0 1 2))"
[topology]
shape = "pair"
[budgets]
accept = 60.0
receive = 4.0
start = 60.0
[work]
kind = "learn"
[learner]
hidden = 8
rate = 0.05
batch = 8
"""


def _launch(compiled: Path, deployment: Path, *sshds: Sshd) -> int:
    return main(
        [
            "launch",
            str(compiled),
            "--deploy",
            str(deployment),
            f"--interpreter=x86_64={sys.executable}",
            *ssh_options(*sshds),
        ]
    )


def _compiled(tmp_path: Path, rounds: int) -> tuple[Plan, Path]:
    plan = parse_plan(PLAN.replace("ROUNDS", str(rounds)))
    compiled = tmp_path / "compiled"
    compile_plan(plan, compiled, range(2))
    return plan, compiled


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _until_gone(remote: Path, *sshds: Sshd, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while (left := left_running(remote, *sshds)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


_FAILED = re.compile(r"failure-clock (\d+\.\d+)\n.*failed: (\w+): ")


def _refusal(log: Path, wait: float = 0.0) -> tuple[float, str]:
    """The monotonic time a role failed at and its error's class, from its log (waiting up to
    ``wait`` seconds for the lines)."""
    deadline = time.monotonic() + wait
    while (found := _FAILED.search(log.read_text())) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert found is not None, log.read_text()
    return float(found.group(1)), found.group(2)


def _when_round(log: Path, round_: int) -> None:
    while f"round {round_} " not in (log.read_text() if log.exists() else ""):
        time.sleep(0.02)


def test_a_learner_run_through_ssh_tunnels_equals_the_replicated_learner(tmp_path: Path) -> None:
    plan, compiled = _compiled(tmp_path, 3)
    remote = tmp_path / "remote"
    with running_sshd(tmp_path / "sshd") as sshd:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        assert _launch(compiled, deployment, sshd) == EXIT_OK
        # The launcher ended every forward and session it opened.
        assert left_running(remote, sshd) == []
    # The roles ran from the remote root, and wrote their reports there, beside the one
    # shared runtime they bind.
    runtime = json.loads((compiled / "run.json").read_text())["runtime"]["file"]
    assert sorted(p.name for p in remote.glob("*.pyz")) == [
        "role-000000.pyz",
        "role-000001.pyz",
        runtime,
    ]
    for name in ("role-000000.pyz", "role-000001.pyz", runtime):
        assert (remote / name).read_bytes() == (compiled / name).read_bytes()
        # each copy keeps its file's mode: a keyed artifact is its owner's alone on the node too
        assert _mode(remote / name) == _mode(compiled / name)
    assert [_mode(remote / f"role-00000{role}.pyz") for role in (0, 1)] == [0o700, 0o700]
    assert not list(remote.glob("*.part"))
    _, reports = committed_reports(remote / "reports", plan.tree.children)
    digests = {report["digests"]["w"] for report in reports.values()}
    assert digests == {replicate(plan, load_digits()).digest}
    # Every edge went through the tunnels: the connector's port is one its sshd allocated.
    assert reports[1]["edges"][0]["remote_port"] != reports[0]["edges"][0]["local_port"]
    logs = compiled / "logs"
    assert "Local forwarding listening" in (logs / "ssh-L-0-1.log").read_text()
    assert "Allocated port" in (logs / "ssh-R-0-1.log").read_text()


def _counting_ssh(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put first on PATH an ``ssh`` that appends its last word (the remote command) to a file,
    one line each, then runs the real ssh; return that file."""
    real = shutil.which("ssh")
    assert real is not None
    said = folder / "commands"
    wrapper = folder / "bin" / "ssh"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(
        f'#!/bin/sh\nfor word; do last=$word; done\nprintf "%s\\n" "$last" >> {said}\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return said


def test_staging_copies_the_shared_runtime_once_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alpha.launch.deploy import load_deployment
    from alpha.launch.launcher import launch_specs
    from alpha.launch.remote import stage_artifacts

    _, compiled = _compiled(tmp_path, 1)
    runtime = json.loads((compiled / "run.json").read_text())["runtime"]["file"]
    specs, _ = launch_specs(compiled)
    options = [word.removeprefix("--ssh-option=") for word in ssh_options()]
    for sshds in (1, 2):
        remote = tmp_path / f"remote-{sshds}"
        said = _counting_ssh(tmp_path / f"ssh-{sshds}", monkeypatch)
        with contextlib.ExitStack() as stack:
            started = [
                stack.enter_context(running_sshd(tmp_path / f"sshd-{sshds}-{n}"))
                for n in range(sshds)
            ]
            nodes = [(started[0], 0), (started[-1], 1)]  # one sshd for both nodes, or one each
            path = deployment_file(tmp_path / "deploy.json", remote, nodes)
            deployment = load_deployment(path)
            known = [f"UserKnownHostsFile={' '.join(str(s.known_hosts) for s in started)}"]
            stage_artifacts(specs, deployment, [*options[:-2], "-o", *known])
        copies = [line for line in said.read_text().splitlines() if "cat >" in line]
        assert sum(runtime in line for line in copies) == sshds, copies
        assert sum("role-00000" in line for line in copies) == 2, copies
        assert sorted(p.name for p in remote.iterdir()) == [
            "role-000000.pyz",
            "role-000001.pyz",
            runtime,
        ], "whole files, no temporary one left"
        assert (remote / runtime).read_bytes() == (compiled / runtime).read_bytes()


def _forwards(sshd: Sshd) -> list[int]:
    """This test's SSH forwards (the relay): ssh processes with a forward, to this sshd."""
    to_it = set(running(str(sshd.port), whole=True))
    return [pid for pid in running("ExitOnForwardFailure=yes", whole=True) if pid in to_it]


def test_a_relay_killed_mid_run_aborts_every_role_within_its_budget(tmp_path: Path) -> None:
    plan, compiled = _compiled(tmp_path, 100000)
    remote = tmp_path / "remote"
    logs = compiled / "logs"
    with running_sshd(tmp_path / "sshd") as sshd:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        killed: list[tuple[float, int]] = []

        def kill_the_relay() -> None:
            _when_round(logs / "role-000000.log", 20)
            for pid in _forwards(sshd):
                killed.append((time.monotonic(), pid))
                os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_the_relay, daemon=True)
        killer.start()
        assert _launch(compiled, deployment, sshd) == EXIT_FAILURE
        killer.join()
        assert len(killed) == 2, "the relay is one -L and one -R forward"
        # Each role refused by itself, as a lost peer, within its receive budget of the kill.
        for role in (0, 1):
            at, error = _refusal(logs / f"role-00000{role}.log")
            assert error == "PeerLost"
            assert 0 <= at - killed[0][0] <= plan.budgets.receive  # from the first kill
        assert _until_gone(remote, sshd, within=plan.budgets.receive) == []
    assert not (remote / "reports" / COMMIT_NAME).exists()
    assert list((remote / "reports").glob("role-*.json")) == []


def _sessions(remote: Path) -> list[int]:
    """The deployment host's ssh sessions that run roles from ``remote`` (not forwards, not
    copies): ``ssh ... 'cd REMOTE && ... exec PYTHON REMOTE/role-N.pyz'``."""
    return [
        pid
        for pid in running(f"cd {remote} && ")
        if _argv0(pid) == "ssh" and " exec " in _cmdline(pid)
    ]


def test_a_lost_ssh_session_is_its_roles_failure_and_aborts_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, compiled = _compiled(tmp_path, 100000)
    remote = tmp_path / "remote"
    logs = compiled / "logs"
    with running_sshd(tmp_path / "sshd") as sshd:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        killed: list[int] = []

        def kill_the_session() -> None:
            _when_round(logs / "role-000000.log", 20)
            (session,) = [pid for pid in _sessions(remote) if "role-000001.pyz" in _cmdline(pid)]
            os.kill(session, signal.SIGKILL)
            killed.append(session)

        killer = threading.Thread(target=kill_the_session, daemon=True)
        killer.start()
        capsys.readouterr()
        assert _launch(compiled, deployment, sshd) == EXIT_FAILURE
        killer.join()
        assert killed, "the session was never killed"
        err = capsys.readouterr().err
        assert "launch: role 1 failed first: role 1 was killed by SIGKILL" in err
        assert _until_gone(remote, sshd, within=plan.budgets.receive) == []
    assert not (remote / "reports" / COMMIT_NAME).exists()
    assert list((remote / "reports").glob("role-*.json")) == []


def test_a_participant_stops_when_its_session_ends_though_the_relay_stands(
    tmp_path: Path,
) -> None:
    """The deployment host loses its launcher and its session to role 1's node, but not the
    forwards or role 0's session. Role 1 logs nothing between rounds, so nothing else would
    stop it: it could go on, with role 0, to commit a run no one watches. Its parent is its
    sshd session, named as its launcher, and it stops when that goes; role 0 then refuses the
    lost peer within its budget and nothing is committed."""
    plan, compiled = _compiled(tmp_path, 100000)
    remote = tmp_path / "remote"
    logs = compiled / "logs"
    with running_sshd(tmp_path / "sshd") as sshd:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        argv = [*ALPHA, "launch", str(compiled), "--deploy"]
        argv += [str(deployment), f"--interpreter=x86_64={sys.executable}", *ssh_options(sshd)]
        launcher = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        forwards: list[int] = []
        try:
            _when_round(logs / "role-000000.log", 20)
            forwards = _forwards(sshd)
            assert len(forwards) == 2
            (session,) = [pid for pid in _sessions(remote) if "role-000001" in _cmdline(pid)]
            (role_1,) = running(remote / "role-000001.pyz", whole=True)
            launcher.kill()
            launcher.wait()
            os.kill(session, signal.SIGKILL)
            killed = time.monotonic()
            at, error = _refusal(logs / "role-000000.log", wait=plan.budgets.receive * 2)
            assert error == "PeerLost"
            assert 0 <= at - killed <= plan.budgets.receive
            while state_of(role_1) not in ("", "Z"):  # it closed its edge, and is exiting
                assert time.monotonic() < killed + plan.budgets.receive
                time.sleep(0.02)
            assert all(state_of(pid) not in ("", "Z") for pid in forwards)  # the relay stood
        finally:
            launcher.kill()
            launcher.wait()
            for pid in forwards:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert _until_gone(remote, sshd, within=plan.budgets.receive) == []
    assert not (remote / "reports" / COMMIT_NAME).exists()
    assert list((remote / "reports").glob("role-*.json")) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_launcher_stopped_by_a_signal_ends_every_session_and_forward(
    tmp_path: Path, signum: signal.Signals
) -> None:
    plan, compiled = _compiled(tmp_path, 100000)
    remote = tmp_path / "remote"
    with running_sshd(tmp_path / "sshd") as sshd:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        argv = [*ALPHA, "launch", str(compiled), "--deploy"]
        argv += [str(deployment), f"--interpreter=x86_64={sys.executable}", *ssh_options(sshd)]
        launcher = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            _when_round(compiled / "logs" / "role-000000.log", 10)
            assert len(_forwards(sshd)) == 2 and len(_sessions(remote)) == 2
            launcher.send_signal(signum)
            _, err = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
            launcher.wait()
        assert launcher.returncode == 128 + signum  # as shells expect: 130, 143
        lines = [line for line in err.splitlines() if "interrupted" in line]
        assert len(lines) == 1 and lines[0].startswith(f"launch: interrupted ({signum.name})"), err
        assert _until_gone(remote, sshd, within=plan.budgets.receive) == []
    assert not (remote / "reports" / COMMIT_NAME).exists()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def _with_port(deployment: Path, role: int, port: int) -> None:
    data = json.loads(deployment.read_text())
    data["nodes"][role]["port"] = port
    deployment.write_text(json.dumps(data))


def test_a_node_that_refuses_connections_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, compiled = _compiled(tmp_path, 1)
    remote = tmp_path / "remote"
    with running_sshd(tmp_path / "sshd") as sshd, socket.socket() as closed:
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        _with_port(deployment, 1, closed.getsockname()[1])
        capsys.readouterr()
        assert _launch(compiled, deployment, sshd) == EXIT_FAILURE
        assert left_running(remote, sshd) == []
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("alpha: error: cannot copy role 1's artifact to node-1 (root@127.0.0.1")
    assert "Connection refused" in err
    assert not (remote / "reports").exists()  # no role was started


def test_a_node_that_never_answers_is_one_clear_error_within_its_connect_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, compiled = _compiled(tmp_path, 1)
    remote = tmp_path / "remote"
    connect_timeout = 2
    with (
        running_sshd(tmp_path / "sshd") as sshd,
        socket.create_server(("127.0.0.1", 0)) as silent,  # accepts, never says a word
    ):
        deployment = deployment_file(tmp_path / "deploy.json", remote, [(sshd, 0), (sshd, 1)])
        _with_port(deployment, 1, silent.getsockname()[1])
        capsys.readouterr()
        started = time.monotonic()
        code = main(
            [
                "launch",
                str(compiled),
                "--deploy",
                str(deployment),
                f"--interpreter=x86_64={sys.executable}",
                *ssh_options(sshd),
                "--ssh-option=-o",
                f"--ssh-option=ConnectTimeout={connect_timeout}",  # before the default 10 s
            ]
        )
        took = time.monotonic() - started
        assert code == EXIT_FAILURE
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("alpha: error: cannot copy role 1's artifact to node-1")
    assert "timed out" in err
    # ssh's own bound, with room for the other copy and ssh's start on a loaded machine.
    assert took < connect_timeout + 8


def _namespace_of(pid: int) -> str:
    found = subprocess.run(
        ["ip", "netns", "identify", str(pid)], capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["in-order", "reversed"])
def test_across_network_namespaces_the_relay_is_the_only_route(
    tmp_path: Path, order: tuple[int, int]
) -> None:
    """Each role on a node of its own, in a namespace of its own that reaches the deployment
    host's (this process's) and nothing else: role 1 has no route to role 0 but the relay.
    Reversing the nodes swaps which namespace runs which role."""
    with namespace_nodes("alpha-remote") as nodes:
        if nodes is None:
            pytest.skip("network namespaces cannot be made here (ip netns add was refused)")
        plan, compiled = _compiled(tmp_path, 20)
        remote = tmp_path / "remote"
        with (
            running_sshd(tmp_path / "sshd-0", host=nodes[0].address, netns=nodes[0].name) as s0,
            running_sshd(tmp_path / "sshd-1", host=nodes[1].address, netns=nodes[1].name) as s1,
        ):
            sshds = [s0, s1]
            for here, there in ((0, 1), (1, 0)):
                refused = connect_error(nodes[there].address, sshds[there].port, nodes[here].name)
                assert refused == errno.ENETUNREACH
            placed = [sshds[k] for k in order]  # node of role r: placed[r]
            deployment = deployment_file(tmp_path / "deploy.json", remote, [(s, 0) for s in placed])
            seen: dict[int, set[str]] = {0: set(), 1: set()}
            done = threading.Event()

            def where() -> None:  # the namespace of each role's process, while it runs
                while not done.is_set():
                    for role in (0, 1):
                        for pid in running(remote / f"role-00000{role}.pyz", whole=True):
                            name = _namespace_of(pid)
                            if state_of(pid) not in ("", "Z"):  # not gone while identified
                                seen[role].add(name)
                    time.sleep(0.01)

            watcher = threading.Thread(target=where, daemon=True)
            watcher.start()
            try:
                assert _launch(compiled, deployment, s0, s1) == EXIT_OK
            finally:
                done.set()
                watcher.join()
            assert seen == {role: {nodes[order[role]].name} for role in (0, 1)}
            assert left_running(remote, s0, s1) == []
        _, reports = committed_reports(remote / "reports", plan.tree.children)
        assert {r["digests"]["w"] for r in reports.values()} == {
            replicate(plan, load_digits()).digest
        }
