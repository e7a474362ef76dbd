"""``alpha observe trace DIR`` and ``alpha observe diff DIR_A DIR_B``: a traced run's roles'
traces as one timeline, and where two traced runs of one plan part (``docs/trace.md``).

``observe trace`` merges every role's trace into one Chrome trace (the Trace Event Format's
JSON, which Perfetto's UI and ``chrome://tracing`` open): a process per role, a thread for its
local work and one per edge, a complete event per frame, operation and wait, an instant per
failure and commit, and a flow arrow from each frame's send to its receive. It draws a sequence
chart of a window of rounds too (:mod:`alpha.app.trace_chart`). ``observe diff`` names the first
frame whose payload differs (:mod:`alpha.records.trace_diff`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from alpha.app._options import print_json
from alpha.errors import TraceInvalid, UsageError
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.files import write_bytes_atomically
from alpha.records.folder import TRACE_DIR
from alpha.records.trace import NONE_U32, Event, detail_names
from alpha.records.trace_diff import Divergence, FrameSide, TraceDiff, diff_traces
from alpha.records.trace_table import Trace, read_trace
from alpha.wire.frame import FrameKind

__all__ = [
    "TRACE_JSON",
    "TRACE_PNG",
    "chrome_trace",
    "load_traces",
    "observe_diff",
    "observe_trace",
    "round_window",
]

TRACE_JSON: Final = "trace.json"
"""``observe trace``'s Chrome trace, beside the run's ``trace/`` folder unless ``-o`` says."""

TRACE_PNG: Final = "trace.png"
"""``observe trace``'s sequence chart, beside the run's ``trace/`` folder unless ``--png``."""

_TRACE_FILE: Final = re.compile(r"role-(\d{6})\.trace")
_KINDS: Final = {int(kind): kind.name for kind in FrameKind}  # a record's kind, in words
_PHASES: Final = ("establishing", "running", "completing")
_WORK_THREAD: Final = 0  # a role's local work, waits, failure and commit; edges are peer + 1


def trace_folder(path: Path) -> Path:
    """The folder holding the traces of the run at ``path``: its ``trace/``, or ``path``
    itself when it holds trace files."""
    inner = path / TRACE_DIR
    return inner if inner.is_dir() else path


def load_traces(path: Path) -> dict[int, Trace]:
    """Every role's trace of the traced run at ``path`` (a run folder or its ``trace/``), by
    role.

    Raises:
        TraceInvalid: no trace is there, one cannot be read, or one is not a trace (the file
            and the fault named); a file's name and its header name other roles.
    """
    folder = trace_folder(path)
    try:
        names = sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError as error:
        raise TraceInvalid(f"cannot read {folder}: {error.strerror or error}") from None
    found: dict[int, Trace] = {}
    for file in names:
        matched = _TRACE_FILE.fullmatch(file.name)
        if matched is None:
            continue
        try:
            data = file.read_bytes()
        except OSError as error:
            raise TraceInvalid(f"cannot read {file}: {error.strerror or error}") from None
        trace = read_trace(data, str(file))
        if trace.header.role != int(matched[1]):
            raise TraceInvalid(f"{file} holds role {trace.header.role}'s trace, not its name's")
        found[trace.header.role] = trace
    if not found:
        raise TraceInvalid(
            f"{path} holds no trace (role-NNNNNN.trace in {path / TRACE_DIR}): run the plan "
            "with alpha run --trace or alpha launch --trace"
        )
    return found


# --- the Chrome trace -------------------------------------------------------------------------


def _us(ns: int, origin: int) -> float:
    return (ns - origin) / 1000


def _frame_name(event: int, kind: int, peer: int, detail: bytes) -> str:
    name = _KINDS.get(kind, str(kind))
    if kind == 4:  # an ABORT names its cause, not a digest
        cause = detail_names(detail)
        name = f"ABORT ({cause[0]})" if cause else name
    return f"send {name} to {peer}" if event == Event.SEND else f"receive {name} from {peer}"


def chrome_trace(traces: Mapping[int, Trace]) -> dict[str, object]:
    """The traces as one Chrome trace (Trace Event Format JSON): ``traceEvents`` holds, per
    role (``pid``), its name and sort order, a thread per edge (``tid`` peer + 1) and one for
    its work (``tid`` 0); an ``X`` event per frame, refusal, operation and wait, an ``i``
    event per failure and commit; and an ``s``/``f`` pair, one ``id``, from each send to the
    receive of the same frame. Times are microseconds since the earliest trace opened, on
    the host's monotonic clock."""
    origin = min(trace.header.monotonic_ns for trace in traces.values())
    events: list[dict[str, object]] = []
    sends: dict[tuple[int, int, int, int, int], tuple[int, float]] = {}
    receives: list[tuple[tuple[int, int, int, int, int], int, int, float]] = []
    for role, trace in sorted(traces.items()):
        events.append(_meta(role, "process_name", {"name": f"role {role}"}))
        events.append(_meta(role, "process_sort_index", {"sort_index": role}))
        events.append(_meta(role, "thread_name", {"name": "work"}, _WORK_THREAD))
        records = trace.records
        columns = {
            name: records[name].tolist()
            for name in ("event", "kind", "phase", "flags", "peer", "slot", "round", "version")
        }
        columns["start"] = records["start"].tolist()
        columns["end"] = records["end"].tolist()
        columns["extent"] = records["extent"].tolist()
        details = [bytes(each) for each in records["detail"]]
        peers = {p for p, e in zip(columns["peer"], columns["event"], strict=True) if p != NONE_U32}
        for peer in sorted(peers):
            events.append(_meta(role, "thread_name", {"name": f"edge with role {peer}"}, peer + 1))
        for index, detail in enumerate(details):
            event = columns["event"][index]
            start, end = columns["start"][index], columns["end"][index]
            peer, kind = columns["peer"][index], columns["kind"][index]
            round_ = columns["round"][index]
            args: dict[str, object] = {
                "phase": _PHASES[columns["phase"][index]],
                "round": None if round_ == NONE_U32 else round_,
            }
            item: dict[str, object] = {
                "pid": role,
                "ts": _us(start, origin),
                "dur": (end - start) / 1000,
                "ph": "X",
            }
            if event in (Event.SEND, Event.RECEIVE):
                slot, version = columns["slot"][index], columns["version"][index]
                args.update(slot=slot, version=version, extent=columns["extent"][index])
                if kind != 4:
                    args["digest"] = detail.hex()
                if columns["flags"][index]:
                    args["shared_memory"] = True
                item.update(name=_frame_name(event, kind, peer, detail), cat="frame", tid=peer + 1)
                sender, receiver = (role, peer) if event == Event.SEND else (peer, role)
                key = (sender, receiver, kind, slot, version)
                if event == Event.SEND:
                    sends.setdefault(key, (role, _us(start, origin)))
                else:
                    receives.append((key, role, peer + 1, _us(max(start, end - 1), origin)))
            elif event == Event.REFUSED:
                names = detail_names(detail)
                refusal = names[0] if names else "refused"
                args.update(
                    refusal=refusal,
                    slot=columns["slot"][index],
                    expected_version=columns["version"][index],
                )
                item.update(
                    name=f"REFUSED {refusal} ({_KINDS.get(kind, kind)} from {peer})",
                    cat="refusal",
                    tid=peer + 1 if peer != NONE_U32 else _WORK_THREAD,
                )
            elif event == Event.OPERATION:
                names = detail_names(detail)
                args["region"] = names[1] if len(names) > 1 else ""
                item.update(name=names[0] if names else "operation", cat="operation")
                item["tid"] = _WORK_THREAD
            elif event == Event.WAIT:
                names = detail_names(detail)
                ran_out = bool(columns["flags"][index])
                args.update(budget=names[0] if names else "", ran_out=ran_out)
                if peer != NONE_U32:
                    args["peer"] = peer
                label = f"wait ({args['budget']} budget)" + (": ran out" if ran_out else "")
                item.update(name=label, cat="wait", tid=_WORK_THREAD)
            else:
                names = detail_names(detail)
                item = {"pid": role, "tid": _WORK_THREAD, "ts": _us(start, origin), "ph": "i"}
                item["s"] = "p"  # an instant across the role's whole track
                if event == Event.FAILED:
                    args["class"] = names[0] if names else ""
                    if len(names) > 1:
                        args["cause"], args["origin"] = names[1], columns["slot"][index]
                    item.update(name=f"FAILED {args['class']}", cat="failure")
                else:
                    item.update(name="committed", cat="commit")
            item["args"] = args
            events.append(item)
    flows = 0
    for key, role, tid, ts in receives:
        sent = sends.get(key)
        if sent is None:
            continue
        flows += 1
        sender, sent_at = sent
        common = {"name": "frame", "cat": "flow", "id": flows}
        events.append({**common, "ph": "s", "pid": sender, "tid": key[1] + 1, "ts": sent_at})
        events.append({**common, "ph": "f", "bp": "e", "pid": role, "tid": tid, "ts": ts})
    any_trace = next(iter(traces.values()))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "format": "alpha trace, docs/trace.md",
            "identity_sha256": any_trace.header.identity.hex(),
            "roles": sorted(traces),
            "delivered_frames": flows,
        },
    }


