"""Traces of real runs (docs/trace.md, issue 30): ``alpha run --trace`` and ``alpha launch
--trace`` make every role write its trace; a traced run computes the untraced run's bits; the
Chrome trace has a track per role and a flow per delivered frame; two runs of one plan diff
equal, and a run with one role's learner changed by one ulp is named at its first changed
frame; a refused gate's trace shows the refusal where the gate expects it; a killed role's
trace reads to its last whole record; ``first`` and ``ring`` bounds keep what they say."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from alpha.app.cli import main
from alpha.app.compile import compile_plan
from alpha.app.trace_command import load_traces
from alpha.compiler.plan import parse_plan
from alpha.errors import TraceMismatch
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from alpha.records.folder import TRACE_DIR, trace_name
from alpha.records.trace import TRACE_RECORD_SIZE, Event, TraceBounds, detail_names
from alpha.records.trace_diff import diff_traces
from alpha.records.trace_table import read_trace
from alpha.runtime import TRACE_STORE_ENV, store_status
from gates.catalogue import GATES, SCENARIOS
from gates.run import judge
from harness.adversary import PERTURBED_FROM, build_adversary
from harness.runs import relayed_run
from tests.support import plan_text
from tests.support.cli import run_alpha

pytestmark = pytest.mark.slow

ROLES = 4
ROUNDS = 3
LEARN = plan_text(
    "traced",
    roles=ROLES,
    rounds=ROUNDS,
    topology={"shape": "tree", "fanout": 3},
    budgets={"accept": 30.0, "receive": 10.0, "start": 30.0},
    work={"kind": "learn"},
    learner={"kind": "mlp", "hidden": 8, "rate": 0.1, "seed": 3, "batch": 8},
)
FRAMES = (Event.SEND, Event.RECEIVE)


def _run(plan: Path, out: Path, *options: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``alpha run PLAN -o OUT --json OPTIONS`` (with ``env`` added to the environment): its
    summary; it must commit and equal the replicated learner bit for bit."""
    environment = None if env is None else {**os.environ, **env}
    done = run_alpha("run", str(plan), "-o", str(out), "--json", *options, env=environment)
    assert done.returncode == EXIT_OK, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    assert summary["ok"] and summary["equal"], summary
    return summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three runs of one plan: two traced (each its own compile, so its own keys) and one not.
    Run ``a``'s records are stored by the compiled writer, built into an empty cache by a
    compiler that logs what it compiles (``compiled``); run ``b``'s by the Python writer."""
    work = tmp_path_factory.mktemp("traced")
    plan = work / "plan.toml"
    plan.write_text(LEARN)
    found = {name: work / name for name in ("a", "b", "untraced")}
    found["compiled"] = work / "compiled.log"
    real = shutil.which((os.environ.get("CC", "") or "cc").split()[0])
    assert real is not None, "make test installs a C compiler"
    logging = work / "logging-cc"
    logging.write_text(
        f'#!/bin/sh\nfor last; do :; done\necho "$last" >> {found["compiled"]}\nexec {real} "$@"\n'
    )
    logging.chmod(0o755)
    compiled = {"CC": str(logging), "ALPHA_KERNEL_CACHE": str(work / "cache")}
    summaries = {
        "a": _run(plan, found["a"], "--trace", env=compiled),
        "b": _run(plan, found["b"], "--trace", env={TRACE_STORE_ENV: "python"}),
        "untraced": _run(plan, found["untraced"]),
    }
    # Tracing changes no bit of the run: the same final parameters, traced or not.
    assert len({each["distributed"] for each in summaries.values()}) == 1
    return found


def test_a_traced_run_writes_a_trace_per_role_and_an_untraced_one_none(
    runs: dict[str, Path],
) -> None:
    assert sorted(path.name for path in (runs["a"] / TRACE_DIR).iterdir()) == [
        trace_name(role) for role in range(ROLES)
    ]
    assert not (runs["untraced"] / TRACE_DIR).exists()
    traces = load_traces(runs["a"])
    for role, trace in traces.items():
        records = trace.records
        assert trace.whole and not trace.torn
        assert Event.COMMITTED in records["event"].tolist()  # each learned of the commit
        # Every round's frames: each role sends and receives DATA in every round.
        data = records[(records["kind"] == 2) & (records["event"] == Event.SEND)]
        assert sorted(set(data["round"].tolist())) == list(range(ROUNDS)), role
    # Every frame one role sent was received by its peer, with the digest it was sent with.
    sent = {
        (role, int(r["peer"]), int(r["kind"]), int(r["slot"]), int(r["version"])): bytes(
            r["detail"]
        )
        for role, t in traces.items()
        for r in t.records[t.records["event"] == Event.SEND]
    }
    got = {
        (int(r["peer"]), role, int(r["kind"]), int(r["slot"]), int(r["version"])): bytes(
            r["detail"]
        )
        for role, t in traces.items()
        for r in t.records[t.records["event"] == Event.RECEIVE]
    }
    assert got == sent and len(sent) > 2 * ROUNDS * (ROLES - 1)


