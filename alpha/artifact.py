"""Role artifacts: one self-contained executable zipapp per role, and the run.json beside them.

An artifact ``role-NNNNNN.pyz`` is a zip archive behind two lines (``#!/usr/bin/env python3``
and a coding line that stops Python reading a truncated artifact as a script). It holds a
``__main__.py`` that carries the loader (``alpha/_loader.py``), the ``alpha`` package's
Python sources and bytecode, ``role.json``: the payload that makes it one role's participant
(its role description, target and, once compiled, its local schedule), and last ``SHA256SUMS``,
the manifest: every other member's SHA-256. ``python3 role-NNNNNN.pyz`` runs the loader, which
checks every member against the manifest before any bundled code runs, then
:func:`run_embedded`, which refuses to start on a machine of another target and otherwise runs
the participant the payload describes.

Artifacts are deterministic: the same payload and the same sources give byte-identical files
(fixed order, timestamps, permissions and compression level). ``run.json`` lists what a build
wrote, with each file's size and SHA-256, and :func:`launch_specs` checks it against the
artifacts (and each artifact against its manifest) and turns it into what
:func:`alpha.launch.launch` starts. The formats are documented in ``docs/artifacts.md``.

The module imports only the standard library and Alpha's light modules at import time, so an
artifact can name a wrong target (or a missing numpy or trio) before it imports either.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import io
import json
import marshal
import platform
import re
import stat
import sys
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final, final

import alpha
from alpha._checks import int_in
from alpha._files import role_file, write_atomically, write_bytes_atomically
from alpha._loader import (
    FILE_MODE,
    HASH_CHUNK,
    HEADER,
    MAIN_NAME,
    MANIFEST_NAME,
    MAX_MEMBER_BYTES,
    ZIP_CREATE_SYSTEM,
    ZIP_EPOCH,
    ZIP_VERSION,
    Damaged,
    encode_manifest,
    verify,
)
from alpha.errors import AlphaError, ArtifactInvalid, TargetMismatch
from alpha.exitcodes import EXIT_USAGE
from alpha.topology import MAX_ROLES

if TYPE_CHECKING:
    from alpha.role import RoleDescription

__all__ = [
    "ARTIFACT_FORMAT",
    "MANIFEST_NAME",
    "MAX_PAYLOAD_BYTES",
    "PAYLOAD_NAME",
    "RUN_FORMAT",
    "RUN_JSON",
    "TARGETS",
    "VerifiedRole",
    "artifact_entry",
    "artifact_name",
    "build_artifact",
    "check_target",
    "file_sha256",
    "host_target",
    "read_artifact",
    "read_run_json",
    "run_embedded",
    "verified_roles",
    "verify_artifact",
    "write_run_json",
]

ARTIFACT_FORMAT: Final = "alpha-artifact/1"
"""The ``format`` field of every artifact payload (``role.json``) this module writes and reads."""

RUN_FORMAT: Final = "alpha-run/1"
"""The ``format`` field of every ``run.json`` this module writes and reads."""

TARGETS: Final = ("x86_64", "aarch64")
"""The machines an artifact can be built for (decision 7 of the design)."""

PAYLOAD_NAME: Final = "role.json"
"""The member of an artifact that holds its payload."""

RUN_JSON: Final = "run.json"
"""The file, beside the artifacts, that lists what a build wrote."""

REPORTS_DIR: Final = "reports"
"""Where, beside its artifact, a finished role writes its report (``docs/roles.md``)."""

# A payload is a role description and a compact local schedule (a 200,000-round repeat is one
# form, not 200,000): kilobytes. 16 MiB is far above any real one, and stops a damaged or
# foreign archive from making a participant or the launcher read gigabytes. The loader bounds
# every member by the same size (it cannot import this module before checking it).
MAX_PAYLOAD_BYTES: Final = MAX_MEMBER_BYTES

# The artifact's __main__.py. Python reads this member itself, without checking its CRC-32, so
# it is stored, and it carries the loader as a string, L: a newline, the SHA-256 of the rest, a
# newline, then alpha/_loader.py deflated in base64. A flipped bit in L is then caught by the
# check instead of making Python print a syntax error: no single flip of a hex or base64 digit
# or a newline makes a NUL byte, or a quote that could end the raw string (newlines surround
# its contents, so no quote or backslash a flip makes is next to its own quotes), and latin-1
# decodes any byte a flip makes. Only the few statements outside L cannot check themselves: a
# flip there stops Python before the loader runs, or leaves them running the loader, which
# checks this whole member against the manifest through zipfile, whose CRC-32 catches it.
MAIN_TEMPLATE: Final = """\
# coding: latin-1
# An Alpha artifact (docs/artifacts.md): L is the loader, which checks every member first.
import base64, hashlib, sys, zlib

