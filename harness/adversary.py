"""Adversarial participants: an honest role's artifact rebuilt with one behaviour changed, and
participants of another run (built from a plan with one field changed, or from other code).

An adversary is what an attacker with the project's sources would build: the honest role's
payload (its description, identity and schedule, byte for byte) in an artifact whose bundled
``alpha`` package is a copy with one patch applied. The patched copy is imported by a separate
build process, so the artifact's sources, bytecode and manifest are consistent: the loader's
checks pass and only the behaviour differs. Each patch must match the package's source exactly
once; a patch that no longer matches fails loudly (:class:`PatchStale`) instead of building
an honest participant by mistake.

One behaviour is a damage instead of a patch (:class:`Damage`, :func:`damage_member`): the
honest artifact with one stored member's bytes changed in place and its CRC-32 recomputed, so
that only the loader's SHA-256 of the member can tell. Another is the honest artifact beside a
tampered runtime (:func:`tamper_runtime`): the package patched, under the name of the runtime
the role binds, so that only the role's check of its runtime's SHA-256 can tell.

A foreign participant is honest code for another run: a plan with one field changed
(:func:`foreign_artifact`), or the same plan compiled from code with another code digest
(:func:`compile_with_code`). Its hello carries another run identity.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import alpha
from alpha.app import compile_plan, compiled_identity
from alpha.artifact import artifact_name, artifact_runtime
from alpha.compiler import parse_plan
from alpha.runtime import hello_spec
from alpha.wire import KEYED_FORMAT_VERSION, keyed_seal, payload_digest

__all__ = [
    "BEHAVIOURS",
    "PERTURBED_FROM",
    "Behaviour",
    "Damage",
    "Patch",
    "PatchStale",
    "build_adversary",
    "compile_with_code",
    "damage_member",
    "foreign_artifact",
    "keyless_hello",
    "patched_package",
    "tamper_runtime",
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
    # Not a patched package but the honest artifact with one stored member's bytes changed
    # and its CRC-32 recomputed (:func:`damage_member`): a damage only the manifest's SHA-256
    # can find.
    damage: Damage | None = None
    # Not a role built on the patched package but the honest artifact, byte for byte, beside a
    # runtime built from it under the honest runtime's name (:func:`tamper_runtime`): what only
    # the role's check of its runtime's SHA-256 can find.
    runtime: bool = False


@dataclass(frozen=True)
class Damage:
    """Replace ``old`` by ``new`` (of the same length) in the stored member ``member``."""

    member: str
    old: bytes
    new: bytes


_TAMPER_AT: Final = "from alpha.errors import AlphaError\n"
_TAMPERED: Final = (
    "import sys as _sys\n"
    "if _sys.argv[0].endswith('.pyz'):  # a role started from it, not the build\n"
    "    print('role ?: the tampered runtime ran', file=_sys.stderr)\n"
)
_ARMS: Final = "await self._body(ins.arm1 if word else ins.arm0, depth)"
_RECEIVE_WORD: Final = """\
            slot = self._receive_slot(ins.source, ins.slot, FrameKind.CHOICE, WORD_BYTES, None)
            step = f"receiving the choice word from role {ins.source} (round {ctx.round})"
            payload = await self._receive(ins.source, slot, step)
            word = decode_word(bytes(payload), role=self.role, source=ins.source)
"""
_ENCODE: Final = "data = encode_word(word)"
_DECODE: Final = (
    "            word = decode_word(bytes(payload), role=self.role, source=ins.source)\n"
)
_WORD_SLOT: Final = "slot_out = self._send_slot(peer, ins.slot, FrameKind.CHOICE, WORD_BYTES)"
_ARM: Final = """\
            reception = slot.arm(deferred=deferred)
            sock = self.stream.socket
            if first:
"""
_COUNTER: Final = '_check_width("next_version", next_version, MAX_VERSION)'
# The two places a counter starts: a sending slot's (SendSlot) and a receiving slot's.
_SEND_START: Final = _COUNTER + "\n        self.sealing = "
_RECEIVE_START: Final = _COUNTER + "\n        if buffer is None:\n"
_NEAR_TOP: Final = "\n        next_version = max(next_version, MAX_VERSION - 2)"
# The two overflow checks: the sending counter's (SendSlot.begin) and a receive slot's arm.
_SEND_OVERFLOW: Final = "        if version >= MAX_VERSION:\n"
_RECEIVE_OVERFLOW: Final = "        if self._next_version >= MAX_VERSION:\n"
_UNCHECKED: Final = "        if False:  # this role's overflow check, removed\n"
_SENT: Final = """\
        self.where.at(step, peer)
        return await self.channels[peer].send(slot, payload, step=step, digest=digest)
