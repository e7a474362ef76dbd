"""``run.json``, the list of what a build wrote beside its artifacts: its format, its check
field by field, and writing and reading it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Final

from alpha.artifact.loader import FILE_MODE, runtime_name
from alpha.artifact.payload import TARGETS, artifact_name, checked_role
from alpha.checked import int_in
from alpha.core.topology import MAX_ROLES
from alpha.errors import ArtifactInvalid
from alpha.files import write_atomically
from alpha.records.folder import RUN_JSON

__all__ = ["RUN_FORMAT", "RUN_JSON", "read_run_json", "write_run_json"]

RUN_FORMAT: Final = "alpha-run/1"
"""The ``format`` field of every ``run.json`` this module writes and reads."""

_HEX64 = re.compile(r"[0-9a-f]{64}")


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
    _overrides(run.get("overrides", []), f"{where}: overrides")
    identity = run.get("identity")
    if not isinstance(identity, Mapping):
        raise ArtifactInvalid(f"{where}: identity must be a table of three hex digests")
    for part in ("learner", "contract", "membership"):
        _hex64(identity.get(part), f"{where}: identity.{part}")
    _check_runtime_entry(run.get("runtime"), f"{where}: runtime")
    roles = run.get("roles")
    if not isinstance(roles, list) or not roles:
        raise ArtifactInvalid(f"{where}: roles must be a non-empty list of built roles")
    previous = -1
    for index, entry in enumerate(roles):
        at = f"{where}: roles[{index}]"
        if not isinstance(entry, Mapping):
            raise ArtifactInvalid(f"{at} must be a table")
        role = checked_role(entry.get("role"), f"{at}.role")
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


#: The options an override comes from (``alpha.compiler.plan_overrides``).
OVERRIDE_OPTIONS: Final = ("--set", "--roles", "--fanout", "--rounds")


def _overrides(value: object, where: str) -> None:
    """``value`` is the plan's overrides in the order given: ``{"option", "key", "value"}``
    each, the option one of ``OVERRIDE_OPTIONS``, the key a dotted plan field."""
    if not isinstance(value, list):
        raise ArtifactInvalid(f"{where} must be a list of the plan's overrides, got {value!r}")
    for index, entry in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(entry, Mapping) or set(entry) != {"option", "key", "value"}:
            raise ArtifactInvalid(f"{at} must be an object of option, key and value")
        if entry["option"] not in OVERRIDE_OPTIONS:
            raise ArtifactInvalid(
                f"{at}.option must be one of {OVERRIDE_OPTIONS}, got {entry['option']!r}"
            )
        if not isinstance(entry["key"], str) or not entry["key"]:
            raise ArtifactInvalid(f"{at}.key must be a plan field's dotted name")


def _check_runtime_entry(entry: object, where: str) -> None:
    """``entry`` is the shared runtime's: ``file`` (``runtime-SHA256.pyz``), ``bytes`` and
    ``sha256``."""
    if not isinstance(entry, Mapping):
        raise ArtifactInvalid(
            f"{where} must be a table (file, bytes, sha256) naming the folder's shared runtime, "
            f"got {entry!r}; compile the plan again"
        )
    _hex64(entry.get("sha256"), f"{where}.sha256")
    digest = entry["sha256"]
    assert isinstance(digest, str)
    if entry.get("file") != runtime_name(digest):
        raise ArtifactInvalid(
            f"{where}.file must be {runtime_name(digest)!r}, got {entry.get('file')!r}"
        )
    if not int_in(entry.get("bytes"), 1):
        raise ArtifactInvalid(f"{where}.bytes must be a positive int, got {entry.get('bytes')!r}")


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
        if any(directory.glob("role-*.pyz")):
            raise ArtifactInvalid(
                f"{directory} has artifacts but no {RUN_JSON}: an alpha compile into it did not "
                "finish (interrupted, or it failed); compile the plan into it again"
            ) from None
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