def _meta(pid: int, name: str, args: dict[str, object], tid: int = 0) -> dict[str, object]:
    return {"ph": "M", "pid": pid, "tid": tid, "name": name, "args": args}


# --- the commands -----------------------------------------------------------------------------


def round_window(text: str) -> tuple[int, int]:
    """``A:B`` (rounds A to B, counted from 0, both included) or ``A`` (one round), as
    ``--rounds`` takes it.

    Raises:
        argparse.ArgumentTypeError: not such a window.
    """
    low, colon, high = text.partition(":")
    try:
        first = int(low, 10)
        last = int(high, 10) if colon else first
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected rounds A:B or one round A (counted from 0), got {text!r}"
        ) from None
    if first < 0 or last < first:
        raise argparse.ArgumentTypeError(f"expected 0 <= A <= B, got {text!r}")
    return first, last


def _summary(traces: Mapping[int, Trace]) -> dict[str, object]:
    records = sum(len(t.records) for t in traces.values())
    refusals: list[dict[str, object]] = []
    failures: list[dict[str, object]] = []
    committed = []
    for role, trace in sorted(traces.items()):
        found = trace.records
        for index in (found["event"] == Event.REFUSED).nonzero()[0]:
            names = detail_names(bytes(found["detail"][index]))
            refusals.append(
                {
                    "role": role,
                    "refusal": names[0] if names else "",
                    "peer": int(found["peer"][index]),
                    "kind": _KINDS.get(int(found["kind"][index]), "?"),
                    "slot": int(found["slot"][index]),
                    "version": int(found["version"][index]),
                }
            )
        for index in (found["event"] == Event.FAILED).nonzero()[0]:
            names = detail_names(bytes(found["detail"][index]))
            failures.append({"role": role, "class": names[0] if names else ""})
        if (found["event"] == Event.COMMITTED).any():
            committed.append(role)
    return {
        "roles": sorted(traces),
        "records": records,
        "torn": [role for role, t in sorted(traces.items()) if t.torn],
        "cut": [role for role, t in sorted(traces.items()) if not t.whole],
        "refusals": refusals,
        "failures": failures,
        "committed": committed,
    }


