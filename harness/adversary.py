"""Adversarial participants: an honest role's artifact rebuilt with one behaviour changed, and
participants of another run (built from a plan with one field changed, or from other code).

An adversary is what an attacker with the project's sources would build: the honest role's
payload (its description, identity and schedule, byte for byte) in an artifact whose bundled
``alpha`` package is a copy with one patch applied. The patched copy is imported by a separate
build process, so the artifact's sources, bytecode and manifest are consistent: the loader's
checks pass and only the behaviour differs. Each patch must match the package's source exactly
once; a patch that no longer matches fails loudly (:class:`PatchStale`) instead of building
an honest participant by mistake.

A foreign participant is honest code for another run: a plan with one field changed
(:func:`foreign_artifact`), or the same plan compiled from code with another code digest
(:func:`compile_with_code`). Its hello carries another run identity.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import alpha
from alpha.artifact import artifact_name
from alpha.compile import compile_plan
from alpha.plan import parse_plan

__all__ = [
    "BEHAVIOURS",
    "Behaviour",
    "Patch",
    "PatchStale",
    "build_adversary",
    "compile_with_code",
    "foreign_artifact",
    "patched_package",
]

_PACKAGE: Final = Path(alpha.__file__).resolve().parent
_INTERPRETER: Final = "alpha/runtime/interpreter.py"


class PatchStale(RuntimeError):
    """A patch no longer matches the package's source exactly once."""


@dataclass(frozen=True)
class Patch:
    """Replace ``old`` by ``new`` in ``module`` (a path inside the package's parent)."""

    module: str
    old: str
    new: str
    times: int = 1  # how often ``old`` occurs: every occurrence is replaced


@dataclass(frozen=True)
class Behaviour:
    """One changed behaviour: its name, what it does, and the patches that make it."""

    name: str
    meaning: str
    patches: tuple[Patch, ...]


_ARMS: Final = "await self._body(ins.arm1 if word else ins.arm0, depth)"
_RECEIVE_WORD: Final = """\
            slot = self._receive_slot(ins.source, ins.slot, FrameKind.CHOICE, WORD_BYTES, None)
            step = f"receiving the choice word from role {ins.source} (round {ctx.round})"
            payload = await self._receive(ins.source, slot, step)
            word = decode_word(bytes(payload), role=self.role, source=ins.source)
"""
_ENCODE: Final = "data = encode_word(word)"
_WORD_SLOT: Final = "slot_out = self._send_slot(peer, ins.slot, FrameKind.CHOICE, WORD_BYTES)"
_ARM: Final = """\
            reception = slot.arm(deferred=deferred)
            sock = self.stream.socket
            if first:
"""
_COUNTER: Final = '_check_width("next_version", next_version, MAX_VERSION)'

BEHAVIOURS: Final[dict[str, Behaviour]] = {
    behaviour.name: behaviour
    for behaviour in (
        Behaviour(
            "inverted-choice",
            "takes the arm opposite to the agreed word",
            (
                Patch(
                    _INTERPRETER,
                    _ARMS,
                    _ARMS.replace("arm1 if word else ins.arm0", "arm0 if word else ins.arm1"),
                ),
            ),
        ),
        Behaviour(
            "independent-forwarder",
            "decides the round's parity itself instead of relaying the authority's word",
            (
                Patch(
                    _INTERPRETER,
                    _RECEIVE_WORD,
                    "            word = ctx.round % 2  # decided here, the authority unheard\n",
                ),
            ),
        ),
        Behaviour(
            "noncanonical-word",
            "sends the agreed word little-endian (1 as 01 00 .. 00), not canonical",
            (Patch(_INTERPRETER, _ENCODE, 'data = word.to_bytes(WORD_BYTES, "little")'),),
        ),
        Behaviour(
            "mismatched-binding",
            "binds the choice word to a data frame instead of a choice frame",
            (
                Patch(
                    _INTERPRETER,
                    _WORD_SLOT,
                    _WORD_SLOT.replace("FrameKind.CHOICE", "FrameKind.DATA"),
                ),
            ),
        ),
        Behaviour(
            "double-rearm",
            "arms a receive slot twice for the same frame",
            (
                Patch(
                    "alpha/runtime/channel.py",
                    _ARM,
                    _ARM.replace(
                        "slot.arm(deferred=deferred)\n",
                        "slot.arm(deferred=deferred)\n            slot.arm()\n",
                        1,
                    ),
                ),
            ),
        ),
        Behaviour(
            "near-overflow",
            "starts every slot's version counter two frames before its maximum",
            (
                Patch(
                    "alpha/frame.py",
                    _COUNTER,
                    _COUNTER + "\n        next_version = max(next_version, MAX_VERSION - 2)",
                    times=2,
                ),
            ),
        ),
        Behaviour(
            "other-program",
            "honest, from sources that differ by one comment (another code digest)",
            (Patch("alpha/runtime/ops.py", "\n__all__ = [", "\n# another copy\n__all__ = ["),),
        ),
    )
}
"""Every changed behaviour by name; docs/gates.md says which gate uses which."""


