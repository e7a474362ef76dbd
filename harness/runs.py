"""Real runs for tests and gates: a compiled folder launched on 127.0.0.1, optionally with a
fault-injecting relay on one edge, and what it left behind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import trio

from alpha.commit import COMMIT_NAME
from alpha.launch import LaunchResult, launch, launch_specs
from harness.processes import running
from harness.relay import Fault, Relay

__all__ = ["Outcome", "relayed_run"]


@dataclass
class Outcome:
    """A finished run: the launcher's result, the folder, and the relay (if any)."""

    result: LaunchResult
    folder: Path
    relay: Relay | None

    def log(self, role: int) -> str:
        return (self.folder / "logs" / f"role-{role:06d}.log").read_text(errors="replace")

    def cause(self, role: int) -> str:
        """The class named on the role's failure line, or "" when it logged none."""
        lines = [line for line in self.log(role).splitlines() if ": failed: " in line]
        if not lines:
            return ""
        return lines[-1].split(": failed: ", 1)[1].split(":", 1)[0]

    def committed(self) -> bool:
        return (self.folder / "reports" / COMMIT_NAME).exists()

    def final_reports(self) -> list[Path]:
        return sorted((self.folder / "reports").glob("role-*.json"))

    def left_running(self) -> list[int]:
        """Processes still running an artifact of this run."""
        return running(self.folder)


async def relayed_run(
    compiled: Path,
    folder: Path,
    edge: tuple[int, int] | None = None,
    fault: Fault | None = None,
    *,
    fail_fast: bool = False,
) -> Outcome:
    """Copy the compiled run in ``compiled`` to ``folder`` and launch it, with a relay on
    ``edge`` (listener, connector) that applies ``fault`` (None: relays faithfully).

    Without ``fail_fast`` the launcher stops no one: each role must end by itself.
    """
    shutil.copytree(compiled, folder)
    specs, deadline = launch_specs(folder)
    relay: Relay | None = None
    async with trio.open_nursery() as nursery:

        async def route(listener: int, connector: int, port: int) -> int:
            nonlocal relay
            if (listener, connector) != edge:
                return port
            relay = Relay(port, fault)
            relayed = await relay.open()
            nursery.start_soon(relay.serve)
            return relayed

        result = await launch(specs, deadline=deadline, fail_fast=fail_fast, route=route)
        nursery.cancel_scope.cancel()
    return Outcome(result, folder, relay)