"""


# The shared-memory transport (alpha/runtime/channel.py `_send_shared`, alpha/runtime/shared.py
# `Region.make`): the doorbell is sealed, then sent; a region is reserved, then marked.
_CHANNEL: Final = "alpha/runtime/channel.py"
_CHANNEL_OS: Final = Patch(_CHANNEL, "import fcntl\n", "import fcntl\nimport os\n")
_SEALED: Final = """\
            frame = unsealed.seal(found[0])
            rest = self._write_now((frame.header, frame.trailer), step)
"""
_SEAL_LINE: Final = "            frame = unsealed.seal(found[0])\n"
# After the trailer was computed over the payload, before the doorbell leaves: so the receiver,
# which copies out only once the doorbell's header is in, sees what was done to the region.
_REWRITE_LAST_BYTE: Final = (
    "            _at = area.offset + area.extent - 1  # the payload's last byte, flipped\n"
    "            os.pwrite(region.fd, bytes([os.pread(region.fd, 1, _at)[0] ^ 1]), _at)\n"
)
_CUT_SHORT: Final = (
    "            os.ftruncate(region.fd, area.offset + area.extent // 2)  # half a payload\n"
)
_SHARED: Final = "alpha/runtime/shared.py"
_RESERVE: Final = "            os.posix_fallocate(fd, 0, layout.size)\n"
_MARK: Final = "            region._pwrite(layout.marker, 0)\n"
_DIGEST_AT: Final = 16  # the layout digest's offset in a region's marker (magic, format first)


def _after_seal(added: str) -> tuple[Patch, ...]:
    """``_send_shared`` does ``added`` between sealing its frame and sending its doorbell."""
    return (_CHANNEL_OS, Patch(_CHANNEL, _SEALED, _SEALED.replace(_SEAL_LINE, _SEAL_LINE + added)))


_COMPLETION: Final = "alpha/runtime/completion.py"
_DONE: Final = (
    "        await upward.send(_end(upward).completion_out(FrameKind.DONE), mine, step=step)\n"
)

# A learner's contribution (alpha/schedule/operations.py, the `contribute` operation).
_OPERATIONS: Final = "alpha/schedule/operations.py"
_CONTRIBUTE: Final = """\
    "contribute": lambda ctx, g: ctx.need_learner().contribute(
        ctx.buffers[PARAMETERS], g, ctx.round
    ),
"""
# From this round on (counted from 0) the perturbed contribution differs: round 0 stays the
# honest run's, so that a diff must name the round as well as the role.
PERTURBED_FROM: Final = 1
_PERTURBED: Final = f"""\
    "contribute": lambda ctx, g: (
        ctx.need_learner().contribute(ctx.buffers[PARAMETERS], g, ctx.round),
        # One ulp up, in the region's own dtype (a float64 step would round back to g[0]).
        ctx.round >= {PERTURBED_FROM}
        and g.__setitem__(0, np.nextafter(g[0], g.dtype.type(np.inf))),
    )[0],