L = r'''
{sha256}
{loader}'''
if hashlib.sha256(L[66:].encode("latin-1")).hexdigest() != L[1:65]:
    name = sys.argv[0].rpartition("/")[2]
    print(
        "role ?: failed: ArtifactInvalid: " + name + " is damaged: its loader does not match its "
        "SHA-256; compile it again with alpha compile",
        file=sys.stderr,
    )
    sys.exit(2)  # EXIT_USAGE, nothing ran: alpha cannot be imported before it is checked
exec(compile(zlib.decompress(base64.b64decode(L[66:])), "alpha/_loader.py", "exec"))
"""

# Every member's zip fields (ZIP_EPOCH, ZIP_CREATE_SYSTEM, ZIP_VERSION, FILE_MODE) are fixed,
# so that rebuilding from the same inputs gives the same bytes whenever and wherever it runs;
# they are defined in alpha/_loader.py, which checks them. run.json has FILE_MODE too; the
# artifact itself is executable (it has a shebang).
ARTIFACT_MODE: Final = 0o755

# zlib's strongest level: sources are compressed once per build and read at every start, so
# the smallest file is worth the time. Fixed, so the bytes do not follow zlib's default.
COMPRESS_LEVEL: Final = 9

# Bytecode beside the sources: a PEP 552 ``.pyc`` whose flags say "hash-based, check the
# source". zipimport loads it instead of compiling the sources at every start (about 0.3 s of a
# participant's start), after checking it against its source's hash; an interpreter of another
# version ignores it and compiles the source. Marshal format 2 has no back-references, whose
# use follows the building process's reference counts, so the bytes depend only on the source
# and the interpreter's version.
PYC_FLAGS: Final = 0b11
PYC_MARSHAL_VERSION: Final = 2

# The exit code of an artifact that cannot start: a wrong target, a damaged archive, an
# interpreter without numpy or trio. Nothing ran, as for any other usage error.
EXIT_CANNOT_START: Final = EXIT_USAGE

_HEX64 = re.compile(r"[0-9a-f]{64}")

#: Machine names, as ``platform.machine()`` spells them, of each target.
_MACHINES: Final = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
}


# --- targets ----------------------------------------------------------------


def host_target(machine: str | None = None) -> str:
    """The target of this machine (or of ``machine``, a ``platform.machine()`` name).

    ``x86_64`` and ``amd64`` are ``"x86_64"``; ``aarch64`` and ``arm64`` are ``"aarch64"``
    (case aside). Any other machine keeps its own name, which matches no target. Under
    ``qemu-aarch64`` user emulation the machine is ``aarch64``.
    """
    name = platform.machine() if machine is None else machine
    return _MACHINES.get(name.lower(), name)


def check_target(payload: Mapping[str, object], host: str | None = None) -> None:
    """Refuse to run ``payload`` unless it was built for ``host`` (this machine by default).

    Raises:
        TargetMismatch: the payload's target is not the host's; the message is the one line an
            artifact prints, naming the role, both targets and what to do.
    """
    here = host_target() if host is None else host
    target = payload.get("target")
    if target != here:
        raise TargetMismatch(
            f"role {payload.get('role', '?')}: this artifact is built for {target}, but this "
            f"machine is {here}; run it on a {target} machine (or under qemu-{target})"
        )


# --- payloads ---------------------------------------------------------------


def artifact_name(role: int) -> str:
    """The file name of ``role``'s artifact: ``role-NNNNNN.pyz`` (at least six digits)."""
    return role_file(role, ".pyz")