def observe_trace(args: argparse.Namespace) -> int:
    """``alpha observe trace DIR``: write the Chrome trace and the sequence chart; 0.

    Raises:
        TraceInvalid: ``DIR`` holds no readable traces.
        UsageError: ``--rounds`` names rounds no trace holds.
    """
    from alpha.app.trace_chart import default_window, draw_sequence

    path = Path(args.dir)
    traces = load_traces(path)
    beside = trace_folder(path).parent if trace_folder(path) != path else path
    out = Path(args.output) if args.output else beside / TRACE_JSON
    png = Path(args.png) if args.png else beside / TRACE_PNG
    chrome = chrome_trace(traces)
    write_bytes_atomically(out, json.dumps(chrome, separators=(",", ":")).encode())
    window = args.rounds if args.rounds is not None else default_window(traces)
    drawn = draw_sequence(traces, png, window)
    summary = _summary(traces)
    delivered = chrome["otherData"]
    assert isinstance(delivered, dict)
    summary.update(
        json=str(out), png=str(png), window=list(window), drawn=drawn,
        delivered_frames=delivered["delivered_frames"],
    )  # fmt: skip
    if args.json:
        print_json(summary)
        return EXIT_OK
    roles = summary["roles"]
    assert isinstance(roles, list)
    print(
        f"observe trace: {len(roles)} role(s), {summary['records']} records, "
        f"{summary['delivered_frames']} frames delivered"
    )
    refusals = summary["refusals"]
    assert isinstance(refusals, list)
    for refusal in refusals:
        print(
            f"observe trace: role {refusal['role']} refused the {refusal['kind']} frame from "
            f"role {refusal['peer']} (slot {refusal['slot']}, version {refusal['version']}): "
            f"{refusal['refusal']}"
        )
    failures = summary["failures"]
    assert isinstance(failures, list)
    if failures:
        print(
            "observe trace: failed: "
            + ", ".join(f"role {f['role']} ({f['class']})" for f in failures)
        )
    elif summary["committed"]:
        print("observe trace: the run committed")
    for role in summary["torn"]:  # type: ignore[attr-defined]
        print(f"observe trace: role {role}'s last record was cut short (killed): ignored")
    for role in summary["cut"]:  # type: ignore[attr-defined]
        print(f"observe trace: role {role}'s trace reached its limit: not every record is kept")
    print(f"observe trace: wrote {out} (open it in https://ui.perfetto.dev)")
    print(f"observe trace: wrote {png} (rounds {window[0]} to {window[1]}, {drawn} frames)")
    return EXIT_OK