"""

# The sending side's module and the receiving side's (alpha.wire.send and alpha.wire.receive).
_SEND: Final = "alpha/wire/send.py"
_RECEIVE: Final = "alpha/wire/receive.py"


def _near_top(module: str, start: str) -> Patch:
    """The counters that start at ``start`` in ``module`` (a sending or a receiving slot's)
    start two frames before their maximum instead of at 0."""
    return Patch(module, start, start.replace(_COUNTER, _COUNTER + _NEAR_TOP))


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
            (_near_top(_SEND, _SEND_START), _near_top(_RECEIVE, _RECEIVE_START)),
        ),
        # One-sided overflow (docs/gates.md): a role whose counters on one side start near the
        # top keeps the product's checks ("aged", as after 2^64 - 3 frames); its peer starts
        # the matching side near the top too, with that side's own check removed, so the
        # aged role's check is the only one that can refuse.
        Behaviour(
            "aged-receiver",
            "starts every receiving slot's counter two frames before its maximum; its checks "
            "are the product's",
            (_near_top(_RECEIVE, _RECEIVE_START),),
        ),
        Behaviour(
            "overflowing-sender",
            "starts every sending slot's counter two frames before its maximum and sends past "
            "it (its send-side overflow check removed)",
            (
                _near_top(_SEND, _SEND_START),
                Patch(_SEND, _SEND_OVERFLOW, _UNCHECKED),
            ),
        ),
        Behaviour(
            "aged-sender",
            "starts every sending slot's counter two frames before its maximum; its checks are "
            "the product's",
            (_near_top(_SEND, _SEND_START),),
        ),
        Behaviour(
            "overflowing-receiver",
            "starts every receiving slot's counter two frames before its maximum and accepts "
            "past it (its receive-side overflow check removed)",
            (
                _near_top(_RECEIVE, _RECEIVE_START),
                Patch(_RECEIVE, _RECEIVE_OVERFLOW, _UNCHECKED),
            ),
        ),
        Behaviour(
            "stall-after-first",
            "after each frame it sends (the first one first), sends and reads nothing for "
            "two of its receive budgets, then goes on",
            (
                Patch(
                    _INTERPRETER,
                    _SENT,
                    _SENT.replace("return await", "sent = await")
                    + "        await trio.sleep(2 * self.channels[peer].budgets.receive)\n"
                    "        return sent\n",
                ),
            ),
        ),
        Behaviour(
            "lying-forwarder",
            "reads the authority's word, then relays and follows the other one",
            (
                Patch(
                    _INTERPRETER,
                    _DECODE,
                    _DECODE + "            word = 1 - word  # relayed and followed: the other\n",
                ),
            ),
        ),
        Behaviour(
            "damaged-member",
            "its payload (role.json, stored) with the receive budget's 4.0 changed to 5.0 and "
            "the member's CRC-32 recomputed: the zip reads cleanly, only the manifest's SHA-256 "
            "tells",
            (),
            damage=Damage("role.json", b'"receive":4.0', b'"receive":5.0'),
        ),
        Behaviour(
            "tampered-runtime",
            "its own artifact unchanged, beside a runtime of the package with one line added "
            "(it says it ran) under the honest runtime's name: consistent within itself, its "
            "manifest lists its members, but its SHA-256 is not the one the role binds",
            (Patch("alpha/__init__.py", _TAMPER_AT, _TAMPER_AT + _TAMPERED),),
            runtime=True,
        ),
        Behaviour(
            "done-twice",
            "sends its DONE twice: its parent refuses the second as bytes after its last frame "
            "(TrailingBytes) and aborts the run where the COMMIT is due to its other children",
            (Patch(_COMPLETION, _DONE, _DONE + _DONE),),
        ),
        Behaviour(
            "region-rewritten",
            "flips the last byte of each payload in its outgoing shared-memory region after "
            "the frame's trailer was computed, before its doorbell leaves",
            _after_seal(_REWRITE_LAST_BYTE),
        ),
        Behaviour(
            "region-cut-short",
            "cuts its outgoing shared-memory region short (ftruncate) inside the payload it "
            "just wrote, before its doorbell leaves",
            _after_seal(_CUT_SHORT),
        ),
        Behaviour(
            "region-page-short",
            "makes each incoming shared-memory region one page shorter than the schedule's layout",
            (Patch(_SHARED, _RESERVE, _RESERVE.replace("layout.size", "layout.size - 4096")),),
        ),
        Behaviour(
            "region-foreign-marker",
            "marks each incoming shared-memory region with another layout digest (as another "
            "run's, edge's or set of slots' region would be)",
            (
                Patch(
                    _SHARED,
                    _MARK,
                    _MARK.replace(
                        "layout.marker",
                        f"layout.marker[:{_DIGEST_AT}] + bytes(32) + "
                        f"layout.marker[{_DIGEST_AT + 32}:]",
                    ),
                ),
            ),
        ),
        Behaviour(
            "perturbed-contribution",
            f"from round {PERTURBED_FROM} on, its learner contribution's first value one ulp "
            "higher (np.nextafter, in the region's dtype); every frame and check honest",
            (Patch(_OPERATIONS, _CONTRIBUTE, _PERTURBED),),
        ),
        Behaviour(
            "other-program",
            "honest, from sources that differ by one comment (another code digest)",
            (
                Patch(
                    "alpha/runtime/whereabouts.py", "\n__all__ = [", "\n# another copy\n__all__ = ["
                ),
            ),
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
from alpha.app import compile_plan
from alpha.compiler import parse_plan
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
    if chosen.damage is not None:
        return damage_member(honest, chosen.damage, out)
    if chosen.runtime:
        return tamper_runtime(honest, chosen, out)
    work = out.parent / f".{out.name}.package"
    shutil.rmtree(work, ignore_errors=True)
    try:
        root = patched_package(chosen, work)
        _run_with(root, _BUILD, str(honest), str(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


_BUILD_RUNTIME: Final = """
from alpha.artifact import build_runtime
build_runtime(pathlib.Path(sys.argv[1]))
"""


def _runtime_beside(honest: Path, out: Path) -> Path:
    """Copy the runtime ``honest`` binds beside ``out`` (unless there); return its path there."""
    name, _ = artifact_runtime(honest)
    there = out.parent / name
    if not there.exists():
        shutil.copyfile(honest.parent / name, there)
    return there


def tamper_runtime(honest: Path, behaviour: Behaviour, out: Path) -> Path:
    """Write at ``out`` the artifact ``honest``, byte for byte, and beside it, under the name
    of the runtime it binds, the runtime of the package patched by ``behaviour``: a whole,
    self-consistent runtime (its manifest lists its members) whose SHA-256 is not the one the
    role binds. Return ``out``.

    Raises:
        PatchStale: as :func:`patched_package`.
        subprocess.CalledProcessError: the build failed (its traceback is on stderr).
    """
    work = out.parent / f".{out.name}.package"
    built = out.parent / f".{out.name}.runtime"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(built, ignore_errors=True)
    built.mkdir()
    try:
        root = patched_package(behaviour, work)
        _run_with(root, _BUILD_RUNTIME, str(built))
        (tampered,) = built.iterdir()
        name, _ = artifact_runtime(honest)
        shutil.copyfile(honest, out)
        out.chmod(honest.stat().st_mode)
        tampered.replace(out.parent / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(built, ignore_errors=True)
    return out


_LOCAL_HEADER: Final = struct.Struct("<4s5H3L2H")  # a zip local file header (30 bytes)
_CENTRAL_CRC_AT: Final = 16  # the CRC-32 in a central directory entry
_LOCAL_CRC_AT: Final = 14  # the CRC-32 in a local file header


def damage_member(honest: Path, damage: Damage, out: Path) -> Path:
    """Write at ``out`` the artifact ``honest`` with ``damage.old`` replaced by ``damage.new``
    in its stored member ``damage.member``, and that member's CRC-32 recomputed in its local
    header and its central directory entry: every byte else, lengths and offsets included, is
    the honest artifact's, so ``zipfile`` reads it without complaint. Return ``out``.

    Raises:
        ValueError: the member is not stored uncompressed, or ``old`` is not in it exactly
            once, or ``new`` is not as long as ``old``.
    """
    data = bytearray(honest.read_bytes())
    with zipfile.ZipFile(honest) as archive:
        info = archive.getinfo(damage.member)
        content = archive.read(info)
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{damage.member} is compressed; damage a stored member")
    if content.count(damage.old) != 1 or len(damage.new) != len(damage.old):
        raise ValueError(f"{damage.member} must hold {damage.old!r} once, replaced in place")
    changed = content.replace(damage.old, damage.new)
    # zipfile's header_offset counts from the file's start, the artifact's two lines included.
    local = info.header_offset
    fields = _LOCAL_HEADER.unpack_from(data, local)
    start = local + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    if bytes(data[start : start + len(content)]) != content:
        raise ValueError(f"{damage.member}'s data is not where its local header says")
    data[start : start + len(content)] = changed
    crc = struct.pack("<L", zlib.crc32(changed))
    data[local + _LOCAL_CRC_AT : local + _LOCAL_CRC_AT + 4] = crc
    entry = _central_entry(data, damage.member.encode("ascii"))
    data[entry + _CENTRAL_CRC_AT : entry + _CENTRAL_CRC_AT + 4] = crc
    out.write_bytes(bytes(data))
    out.chmod(honest.stat().st_mode)
    _runtime_beside(honest, out)  # the damage is the member's alone
    with zipfile.ZipFile(out) as archive:
        if archive.testzip() is not None or archive.read(damage.member) != changed:
            raise ValueError(f"{out.name}: the damaged member does not read back")
    return out


def _central_entry(data: bytearray, name: bytes) -> int:
    """The offset of the central directory entry naming ``name``."""
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46 : at + 46 + length]) == name:
            return at
        at = data.find(b"PK\x01\x02", at + 46 + length)
    raise ValueError(f"no central directory entry names {name.decode()}")


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


def keyless_hello(plan_text: str, sender: int, receiver: int, key: bytes) -> bytes:
    """The hello ``sender`` sends ``receiver`` in a keyed run of ``plan_text``, as a stranger
    who holds the plan and the code but no edge key makes it: every header field right (the
    identity computed from the plan and this package, as ``alpha.app.compiled_identity``
    gives it; layout 3), its trailer an HMAC-SHA256 under ``key``, a key of its own."""
    identity = compiled_identity(parse_plan(plan_text, source="stranger"))
    header = hello_spec(identity, sender, receiver).header(0, layout=KEYED_FORMAT_VERSION)
    return header + keyed_seal(key, header, payload_digest(b""))