def _role(value: object, where: str) -> int:
    if not int_in(value, 0, MAX_ROLES - 1):
        raise ArtifactInvalid(f"{where} must be an int in 0..{MAX_ROLES - 1}, got {value!r}")
    return value


def _check_payload_fields(payload: Mapping[str, object], where: str) -> None:
    """The light checks (no numpy needed): format, role, target, a description table."""
    if payload.get("format") != ARTIFACT_FORMAT:
        raise ArtifactInvalid(
            f"{where}: format must be {ARTIFACT_FORMAT!r}, got {payload.get('format')!r}"
        )
    _role(payload.get("role"), f"{where}: role")
    target = payload.get("target")
    if target not in TARGETS:
        raise ArtifactInvalid(f"{where}: target must be one of {TARGETS}, got {target!r}")
    if not isinstance(payload.get("description"), dict):
        raise ArtifactInvalid(
            f"{where}: description must be a role description table, "
            f"got {payload.get('description')!r}"
        )


def _description(payload: Mapping[str, object], where: str) -> RoleDescription:
    """The payload's description, parsed.

    Raises:
        ArtifactInvalid: the description is not a valid role description, or describes another
            role than the payload's.
    """
    # Imported here: the role layer needs numpy, and an artifact checks its target first.
    from alpha.errors import RoleDescriptionInvalid
    from alpha.role import RoleDescription

    try:
        description = RoleDescription.from_dict(payload.get("description"))
    except RoleDescriptionInvalid as error:
        raise ArtifactInvalid(f"{where}: description: {error}") from None
    if description.role != payload.get("role"):
        raise ArtifactInvalid(
            f"{where}: description.role is {description.role}, but the payload is role "
            f"{payload.get('role')}"
        )
    return description


def _description_view(
    payload: Mapping[str, object], where: str
) -> tuple[float | None, tuple[int, ...], tuple[int, ...]]:
    """The payload's description, parsed: its deadline (None: off), lower and higher peers.

    Raises:
        ArtifactInvalid: as :func:`_description`.
    """
    description = _description(payload, where)
    return (
        description.budgets.deadline,
        tuple(edge.peer for edge in description.lower),
        tuple(edge.peer for edge in description.higher),
    )


def _canonical(value: object, where: str) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, ASCII, no NaN or infinity."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ArtifactInvalid(f"{where} is not a JSON value: {error}") from None
    return text.encode("ascii")


# --- writing ----------------------------------------------------------------


def _package_sources() -> list[tuple[str, Path]]:
    """``(archive name, file)`` of every ``.py`` file of the ``alpha`` package, sorted."""
    root = Path(alpha.__file__).resolve().parent
    sources = [
        (path.relative_to(root.parent).as_posix(), path)
        for path in root.rglob("*.py")
        if "__pycache__" not in path.relative_to(root).parts and path.is_file()
    ]
    return sorted(sources)


@functools.cache
def package_code_digest() -> bytes:
    """The code digest (``alpha.identity.code_digest``) of the sources every artifact carries:
    each ``.py`` file of the package by its archive name, so neither where the package lies
    nor the interpreter enters it. Read and hashed once per process.

    Raises:
        OSError: a source cannot be read.
    """
    # Imported here: alpha.identity needs numpy, which this module leaves to the participant.
    from alpha.identity import code_digest

    return code_digest((name, path.read_bytes()) for name, path in _package_sources())


