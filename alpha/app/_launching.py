"""Start a compiled folder's roles and report how they ended, for ``alpha launch`` and
``alpha exchange``: a line on stderr as each role announces its ports, the warm starter's notes,
the role that failed first and where the logs are, and with ``--json`` the outcome as one
object on stdout.

The ``--deploy`` preparation (copying artifacts, SSH tunnels) is ``alpha launch``'s alone and
lives in :mod:`alpha.app.launch_command`: this module imports the local launcher only, so
``alpha exchange`` does not stand on the remote launcher.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from alpha.app._options import print_json
from alpha.app.interrupted import Interrupted
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.records.folder import LOGS_DIR

if TYPE_CHECKING:
    from alpha.launch.launcher import LaunchSpec, RouteHook

__all__ = ["folder_targets", "launch_folder", "local_interpreters", "plan_targets"]


def local_interpreters(
    targets: Mapping[str, Collection[int]], chosen: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, ...]]:
    """The interpreters a launch on this host starts the roles of ``targets`` (target: its
    roles) with: the ``--interpreter`` ones, and for a target that is not this machine's the
    emulation of it (``docs/emulation.md``), found before any role starts.

    Raises:
        EmulationUnavailable: a role cannot run on this machine and no interpreter was given.
    """
    from alpha.artifact.payload import host_target
    from alpha.launch.emulation import interpreters_for

    return interpreters_for(targets, chosen, host_target())


def plan_targets(
    participants: int, default: str, listed: Sequence[tuple[str, Sequence[int]]]
) -> dict[str, Collection[int]]:
    """The roles of each target of a plan of ``participants`` roles: those ``listed`` per
    target (``Plan.target_roles``), and every other role ``default``'s."""
    found: dict[str, Collection[int]] = {target: roles for target, roles in listed}
    named = {role for _, roles in listed for role in roles}
    rest = participants - len(named)
    if rest:
        found[default] = [
            *found.get(default, ()),
            *(r for r in range(participants) if r not in named),
        ]
    return found


def folder_targets(run: Mapping[str, object]) -> dict[str, list[int]]:
    """The roles of each target a compiled folder's ``run.json`` (read and checked) lists."""
    found: dict[str, list[int]] = {}
    roles = run.get("roles")
    for entry in roles if isinstance(roles, list) else ():
        found.setdefault(str(entry["target"]), []).append(int(entry["role"]))
    return found


def launch_folder(
    directory: Path,
    specs: Sequence[LaunchSpec],
    deadline: float | None,
    *,
    route: RouteHook | None = None,
    close: Callable[[], Awaitable[None]] | None = None,
    as_json: bool = False,
    warm: bool = True,
) -> int:
    """Launch ``specs`` (the roles of ``directory``) and wait for every role; the exit code:
    0 when all finished, else 1. ``route`` turns
    announced ports into the ports connectors get (SSH tunnels); ``close`` runs once the
    launch is over, however it ended (it ends the tunnels).

    Raises:
        Interrupted: SIGINT, SIGTERM or SIGHUP stopped the launch (every role stopped and
            reaped; with ``as_json`` the outcome was printed first): 128 + the signal."""
    import trio

    from alpha.launch.launcher import LaunchResult, launch

    total = len(specs)
    up = 0

    async def announced(role: int, ports: tuple[int, ...]) -> None:
        nonlocal up
        up += 1
        print(f"launch: role {role} announced {len(ports)} port(s) ({up}/{total})", file=sys.stderr)

    async def main() -> LaunchResult:
        try:
            return await launch(
                specs, deadline=deadline, on_announce=announced, route=route, warm=warm
            )
        finally:
            if close is not None:
                await close()

    result = trio.run(main)
    failure = result.first_to_fail
    for note in result.notes:  # a warm starter's fault that did not fail the run
        print(f"launch: note: {note}", file=sys.stderr)
    if as_json:
        print_json(
            {
                "ok": result.ok,
                "directory": str(directory),
                "roles": total,
                "elapsed_s": result.elapsed_s,
                "first_failure": None
                if failure is None
                else {"role": failure.role, "cause": failure.cause},
                "signal": None if result.signal is None else signal.Signals(result.signal).name,
                "logs": str(directory / LOGS_DIR),
                "notes": result.notes,
            }
        )
    if result.signal is not None:
        # One line, the command's (cli.main prints it): every role was stopped and reaped.
        raise Interrupted(
            result.signal,
            f"stopped all {total} role(s) after {result.elapsed_s:.1f} s; logs are in "
            f"{directory / LOGS_DIR}",
        )
    if failure is not None:
        print(f"launch: role {failure.role} failed first: {failure.cause}", file=sys.stderr)
        print(f"launch: logs are in {directory / 'logs'}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"launch: {total} role(s) finished in {result.elapsed_s:.2f} s", file=sys.stderr)
    return EXIT_OK
