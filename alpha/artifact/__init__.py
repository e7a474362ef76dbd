"""Role artifacts: one small executable zipapp per role, the shared runtime they bind, and the
run.json beside them.

An artifact ``role-NNNNNN.pyz`` is a zip archive behind two lines (``#!/usr/bin/env python3``
and a coding line that stops Python reading a truncated artifact as a script). It holds a
``__main__.py`` that carries the loader (``alpha/artifact/loader.py``), ``RUNTIME``: the name and
SHA-256 of the folder's shared runtime ``runtime-SHA256.pyz`` (the ``alpha`` package's Python
sources and bytecode, once per folder), ``role.json``: the payload that makes it one role's
participant (its role description, target and, once compiled, its local schedule), and last
``SHA256SUMS``, the manifest: every other member's SHA-256. ``python3 role-NNNNNN.pyz`` runs the
loader, which checks every member against the manifest and the runtime beside it against the
SHA-256 it binds before any of the package's code runs, then :func:`run_embedded` from that
runtime, which refuses to start on a machine of another target and otherwise runs the
participant the payload describes.

Artifacts and runtimes are deterministic: the same payload and the same sources give
byte-identical files (fixed order, timestamps, permissions and compression level). ``run.json``
lists what a build wrote, with each file's size and SHA-256, and :func:`verified_roles` checks it
against the artifacts and the runtime (and each artifact against its manifest). The formats are
documented in ``docs/artifacts.md``.

Each job has its module: ``payload`` (formats, targets, a payload's checks), ``build`` (the
runtime's sources and bytecode, :func:`build_runtime`, the archive, :func:`build_artifact`),
``read`` (a ``run.json`` entry), ``verify`` (the whole check from outside), ``description``
(a payload's role description), ``environ`` (what a participant reads of its environment),
``loader`` (the standard-library-only start, the manifest and the runtime's binding, which hands
off to the entry by name),
``entry`` (:func:`run_embedded`), ``participant`` (a payload run as a role), ``run_json`` and
``verified`` (a folder checked against its ``run.json``). This face loads each name on first
use, so that a participant's start imports the loader, the entry and what its role runs, and
not the builder.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.artifact.build import (
        ARTIFACT_MODE,
        KEYED_ARTIFACT_MODE,
        build_artifact,
        build_runtime,
        package_code_digest,
        runtime_entry,
    )
    from alpha.artifact.description import (
        description_view,
        payload_description,
    )
    from alpha.artifact.entry import (
        REPORTS_DIR,
        run_embedded,
    )
    from alpha.artifact.environ import (
        BLAS_THREADS,
        FAILURE_CLOCK_ENV,
        REALTIME,
        TRACE_ENV,
        TRACE_ON,
        TRACEBACK_ENV,
    )
    from alpha.artifact.loader import (
        MANIFEST_NAME,
        decode_manifest,
        encode_manifest,
    )
    from alpha.artifact.participant import (
        FAILURE_CLOCK,
        run_description,
        run_payload,
        unexpected,
    )
    from alpha.artifact.payload import (
        ARTIFACT_FORMAT,
        MAX_PAYLOAD_BYTES,
        PAYLOAD_NAME,
        TARGETS,
        artifact_name,
        check_payload_fields,
        check_target,
        checked_role,
        host_target,
        read_artifact,
        trace_bounds,
    )
    from alpha.artifact.read import (
        artifact_entry,
    )
    from alpha.artifact.run_json import (
        RUN_FORMAT,
        RUN_JSON,
        read_run_json,
        write_run_json,
    )
    from alpha.artifact.verified import (
        VerifiedRole,
        check_private,
        verified_roles,
    )
    from alpha.artifact.verify import (
        artifact_runtime,
        file_sha256,
        verify_archive,
        verify_artifact,
    )

__all__ = [
    "ARTIFACT_FORMAT",
    "ARTIFACT_MODE",
    "BLAS_THREADS",
    "FAILURE_CLOCK",
    "FAILURE_CLOCK_ENV",
    "KEYED_ARTIFACT_MODE",
    "MANIFEST_NAME",
    "MAX_PAYLOAD_BYTES",
    "PAYLOAD_NAME",
    "REALTIME",
    "REPORTS_DIR",
    "RUN_FORMAT",
    "RUN_JSON",
    "TARGETS",
    "TRACEBACK_ENV",
    "TRACE_ENV",
    "TRACE_ON",
    "VerifiedRole",
    "artifact_entry",
    "artifact_name",
    "artifact_runtime",
    "build_artifact",
    "build_runtime",
    "check_payload_fields",
    "check_private",
    "check_target",
    "checked_role",
    "decode_manifest",
    "description_view",
    "encode_manifest",
    "file_sha256",
    "host_target",
    "package_code_digest",
    "payload_description",
    "read_artifact",
    "read_run_json",
    "run_description",
    "run_embedded",
    "run_payload",
    "runtime_entry",
    "trace_bounds",
    "unexpected",
    "verified_roles",
    "verify_archive",
    "verify_artifact",
    "write_run_json",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.artifact.build": (
            "ARTIFACT_MODE",
            "KEYED_ARTIFACT_MODE",
            "build_artifact",
            "build_runtime",
            "package_code_digest",
            "runtime_entry",
        ),
        "alpha.artifact.description": (
            "description_view",
            "payload_description",
        ),
        "alpha.artifact.entry": (
            "REPORTS_DIR",
            "run_embedded",
        ),
        "alpha.artifact.environ": (
            "BLAS_THREADS",
            "TRACEBACK_ENV",
            "FAILURE_CLOCK_ENV",
            "REALTIME",
            "TRACE_ENV",
            "TRACE_ON",
        ),
        "alpha.artifact.loader": (
            "MANIFEST_NAME",
            "decode_manifest",
            "encode_manifest",
        ),
        "alpha.artifact.participant": (
            "FAILURE_CLOCK",
            "run_description",
            "run_payload",
            "unexpected",
        ),
        "alpha.artifact.payload": (
            "ARTIFACT_FORMAT",
            "MAX_PAYLOAD_BYTES",
            "PAYLOAD_NAME",
            "TARGETS",
            "artifact_name",
            "check_payload_fields",
            "check_target",
            "checked_role",
            "host_target",
            "read_artifact",
            "trace_bounds",
        ),
        "alpha.artifact.read": ("artifact_entry",),
        "alpha.artifact.run_json": (
            "RUN_FORMAT",
            "RUN_JSON",
            "read_run_json",
            "write_run_json",
        ),
        "alpha.artifact.verified": (
            "VerifiedRole",
            "check_private",
            "verified_roles",
        ),
        "alpha.artifact.verify": (
            "file_sha256",
            "verify_artifact",
            "artifact_runtime",
            "verify_archive",
        ),
    },
)