def _ordered(code: object) -> bool:
    """Whether marshal writes ``code``'s constants in an order that no hash seed changes: a
    frozenset constant iterates in its elements' hash order, fixed only for integers."""
    for constant in getattr(code, "co_consts", ()):
        if isinstance(constant, frozenset) and not all(type(e) is int for e in constant):
            return False
        if hasattr(constant, "co_consts") and not _ordered(constant):
            return False
    return True


def _bytecode(name: str, source: bytes) -> bytes | None:
    """The checked hash-based ``.pyc`` of the module ``name`` (its archive path), or None for
    a module whose bytecode would depend on the hash seed (it is then compiled at start)."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    if not _ordered(code):
        return None
    return (
        importlib.util.MAGIC_NUMBER
        + PYC_FLAGS.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code, PYC_MARSHAL_VERSION)
    )


def _main_source() -> bytes:
    """The artifact's ``__main__.py``: :data:`MAIN_TEMPLATE` around the loader's source."""
    loader = Path(alpha.__file__).resolve().parent.joinpath("_loader.py").read_bytes()
    encoded = base64.encodebytes(zlib.compress(loader, COMPRESS_LEVEL))  # lines, each ending \n
    main = MAIN_TEMPLATE.format(
        sha256=hashlib.sha256(encoded).hexdigest(), loader=encoded.decode("ascii")
    )
    return main.encode("ascii")


@functools.cache
def _archive_prefix() -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """Every artifact's bytes before its payload: :data:`HEADER` and a zip of ``__main__.py``
    (stored, see :data:`MAIN_TEMPLATE`), the package's sources and their bytecode; and the
    manifest entries (name, SHA-256) of those members. Built and compressed once per process."""
    out = io.BytesIO()
    out.write(HEADER)
    entries = []
    with zipfile.ZipFile(out, "w") as archive:
        members = [(MAIN_NAME, _main_source(), zipfile.ZIP_STORED)]
        for name, path in _package_sources():
            source = path.read_bytes()
            members.append((name, source, zipfile.ZIP_DEFLATED))
            bytecode = _bytecode(name, source)
            if bytecode is not None:
                members.append((name.removesuffix(".py") + ".pyc", bytecode, zipfile.ZIP_DEFLATED))
        for member, data, method in members:
            archive.writestr(_member(member, method), data, compresslevel=COMPRESS_LEVEL)
            entries.append((member, hashlib.sha256(data).hexdigest()))
    return out.getvalue(), tuple(entries)


def _member(name: str, compress_type: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.create_system = ZIP_CREATE_SYSTEM
    info.create_version = info.extract_version = ZIP_VERSION
    info.external_attr = (stat.S_IFREG | FILE_MODE) << 16
    info.compress_type = compress_type
    return info


def build_artifact(path: Path, payload: Mapping[str, object]) -> int:
    """Write the artifact for ``payload`` at ``path``; return its size in bytes.

    ``payload`` holds ``format`` (:data:`ARTIFACT_FORMAT`), ``role``, ``target`` (one of
    :data:`TARGETS`), ``description`` (``RoleDescription.to_dict()`` of that role) and
    optionally ``schedule`` (the role's local schedule, any JSON value). The file appears at
    once, whole, executable; the same payload and sources give the same bytes.

    Raises:
        ArtifactInvalid: a key is missing or wrong (the message names it), the payload is not
            JSON, or its canonical JSON passes :data:`MAX_PAYLOAD_BYTES`.
    """
    where = f"the payload of {path.name}"
    if not isinstance(payload, Mapping):
        raise ArtifactInvalid(f"{where} must be a table, got {type(payload).__name__}")
    for key in ("format", "role", "target", "description"):
        if key not in payload:
            raise ArtifactInvalid(f"{where} lacks the key {key!r}")
    _check_payload_fields(payload, where)
    _description_view(payload, where)
    role_json = _canonical(dict(payload), where)
    if len(role_json) > MAX_PAYLOAD_BYTES:
        raise ArtifactInvalid(
            f"{where} is {len(role_json)} bytes of JSON, past the {MAX_PAYLOAD_BYTES} allowed"
        )
    prefix, entries = _archive_prefix()
    manifest = encode_manifest([*entries, (PAYLOAD_NAME, hashlib.sha256(role_json).hexdigest())])
    whole = io.BytesIO(prefix)
    whole.seek(0, io.SEEK_END)
    with zipfile.ZipFile(whole, "a") as archive:
        # Both stored, the payload then the manifest: every artifact of a build shares the
        # bytes before the payload, and its size is the shared part, exactly the payload's
        # canonical JSON, and a manifest whose size does not depend on the payload.
        archive.writestr(_member(PAYLOAD_NAME, zipfile.ZIP_STORED), role_json)
        archive.writestr(_member(MANIFEST_NAME, zipfile.ZIP_STORED), manifest)
    write_bytes_atomically(path, whole.getvalue(), ARTIFACT_MODE)
    return path.stat().st_size


# --- reading ----------------------------------------------------------------


def _read_payload_bytes(path: Path) -> bytes:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if "__main__.py" not in names:
                raise ArtifactInvalid(f"{path.name} has no __main__.py: it is not an artifact")
            if PAYLOAD_NAME not in names:
                raise ArtifactInvalid(f"{path.name} has no {PAYLOAD_NAME}: it is not an artifact")
            info = archive.getinfo(PAYLOAD_NAME)
            if info.compress_type != zipfile.ZIP_STORED:
                raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} must be stored uncompressed")
            if info.file_size > MAX_PAYLOAD_BYTES:
                raise ArtifactInvalid(
                    f"{path.name}: {PAYLOAD_NAME} is {info.file_size} bytes, past the "
                    f"{MAX_PAYLOAD_BYTES} allowed"
                )
            return archive.read(info)
    except FileNotFoundError:
        raise ArtifactInvalid(f"{path} does not exist") from None
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error) as error:
        raise ArtifactInvalid(f"{path.name} is not a readable artifact: {error}") from None
    except NotImplementedError as error:  # a compression method zipfile does not know
        raise ArtifactInvalid(f"{path.name} is not a readable artifact: {error}") from None


def read_artifact(path: Path) -> dict[str, object]:
    """The payload (``role.json``) of the artifact at ``path``, with its format, role and
    target checked (its description is checked where it is used).

    Raises:
        ArtifactInvalid: the file is missing, is not a zip, is damaged, lacks ``role.json`` or
            ``__main__.py``, or its payload is not JSON or has a wrong format, role or target.
    """
    data = _read_payload_bytes(path)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} is not JSON: {error}") from None
    if not isinstance(payload, dict):
        raise ArtifactInvalid(f"{path.name}: {PAYLOAD_NAME} must be a JSON object")
    _check_payload_fields(payload, f"{path.name}: {PAYLOAD_NAME}")
    return payload


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as 64 lowercase hex digits.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_artifact(path: Path) -> None:
    """Check the artifact at ``path`` whole, as its loader does before anything in it runs:
    it begins with the artifact's two lines, and every member matches its SHA-256 in the
    manifest (``SHA256SUMS``, the last member), which lists every other member once, in order.

    Raises:
        ArtifactInvalid: the file cannot be read, is truncated, is not a zip archive, lacks a
            manifest or has a bad one, holds a member the manifest does not list, lacks one it
            lists, a zip header is not a build's, or a member differs from its SHA-256 (or
            CRC-32); the message is the loader's sentence, naming the file, the damage and what
            to do.
    """
    try:
        verify(str(path))
    except Damaged as error:
        raise ArtifactInvalid(str(error)) from None


def artifact_entry(path: Path) -> dict[str, object]:
    """The ``run.json`` entry of the artifact at ``path``: ``role``, ``target``, ``file``,
    ``bytes``, ``sha256``, ``lower`` and ``higher`` (peers in edge order), read from the file.

    Raises:
        ArtifactInvalid: the artifact is damaged (:func:`verify_artifact`), unreadable,
            invalid, or not named for its role.
    """
    verify_artifact(path)
    payload = read_artifact(path)
    where = f"{path.name}: {PAYLOAD_NAME}"
    _, lower, higher = _description_view(payload, where)
    role = _role(payload["role"], f"{where}: role")
    if path.name != artifact_name(role):
        raise ArtifactInvalid(f"{path.name} holds role {role}; name it {artifact_name(role)}")
    try:
        size, digest = path.stat().st_size, file_sha256(path)
    except OSError as error:
        raise ArtifactInvalid(f"{path.name}: {error}") from None
    return {
        "role": role,
        "target": payload["target"],
        "file": path.name,
        "bytes": size,
        "sha256": digest,
        "lower": list(lower),
        "higher": list(higher),
    }


# --- the entry inside an artifact -------------------------------------------


def _say(role: object, text: str) -> None:
    print(f"role {role}: {text}", file=sys.stderr, flush=True)


def run_embedded(archive: Path | None = None) -> int:
    """Run the participant the artifact ``archive`` carries (the running one, ``sys.argv[0]``,
    by default); return its exit code. This is what an artifact's loader calls once it has
    checked every member against the manifest (``alpha/_loader.py``); it does not check them
    again.

    A wrong target, a damaged artifact or an interpreter without numpy or trio prints one line
    on stderr and returns ``EXIT_USAGE`` (2) before anything starts; otherwise the code is the
    participant's (``alpha.participant.run_payload``).
    """
    path = Path(sys.argv[0]) if archive is None else archive
    try:
        payload = read_artifact(path)
        check_target(payload)
    except TargetMismatch as error:
        print(error, file=sys.stderr, flush=True)
        return EXIT_CANNOT_START
    except AlphaError as error:
        _say("?", f"failed: {type(error).__name__}: {error}")
        return EXIT_CANNOT_START
    try:
        from alpha.participant import run_payload
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing in ("", "alpha"):
            raise  # a module of Alpha itself is missing from the artifact: a bug in the build
        _say(
            payload["role"],
            f"failed: {sys.executable} cannot import {missing}; an artifact needs an "
            "interpreter with numpy and trio installed (they are not bundled)",
        )
        return EXIT_CANNOT_START
    # A finished role leaves its report (docs/roles.md) in reports/ beside its artifact.
    reports = path.resolve().parent / REPORTS_DIR
    reports.mkdir(exist_ok=True)
    role = payload["role"]
    assert isinstance(role, int), "read_artifact checked the payload's role"
    return run_payload(payload, report_path=str(reports / role_file(role, ".json")))


# --- run.json ---------------------------------------------------------------


def _check_run(run: object, where: str) -> dict[str, object]:
    """Check a ``run.json`` value field by field; return it as a dict.

    Raises:
        ArtifactInvalid: a field is missing or wrong; the message names it.
    """
    if not isinstance(run, Mapping):
        raise ArtifactInvalid(f"{where} must be a JSON object")
    run = dict(run)
    if run.get("format") != RUN_FORMAT:
        raise ArtifactInvalid(f"{where}: format must be {RUN_FORMAT!r}, got {run.get('format')!r}")
    for name in ("name", "alpha_version"):
        if not isinstance(run.get(name), str) or not run[name]:
            raise ArtifactInvalid(
                f"{where}: {name} must be a non-empty string, got {run.get(name)!r}"
            )
    participants = run.get("participants")
    if (
        isinstance(participants, bool)
        or not isinstance(participants, int)
        or not 1 <= participants <= MAX_ROLES
    ):
        raise ArtifactInvalid(
            f"{where}: participants must be an int in 1..{MAX_ROLES}, got {participants!r}"
        )
    _hex64(run.get("plan_sha256"), f"{where}: plan_sha256")
    identity = run.get("identity")
    if not isinstance(identity, Mapping):
        raise ArtifactInvalid(f"{where}: identity must be a table of three hex digests")
    for part in ("learner", "contract", "membership"):
        _hex64(identity.get(part), f"{where}: identity.{part}")
    roles = run.get("roles")
    if not isinstance(roles, list) or not roles:
        raise ArtifactInvalid(f"{where}: roles must be a non-empty list of built roles")
    previous = -1
    for index, entry in enumerate(roles):
        at = f"{where}: roles[{index}]"
        if not isinstance(entry, Mapping):
            raise ArtifactInvalid(f"{at} must be a table")
        role = _role(entry.get("role"), f"{at}.role")
        if not previous < role < participants:
            raise ArtifactInvalid(
                f"{at}.role must be above {previous} (roles ascending, once each) and below "
                f"participants ({participants}), got {role}"
            )
        previous = role
        if entry.get("target") not in TARGETS:
            raise ArtifactInvalid(
                f"{at}.target must be one of {TARGETS}, got {entry.get('target')!r}"
            )
        if entry.get("file") != artifact_name(role):
            raise ArtifactInvalid(
                f"{at}.file must be {artifact_name(role)!r}, got {entry.get('file')!r}"
            )
        size = entry.get("bytes")
        if not int_in(size, 1):
            raise ArtifactInvalid(f"{at}.bytes must be a positive int, got {size!r}")
        _hex64(entry.get("sha256"), f"{at}.sha256")
        _peers(entry.get("lower"), f"{at}.lower", 0, role)
        _peers(entry.get("higher"), f"{at}.higher", role + 1, participants)
    return run


def _hex64(value: object, where: str) -> None:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ArtifactInvalid(f"{where} must be 64 lowercase hex digits, got {value!r}")


def _peers(value: object, where: str, low: int, high: int) -> None:
    """``value`` is a list of distinct peers ascending (edge order) in ``low..high-1``."""
    if (
        not isinstance(value, list)
        or any(not int_in(p) for p in value)
        or value != sorted(set(value))
        or any(not low <= p < high for p in value)
    ):
        raise ArtifactInvalid(
            f"{where} must be distinct peers ascending in {low}..{high - 1}, got {value!r}"
        )


def write_run_json(directory: Path, run: Mapping[str, object]) -> Path:
    """Check ``run`` and write it as ``directory/run.json`` (at once, whole); return the path.

    Raises:
        ArtifactInvalid: a field of ``run`` is missing or wrong; the message names it.
    """
    path = directory / RUN_JSON
    checked = _check_run(run, f"the {RUN_JSON} to write")
    try:
        text = json.dumps(checked, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as error:
        raise ArtifactInvalid(f"the {RUN_JSON} to write is not JSON: {error}") from None

    def write(out: IO[bytes]) -> None:
        out.write(text.encode("ascii"))

    write_atomically(path, write, FILE_MODE)
    return path


def read_run_json(directory: Path) -> dict[str, object]:
    """The ``run.json`` in ``directory``, checked field by field.

    Raises:
        ArtifactInvalid: the file is missing or unreadable, not JSON, or a field is missing or
            wrong; the message names it.
    """
    path = directory / RUN_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactInvalid(
            f"{directory} has no {RUN_JSON}; compile the plan into it first"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ArtifactInvalid(f"{path}: {error}") from None
    try:
        run = json.loads(text)
    except json.JSONDecodeError as error:
        raise ArtifactInvalid(f"{path} is not JSON: {error}") from None
    return _check_run(run, str(path))


# --- launching --------------------------------------------------------------


def _agree_on_the_run(run: Mapping[str, object], payload: Mapping[str, object], name: str) -> None:
    """Refuse a ``run.json`` that says of the run what the artifact ``name`` does not: the
    number of participants, the run identity, or the plan's name (when the payload has one).

    Raises:
        ArtifactInvalid: the first field that differs, with both values.
    """
    description = _description(payload, f"{name}: {PAYLOAD_NAME}")
    if description.participants != run["participants"]:
        raise ArtifactInvalid(
            f"{name} is a role of a run of {description.participants} participants, but "
            f"{RUN_JSON} says {run['participants']}"
        )
    recorded = run["identity"]
    assert isinstance(recorded, Mapping)  # checked by _check_run
    for part in ("learner", "contract", "membership"):
        carried = getattr(description.identity, part).hex()
        if carried != recorded[part]:
            raise ArtifactInvalid(
                f"{name} carries the run identity's {part} digest {carried}, but {RUN_JSON} "
                f"records {recorded[part]}"
            )
    if "plan" in payload and payload["plan"] != run["name"]:
        raise ArtifactInvalid(
            f"{name} was compiled from the plan {payload['plan']!r}, but {RUN_JSON} names the "
            f"run {run['name']!r}"
        )


@final
@dataclass(frozen=True, slots=True)
class VerifiedRole:
    """One role's artifact, checked against ``run.json`` and against itself."""

    role: int
    path: Path
    lower: tuple[int, ...]
    higher: tuple[int, ...]


