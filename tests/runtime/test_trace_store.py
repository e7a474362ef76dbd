"""The compiled trace writer (alpha/runtime/trace_store.c, docs/trace.md): it stores the Python
writer's bytes for every record in range, wherever the bounds and the room put it, and nothing
for one out of range; a writer that differs is refused by the self-check; a tracer writes the
same trace with either; and where it cannot be had (asked not to, no compiler, an AArch64
Python under qemu) the Python writer stores, saying why."""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.native import Unavailable
from alpha.records.trace import (
    NONE_U32,
    TRACE_HEADER_SIZE,
    TRACE_RECORD_SIZE,
    Event,
    Phase,
    TraceRecord,
    decode_record,
    pack_record,
)
from alpha.records.trace_table import read_trace
from alpha.runtime.tracing import (
    TRACE_STORE_ENV,
    PythonWriter,
    WriterType,
    self_check,
    store_status,
    writer_type,
)
from harness.emulation import aarch64_interpreter
from tests.records.test_trace_records import records
from tests.support import ROOT
from tests.support.cli import python_output

PHASES = {"establishing": int(Phase.ESTABLISHING), "running": int(Phase.RUNNING)}
NAMES = {Phase.ESTABLISHING: "establishing", Phase.RUNNING: "running", Phase.COMPLETING: "done"}


@dataclasses.dataclass
class Where:
    phase: str
    round: int | None


def _compiled() -> WriterType:
    found = writer_type()
    if found is PythonWriter:
        pytest.skip(f"no compiled trace writer here: {store_status()}")
    return found


def _writer(
    kind: WriterType, room: int, *, limit: int = 8, ring: bool = False, grow: int = 0
) -> tuple[Any, bytearray, list[int]]:
    """A writer of ``kind`` over a buffer of ``room`` records, of which ``grow`` more are made
    room for, one a call, when it asks; and the list its calls to grow are counted in."""
    buffer = bytearray(TRACE_HEADER_SIZE + (room + grow) * TRACE_RECORD_SIZE)
    calls: list[int] = []

    def more() -> bool:
        calls.append(made.size)
        if len(calls) > grow:
            return False
        made.size += TRACE_RECORD_SIZE
        return True

    made = kind(limit, ring, PHASES, int(Phase.ESTABLISHING), int(Phase.COMPLETING), more)
    made.buffer = buffer
    made.size = TRACE_HEADER_SIZE + room * TRACE_RECORD_SIZE
    return made, buffer, calls


def _record(buffer: bytearray, index: int) -> bytes:
    at = TRACE_HEADER_SIZE + index * TRACE_RECORD_SIZE
    return bytes(buffer[at : at + TRACE_RECORD_SIZE])


@settings(max_examples=300, deadline=None)
@given(records(), st.booleans())
def test_the_compiled_writer_stores_the_python_writers_bytes(
    record: TraceRecord, positional_flags: bool
) -> None:
    kind = _compiled()
    made, buffer, _ = _writer(kind, 2)
    made.seq = 1  # the record's place: the second
    where = None
    if record.phase != Phase.ESTABLISHING or record.round != NONE_U32:
        round_ = None if record.round == NONE_U32 else record.round
        where = Where(NAMES[record.phase], round_)
    made.where = where
    peer = None if record.peer == NONE_U32 else record.peer
    fields = (record.event, record.kind, peer, record.slot, record.version, record.extent)
    detail = None if record.detail == bytes(32) else record.detail
    before = time.monotonic_ns()
    if record.flags or positional_flags:
        made.frame(*fields, detail, record.start_ns, record.flags)
    else:
        made.frame(*fields, detail, record.start_ns)
    after = time.monotonic_ns()
    got = _record(buffer, 1)
    end = int.from_bytes(got[16:24], "little")
    assert before <= end <= after  # its end is now, on the host's monotonic clock
    expected = pack_record(
        1, record.start_ns, end, record.event, record.kind, record.phase, record.flags,
        record.peer, record.slot, record.round, record.version, record.extent, record.detail,
    )  # fmt: skip
    assert got == expected
    assert buffer[: TRACE_HEADER_SIZE + TRACE_RECORD_SIZE] == bytes(
        TRACE_HEADER_SIZE + TRACE_RECORD_SIZE
    )
    assert made.seq == 2
    if end >= record.start_ns:
        assert decode_record(got) == dataclasses.replace(record, seq=1, end_ns=end)


