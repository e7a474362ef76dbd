"""A generation's history file (alpha.checkpoint.store.HistoryWriter, Generation.history;
docs/checkpoints.md): one file a launch, appended at each generation and linked into it, each
generation reading only the prefix its manifest names; rows round-trip; a file missing, cut
short, damaged or not a regular file is refused as ``CheckpointCorrupt``; where no link can be
made the next generation gets a copy; a write the system refuses is ``CheckpointWriteFailed``."""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alpha.checkpoint.manifest import (
    HISTORY,
    HISTORY_FILE,
    RESUMES,
    GenerationName,
    decode_history_ref,
    encode_rows,
)
from alpha.checkpoint.store import Generation, HistoryWriter
from alpha.errors import CheckpointCorrupt, CheckpointWriteFailed
from tests.support import raises_exactly

Row = tuple[int, float, float, float]


def generation(path: Path, round: int, ref: dict[str, object], resumes: list[int]) -> Generation:
    """The generation at ``path`` as far as its history goes: its round and about."""
    name = GenerationName(round, "0badf00d", "0" * 16)
    about: dict[str, object] = {HISTORY: ref, RESUMES: resumes}
    return Generation(path, "0" * 64, round, name, 1, {}, {}, about)


def rows_of(rounds: range) -> list[Row]:
    return [(r, 1.0 / (r + 1), 0.5, math.nan) for r in rounds]


def folders(tmp_path: Path, count: int) -> list[Path]:
    made = [tmp_path / f"gen-{k}" for k in range(count)]
    for each in made:
        each.mkdir()
    return made


def same_rows(got: tuple[Row, ...], want: list[Row]) -> bool:
    def equal(x: float, y: float) -> bool:
        return x == y or (math.isnan(x) and math.isnan(y))

    return len(got) == len(want) and all(
        a[0] == b[0] and all(equal(x, y) for x, y in zip(a[1:], b[1:], strict=True))
        for a, b in zip(got, want, strict=True)
    )


