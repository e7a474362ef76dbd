"""Participant start-up: from ``python3 role-NNNNNN.pyz`` to the participant's first wait.

Role 1 of the pair plan (``alpha/data/plans/pair.toml``) is compiled and started with an empty
stdin, so it runs everything a real start runs (the target check, reading its payload,
importing the bundled ``alpha`` with trio and numpy, decoding its schedule) and then exits as
soon as it would wait for its peer's port (``PortMissing``). Timed three ways, interleaved:
the artifact as built (sources and bytecode); the reference, the same artifact with its
``.pyc`` members taken out (every start compiles the sources, as artifacts did before they
carried bytecode); and the floor, a bare ``python -c "import trio, numpy"``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from alpha.app import compile_plan, parse_roles
from alpha.artifact import MANIFEST_NAME, artifact_name, decode_manifest, encode_manifest
from alpha.compiler import load_plan

NAME = "startup"
PLAN = Path(__file__).resolve().parents[1] / "alpha" / "data" / "plans" / "pair.toml"
ROLE = 1


def _without_bytecode(source: Path, target: Path) -> None:
    """Copy the artifact ``source`` to ``target`` without its ``.pyc`` members, and without
    their lines in its manifest, so that the copy is still an artifact its loader accepts."""
    data = source.read_bytes()
    target.write_bytes(data[: data.index(b"PK")])  # the shebang line
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "a") as new:
        kept = [i for i in old.infolist() if not i.filename.endswith(".pyc")]
        *members, manifest = kept
        assert manifest.filename == MANIFEST_NAME, "the manifest is an artifact's last member"
        for info in members:
            new.writestr(info, old.read(info.filename))
        listed = decode_manifest(old.read(manifest))
        new.writestr(manifest, encode_manifest(e for e in listed if not e[0].endswith(".pyc")))


def _seconds(argv: list[str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def run(repeat: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        plan = load_plan(PLAN)
        compile_plan(plan, out / "built", parse_roles("all", plan.participants))
        built = out / "built" / artifact_name(ROLE)
        plain = out / "plain.pyz"
        _without_bytecode(built, plain)
        with zipfile.ZipFile(built) as archive:
            infos = archive.infolist()
        bytecode = sum(i.compress_size for i in infos if i.filename.endswith(".pyc"))
        cases = {
            "with bytecode": [sys.executable, str(built)],
            "sources only (reference)": [sys.executable, str(plain)],
            "bare `import trio, numpy` (floor)": [sys.executable, "-c", "import trio, numpy"],
        }
        expect = {"bare `import trio, numpy` (floor)": 0}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for name, argv in cases.items():  # one unmeasured start each
            _seconds(argv, expect.get(name, 1))
        for _ in range(repeat):
            for name, argv in cases.items():
                samples[name].append(_seconds(argv, expect.get(name, 1)))
        sizes = {
            "with bytecode": built.stat().st_size,
            "sources only (reference)": plain.stat().st_size,
        }
    medians = {name: statistics.median(values) for name, values in samples.items()}
    reference = medians["sources only (reference)"]
    rows = [
        f"| {name} | {seconds:.3f} s | {seconds / reference:.2f} | "
        f"{f'{sizes[name]:,} B' if name in sizes else ''} |"
        for name, seconds in medians.items()
    ]
    return (
        f"Start-up of role {ROLE} of `pair.toml` from its artifact to its first wait, against the "
        f"same artifact without bytecode, interleaved, medians of {repeat} starts. The bytecode "
        f"adds {bytecode:,} bytes (compressed) to every artifact.\n\n"
        "| start | median | ratio | artifact |\n|---|---|---|---|\n" + "\n".join(rows)
    )