_GOOD = (int(Event.SEND), 3, 1, 1, 5, 1024, bytes(32), 2, 0)
# A field out of its range, with what the compiled writer and the Python one (struct) raise.
_WRONG = [
    (0, 256, OverflowError, struct.error),  # event
    (0, -1, OverflowError, struct.error),
    (1, 256, OverflowError, struct.error),  # kind
    (2, NONE_U32 + 1, OverflowError, struct.error),  # peer
    (3, NONE_U32 + 1, OverflowError, struct.error),  # slot
    (4, 1 << 64, OverflowError, struct.error),  # version
    (5, -1, OverflowError, struct.error),  # extent
    (7, 1 << 63, OverflowError, struct.error),  # start
    (7, -(1 << 63) - 1, OverflowError, struct.error),
    (8, 256, OverflowError, struct.error),  # flags
    (0, "1", TypeError, struct.error),
    (6, "names", TypeError, struct.error),  # detail
    # struct pads or cuts a detail to 32 bytes; the compiled writer refuses it (no caller
    # passes one: names_detail pads, and every payload digest is 32 bytes).
    (6, bytes(31), ValueError, None),
    (6, bytes(33), ValueError, None),
]


@pytest.mark.parametrize(("index", "value", "compiled", "python"), _WRONG)
def test_a_field_out_of_range_is_refused_and_the_compiled_writer_stores_nothing(
    index: int, value: object, compiled: type[Exception], python: type[Exception] | None
) -> None:
    for kind, error in ((_compiled(), compiled), (PythonWriter, python)):
        if error is None:
            continue
        made, buffer, _ = _writer(kind, 2)
        fields = list(_GOOD)
        fields[index] = value
        with pytest.raises(error):
            made.frame(*fields)
        # The compiled writer checks every field first; struct writes the fields before the
        # bad one (a record without its mark and check, which a reader refuses).
        assert buffer == bytes(len(buffer)) or kind is PythonWriter


@pytest.mark.parametrize("round_", [NONE_U32 + 1, -1])
def test_a_round_out_of_range_is_refused_and_the_compiled_writer_stores_nothing(
    round_: int,
) -> None:
    for kind, error in ((_compiled(), OverflowError), (PythonWriter, struct.error)):
        made, buffer, _ = _writer(kind, 2)
        made.where = Where("running", round_)
        with pytest.raises(error):
            made.frame(*_GOOD)
        assert buffer == bytes(len(buffer)) or kind is PythonWriter


def _series(kind: WriterType, *, limit: int, ring: bool, room: int, grow: int) -> Any:
    made, buffer, calls = _writer(kind, room, limit=limit, ring=ring, grow=grow)
    for i in range(11):
        made.where = None if i % 4 == 0 else Where("running", i)
        made.frame(int(Event.RECEIVE), 2, i % 3, 1, i, 64, bytes([i]) * 32, i)
    return made, buffer, calls