def test_each_generation_links_the_launchs_file_and_reads_its_own_prefix(tmp_path: Path) -> None:
    first, second, third = folders(tmp_path, 3)
    writer = HistoryWriter(encode_rows(rows_of(range(3))))  # carried from the resume
    writer.add(encode_rows(rows_of(range(3, 5))))
    one = writer.put(first)
    writer.add(encode_rows(rows_of(range(5, 10))))
    two = writer.put(second)
    writer.add(encode_rows(rows_of(range(10, 12))))
    three = writer.put(third)
    writer.close()
    inodes = {(each / HISTORY_FILE).stat().st_ino for each in (first, second, third)}
    assert len(inodes) == 1  # one file, linked: no generation rewrites the rows before it
    for path, ref, round in ((first, one, 5), (second, two, 10), (third, three, 12)):
        recorded = generation(path, round, ref, [3]).history()
        assert recorded is not None and recorded.resumes == (3,)
        # Each reads its own rows, though the file holds the later generations' too.
        assert same_rows(recorded.rows, rows_of(range(round)))
    assert one["rows"] == 5 and two["rows"] == 10 and three["rows"] == 12


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(
    st.lists(
        st.tuples(st.floats(allow_infinity=False), st.floats(), st.floats(allow_infinity=False)),
        max_size=40,
    ),
    st.integers(1, 6),
)
def test_rows_round_trip_through_the_file(
    tmp_path_factory: pytest.TempPathFactory, values: list[tuple[float, float, float]], pieces: int
) -> None:
    rows = [(r, *v) for r, v in enumerate(values)]
    base = tmp_path_factory.mktemp("history")
    writer = HistoryWriter()
    cut = max(1, len(rows) // pieces)
    refs = []
    for start in range(0, max(len(rows), 1), cut):
        writer.add(encode_rows(rows[start : start + cut]))
        path = base / f"gen-{start}"
        path.mkdir()
        refs.append((path, writer.put(path), min(start + cut, len(rows))))
    writer.close()
    for path, ref, count in refs:
        recorded = generation(path, count + 1, ref, []).history()
        assert recorded is not None
        # A value that is not finite is written null and read back as NaN, as inline.
        want = [(r, *(x if math.isfinite(x) else math.nan for x in v)) for r, *v in rows[:count]]
        assert same_rows(recorded.rows, want)  # type: ignore[arg-type]


def _written(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    (path,) = folders(tmp_path, 1)
    writer = HistoryWriter(encode_rows(rows_of(range(8))))
    ref = writer.put(path)
    writer.close()
    return path, ref


def test_a_history_file_damaged_in_its_prefix_is_refused(tmp_path: Path) -> None:
    path, ref = _written(tmp_path)
    file = path / HISTORY_FILE
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    raises_exactly(CheckpointCorrupt, generation(path, 8, ref, []).history)


def test_a_history_file_cut_short_or_missing_is_refused(tmp_path: Path) -> None:
    path, ref = _written(tmp_path)
    file = path / HISTORY_FILE
    data = file.read_bytes()
    file.write_bytes(data[:-1])
    raises_exactly(CheckpointCorrupt, generation(path, 8, ref, []).history)
    file.unlink()
    raises_exactly(CheckpointCorrupt, generation(path, 8, ref, []).history)


def test_a_history_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    path, ref = _written(tmp_path)
    (path / HISTORY_FILE).unlink()
    os.mkfifo(path / HISTORY_FILE)  # never waited on: refused before a byte is read
    raises_exactly(CheckpointCorrupt, generation(path, 8, ref, []).history)


def test_rows_after_the_prefix_are_not_the_generations(tmp_path: Path) -> None:
    path, ref = _written(tmp_path)
    with (path / HISTORY_FILE).open("ab") as out:
        out.write(b"not a row at all\n")
    recorded = generation(path, 8, ref, []).history()
    assert recorded is not None and len(recorded.rows) == 8


def test_rows_that_break_the_history_rules_are_refused_though_their_digest_holds(
    tmp_path: Path,
) -> None:
    path, ref = _written(tmp_path)
    # A generation of round 5 cannot record rounds 5 to 7: the rows are checked as inline.
    raises_exactly(CheckpointCorrupt, generation(path, 5, ref, []).history)
    # A count that is not the file's.
    raises_exactly(CheckpointCorrupt, generation(path, 8, {**ref, "rows": 7}, []).history)


@pytest.mark.parametrize(
    "ref",
    [
        {"file": "other.jsonl", "rows": 1, "bytes": 10, "sha256": "0" * 64},
        {"file": HISTORY_FILE, "rows": 11, "bytes": 10, "sha256": "0" * 64},
        {"file": HISTORY_FILE, "rows": -1, "bytes": 10, "sha256": "0" * 64},
        {"file": HISTORY_FILE, "rows": 1, "bytes": 10.0, "sha256": "0" * 64},
        {"file": HISTORY_FILE, "rows": 1, "bytes": 10, "sha256": "0" * 63},
        {"file": HISTORY_FILE, "rows": True, "bytes": 10, "sha256": "0" * 64},
        {"file": HISTORY_FILE, "rows": 1, "bytes": 10, "sha256": "0" * 64, "more": 1},
        {"file": HISTORY_FILE, "rows": 1, "bytes": 10},
    ],
)
def test_a_malformed_reference_is_refused(ref: dict[str, Any]) -> None:
    raises_exactly(CheckpointCorrupt, decode_history_ref, {HISTORY: ref}, "gen")


def test_without_hard_links_each_generation_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_link(*_: object) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    first, second, third = folders(tmp_path, 3)
    writer = HistoryWriter(encode_rows(rows_of(range(4))))
    one = writer.put(first)
    monkeypatch.setattr(os, "link", no_link)
    writer.add(encode_rows(rows_of(range(4, 6))))
    two = writer.put(second)
    writer.add(encode_rows(rows_of(range(6, 9))))
    three = writer.put(third)
    writer.close()
    assert len({(p / HISTORY_FILE).stat().st_ino for p in (first, second, third)}) == 3
    for path, ref, round in ((first, one, 4), (second, two, 6), (third, three, 9)):
        recorded = generation(path, round, ref, []).history()
        assert recorded is not None and same_rows(recorded.rows, rows_of(range(round)))


def test_a_link_refused_for_another_reason_is_a_write_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    first, second = folders(tmp_path, 2)
    writer = HistoryWriter(encode_rows(rows_of(range(2))))
    writer.put(first)
    monkeypatch.setattr(os, "link", no_room)
    writer.add(encode_rows(rows_of(range(2, 3))))
    raises_exactly(CheckpointWriteFailed, writer.put, second)
    writer.close()


def test_a_folder_that_cannot_take_the_file_is_a_write_failure(tmp_path: Path) -> None:
    writer = HistoryWriter(encode_rows(rows_of(range(2))))
    raises_exactly(CheckpointWriteFailed, writer.put, tmp_path / "missing")