def patched_package(behaviour: Behaviour, into: Path) -> Path:
    """Copy the ``alpha`` package into ``into/alpha`` and apply ``behaviour``'s patches;
    return ``into`` (the folder to put first on a build process's path).

    Raises:
        PatchStale: a patch's ``old`` text is not in its module exactly once.
    """
    target = into / "alpha"
    # The copy carries the package data too (alpha/data/: the data set a plan names).
    shutil.copytree(_PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    for patch in behaviour.patches:
        module = into / patch.module
        source = module.read_text()
        found = source.count(patch.old)
        if found != patch.times:
            raise PatchStale(
                f"{behaviour.name}: {patch.module} holds the patched text {found} times, not "
                f"{patch.times}; update harness/adversary.py to the current source"
            )
        module.write_text(source.replace(patch.old, patch.new))
    return into


def _run_with(root: Path, code: str, *args: str) -> None:
    """Run ``code`` in a fresh interpreter that imports ``alpha`` from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    check = (
        "import alpha, pathlib, sys\n"
        f"assert pathlib.Path(alpha.__file__).resolve().is_relative_to({str(root.resolve())!r}), "
        "alpha.__file__\n"
    )
    subprocess.run([sys.executable, "-c", check + code, *args], env=env, cwd=root, check=True)


_BUILD: Final = """
from alpha.artifact import build_artifact, read_artifact
build_artifact(pathlib.Path(sys.argv[2]), read_artifact(pathlib.Path(sys.argv[1])))
"""

_COMPILE: Final = """
from alpha.compile import compile_plan
from alpha.plan import parse_plan
plan = parse_plan(pathlib.Path(sys.argv[1]).read_text(), source=sys.argv[1])
compile_plan(plan, pathlib.Path(sys.argv[2]), [int(r) for r in sys.argv[3].split(",")])
"""


def build_adversary(honest: Path, behaviour: str, out: Path) -> Path:
    """Write at ``out`` the artifact of ``honest``'s role, payload unchanged, carrying the
    package with ``behaviour`` (a key of :data:`BEHAVIOURS`); return ``out``.

    Raises:
        KeyError: no such behaviour.
        PatchStale: as :func:`patched_package`.
        subprocess.CalledProcessError: the build failed (its traceback is on stderr).
    """
    chosen = BEHAVIOURS[behaviour]
    work = out.parent / f".{out.name}.package"
    shutil.rmtree(work, ignore_errors=True)
    try:
        root = patched_package(chosen, work)
        _run_with(root, _BUILD, str(honest), str(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def compile_with_code(plan_text: str, behaviour: str, out: Path, roles: list[int]) -> Path:
    """Compile ``plan_text`` into ``out`` for ``roles`` with the package patched by
    ``behaviour``: the artifacts bind that code's digest into their run identity. Return out.
    """
    chosen = BEHAVIOURS[behaviour]
    work = out.parent / f".{out.name}.package"
    shutil.rmtree(work, ignore_errors=True)
    try:
        root = patched_package(chosen, work)
        plan_file = work / "plan.toml"
        plan_file.write_text(plan_text)
        _run_with(root, _COMPILE, str(plan_file), str(out), ",".join(map(str, roles)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def foreign_artifact(plan_text: str, role: int, out: Path) -> Path:
    """Compile ``role`` of ``plan_text`` (honest code, another plan) into the folder ``out``;
    return its artifact."""
    compile_plan(parse_plan(plan_text, source="foreign"), out, [role])
    return out / artifact_name(role)