def verified_roles(directory: Path) -> tuple[list[VerifiedRole], float | None]:
    """The artifacts ``run.json`` lists in ``directory``, every one checked, and the largest
    session deadline among them (None when a role has none). The launcher turns them into
    what it starts (:func:`alpha.launch.launch_specs`).

    ``run.json`` is trusted for nothing the artifacts do not confirm: every artifact must
    match its entry's size and SHA-256, pass its own checks (:func:`verify_artifact`: each
    member against the manifest inside it), and agree with ``run.json`` on its role, target,
    peers, the number of participants, the run identity and the plan's name (when its payload
    records one). Every artifact is checked before any spec is returned.

    Raises:
        ArtifactInvalid: ``run.json`` is missing or invalid; it lacks a role of the run (the
            first missing one is named: launching on one host needs every role); an artifact is
            missing, changed since it was built (size or SHA-256), damaged (its manifest),
            invalid, or disagrees with ``run.json``.
    """
    run = read_run_json(directory)
    participants = run["participants"]
    roles = run["roles"]
    assert isinstance(participants, int) and isinstance(roles, list)  # checked by _check_run
    built = {entry["role"]: entry for entry in roles}
    for role in range(participants):
        if role not in built:
            raise ArtifactInvalid(
                f"{directory / RUN_JSON} lists no artifact for role {role} of {participants}; "
                "compile all roles to launch on one host"
            )
    specs = []
    deadlines: list[float | None] = []
    for entry in roles:
        role, name = entry["role"], entry["file"]
        path = directory / name
        try:
            size, digest = path.stat().st_size, file_sha256(path)
        except FileNotFoundError:
            raise ArtifactInvalid(f"{name} is missing from {directory}; compile again") from None
        except OSError as error:
            raise ArtifactInvalid(f"{name}: {error}") from None
        if size != entry["bytes"] or digest != entry["sha256"]:
            raise ArtifactInvalid(
                f"{name} changed since it was built ({size} bytes, sha256 {digest}; "
                f"{RUN_JSON} says {entry['bytes']} bytes, sha256 {entry['sha256']}); "
                "compile again"
            )
        verify_artifact(path)
        payload = read_artifact(path)
        if payload["role"] != role or payload["target"] != entry["target"]:
            raise ArtifactInvalid(
                f"{name} holds role {payload['role']} for {payload['target']}, but {RUN_JSON} "
                f"lists role {role} for {entry['target']}"
            )
        seconds, lower, higher = _description_view(payload, f"{name}: {PAYLOAD_NAME}")
        if list(lower) != entry["lower"] or list(higher) != entry["higher"]:
            raise ArtifactInvalid(
                f"{name} has lower peers {list(lower)} and higher {list(higher)}, but "
                f"{RUN_JSON} lists {entry['lower']} and {entry['higher']}"
            )
        _agree_on_the_run(run, payload, name)
        deadlines.append(seconds)
        specs.append(VerifiedRole(role, path, lower, higher))
    bounded = [seconds for seconds in deadlines if seconds is not None]
    return specs, (max(bounded) if len(bounded) == len(deadlines) and bounded else None)
