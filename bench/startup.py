"""Participant start-up: from ``python3 role-NNNNNN.pyz`` to the participant's first wait.

Role 1 of the pair plan (``alpha/data/plans/pair.toml``) is compiled and started with an empty
stdin, so it runs everything a real start runs (the target check, reading its payload,
importing the bundled ``alpha`` with trio and numpy, decoding its schedule) and then exits as
soon as it would wait for its peer's port (``PortMissing``). Timed three ways, interleaved:
the artifact as built (its runtime holds sources and bytecode); the reference, the same
artifact bound to a copy of its runtime with the ``.pyc`` members taken out (every start
compiles the sources, as artifacts did before they carried bytecode); and the floor, a bare
``python -c "import trio, numpy"``.
"""

from __future__ import annotations

import hashlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from alpha.app import compile_plan, parse_roles
from alpha.artifact import (
    MANIFEST_NAME,
    artifact_name,
    artifact_runtime,
    build_artifact,
    decode_manifest,
    encode_manifest,
    read_artifact,
)
from alpha.compiler import load_plan

NAME = "startup"
PLAN = Path(__file__).resolve().parents[1] / "alpha" / "data" / "plans" / "pair.toml"
ROLE = 1


def _without_bytecode(source: Path, target: Path) -> None:
    """Write at ``target`` the artifact ``source`` bound to a copy of its runtime without the
    ``.pyc`` members (and without their lines in its manifest), written beside ``target``
    under its own digest's name: an artifact and a runtime its loader accepts."""
    runtime = source.parent / artifact_runtime(source)[0]
    data = runtime.read_bytes()
    out = io.BytesIO()
    out.write(data[: data.index(b"PK")])  # the two lines
    with zipfile.ZipFile(runtime) as old, zipfile.ZipFile(out, "a") as new:
        kept = [i for i in old.infolist() if not i.filename.endswith(".pyc")]
        *members, manifest = kept
        assert manifest.filename == MANIFEST_NAME, "the manifest is a runtime's last member"
        for info in members:
            new.writestr(info, old.read(info.filename))
        listed = decode_manifest(old.read(manifest))
        new.writestr(manifest, encode_manifest(e for e in listed if not e[0].endswith(".pyc")))
    digest = hashlib.sha256(out.getvalue()).hexdigest()
    name = f"runtime-{digest}.pyz"
    (target.parent / name).write_bytes(out.getvalue())
    bound = {"file": name, "bytes": len(out.getvalue()), "sha256": digest}
    build_artifact(target, read_artifact(source), runtime=bound)


def _with_runtime(artifact: Path) -> int:
    return (
        artifact.stat().st_size + (artifact.parent / artifact_runtime(artifact)[0]).stat().st_size
    )


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
        (out / "plain").mkdir()
        plain = out / "plain" / artifact_name(ROLE)
        _without_bytecode(built, plain)
        with zipfile.ZipFile(built.parent / artifact_runtime(built)[0]) as archive:
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
        sizes = {  # the role's artifact and its runtime
            "with bytecode": _with_runtime(built),
            "sources only (reference)": _with_runtime(plain),
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
        f"adds {bytecode:,} bytes (compressed) to the runtime (once per folder); sizes are "
        "the role's artifact and its runtime.\n\n"
        "| start | median | ratio | artifact |\n|---|---|---|---|\n" + "\n".join(rows)
    )