def test_a_traced_run_compiles_the_trace_writer_once(
    runs: dict[str, Path],
) -> None:
    # The launcher builds it before the roles start; each role loads it from the cache. (The
    # ordered fold's source, which each learning role may build as it first folds, is apart.)
    if store_status().startswith("python: "):
        pytest.skip(f"no compiled trace writer here: {store_status()}")
    compiled = runs["compiled"].read_text().split()
    assert [Path(name).name for name in compiled].count("trace_store.c") == 1, compiled
    assert len(list((runs["compiled"].parent / "cache").glob("trace-store-*.so"))) == 1
    # Run a's records were stored by the compiled writer, run b's by Python: the two diff
    # equal (test_two_runs_of_one_plan_diff_equal); tests/runtime/test_trace_store.py holds
    # the two writers to the same bytes.


def test_observe_trace_writes_a_track_per_role_a_flow_per_frame_and_a_chart(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = runs["a"]
    assert main(["observe", "trace", str(folder), "--json"]) == EXIT_OK
    summary = json.loads(capsys.readouterr().out)
    chrome = json.loads((folder / "trace.json").read_text())
    events = chrome["traceEvents"]
    names = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert sorted(e["pid"] for e in names) == list(range(ROLES))
    assert [e["args"]["name"] for e in sorted(names, key=lambda e: e["pid"])] == [
        f"role {role}" for role in range(ROLES)
    ]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    receives = sum(
        int((t.records["event"] == Event.RECEIVE).sum()) for t in load_traces(folder).values()
    )
    # One flow pair per delivered frame (a committed run: every frame received was sent).
    assert set(starts) == set(ends) and len(starts) == receives == summary["delivered_frames"]
    for flow, start in starts.items():
        assert start["ts"] <= ends[flow]["ts"]  # from the send to its receive
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    assert (folder / "trace.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["committed"] == list(range(ROLES)) and summary["refusals"] == []


def test_two_runs_of_one_plan_diff_equal(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["observe", "diff", str(runs["a"]), str(runs["b"]), "--json"]) == EXIT_OK
    found = json.loads(capsys.readouterr().out)
    assert found["equal"] and found["first"] is None and found["differing"] == 0
    assert found["compared"] > 0


def test_a_run_with_a_perturbed_learner_is_named_at_its_first_changed_frame(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compiled = tmp_path / "compiled"
    compile_plan(parse_plan(LEARN), compiled, range(ROLES))
    leaf = ROLES - 1  # a child of role 0
    adversary = build_adversary(
        compiled / "role-000003.pyz", "perturbed-contribution", tmp_path / "role-000003.pyz"
    )
    outcome = trio.run(
        lambda: relayed_run(compiled, tmp_path / "run", replace={leaf: adversary}, trace=True)
    )
    assert outcome.committed()  # an honest run in every check: only its bits differ
    assert main(["observe", "diff", str(runs["a"]), str(outcome.folder), "--json"]) == EXIT_FAILURE
    first = json.loads(capsys.readouterr().out)["first"]
    assert (first["round"], first["role"], first["direction"]) == (PERTURBED_FROM, leaf, "sent")
    assert (first["sender"], first["receiver"], first["kind"]) == (leaf, 0, "DATA")
    assert first["why"] == "digest" and first["origin"]
    assert first["a"]["digest"] != first["b"]["digest"]
    assert first["a"]["before"] == first["b"]["before"] == "contribute on 'g'"
    # And in words.
    assert main(["observe", "diff", str(runs["a"]), str(outcome.folder)]) == EXIT_FAILURE
    line = capsys.readouterr().out.splitlines()[0]
    assert f"round {PERTURBED_FROM}, role {leaf} sent the DATA frame {leaf}->0" in line


def test_runs_of_other_plans_are_not_compared(runs: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(runs["b"], other)
    traces = load_traces(runs["a"])
    changed = load_traces(other)
    # Another identity is another plan's run: exit 2, whatever the frames hold.
    header = changed[0].header
    forged = type(header)(
        header.role, header.participants, bytes(32), header.digest, header.bounds,
        header.monotonic_ns, header.wall_ns,
    )  # fmt: skip
    changed[0] = type(changed[0])(forged, changed[0].records)
    with pytest.raises(TraceMismatch):
        diff_traces(traces, changed)
    (other / TRACE_DIR / trace_name(ROLES - 1)).unlink()
    assert main(["observe", "diff", str(runs["a"]), str(other)]) == EXIT_USAGE


def _gate_run(name: str, folder: Path) -> tuple[Any, dict[int, Any]]:
    """Gate ``name``'s faulted run, traced: its outcome (which must pass the gate's judge)
    and its traces."""
    gate = next(g for g in GATES if g.name == name)
    scenario = SCENARIOS[gate.scenario.name]
    compiled = folder / "compiled"
    compile_plan(parse_plan(scenario.plan, source=scenario.name), compiled, range(scenario.roles))
    outcome = trio.run(
        lambda: relayed_run(
            compiled,
            folder / "run",
            scenario.edge,
            gate.fault,
            interrupt=gate.interrupt,
            shared=scenario.shared,
            trace=True,
        )
    )
    verdict = judge(gate, outcome)
    assert verdict.passed, verdict.why
    return gate, load_traces(outcome.folder)


def test_a_refused_gates_trace_shows_the_refusal_where_the_gate_expects_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, traces = _gate_run("frames.corrupt-payload", tmp_path)
    (refusing,) = gate.at
    low, high = gate.scenario.edge
    peer = high if refusing == low else low
    records = traces[refusing].records
    refused = records[records["event"] == Event.REFUSED]
    assert len(refused) == 1
    assert detail_names(bytes(refused["detail"][0])) == (gate.expected,)
    assert (int(refused["peer"][0]), int(refused["kind"][0])) == (peer, 2)  # a DATA frame
    failed = records[records["event"] == Event.FAILED]
    assert detail_names(bytes(failed["detail"][0]))[0] == gate.expected
    # Its peer heard the ABORT naming that cause: the abort's spread.
    theirs = traces[peer].records
    aborts = theirs[(theirs["event"] == Event.RECEIVE) & (theirs["kind"] == 4)]
    assert [detail_names(bytes(d)) for d in aborts["detail"]] == [(gate.expected,)]
    assert not any((t.records["event"] == Event.COMMITTED).any() for t in traces.values())
    # observe trace says so, and its chart's window holds the refusal's round.
    folder = tmp_path / "run"
    assert main(["observe", "trace", str(folder), "--json"]) == EXIT_OK
    summary = json.loads(capsys.readouterr().out)
    assert summary["refusals"] == [
        {
            "role": refusing,
            "refusal": gate.expected,
            "peer": peer,
            "kind": "DATA",
            "slot": int(refused["slot"][0]),
            "version": int(refused["version"][0]),
        }
    ]
    # The chart's window holds the refusal's round and every role's failure: the spread.
    low_round, high_round = summary["window"]
    assert low_round <= int(refused["round"][0]) <= high_round
    for trace in traces.values():
        failure = trace.records[trace.records["event"] == Event.FAILED]
        assert low_round <= int(failure["round"][0]) <= high_round


def test_a_killed_roles_trace_reads_to_its_last_whole_record(tmp_path: Path) -> None:
    gate, traces = _gate_run("failure.killed-mid-round", tmp_path)
    killed = gate.interrupt.role if gate.interrupt is not None else -1
    records = traces[killed].records
    # Killed by SIGKILL mid-run: no failure and no commit of its own, its frames up to then.
    assert not np_any(records["event"], (Event.FAILED, Event.COMMITTED))
    assert np_any(records["event"], FRAMES)
    path = tmp_path / "run" / TRACE_DIR / trace_name(killed)
    data = path.read_bytes()
    # A record cut short at the end, as a kill inside its write would leave it, is ignored.
    torn = read_trace(data + data[-TRACE_RECORD_SIZE:][:50], str(path))
    assert torn.torn and torn.records.tobytes() == records.tobytes()
    assert gate.interrupt is not None and gate.interrupt.signal == signal.SIGKILL


def np_any(events: Any, wanted: tuple[int, ...]) -> bool:
    return bool(sum(int((events == each).sum()) for each in wanted))


@pytest.mark.parametrize("mode", ["first", "ring"])
def test_the_bounds_keep_the_first_or_the_last_records(mode: str, tmp_path: Path) -> None:
    limit = 24
    plan = tmp_path / "plan.toml"
    plan.write_text(LEARN + f"[trace]\nlimit = {limit}\nmode = '{mode}'\n")
    folder = tmp_path / "run"
    assert run_alpha("compile", str(plan), "-o", str(folder)).returncode == EXIT_OK
    done = run_alpha("launch", str(folder), "--trace")
    assert done.returncode == EXIT_OK, done.stderr
    root = load_traces(folder)[0]
    assert root.header.bounds == TraceBounds(limit, mode)  # the plan's [trace], in its payload
    records = root.records
    assert len(records) == limit and root.full and not root.whole
    if mode == "first":  # the first ones: from the run's start, the commit not among them
        assert records["seq"].tolist() == list(range(limit))
        assert records["event"][0] == Event.WAIT  # accepting its first child
        assert Event.COMMITTED not in records["event"].tolist()
    else:  # the last ones: to the end, the commit among them, the start overwritten
        assert root.overwritten > 0
        first = root.overwritten
        assert records["seq"].tolist() == list(range(first, first + limit))
        assert Event.COMMITTED in records["event"].tolist()
        assert (records["event"][-1], records["kind"][-1]) == (Event.SEND, 7)  # its last COMMIT
