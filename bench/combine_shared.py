"""Combine over TCP against combine through shared memory (issue 26), side by side, in one run.

The sum check on a star of n real participant processes (n = 2 and 4), measured as
``bench.combine`` measures Alpha (one plan compiled for R1 and R2 rounds, launched R1 then R2;
a sample is (T(R2) - T(R1)) / (R2 - R1) with T role 0's time from its last edge established to
its last round done, and every launch must commit the declared-order fold), keyed frames with
SHA-256 payload digests, for two settings of ``[addresses] transport``:

* ``tcp``: every frame whole over TCP on 127.0.0.1;
* ``auto``: the launcher runs every role here, so each DATA payload of 64 KiB and more moves
  through the edge's shared-memory region (docs/frames.md); at 1 KiB both are the same path.

The two take turns within each repetition, their order rotated from one repetition to the
next. Beside them, from ``bench.combine`` in the same run: the plain checked star, the CPU floor
of a star combine that hashes every byte it moves, and gloo's all_reduce (the reference; torch
is the ``bench`` extra). Issue 26's targets at n = 4, keyed: 1 KiB at most 2.0 times the plain
checked star and at most 0.25 ms; 1 MiB at most 1.0 times gloo; 64 MiB with SHA-256 at most 1.1
times the CPU floor (and with BLAKE3 at most 1.0 times gloo: ``bench.combine_keyed`` measures
BLAKE3).

``python -m bench combine-shared [--repeat N]`` runs this alone.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.combine import (
    KIB,
    MIB,
    ROUNDS,
    SIZES,
    _compile_pair,
    _cpu_floor,
    _gloo,
    _ms,
    _Pair,
    _plain,
    _size,
    _torch_version,
)

NAME = "combine-shared"
ROLES = (2, 4)
TRANSPORTS = ("tcp", "auto")


def _log(text: str) -> None:
    print(f"bench combine-shared: {text}", file=sys.stderr, flush=True)


def _measure(n: int, size: int, repeat: int) -> dict[str, list[float]]:
    """Role 0's seconds per combine for each transport, ``repeat`` samples each, in turns."""
    samples: dict[str, list[float]] = {transport: [] for transport in TRANSPORTS}
    with tempfile.TemporaryDirectory(prefix="alpha-bench-shared-") as folder:
        pairs: dict[str, _Pair] = {
            transport: _compile_pair(
                n, size, ROUNDS[size], Path(folder) / transport, transport=transport
            )
            for transport in TRANSPORTS
        }
        for index in range(repeat):
            order = TRANSPORTS if index % 2 == 0 else TRANSPORTS[::-1]
            for transport in order:
                samples[transport].append(pairs[transport].sample().root)
    return samples


def run(repeat: int) -> str:
    started = time.monotonic()
    version, skipped = _torch_version()
    rows = [
        "| n | size | Alpha TCP | Alpha shared memory | shared / TCP (median of turns) "
        "| plain checked star | plain checked star on trio | CPU floor | gloo all_reduce "
        "| TCP / gloo | shared / gloo | shared / plain | shared / plain on trio "
        "| shared / CPU floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in ROLES:
        _log(f"the plain checked star among {n} processes, and the CPU floor")
        plain = _plain(n, repeat)
        on_trio = _plain(n, repeat, on_trio=True)
        floor = {size: _cpu_floor(n, size, repeat) for size in SIZES}
        gloo = _gloo(n, repeat) if version is not None else None
        for size in SIZES:
            _log(f"n = {n}, {_size(size)}: TCP and shared memory, {repeat} turns")
            samples = _measure(n, size, repeat)
            tcp = statistics.median(samples["tcp"])
            shared = statistics.median(samples["auto"])
            turns = statistics.median(
                s / t for s, t in zip(samples["auto"], samples["tcp"], strict=True)
            )
            if gloo is None:
                reference, over_tcp, over_shared = f"skipped: {skipped}", "", ""
            else:
                seconds = gloo[size][0]
                reference = _ms(seconds)
                over_tcp, over_shared = f"{tcp / seconds:.2f}", f"{shared / seconds:.2f}"
            rows.append(
                f"| {n} | {_size(size)} | {_ms(tcp)} | {_ms(shared)} | {shared / tcp:.2f} "
                f"({turns:.2f}) | {_ms(plain[size])} | {_ms(on_trio[size])} "
                f"| {_ms(floor[size])} | {reference} | {over_tcp} | {over_shared} "
                f"| {shared / plain[size]:.2f} | {shared / on_trio[size]:.2f} "
                f"| {shared / floor[size]:.2f} |"
            )
    _log(f"done in {time.monotonic() - started:.0f} s")
    reference = f"torch {version}" if version is not None else f"not measured: {skipped}"
    return "\n".join(
        [
            "The sum check on a star of n real participant processes, keyed frames with SHA-256",
            'payload digests, each plan compiled twice: `[addresses] transport = "tcp"` (every',
            'frame whole over TCP on 127.0.0.1) and `"auto"` (each DATA payload of 64 KiB and more',
            "through its edge's shared-memory region; at 1 KiB the two are the same path).",
            "Alpha's figures as in `combine` (role 0's (T(R2) - T(R1)) / (R2 - R1), medians of",
            f"{repeat} repetitions, R1 / R2 = "
            + ", ".join(f"{ROUNDS[s][0]} / {ROUNDS[s][1]} at {_size(s)}" for s in SIZES)
            + "), the two transports taking turns in each repetition. 'shared / TCP' is the",
            "ratio of the medians, and in brackets the median of each repetition's own ratio.",
            f"The plain checked star, the CPU floor and gloo ({reference}) as in `combine`,",
            f"measured in the same run, on the {os.cpu_count()} cores here. 'plain checked star",
            "on trio' is the same star on trio's sockets and run loop (one `sendmsg` per region",
            "and digest, one `recvmsg_into` for a small region and its digest, no framing, no",
            "budgets): the least a runtime on trio pays for a checked combine.",
            "",
            *rows,
        ]
    )


__all__ = ["KIB", "MIB", "NAME", "run"]