def _side_lines(label: str, side: FrameSide | None, direction: str) -> list[str]:
    if side is None:
        return [f"  {label}: no such frame {direction}"]
    lines = [f"  {label}: {side.kind}, {side.extent} bytes, payload digest {side.digest}"]
    if side.before:
        lines.append(f"  {label}: its role's last local operation before it: {side.before}")
    return lines


def _diff_lines(diff: TraceDiff, a: Path, b: Path) -> list[str]:
    first = diff.first
    if first is None:
        lines = [
            f"observe diff: equal: {diff.compared} frame records (DATA and CHOICE) compared, "
            "every payload the same"
        ]
    else:
        lines = [_divergence_line(first)]
        lines += _side_lines("A", first.a, first.direction)
        lines += _side_lines("B", first.b, first.direction)
        if first.refused:
            lines.append(f"  the run lacking it refused it there: {first.refused}")
        lines.append(
            f"observe diff: {diff.differing} of {diff.compared} compared frame records differ "
            f"(A: {a}, B: {b})"
        )
    if diff.partial:
        roles = ", ".join(str(role) for role in diff.partial)
        lines.append(
            f"observe diff: the traces of role(s) {roles} reached their limit in a run: "
            "frames past it were not compared"
        )
    return lines


def _divergence_line(first: Divergence) -> str:
    where = "outside the rounds" if first.round is None else f"round {first.round}"
    frame = (
        f"the {first.kind} frame {first.sender}->{first.receiver} (slot {first.slot}, "
        f"version {first.version})"
    )
    what = {
        "digest": "its payload differs",
        "extent": "its extent differs",
        "round": "it falls in another round",
    }.get(first.why, f"it is {first.why}")
    origin = (
        f"; role {first.role} computed it from equal inputs: the runs part here"
        if first.origin
        else f"; it carries a difference from before (role {first.role} had received one)"
    )
    return (
        f"observe diff: the runs part at {where}, role {first.role} {first.direction} {frame}: "
        f"{what}{origin}"
    )


def _diff_json(diff: TraceDiff) -> dict[str, object]:
    first = diff.first

    def side(entry: FrameSide | None) -> dict[str, object] | None:
        if entry is None:
            return None
        return {
            "kind": entry.kind,
            "extent": entry.extent,
            "digest": entry.digest,
            "round": entry.round,
            "before": entry.before,
        }

    return {
        "equal": diff.equal,
        "compared": diff.compared,
        "differing": diff.differing,
        "partial": list(diff.partial),
        "first": None
        if first is None
        else {
            "round": first.round,
            "role": first.role,
            "direction": first.direction,
            "sender": first.sender,
            "receiver": first.receiver,
            "kind": first.kind,
            "slot": first.slot,
            "version": first.version,
            "why": first.why,
            "origin": first.origin,
            "refused": first.refused,
            "a": side(first.a),
            "b": side(first.b),
        },
    }


def observe_diff(args: argparse.Namespace) -> int:
    """``alpha observe diff DIR_A DIR_B``: 0 when every compared frame is equal, 1 naming the
    first that differs.

    Raises:
        TraceInvalid: a folder holds no readable traces.
        TraceMismatch: the runs are not two runs of one plan (another identity, other roles).
    """
    a, b = Path(args.dir_a), Path(args.dir_b)
    if a.resolve() == b.resolve():
        raise UsageError("observe diff: DIR_A and DIR_B are one folder; give two traced runs")
    diff = diff_traces(load_traces(a), load_traces(b))
    if args.json:
        print_json(_diff_json(diff))
    else:
        for line in _diff_lines(diff, a, b):
            print(line, file=sys.stdout)
    return EXIT_OK if diff.equal else EXIT_FAILURE
