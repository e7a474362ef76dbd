"""``alpha exchange N F``: compile the edge exchange on the tree of N roles and fan-out F (a
sum-check plan, one round, about ``--payload`` bytes each way per edge), launch it on this
host, and check from the committed reports that every edge was established once and carried
checked payloads both ways."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from alpha.core.topology import ParticipantTree
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK
from alpha.files import hold_folder, output_folder
from alpha.records.folder import REPORTS_DIR

if TYPE_CHECKING:
    from alpha.compiler.plan import Plan

__all__ = ["exchange_command"]


def exchange_command(args: argparse.Namespace) -> int:
    """``alpha exchange``: 0 when every edge checked both ways; 1 when a role failed or an edge
    is missing from the committed reports; 128 + the signal that stopped the launch.

    Raises:
        InputInvalid: the tree or the plan is refused (N or F out of range).
        FolderInUse: another command holds the output folder.
    """
    from alpha.app.compile import require_buildable
    from alpha.compiler.work_sum_check import exchange_plan
    from alpha.core.budgets import Budgets

    tree = ParticipantTree(args.n, args.fanout)
    require_buildable(tree.n, "exchange")  # before a byte is written
    plan = exchange_plan(
        tree.n, tree.fanout, payload=args.payload, budgets=Budgets(deadline=args.deadline)
    )
    directory = Path(args.output or f"runs/{plan.name}")
    with hold_folder(directory, "alpha exchange"):
        return _exchange_in(directory, plan, tree, args.payload, warm=not args.cold)


def _exchange_in(
    directory: Path, plan: Plan, tree: ParticipantTree, payload: int, *, warm: bool
) -> int:
    from alpha.app._launching import launch_folder
    from alpha.app.compile import compile_plan
    from alpha.app.display import PhaseStatus
    from alpha.launch.launcher import launch_specs
    from alpha.records.reports import committed_reports

    reports = output_folder(directory / REPORTS_DIR)
    # compile_plan, then launch_folder, sweep the folder's previous attempt (its reports too).
    status = PhaseStatus(sys.stderr, "exchange")
    try:
        compile_plan(plan, directory, range(plan.participants), progress=status.compiling)
    finally:
        status.close()
    edges = tree.n - 1
    print(
        f"exchange: {tree.n} roles, fan-out {tree.fanout}, depth {tree.depth}, {edges} edge(s), "
        f"{payload} bytes each way per edge; artifacts in {directory}",
        file=sys.stderr,
    )
    specs, deadline = launch_specs(directory)
    code = launch_folder(directory, specs, deadline, warm=warm, label="exchange")
    if code == EXIT_OK:
        # The reports count only as the run committed them (docs/failure.md).
        _, committed = committed_reports(reports, tree.children)
        checked = sum(len(report["edges"]) for report in committed.values()) // 2
        print(f"exchange: {checked} of {edges} edge(s) established once and checked both ways")
        if checked != edges:
            return EXIT_FAILURE
    return code
