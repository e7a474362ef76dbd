"""Combine, keyed against unkeyed and BLAKE3 against SHA-256 (issue 25), in one run.

The sum check on a star of n = 4 real participant processes, measured as ``bench.combine``
measures Alpha (one plan compiled for R1 and R2 rounds, launched R1 then R2; a sample is
(T(R2) - T(R1)) / (R2 - R1) with T role 0's time from its last edge established to its last
round done, and every launch must commit the declared-order fold), for several ``[contract]``
settings of the same plan:

* keyed (``integrity = "hmac-sha256"``, the default) and unkeyed (``integrity = "sha256"``)
  at 1 KiB, 1 MiB and 64 MiB;
* at 64 MiB also keyed with ``payload_digest = "blake3"``.

The variants of one size take turns within each repetition, their order rotated from one
repetition to the next, so that a noisy neighbour slows each alike. The ratios are of the
medians (keyed / unkeyed, blake3 / sha256), and beside them the median of the repetitions' own
ratios (each repetition's variants measured within seconds of each other), for role 0's time
and for the participants' CPU per combine (their user and system time, by ``getrusage`` of
this process's children, differenced like T). Issue 25's targets: keyed at most 1.05 times
unkeyed at each size; BLAKE3 at most 0.6 times SHA-256 at 64 MiB.

``python -m bench combine-keyed [--repeat N]`` runs this alone (it does not rewrite
docs/benchmarks.md; ``make bench`` runs it with the rest).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alpha.wire import payload_digest
from bench._timing import median_seconds
from bench.combine import (
    KIB,
    MIB,
    _compile_pair,
    _Launched,
    _ms,
    _Pair,
    _size,
    _transfer_cpu,
)

NAME = "combine-keyed"
ROLES = 4
SIZES = (1 * KIB, 1 * MIB, 64 * MIB)

# R1 / R2 per size: R2 - R1 rounds take about 2 to 7 s at n = 4, twice what bench.combine
# takes at 64 MiB, so that one launch's jitter (a tenth of a second or more) is a few per cent
# of the difference, below the 5 per cent the targets tell apart.
ROUNDS = {1 * KIB: (100, 2100), 1 * MIB: (10, 310), 64 * MIB: (1, 17)}


@dataclass(frozen=True, slots=True)
class Variant:
    """One ``[contract]`` setting of the benchmark's plan."""

    name: str
    contract: Mapping[str, str]


KEYED = Variant("keyed, SHA-256", {"integrity": "hmac-sha256", "payload_digest": "sha256"})
UNKEYED = Variant("unkeyed, SHA-256", {"integrity": "sha256", "payload_digest": "sha256"})
BLAKE3 = Variant("keyed, BLAKE3", {"integrity": "hmac-sha256", "payload_digest": "blake3"})

VARIANTS = {
    1 * KIB: (KEYED, UNKEYED),
    1 * MIB: (KEYED, UNKEYED),
    64 * MIB: (KEYED, UNKEYED, BLAKE3),
}

# Each comparison: (size, numerator, denominator, the bound on the ratio).
COMPARISONS = (
    (1 * KIB, KEYED, UNKEYED, 1.05),
    (1 * MIB, KEYED, UNKEYED, 1.05),
    (64 * MIB, KEYED, UNKEYED, 1.05),
    (64 * MIB, BLAKE3, KEYED, 0.6),
)


def _log(text: str) -> None:
    print(f"bench: {NAME}: {text}", file=sys.stderr, flush=True)


def _rotated(variants: tuple[Variant, ...], turn: int) -> list[Variant]:
    shift = turn % len(variants)
    return [*variants[shift:], *variants[:shift]]


Samples = dict[int, dict[str, list[_Launched]]]
"""By size and variant name, one sample per repetition (seconds per combine)."""


def measure(repeat: int) -> Samples:
    """Seconds per combine, one sample per repetition, by size and variant name; the variants
    of a size take turns (order rotated each repetition), the sizes one after another."""
    samples: Samples = {}
    with tempfile.TemporaryDirectory(prefix="alpha-bench-combine-keyed-") as folder:
        for size in SIZES:
            pairs: dict[str, _Pair] = {
                variant.name: _compile_pair(
                    ROLES, size, ROUNDS[size], Path(folder) / f"{size}-{index}", variant.contract
                )
                for index, variant in enumerate(VARIANTS[size])
            }
            found: dict[str, list[_Launched]] = {name: [] for name in pairs}
            for turn in range(repeat):
                for variant in _rotated(VARIANTS[size], turn):
                    found[variant.name].append(pairs[variant.name].sample())
                line = ", ".join(
                    f"{name} {_ms(got[-1].root)} (CPU {_ms(got[-1].cpu)})"
                    for name, got in found.items()
                )
                _log(f"n = {ROLES}, {_size(size)}: {line} ({turn + 1}/{repeat})")
            samples[size] = found
            for index in range(len(pairs)):  # done with this size's folders
                shutil.rmtree(Path(folder) / f"{size}-{index}")
    return samples


