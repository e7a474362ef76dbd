"""``alpha compile``: check a plan's protocol, project it, and write one artifact per role.

Each artifact (``role-NNNNNN.pyz``, ``docs/artifacts.md``) freezes a role's schedule, edges,
peer addresses, budgets and run identity; ``run.json`` describes the build. Projection of each
role costs the plan's size times depth x fan-out, so compiling a few roles of a 200,000-role
plan is as quick as compiling a small plan.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from alpha import __version__
from alpha.app._options import print_json
from alpha.app.interrupted import Interrupted, interrupted_by
from alpha.app.plans import resolve_plan
from alpha.artifact.build import (
    build_artifact,
    build_runtime,
    package_code_digest,
    runtime_entry,
)
from alpha.artifact.payload import ARTIFACT_FORMAT
from alpha.artifact.run_json import RUN_FORMAT, write_run_json
from alpha.artifact.verify import file_sha256
from alpha.compiler.checks import check
from alpha.compiler.forms import Protocol
from alpha.compiler.implemented import unimplemented
from alpha.compiler.plan import Plan, load_plan, overrides_of
from alpha.compiler.projection import project
from alpha.compiler.work import protocol_for, run_identity
from alpha.core.digests import bind_code
from alpha.core.identity import RunIdentity
from alpha.core.keys import draw_run_secret, keys_for_role
from alpha.core.sealing import KEYED_INTEGRITY
from alpha.errors import ProtocolRejected, UsageError
from alpha.exitcodes import EXIT_OK
from alpha.files import hold_folder, output_folder, temporaries_of
from alpha.records.folder import RUN_JSON
from alpha.records.reports import clear_attempt
from alpha.schedule.local import encode
from alpha.schedule.role import Edge, RoleDescription

if TYPE_CHECKING:
    from alpha.learner.data import Dataset, Split
    from alpha.learner.saving import SegmentIO

__all__ = [
    "ALL_ROLES_LIMIT",
    "CompileResult",
    "compile_command",
    "compile_plan",
    "compiled_identity",
    "parse_roles",
    "require_buildable",
    "require_runnable",
]

ALL_ROLES_LIMIT: Final = 4096
"""The most roles ``alpha compile`` builds without ``--roles``: each role is an artifact of its
own (about 27 KB beside the folder's shared runtime) and a process, so a plan of 200,000 roles
compiled whole would write gigabytes and ask one host for more processes than it runs."""


def require_buildable(participants: int, command: str) -> None:
    """Refuse a command that builds every role (``alpha exchange``, ``alpha run``) a run of more
    than ``ALL_ROLES_LIMIT`` roles, before it writes anything: the one role limit every command
    shares (``alpha compile`` builds past it only with ``--roles``).

    Raises:
        UsageError: ``participants`` is past the limit.
    """
    if participants > ALL_ROLES_LIMIT:
        raise UsageError(
            f"{command}: {participants:,} roles is more than the {ALL_ROLES_LIMIT:,} one command "
            "builds at once (each role is an artifact and a process of its own); compile with "
            "alpha compile --roles to build part of a larger run"
        )


def parse_roles(spec: str | None, participants: int) -> list[int]:
    """Roles named by ``--roles``: ``all``, or a comma list of roles and ranges (``0,3,5-7``).

    Raises:
        UsageError: the text does not parse, has a reversed range (``5-2``), names a role
            outside the run, or (without ``--roles``) the plan has more than
            ``ALL_ROLES_LIMIT`` roles.
    """
    if spec is None or spec == "all":
        if spec is None and participants > ALL_ROLES_LIMIT:
            raise UsageError(
                f"this plan has {participants} roles; compiling all of them writes one artifact "
                f"each: pass --roles (e.g. --roles 0,1,{participants - 1}) or --roles all"
            )
        return list(range(participants))
    roles: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if high else first
        except ValueError:
            raise UsageError(f"--roles: {part!r} is not a role or a range LOW-HIGH") from None
        if first > last:
            raise UsageError(
                f"--roles: {part!r} is a reversed range: its low end comes first ({last}-{first})"
            )
        if not 0 <= first <= last < participants:
            raise UsageError(f"--roles: {part!r} is outside the run's roles 0..{participants - 1}")
        roles.update(range(first, last + 1))
    return sorted(roles)


@dataclass(frozen=True, slots=True)
class CompileResult:
    directory: Path
    roles: tuple[int, ...]
    artifact_bytes: tuple[int, ...]
    run_json: Path
    runtime_bytes: int = 0  # the folder's shared runtime (docs/artifacts.md)


def compiled_identity(
    plan: Plan, digits: Dataset | None = None, *, code: bytes | None = None
) -> RunIdentity:
    """The identity ``plan``'s artifacts carry: the plan's run identity with its learner part
    bound to the code that computes the run (``alpha.core.digests.bind_code``), by default the
    sources every artifact of this build carries (``package_code_digest``). ``code`` stands
    in another code digest, as a build from other sources would have.

    Raises:
        LearnerInputInvalid: ``code`` is not 32 bytes.
    """
    return bind_code(run_identity(plan, digits), package_code_digest() if code is None else code)


def describe_role(
    plan: Plan,
    role: int,
    identity: RunIdentity | None = None,
    *,
    secret: bytes | None = None,
) -> RoleDescription:
    """The role description a role's artifact carries: edges with their compiled addresses and,
    for a keyed plan (``[contract] integrity``, keyed by default), the keys of the role's own
    edges derived from the run secret ``secret`` (``alpha.core.keys``; one secret per build,
    shared by every role of it). Without ``identity``, it is :func:`compiled_identity` of the
    plan.

    Raises:
        UsageError: the plan is keyed and no ``secret`` is given, or it is not keyed and one is.
        KeyScheduleInvalid: ``secret`` is not a run secret (32 bytes).
    """
    run = identity or compiled_identity(plan)
    keyed = plan.integrity == KEYED_INTEGRITY
    if keyed != (secret is not None):
        raise UsageError(
            f"role {role}: a plan with integrity {plan.integrity!r} "
            + ("needs its build's run secret" if keyed else "takes no run secret")
        )
    tree = plan.tree
    peers = tree.edges(role)
    keys = (
        {}
        if secret is None
        else keys_for_role(
            secret,
            run.encode(),
            role,
            [peer for peer in peers if peer < role],
            [peer for peer in peers if peer > role],
        )
    )
    edges = tuple(
        Edge(
            peer,
            plan.address(min(role, peer), max(role, peer)),
            keys.get((role, peer)),
            keys.get((peer, role)),
            plan.port(min(role, peer), max(role, peer)),
        )
        for peer in peers
    )
    return RoleDescription(
        role=role,
        participants=plan.participants,
        identity=run,
        edges=edges,
        budgets=plan.budgets,
        integrity=plan.integrity,
        payload_digest=plan.payload_digest,
        transport=plan.transport,
    )


def require_runnable(protocol: Protocol) -> None:
    """Check ``protocol`` as projection needs it, and that every operation and selector it
    names is implemented, so that no participant meets an unknown name mid-run.

    Raises:
        ProtocolRejected: one or more refusals, all of them in ``failures``.
    """
    failures = [*check(protocol), *unimplemented(protocol)]
    if failures:
        raise ProtocolRejected(tuple(failures))


def compile_plan(
    plan: Plan,
    directory: Path,
    roles: Iterable[int],
    *,
    progress: Callable[[int, int], None] | None = None,
    code: bytes | None = None,
) -> CompileResult:
    """Check ``plan``'s protocol, project it to each of ``roles``, and write their artifacts
    and ``run.json`` into ``directory``. Every artifact carries :func:`compiled_identity`;
    ``code`` stands in another code digest for it (a test builds a run from "other sources").
    ``progress(done, total)`` is called once the artifacts' building starts (``done`` 0) and
    after each artifact is written: the caller shows it (this function prints nothing). The
    folder's former attempt (logs, reports, progress records) is swept first
    (:func:`alpha.records.reports.clear_attempt`).

    Raises:
        ProtocolRejected: the protocol failed its checks, or names an operation or selector
            with no implementation (``OperationUnimplemented``); every refusal is listed.
        PlanInvalid: the plan's work cannot be compiled (e.g. sums not exact in its dtype).
        LearnerInputInvalid: ``code`` is not 32 bytes.
    """
    protocol = protocol_for(plan)
    require_runnable(protocol)
    digits = None
    parts = None
    if plan.work_kind == "learn":
        from alpha.compiler.datasets import dataset_of
        from alpha.compiler.work_learn import learner_setup
        from alpha.learner.state import split_of

        digits = dataset_of(plan)
        parts = split_of(learner_setup(plan), digits)
    identity = compiled_identity(plan, digits, code=code)
    created = not directory.exists()
    output_folder(directory)
    # run.json goes first and comes back last: a folder whose compile did not finish has no
    # run.json, which launch reports as such, and never a run.json naming other artifacts.
    (directory / RUN_JSON).unlink(missing_ok=True)
    for stale in (*directory.glob("role-*.pyz"), *directory.glob("runtime-*.pyz")):
        stale.unlink()
    _remove_temporaries(directory)  # what a compile killed outright (SIGKILL) left
    # A new build is a new run: no log, report or progress record of the former one (of a
    # role this build may not even have) stays beside it (docs/artifacts.md).
    clear_attempt(directory)
    written: list[Path] = []
    try:
        return _write_artifacts(
            plan, directory, list(roles), protocol, identity, digits, parts, progress, written
        )
    except BaseException as error:
        # An interrupt (Ctrl-C, SIGTERM, SIGHUP) or a failure leaves no artifact of an
        # unfinished build, and no folder this call made.
        removed = 0  # the one being written when it stopped may not exist yet
        for path in written:
            removed += path.exists()
            path.unlink(missing_ok=True)
        # A signal between a temporary's making and its writer's guard leaves it.
        _remove_temporaries(directory)
        if created:
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty: nothing of anyone else's is removed
        stopped = interrupted_by(error)
        if stopped is not None:
            # Its one line says what was removed (docs/cli.md, "Interrupts").
            raise Interrupted(
                stopped.signal,
                f"removed the {removed} file(s) this build wrote (artifacts and runtime); "
                "no run.json",
            ) from None
        raise


def _remove_temporaries(directory: Path) -> None:
    """Remove the temporaries of artifacts and runtimes in ``directory``: every one is a
    build's that did not finish, since a compile holds its folder (one at a time)."""
    for pattern in ("role-*.pyz", "runtime-*.pyz"):
        for stray in temporaries_of(directory, pattern):
            stray.unlink(missing_ok=True)


def _write_artifacts(
    plan: Plan,
    directory: Path,
    chosen: list[int],
    protocol: Protocol,
    identity: RunIdentity,
    digits: Dataset | None,
    parts: Split | None,
    progress: Callable[[int, int], None] | None,
    written: list[Path],
) -> CompileResult:
    """Write each chosen role's artifact (whole, each in its turn, noted in ``written``), then
    ``run.json``."""
    entries: list[dict[str, object]] = []
    sizes: list[int] = []
    if progress is not None:
        progress(0, len(chosen))  # the building starts: a display can say so at once
    # The package once, shared by every role of the folder (docs/artifacts.md).
    written.append(directory / str(runtime_entry()["file"]))
    runtime = build_runtime(directory)
    # One fresh secret per build, from the OS, never from a seed; it lives in this frame only
    # and reaches the disk only as the edge keys inside each role's artifact (docs/security.md).
    secret = draw_run_secret() if plan.integrity == KEYED_INTEGRITY else None
    for index, role in enumerate(chosen):
        description = describe_role(plan, role, identity, secret=secret)
        payload: dict[str, object] = {
            "format": ARTIFACT_FORMAT,
            "role": role,
            "target": plan.target(role),
            "plan": plan.name,
            "description": description.to_dict(),
            "schedule": encode(project(protocol, role)),
        }
        if plan.trace is not None:  # the plan's bounds on a traced run (docs/trace.md)
            payload["trace"] = plan.trace.to_dict()
        if digits is not None:
            from alpha.compiler.work_learn import learner_setup
            from alpha.learner.payload import learner_payload
            from alpha.learner.state import LearnerState

            state = LearnerState.for_role(learner_setup(plan), digits, role, parts)
            payload["learner"] = learner_payload(state, _segment_io(plan))
        path = directory / f"role-{role:06d}.pyz"
        written.append(path)
        size = build_artifact(path, payload, runtime=runtime)
        sizes.append(size)
        entries.append(
            {
                "role": role,
                "target": plan.target(role),
                "file": path.name,
                "bytes": size,
                "sha256": file_sha256(path),
                "lower": [e.peer for e in description.lower],
                "higher": [e.peer for e in description.higher],
            }
        )
        if progress is not None:
            progress(index + 1, len(chosen))
    run_json = write_run_json(
        directory,
        {
            "format": RUN_FORMAT,
            "name": plan.name,
            "participants": plan.participants,
            "plan_sha256": plan.text_sha256,
            "overrides": [each.recorded() for each in plan.overrides],
            "identity": {
                "learner": identity.learner.hex(),
                "contract": identity.contract.hex(),
                "membership": identity.membership.hex(),
            },
            "alpha_version": __version__,
            "runtime": runtime,
            "roles": entries,
        },
    )
    runtime_bytes = runtime["bytes"]
    assert isinstance(runtime_bytes, int)
    return CompileResult(directory, tuple(chosen), tuple(sizes), run_json, runtime_bytes)


def _segment_io(plan: Plan) -> SegmentIO | None:
    """What a learner's artifact carries of the segment it runs (``docs/checkpoints.md``):
    the plan's segment, and the round it ends on."""
    import dataclasses

    from alpha.learner.saving import SegmentIO

    if plan.segment is None:
        return None
    return SegmentIO(**dataclasses.asdict(plan.segment), end=plan.rounds)


def print_progress(done: int, total: int) -> None:
    if done == total or (done and done % 64 == 0):
        print(f"compile: {done}/{total} artifact(s) written", file=sys.stderr, flush=True)


def compile_command(args: argparse.Namespace) -> int:
    """``alpha compile PLAN -o DIR``: :func:`compile_plan` for the roles ``--roles`` names, and
    what was written, as a line or (``--json``) one object.

    Raises:
        PlanInvalid: the plan does not read or check (the first wrong field named).
        UsageError: ``--roles`` does not parse or names a role outside the run.
        FolderInUse: another command holds ``DIR``.
        ProtocolRejected: the plan's protocol is refused (every refusal named).
    """
    plan = load_plan(resolve_plan(args.plan), overrides=overrides_of(args.overrides))
    roles = parse_roles(args.roles, plan.participants)
    directory = Path(args.output)
    with hold_folder(directory, "alpha compile"):
        # Looked up here, when the command runs: tests stand in their own.
        result = compile_plan(plan, directory, roles, progress=print_progress)
    total = sum(result.artifact_bytes) + result.runtime_bytes
    if args.json:
        print_json(
            {
                "plan": plan.name,
                "participants": plan.participants,
                "directory": str(result.directory),
                "run_json": str(result.run_json),
                "roles": list(result.roles),
                "artifact_bytes": total,
                "runtime_bytes": result.runtime_bytes,
            }
        )
        return EXIT_OK
    print(
        f"compile: {plan.name}: {len(result.roles)} of {plan.participants} role(s), "
        f"{total} bytes of artifacts (a shared runtime of {result.runtime_bytes}) in "
        f"{result.directory}"
    )
    return EXIT_OK
