"""A plan compiled into one folder for tests: its artifacts, run.json, launch specs, and
after a launch the reports and logs the roles left there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, final

from alpha.app import compile_plan
from alpha.artifact import artifact_name, read_artifact
from alpha.compiler import Plan, exchange_plan
from alpha.core import Budgets, ParticipantTree
from alpha.launch import LaunchResult, launch, launch_specs
from alpha.records import LOGS_DIR, REPORTS_DIR, log_name
from alpha.schedule import RoleDescription

__all__ = ["CompiledRun"]


@final
class CompiledRun:
    """Every role of ``plan`` compiled into ``folder``, ready to launch on 127.0.0.1.

    Compiling happens once, here; each :meth:`launch` starts the artifacts as ``alpha launch``
    would, so a test can launch with its own options (absent or late roles, hooks, fail-fast)
    and then read what the roles wrote into the folder.

    Raises:
        ProtocolRejected, PlanInvalid: as :func:`alpha.app.compile.compile_plan`.
    """

    def __init__(self, plan: Plan, folder: Path) -> None:
        self.plan = plan
        self.folder = folder
        compile_plan(plan, folder, range(plan.participants))
        self.reports = folder / REPORTS_DIR
        self.specs, self.deadline = launch_specs(folder)

    @classmethod
    def exchange(
        cls,
        base: Path,
        tree: ParticipantTree,
        *,
        budgets: Budgets,
        payload: int = 512,
        rounds: int = 1,
    ) -> CompiledRun:
        """The edge exchange on ``tree`` (:func:`alpha.compiler.work_sum_check.exchange_plan`, about
        ``payload`` bytes each way on each edge) compiled into ``base / "run"``."""
        plan = exchange_plan(tree.n, tree.fanout, payload=payload, budgets=budgets, rounds=rounds)
        return cls(plan, base / "run")

    async def launch(self, **options: Any) -> LaunchResult:
        """Launch every role with the compiled deadline; ``options`` as
        :func:`alpha.launch.launcher.launch` takes them."""
        return await launch(self.specs, deadline=self.deadline, **options)

    def description(self, role: int) -> RoleDescription:
        """The role description compiled into ``role``'s artifact."""
        payload = read_artifact(self.folder / artifact_name(role))
        return RoleDescription.from_dict(payload["description"])

    def found_reports(self) -> dict[int, dict[str, Any]]:
        """The roles' reports found in the folder, by role."""
        return {
            int(data["role"]): data
            for data in (json.loads(p.read_text()) for p in self.reports.glob("role-*.json"))
        }

    def log_path(self, role: int) -> Path:
        """Where ``role``'s stderr goes (the path its failure cause names)."""
        return self.folder / LOGS_DIR / log_name(role)

    def log(self, role: int) -> str:
        """What ``role`` wrote to its log (its stderr)."""
        return self.log_path(role).read_text()
