"""``alpha launch DIR``: start every role a compiled folder holds, on this host or (``--deploy
FILE``) on the nodes a deployment file names, and report how they ended. Named apart from the
:mod:`alpha.launch` package, which does the launching; this module is the command around it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from alpha.app._launching import folder_targets, launch_folder, local_interpreters
from alpha.app._options import TRACE_HERE_ONLY, interpreters
from alpha.errors import UsageError
from alpha.files import hold_folder
from alpha.records.folder import LOGS_DIR

__all__ = ["launch_command"]


def launch_command(args: argparse.Namespace) -> int:
    """``alpha launch``: the exit code of :func:`alpha.app._launching.launch_folder`.

    Raises:
        UsageError: ``DIR`` is not a folder, ``--interpreter`` names a target twice, or
            ``--trace`` comes with ``--deploy``.
        EmulationUnavailable: without ``--deploy``, a role is built for another target and
            this host cannot emulate it (``docs/emulation.md``); no role started.
        InputInvalid: ``DIR`` has no ``run.json`` that ``alpha compile`` wrote, or the
            deployment file is wrong (the first wrong field named).
        FolderInUse: another command holds ``DIR``.
    """
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"alpha launch: {directory} is not a directory")
    chosen = interpreters("launch", args.interpreter)
    if args.trace and args.deploy is not None:
        raise UsageError(TRACE_HERE_ONLY.format(command="launch"))
    from alpha.artifact.run_json import read_run_json

    run = read_run_json(directory)  # a folder compile did not write is refused untouched
    participants = run["participants"]
    assert isinstance(participants, int)  # checked by read_run_json
    if args.deploy is None:  # on this host: a role it cannot start is refused before any starts
        chosen = local_interpreters(folder_targets(run), chosen)
    with hold_folder(directory, "alpha launch"):
        return _launch_dir(
            directory,
            chosen,
            args.deploy,
            args.ssh_option or (),
            as_json=args.json,
            warm=not args.cold,
            participants=participants,
            trace=args.trace,
        )


def _launch_dir(
    directory: Path,
    interpreters: Mapping[str, Sequence[str]] | None,
    deploy: str | None,
    ssh_options: Sequence[str],
    *,
    as_json: bool,
    warm: bool,
    participants: int,
    trace: bool = False,
) -> int:
    from alpha.app.display import PhaseStatus
    from alpha.launch.launcher import launch_specs

    if deploy is None:
        # Checking every artifact whole takes a while for many roles: the status says so.
        status = PhaseStatus(sys.stderr, "launch")
        status.checking(0, participants)
        try:
            specs, deadline = launch_specs(directory, interpreters)
        except BaseException:
            status.close()
            raise
        status.checking(participants, participants)
        return launch_folder(
            directory, specs, deadline, as_json=as_json, warm=warm, status=status, trace=trace
        )
    from alpha.launch.deploy import load_deployment
    from alpha.launch.remote import prepare_nodes

    deployment = load_deployment(deploy)
    local, deadline = launch_specs(directory)
    deployment.require_roles(len(local))
    print(f"launch: copying {len(local)} artifact(s) to their nodes", file=sys.stderr)
    specs, tunnels = prepare_nodes(
        local, deployment, directory / LOGS_DIR, interpreters, ssh_options
    )
    return launch_folder(
        directory,
        specs,
        deadline,
        route=tunnels.route,
        close=tunnels.aclose,
        as_json=as_json,
        warm=warm,
        local=False,  # the reports and progress records are on the nodes
    )