@pytest.mark.parametrize(
    ("limit", "ring", "room", "grow"),
    [(8, False, 8, 0), (8, True, 8, 0), (5, True, 2, 3), (4, False, 1, 1), (20, False, 3, 2)],
)
def test_both_writers_place_grow_and_drop_alike(
    limit: int, ring: bool, room: int, grow: int
) -> None:
    # A first trace keeps its first records; a ring wraps; a record past the room asks for
    # more, once a record, and one the room cannot take is dropped.
    compiled = _series(_compiled(), limit=limit, ring=ring, room=room, grow=grow)
    python = _series(PythonWriter, limit=limit, ring=ring, room=room, grow=grow)
    (c, c_buffer, c_calls), (p, p_buffer, p_calls) = compiled, python
    assert c.seq == p.seq == 11
    assert c_calls == p_calls
    assert c.size == p.size
    for index in range(len(c_buffer) // TRACE_RECORD_SIZE - 1):
        mine, theirs = _record(c_buffer, index), _record(p_buffer, index)
        assert (mine[:16], mine[24:92]) == (theirs[:16], theirs[24:92]), index
    if not ring:
        kept = min(limit, room + grow)
        seqs = [int.from_bytes(_record(c_buffer, i)[:8], "little") for i in range(kept)]
        assert seqs == list(range(kept))


def test_a_closed_writer_stores_nothing_and_counts_nothing() -> None:
    for kind in (_compiled(), PythonWriter):
        made, buffer, _ = _writer(kind, 2)
        made.open = False
        made.frame(*_GOOD)
        assert made.seq == 0 and buffer == bytes(len(buffer))


def _wrapped(change: Callable[[Any, int], None]) -> WriterType:
    """The compiled writer with ``change`` made to its buffer after each record (given the
    writer and the record's seq)."""
    compiled = _compiled()

    class Changed:
        def __init__(self, *args: Any) -> None:
            self.inner = compiled(*args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "inner":
                object.__setattr__(self, name, value)
            else:
                setattr(self.inner, name, value)

        def frame(self, *fields: Any) -> None:
            seq = self.inner.seq
            self.inner.frame(*fields)
            change(self.inner, seq)

    return Changed  # type: ignore[return-value]


# The self-check's writer keeps a ring of 4 records in room for 3: of its 8 records, those of
# seq 4, 5 and 6 are left. A change is made to the one of seq 5.
KEPT = 5


def _at(writer: Any, seq: int) -> int:
    return TRACE_HEADER_SIZE + (seq % 4) * TRACE_RECORD_SIZE


def _flip(offset: int) -> Callable[[Any, int], None]:
    def change(writer: Any, seq: int) -> None:
        at = _at(writer, seq) + offset
        if seq == KEPT:
            writer.buffer[at] ^= 1

    return change


def _rechecked(offset: int) -> Callable[[Any, int], None]:
    """A byte of a field changed, and a check that fits the change: still not the bytes."""

    def change(writer: Any, seq: int) -> None:
        at = _at(writer, seq)
        if seq == KEPT:
            writer.buffer[at + offset] ^= 1
            body = bytes(writer.buffer[at : at + 92])
            check = int.from_bytes(body, "little") % 1073741789
            writer.buffer[at + 92 : at + 96] = check.to_bytes(4, "little")

    return change


def _late(writer: Any, seq: int) -> None:
    at = _at(writer, seq)
    if seq == KEPT:
        end = int.from_bytes(writer.buffer[at + 16 : at + 24], "little") + 10**9
        writer.buffer[at + 16 : at + 24] = end.to_bytes(8, "little")
        body = bytes(writer.buffer[at : at + 92])
        check = int.from_bytes(body, "little") % 1073741789
        writer.buffer[at + 92 : at + 96] = check.to_bytes(4, "little")


def _header(writer: Any, seq: int) -> None:
    writer.buffer[0] = 1


def _counts_twice(writer: Any, seq: int) -> None:
    if seq == 7:  # the last record: every record right, the count one too many
        writer.seq += 1


@pytest.mark.parametrize(
    "change",
    [_flip(8), _flip(28), _flip(26), _flip(36), _flip(60), _flip(92), _rechecked(8),
     _rechecked(40), _late, _header, _counts_twice],
)  # fmt: skip
def test_a_writer_that_differs_from_the_python_writer_fails_the_self_check(
    change: Callable[[Any, int], None],
) -> None:
    self_check(_compiled(), Path("unchanged"))
    self_check(_wrapped(lambda writer, seq: None), Path("wrapped"))
    with pytest.raises(Unavailable, match="differs from the Python writer on its self-check"):
        self_check(_wrapped(change), Path("changed"))


_SERIES = """
import sys, time

def series(path, writer):
    from alpha.core.identity import RunIdentity
    from alpha.records.trace import Event, TraceBounds
    from alpha.runtime import tracing
    from alpha.wire.frame import FrameKind

    tracer = tracing.Tracer.open(
        path, role=1, participants=3, digest="sha256", writer=writer,
        identity=RunIdentity(learner=b"L" * 32, contract=b"c" * 32, membership=b"m" * 32),
        bounds=TraceBounds(limit=10_000, mode="ring"),
    )
    digest = bytes(range(32))
    for i in range(tracing.CHUNK_RECORDS + 100):
        tracer.frame(Event.SEND, FrameKind.DATA, 0, 1, i, 1024, digest, time.monotonic_ns())
        tracer.operation("fold", "grad", time.monotonic_ns())
        tracer.wait("receive", None, time.monotonic_ns(), ran_out=i % 7 == 0)
    tracer.committed()
    tracer.close()

if __name__ == "__main__":  # python -c _SERIES ROOT PATH: the checkout's alpha, its writer
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from alpha.runtime import tracing

    series(Path(sys.argv[2]), None)
    print(tracing.store_status())
"""


def _trace(path: Path, writer: WriterType) -> np.ndarray:
    """A tracer's records for a fixed series of events (:data:`_SERIES`), stored by
    ``writer``, through the file's growth by more than a chunk and a ring's wrap."""
    space: dict[str, Any] = {"__name__": "series"}
    exec(_SERIES, space)
    space["series"](path, writer)
    return _read(path)


def _read(path: Path) -> np.ndarray:
    """The records of the trace at ``path``, read and checked whole, then their times and
    checks (which cover the times) set to zero."""
    found = read_trace(path.read_bytes()).records.copy()
    for name in ("start", "end", "check"):
        found[name] = 0
    return found


def test_a_tracer_writes_the_same_trace_with_either_writer(tmp_path: Path) -> None:
    compiled = _trace(tmp_path / "c.trace", _compiled())
    python = _trace(tmp_path / "py.trace", PythonWriter)
    assert len(compiled) == 10_000  # the ring's last records, past two chunks of growth
    assert compiled.tobytes() == python.tobytes()


def _status(env: dict[str, str]) -> str:
    code = "from alpha.runtime.tracing import store_status as s; print(s())"
    return python_output(code, env=env).strip()


def test_where_it_cannot_be_had_the_python_writer_stores_saying_why(tmp_path: Path) -> None:
    assert _status({TRACE_STORE_ENV: "python"}) == f"python: {TRACE_STORE_ENV}=python"
    assert _status({TRACE_STORE_ENV: "fast"}) == (
        f"python: {TRACE_STORE_ENV}='fast' is neither 'auto' nor 'python'"
    )
    assert _status({TRACE_STORE_ENV: "", "CC": "no-such-cc"}) == (
        "python: no C compiler: 'no-such-cc' is not on PATH (set CC)"
    )
    cache = tmp_path / "cache"
    found = _status({TRACE_STORE_ENV: "auto", "ALPHA_KERNEL_CACHE": str(cache)})
    if found.startswith("python: "):
        pytest.skip(f"no compiled trace writer here: {found}")
    assert found.startswith(f"compiled: {cache}/trace-store-")
    # A damaged library (a torn copy) is built again, once, and loads.
    library = Path(found.removeprefix("compiled: "))
    torn = library.with_name(library.name + ".torn")
    torn.write_bytes(b"\x7fELF torn")
    torn.replace(library)
    assert _status({"ALPHA_KERNEL_CACHE": str(cache)}) == found
    assert library.stat().st_size > len(b"\x7fELF torn")


def test_a_library_that_differs_is_refused_by_the_self_check_and_python_stores(
    tmp_path: Path,
) -> None:
    # A compiler that builds another mark into every record than the source says.
    real = shutil.which((os.environ.get("CC", "") or "cc").split()[0])
    if real is None:
        pytest.skip("no C compiler here")
    script = tmp_path / "marking-cc"
    script.write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"  # the source is the last argument
        'sed -i "s/\\"ATR1\\"/\\"ATR0\\"/" "$last"\n'
        f'exec {real} "$@"\n'
    )
    script.chmod(0o755)
    found = _status({"CC": str(script), "ALPHA_KERNEL_CACHE": str(tmp_path / "cache")})
    if "Python.h" in found:
        pytest.skip(f"no Python headers here: {found}")
    assert found.startswith("python: "), found
    assert found.endswith("differs from the Python writer on its self-check"), found


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="compares an x86-64 host with AArch64")
def test_an_aarch64_role_under_qemu_writes_with_python_the_same_trace(tmp_path: Path) -> None:
    # The host's cc builds for x86-64, not for the emulated Python: the guest writes in Python.
    kind = _compiled()
    guest = subprocess.run(
        [*aarch64_interpreter(), "-c", _SERIES, str(ROOT), str(tmp_path / "guest.trace")],
        capture_output=True,
        text=True,
        env={**os.environ, "ALPHA_KERNEL_CACHE": str(tmp_path / "cache")},
        check=False,
    )
    assert guest.returncode == 0, guest.stderr
    assert guest.stdout.startswith("python: "), guest.stdout
    assert "not for this aarch64 Python" in guest.stdout, guest.stdout
    host = _trace(tmp_path / "host.trace", kind)
    assert _read(tmp_path / "guest.trace").tobytes() == host.tobytes()


def test_the_module_says_which_writer_it_uses() -> None:
    found = store_status()
    assert found.startswith(("compiled: ", "python: "))
    assert (writer_type() is PythonWriter) == found.startswith("python: ")
