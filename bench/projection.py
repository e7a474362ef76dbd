"""Projection: time and memory to project one role, against the run's role count.

A sum-check plan (written here, like ``alpha/data/plans/tree-200k.toml``: a tree of fan-out 64,
float64, 1,000 rounds, ``work.size`` 1024) is read (``parse_plan``), turned into its global
protocol (``protocol_for``), checked (``check``) and projected to one role (``project``), at
n = 2,000, 200,000 and 2,000,000 roles, for the root, a middle role and the last role, and
again with the per-round choice (``choice = "parity"``). The reference is the same work at
n = 2,000, timed in the same run just before and just after each measurement; the goal is a
ratio time(n) / time(2,000) of at most 2: nothing in projecting one role may visit every role.
Peak allocation (tracemalloc) of check + project shows the same for memory.

Artifact size against the repeat count: role 1 of a tree of 13 (fan-out 3) compiled with
``compile_plan`` at 4, 400, 40,000 and 4,000,000 rounds. Loops stay loops, so the artifact may
grow by the count's digits only; the 4-round artifact is the reference.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from alpha.app.compile import compile_plan
from alpha.artifact import PAYLOAD_NAME
from alpha.compiler import Protocol, check, encode, project
from alpha.compiler.plan import parse_plan
from alpha.compiler.work import protocol_for
from bench._timing import median_seconds, peak_bytes

NAME = "projection"
SIZES = (2_000, 200_000, 2_000_000)
REFERENCE = SIZES[0]
ROUNDS = 1_000  # rounds * n * (n + 1) / 2 stays below 2**53 at n = 2,000,000: exact in float64
FANOUT = 64
CHOICES = ("none", "parity")
ARTIFACT_ROUNDS = (4, 400, 40_000, 4_000_000)
CALLS = 50  # calls per timed sample: one call (tens to hundreds of µs) is too short alone


def plan_text(
    n: int, *, choice: str = "none", rounds: int = ROUNDS, fanout: int = FANOUT, name: str = ""
) -> str:
    """A sum-check plan of ``n`` roles (a regular group ``0..n-1``) as TOML text."""
    return "\n".join(
        [
            "[run]",
            f'name = "{name or f"projection-{n}"}"',
            f"rounds = {rounds}",
            "[membership]",
            f'group = "(group (stride 0 1 {n}))"',
            "[topology]",
            'shape = "tree"',
            f"fanout = {fanout}",
            "[contract]",
            'dtype = "float64"',
            "[work]",
            'kind = "sum-check"',
            "size = 1024",
            f'choice = "{choice}"',
            "",
        ]
    )


def _per_call(work: Callable[[], object], repeat: int) -> float:
    """The median over ``repeat`` samples of one call's time, each sample ``CALLS`` calls."""

    def batch() -> None:
        for _ in range(CALLS):
            work()

    return median_seconds(batch, repeat=repeat) / CALLS


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def _roles(n: int) -> tuple[tuple[str, int], ...]:
    return (("root 0", 0), ("middle", n // 2), ("last", n - 1))


def _whole(text: str, role: int) -> Callable[[], object]:
    """Parse, build the protocol, check it and project ``role``: the work of ``compile_plan``
    for one role before its artifact is written."""

    def work() -> object:
        protocol = protocol_for(parse_plan(text))
        check(protocol)
        return project(protocol, role)

    return work


def _project_rows(repeat: int) -> list[str]:
    rows = []
    for choice in CHOICES:
        reference_text = plan_text(REFERENCE, choice=choice)
        for n in SIZES:
            text = plan_text(n, choice=choice)
            protocol = protocol_for(parse_plan(text))
            failures = check(protocol)
            assert not failures, failures

            def parse(text: str = text) -> object:
                return protocol_for(parse_plan(text))

            def checked(protocol: Protocol = protocol) -> object:
                return check(protocol)

            t_parse = _per_call(parse, repeat)
            t_check = _per_call(checked, repeat)
            for (label, role), (_, reference_role) in zip(
                _roles(n), _roles(REFERENCE), strict=True
            ):

                def projected(protocol: Protocol = protocol, role: int = role) -> object:
                    return project(protocol, role)

                def check_project(protocol: Protocol = protocol, role: int = role) -> object:
                    check(protocol)
                    return project(protocol, role)

                t_project = _per_call(projected, repeat)
                if n == REFERENCE:
                    t_whole = _per_call(_whole(text, role), repeat)
                    ratio = 1.0
                else:
                    # The reference timed just before and just after, so that a change of the
                    # machine's speed during the run does not pass for a cost of n.
                    reference = _whole(reference_text, reference_role)
                    before = _per_call(reference, repeat)
                    t_whole = _per_call(_whole(text, role), repeat)
                    after = _per_call(reference, repeat)
                    ratio = t_whole / ((before + after) / 2)
                peak = peak_bytes(check_project)
                schedule = json.dumps(encode(project(protocol, role)), separators=(",", ":"))
                rows.append(
                    f"| {choice} | {n:,} | {label} ({role:,}) | {_us(t_parse)} | "
                    f"{_us(t_check)} | {_us(t_project)} | {_us(t_whole)} | {ratio:.2f} | "
                    f"{peak / 1024:,.1f} KiB | {len(schedule):,} B |"
                )
    return rows


def _role_json(artifact: Path) -> bytes:
    with zipfile.ZipFile(artifact) as archive:
        return archive.read(PAYLOAD_NAME)


def _without_count(payload: bytes) -> object:
    """The payload with the loop count and the learner digest (which hashes the round count)
    blanked: what must not change with the count."""
    data = json.loads(payload)
    data["schedule"]["body"][0][1] = None
    data["description"]["identity"]["learner"] = None
    return data


def _artifact_rows() -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="alpha-bench-") as temp:
        base: tuple[int, int, object] | None = None
        for rounds in ARTIFACT_ROUNDS:
            plan = parse_plan(plan_text(13, rounds=rounds, fanout=3, name="projection-13"))
            directory = Path(temp) / f"rounds-{rounds}"
            result = compile_plan(plan, directory, [1])
            artifact = directory / "role-000001.pyz"
            size = artifact.stat().st_size
            assert result.artifact_bytes == (size,)
            payload = _role_json(artifact)
            rest = _without_count(payload)
            if base is None:
                base = (size, len(payload), rest)
            rows.append(
                f"| {rounds:,} | {size:,} B | {len(payload):,} B | {size - base[0]:+d} B | "
                f"{len(payload) - base[1]:+d} B | {len(str(rounds)) - 1:+d} | "
                f"{'yes' if rest == base[2] else 'no'} |"
            )
    return rows


def run(repeat: int) -> str:
    project_rows = _project_rows(repeat)
    artifact_rows = _artifact_rows()
    return "\n".join(
        [
            "One role of a sum-check plan: a tree of fan-out 64 over the regular group",
            f"`(group (stride 0 1 n))`, float64, {ROUNDS:,} rounds (so that",
            "rounds x n(n + 1)/2 < 2^53 at n = 2,000,000 and `protocol_for` accepts it),",
            '`work.size` 1024, without a choice and with `choice = "parity"` (a choice sent',
            "down the tree each round). 'parse' is `parse_plan` + `protocol_for` from the plan's",
            "text; 'check' is `check`; 'project' is `project` for the role; 'all' is the three",
            f"together, and 'ratio' is all(n) / all({REFERENCE:,}) for the same choice and role",
            f"(goal: at most 2), the {REFERENCE:,}-role reference timed in the same run just",
            "before and just after each row's 'all' (the mean of the two), since this machine's",
            f"speed drifts. Times are medians of {repeat} samples, each the mean of {CALLS} calls.",
            "Peak is tracemalloc's peak allocation during one check + project; 'schedule' is",
            "the projected schedule's compact JSON (`encode`), which grows with n only by the",
            "digits of role numbers. The root has 64 children, so its projection (one receive,",
            "scratch buffer and send per child) is the largest; the last role is a leaf.",
            "",
            "| choice | n | role | parse | check | project | all | ratio | peak | schedule |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *project_rows,
            "",
            "Artifact size against the repeat count: role 1 of a tree of 13 (fan-out 3, float64,",
            "no choice) compiled by `compile_plan` with each round count. 'role.json' is the",
            "payload member of the artifact; differences are against the 4-round artifact;",
            "'digits' is the count's extra digits. 'rest same' says whether the payload is",
            "identical once the loop count and the learner digest (a hash over the round count,",
            "of fixed length) are blanked.",
            "",
            "| rounds | artifact | role.json | artifact diff | role.json diff | digits "
            "| rest same |",
            "|---|---|---|---|---|---|---|",
            *artifact_rows,
        ]
    )
