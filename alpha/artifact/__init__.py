"""Role artifacts: one self-contained executable zipapp per role, and the run.json beside them.

An artifact ``role-NNNNNN.pyz`` is a zip archive behind two lines (``#!/usr/bin/env python3``
and a coding line that stops Python reading a truncated artifact as a script). It holds a
``__main__.py`` that carries the loader (``alpha/artifact/loader.py``), the ``alpha`` package's
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
:func:`alpha.launch.launcher.launch` starts. The formats are documented in ``docs/artifacts.md``.

This module is the public face; each job lives in a private module beside it:
``_artifact_payload`` (formats, targets, a payload's checks), ``_artifact_build`` (bundled
sources and bytecode, the archive, :func:`build_artifact`), ``_artifact_read`` (a payload, the
whole check, a ``run.json`` entry), ``_artifact_entry`` (:func:`run_embedded`), ``_run_json``
(``run.json``) and ``_verified_roles`` (a folder checked against its ``run.json``). They import
only the standard library and Alpha's light modules at import time, so an artifact can name a
wrong target (or a missing numpy or trio) before it imports either.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

# Each name is loaded from its module on first use: a participant passes through this package on
# its way to alpha.artifact.entry and must not pay for the builder, run.json or the reader.
# Beside __all__, the names others import from here: package_code_digest, REPORTS_DIR, and the
# private helpers the tests probe.
if TYPE_CHECKING:
    from alpha.artifact.build import _bytecode as _bytecode
    from alpha.artifact.build import _member as _member
    from alpha.artifact.build import _package_sources as _package_sources
    from alpha.artifact.build import build_artifact
    from alpha.artifact.build import package_code_digest as package_code_digest
    from alpha.artifact.entry import REPORTS_DIR as REPORTS_DIR
    from alpha.artifact.entry import run_embedded
    from alpha.artifact.loader import MANIFEST_NAME
    from alpha.artifact.payload import (
        ARTIFACT_FORMAT,
        MAX_PAYLOAD_BYTES,
        PAYLOAD_NAME,
        TARGETS,
        artifact_name,
        check_target,
        host_target,
    )
    from alpha.artifact.read import artifact_entry, file_sha256, read_artifact, verify_artifact
    from alpha.artifact.run_json import RUN_FORMAT, RUN_JSON, read_run_json, write_run_json
    from alpha.artifact.verified import VerifiedRole, verified_roles

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


_HOMES = {
    **dict.fromkeys(
        ("_bytecode", "_member", "_package_sources", "build_artifact", "package_code_digest"),
        "alpha.artifact.build",
    ),
    **dict.fromkeys(("REPORTS_DIR", "run_embedded"), "alpha.artifact.entry"),
    "MANIFEST_NAME": "alpha.artifact.loader",
    **dict.fromkeys(
        (
            "ARTIFACT_FORMAT",
            "MAX_PAYLOAD_BYTES",
            "PAYLOAD_NAME",
            "TARGETS",
            "artifact_name",
            "check_target",
            "host_target",
        ),
        "alpha.artifact.payload",
    ),
    **dict.fromkeys(
        ("artifact_entry", "file_sha256", "read_artifact", "verify_artifact"),
        "alpha.artifact.read",
    ),
    **dict.fromkeys(
        ("RUN_FORMAT", "RUN_JSON", "read_run_json", "write_run_json"), "alpha.artifact.run_json"
    ),
    **dict.fromkeys(("VerifiedRole", "verified_roles"), "alpha.artifact.verified"),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