def _digest_rates(repeat: int) -> tuple[float, float]:
    """This process's median seconds of one SHA-256 and one BLAKE3 of 64 MiB, interleaved."""
    region = os.urandom(64 * MIB)
    pairs = []
    payload_digest(region, "blake3")  # imports blake3, warms both
    hashlib.sha256(region).digest()
    for _ in range(repeat):
        start = time.perf_counter()
        payload_digest(region, "sha256")
        middle = time.perf_counter()
        payload_digest(region, "blake3")
        pairs.append((middle - start, time.perf_counter() - middle))
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _ratios(top: list[float], bottom: list[float]) -> tuple[float, float]:
    """The ratio of the medians, and the median of the repetitions' own ratios."""
    of_medians = statistics.median(top) / statistics.median(bottom)
    return of_medians, statistics.median(a / b for a, b in zip(top, bottom, strict=True))


# Per combine at n roles on a star: role 0 digests its own region, the n - 1 it receives and
# the total once; each other role its own and the total (3n - 2); 2(n - 1) transfers, n - 1
# additions (bench.combine's CPU floor).
HASHES = 3 * ROLES - 2
TRANSFERS = 2 * (ROLES - 1)
ADDS = ROLES - 1


def _floor_rest(repeat: int) -> float:
    """The CPU seconds of a 64 MiB combine's transfers and additions, measured here."""
    region = np.ones(64 * MIB // 4, dtype=np.float32)
    other = np.ones_like(region)
    adding = median_seconds(lambda: np.add(region, other, out=other), repeat=repeat)
    return TRANSFERS * _transfer_cpu(64 * MIB, repeat) + ADDS * adding


def table(samples: Samples) -> list[str]:
    """The medians, then the comparisons (ratio of medians, median of per-repetition ratios),
    of role 0's time and of the participants' CPU, against the issue's bound."""
    rows = [
        "| size | R1 / R2 | variant | per combine: median (min - max) | CPU per combine: median "
        "(min - max) |",
        "|---|---|---|---|---|",
    ]
    for size, found in samples.items():
        low, high = ROUNDS[size]
        for name, got in found.items():
            root, cpu = [one.root for one in got], [one.cpu for one in got]
            rows.append(
                f"| {_size(size)} | {low} / {high} | {name} | {_ms(statistics.median(root))} "
                f"({_ms(min(root))} - {_ms(max(root))}) | {_ms(statistics.median(cpu))} "
                f"({_ms(min(cpu))} - {_ms(max(cpu))}) |"
            )
    rows += [
        "",
        "| size | ratio | per combine: of medians | per-repetition ratios' median "
        "| CPU: of medians | CPU: per-repetition ratios' median | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for size, top, bottom, bound in COMPARISONS:
        numerator, denominator = samples[size][top.name], samples[size][bottom.name]
        wall_ratios = _ratios([s.root for s in numerator], [s.root for s in denominator])
        cpu_ratios = _ratios([s.cpu for s in numerator], [s.cpu for s in denominator])
        figures = " | ".join(f"{ratio:.3f}" for ratio in (*wall_ratios, *cpu_ratios))
        rows.append(
            f"| {_size(size)} | {top.name} / {bottom.name} | {figures} | at most {bound:g} |"
        )
    return rows


def run(repeat: int) -> str:
    started = time.monotonic()
    samples = measure(repeat)
    sha, b3 = _digest_rates(repeat)
    rest = _floor_rest(repeat)
    _log(f"done in {time.monotonic() - started:.0f} s")
    return "\n".join(
        [
            f"The sum check on a star of n = {ROLES} real participant processes on 127.0.0.1,",
            "as in `combine` (each plan compiled for R1 and R2 rounds, launched R1 then R2; a",
            "sample is (T(R2) - T(R1)) / (R2 - R1), T role 0's time from its last edge",
            "established to its last round done; every launch committed the declared-order",
            "fold), for three `[contract]` settings of the same plan: keyed (`integrity =",
            '"hmac-sha256"`, the default: trailer HMAC-SHA256 under the edge key, layout 3),',
            'unkeyed (`integrity = "sha256"`: layout 2) and, at 64 MiB, keyed with',
            '`payload_digest = "blake3"`. Within each of the',
            f"{repeat} repetitions the variants of a size take turns, their order rotated each",
            "repetition; medians over the repetitions. 'CPU per combine' is the same",
            "difference of the participants' user and system CPU (`getrusage` of this",
            "process's children around each launch), all roles together: less moved by",
            "neighbours than wall time on a shared machine. 'of medians' divides the medians;",
            "'per-repetition ratios' median' divides each repetition's samples, taken seconds",
            "apart, first. Issue 25's targets: keyed at most 1.05 times unkeyed; BLAKE3 at",
            "most 0.6 times SHA-256 at 64 MiB.",
            "",
            *table(samples),
            "",
            f"One payload digest of 64 MiB in this process, interleaved (median of {repeat}):",
            f"SHA-256 {_ms(sha)} ({64 * MIB / sha / 1e6:,.0f} MB/s), BLAKE3 {_ms(b3)}",
            f"({64 * MIB / b3 / 1e6:,.0f} MB/s), ratio {b3 / sha:.2f}. The CPU a 64 MiB combine",
            f"at n = {ROLES} cannot do without, as `combine`'s CPU floor counts it:",
            f"{HASHES} payload digests, {TRANSFERS} loopback transfers (sender and receiver)",
            f"and {ADDS} float32 additions, the last two {_ms(rest)} here: with SHA-256",
            f"{_ms(HASHES * sha + rest)}, with BLAKE3 {_ms(HASHES * b3 + rest)}, ratio",
            f"{(HASHES * b3 + rest) / (HASHES * sha + rest):.2f}: the least BLAKE3 / SHA-256",
            "ratio of CPU per combine, and of wall time where the cores are the limit.",
        ]
    )
