"""Saving and restoring learning state: a generation (alpha.checkpoint.store) against the bare I/O.

For each size, a float32 parameter vector of that many bytes is saved as one generation by 4
owners (each writes its shards and owner manifest, then the root manifest is written, the
staged folder renamed and the pointer moved: every file and folder fsynced) and restored whole
(every shard read and its SHA-256 checked). The reference, timed in the same run, is one
``write`` of the same bytes to one file and one ``fsync`` (save), and one read of that file
(restore). Medians of ``repeat`` runs each; the page cache is warm for both restores.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from alpha.checkpoint import (
    move_pointer,
    open_generation,
    owner_ranges,
    parts_of,
    publish,
    staged_folder,
    write_shards,
)
from bench._timing import median_seconds, rate

NAME = "checkpoint"

_SIZES = (1 << 20, 16 << 20, 256 << 20)
_OWNERS = 4


def _save(folder: Path, arrays: dict[str, np.ndarray], round: int) -> None:
    nonce = f"{round:08x}"
    staged = staged_folder(folder, round, nonce)
    for owner in range(_OWNERS):
        ranges = {n: owner_ranges(a.size, _OWNERS)[owner] for n, a in arrays.items()}
        write_shards(staged, owner, parts_of(arrays, ranges))
    specs = {n: (tuple(a.shape), str(a.dtype)) for n, a in arrays.items()}
    name, digest = publish(folder, round, nonce, owners=_OWNERS, arrays=specs, about={})
    move_pointer(folder, name, digest)


def _bare_write(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _row(work: Path, size: int, times: int) -> str:
    arrays = {"w": np.random.default_rng(0).standard_normal(size // 4).astype("float32")}
    data = arrays["w"].tobytes()
    rounds = iter(range(1, 10**6))
    folder = work / f"ckpt-{size}"
    folder.mkdir()
    bare = work / f"bare-{size}.bin"

    def save() -> None:
        _save(folder, arrays, next(rounds))
        latest = open_generation(folder).path.name
        for path in folder.iterdir():  # one generation on disk, as with keep = 1
            if path.is_dir() and path.name != latest:
                shutil.rmtree(path)

    saved = median_seconds(save, repeat=times)
    written = median_seconds(lambda: _bare_write(bare, data), repeat=times)
    restored = median_seconds(lambda: open_generation(folder).load(), repeat=times)
    read = median_seconds(bare.read_bytes, repeat=times)
    return (
        f"| {size >> 20} MiB | {saved * 1e3:,.1f} ms ({rate(size, saved)}) "
        f"| {written * 1e3:,.1f} ms | {saved / written:.2f} "
        f"| {restored * 1e3:,.1f} ms ({rate(size, restored)}) | {read * 1e3:,.1f} ms "
        f"| {restored / read:.2f} |"
    )


def run(repeat: int) -> str:
    rows = [
        "| state | save (generation) | one write + fsync | ratio | restore (checked) "
        "| one read | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    work = Path(tempfile.mkdtemp(prefix="alpha-bench-checkpoint-", dir=Path.cwd()))
    try:
        for size in _SIZES:
            rows.append(_row(work, size, repeat if size < (256 << 20) else max(3, repeat // 3)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return (
        f"A float32 state saved by {_OWNERS} owners as one generation and restored whole, "
        "against one write + fsync and one read of the same bytes (medians; ratio = "
        "generation / bare). Saving also hashes every shard and fsyncs every file and folder; "
        "restoring hashes every shard before using it.\n\n" + "\n".join(rows)
    )
