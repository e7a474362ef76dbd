"""The ``alpha`` command line.

Every subcommand is a thin shell over a library call. An error Alpha raised on
purpose prints one line naming what is wrong and exits with the code its family
carries (``AlphaError.exit_code``): :data:`EXIT_USAGE` for a bad argument or
input (``InputInvalid``), :data:`EXIT_FAILURE` for a run that failed
(``RunFailed``); no traceback reaches the user. Exit codes are documented in
``docs/exit-codes.md``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from alpha import __version__
from alpha.core.membership import ParticipantGroup, parse_group
from alpha.core.topology import ParticipantTree
from alpha.errors import AlphaError, UsageError, one_line
from alpha.exitcodes import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from alpha.files import hold_folder, output_folder

if TYPE_CHECKING:
    from alpha.compiler.plan import Plan

# The exit codes are re-exported: a caller of main() compares its result with them.
__all__ = ["EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

# A source checkout: the folder that holds the alpha package, and gates/ and harness/ beside it
# when alpha was imported from a checkout (or an editable install of one). A wheel carries alpha
# alone: the gates drive real runs with the test harness, sshd and the AArch64 sysroot.
_CHECKOUT = Path(__file__).resolve().parents[2]

# How many of a node's children `describe tree` lists before abbreviating:
# a fan-out of 64 still fits on one terminal line or two.
_CHILDREN_SHOWN = 16


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and a usage exit code."""

    def error(self, message: str) -> NoReturn:
        # A subcommand names itself ("run: argument ..."); main() prefixes "alpha: error:".
        command = self.prog.removeprefix("alpha").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _interpreter(text: str) -> tuple[str, tuple[str, ...]]:
    """``TARGET=COMMAND`` as (target, argv prefix): COMMAND is split as a shell would, and its
    first word must be a command this host has."""
    # The light module that defines the targets: no numpy or trio for the command line.
    from alpha.artifact.payload import TARGETS

    target, equals, command = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"expected TARGET=COMMAND, got {text!r}")
    if target not in TARGETS:
        raise argparse.ArgumentTypeError(
            f"no such target {target!r} in {text!r}; the targets are {', '.join(TARGETS)}"
        )
    try:
        words = tuple(shlex.split(command))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"cannot split the command in {text!r}: {error}") from None
    if not words:
        raise argparse.ArgumentTypeError(f"no command for {target} in {text!r}")
    if shutil.which(words[0]) is None:
        raise argparse.ArgumentTypeError(f"{words[0]!r} in {text!r} is not a command on this host")
    return target, words


def _interpreters(
    command: str, given: Sequence[tuple[str, tuple[str, ...]]] | None
) -> dict[str, tuple[str, ...]]:
    """The ``--interpreter`` options of ``command`` as a map; a target given twice is refused."""
    chosen: dict[str, tuple[str, ...]] = {}
    for target, words in given or ():
        if target in chosen:
            raise UsageError(f"{command}: --interpreter gives {target} twice")
        chosen[target] = words
    return chosen


def _folder(text: str) -> str:
    """An output folder's path as typed: an empty one names no folder (it would be the
    current one, which no command should fill with its files unasked)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder; give one, e.g. -o runs/x")
    return text


def _add_output_option(
    parser: argparse.ArgumentParser, *, required: bool = False, default: str = ""
) -> None:
    """``-o DIR`` (also ``--output DIR`` and ``--dir DIR``): every command that writes a folder
    takes it under the same names."""
    parser.add_argument(
        "-o",
        "--output",
        "--dir",
        dest="output",
        type=_folder,
        required=required,
        default=None,
        metavar="DIR",
        help=f"the folder to write{f' (default {default})' if default else ''}",
    )


def _add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as one JSON object on stdout (docs/cli.md), progress still on stderr",
    )


def _print_json(data: Mapping[str, object]) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, allow_nan=False))


def _signal_exit(number: int | None) -> int | None:
    """A run stopped by a signal exits 128 + its number, as shells expect (130: Ctrl-C)."""
    return None if number is None else 128 + number


def _add_cold_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cold",
        action="store_true",
        help="start every role in an interpreter of its own instead of forking it from the "
        "warm starter (docs/launch.md)",
    )


def _add_interpreter_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interpreter",
        type=_interpreter,
        action="append",
        default=None,
        metavar="TARGET=COMMAND",
        help="start the roles built for TARGET (x86_64, aarch64) with COMMAND (split as a "
        "shell would) before the artifact instead of this Python; repeatable, once per target "
        "(see docs/emulation.md)",
    )


def _describe_group(args: argparse.Namespace) -> int:
    group = parse_group(args.text, universe=args.universe, epoch=args.epoch)
    facts = _group_facts(group)
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        for key, value in facts.items():
            print(f"{key.replace('_', ' '):<12} {value}")
    return EXIT_OK


def _group_facts(group: ParticipantGroup) -> dict[str, object]:
    return {
        "group": str(group),
        "universe": group.universe,
        "epoch": group.epoch,
        "size": len(group),
        "index_nodes": group.index_nodes,
        "first": group[0],
        "last": group[len(group) - 1],
        "digest": group.digest().hex(),
    }


def _describe_deploy(args: argparse.Namespace) -> int:
    from alpha.launch.deploy import load_deployment

    deployment = load_deployment(args.file)
    if args.json:
        facts = {
            "transport": deployment.transport,
            "remote_root": deployment.remote_root,
            "roles": [
                {"role": role, **_vars_of(node)} for role, node in enumerate(deployment.nodes)
            ],
        }
        print(json.dumps(facts, indent=2))
        return EXIT_OK
    print(f"transport    {deployment.transport}")
    print(f"remote root  {deployment.remote_root}")
    for role, node in enumerate(deployment.nodes):
        print(
            f"role {role:<7} {node.pod_id} at {node.host} port {node.port}, GPU minor "
            f"{node.minor}, key {node.ssh_key}"
        )
    return EXIT_OK


def _vars_of(node: object) -> dict[str, object]:
    """A frozen dataclass with slots as a dict of its fields."""
    import dataclasses

    assert dataclasses.is_dataclass(node) and not isinstance(node, type)
    return dataclasses.asdict(node)


def _describe_tree(args: argparse.Namespace) -> int:
    tree = ParticipantTree(args.n, args.fanout)
    facts: dict[str, object] = {
        "roles": tree.n,
        "fanout": tree.fanout,
        "depth": tree.depth,
        "level_sizes": list(tree.level_sizes()),
    }
    if args.role is not None:
        role = args.role
        subtree = tree.subtree(role)
        facts["role"] = {
            "role": role,
            "level": tree.level(role),
            "parent": tree.parent(role),
            "children": list(tree.children(role)),
            "subtree": [subtree.start, subtree.stop - 1],
            "edges": list(tree.edges(role)),
            "path": list(tree.path(role)),
        }
    if args.json:
        print(json.dumps(facts, indent=2))
        return EXIT_OK
    print(f"roles        {tree.n}")
    print(f"fanout       {tree.fanout}")
    print(f"depth        {tree.depth}")
    print(f"level sizes  {' '.join(str(s) for s in tree.level_sizes())}")
    if args.role is not None:
        role = args.role
        subtree = tree.subtree(role)
        parent = tree.parent(role)
        children = tree.children(role)
        print(f"role         {role} (level {tree.level(role)})")
        print(f"parent       {'none (root)' if parent is None else parent}")
        print(f"children     {_abbreviate(children, 'none (leaf)')}")
        print(f"edges        {_abbreviate(tree.edges(role), 'none (single role)')}")
        print(f"subtree      {subtree.start}..{subtree.stop - 1} ({len(subtree)} roles)")
        print(f"path         {' -> '.join(str(r) for r in tree.path(role))}")
    return EXIT_OK


def _abbreviate(roles: Sequence[int], empty: str) -> str:
    if not roles:
        return empty
    shown = " ".join(str(r) for r in roles[:_CHILDREN_SHOWN])
    if len(roles) > _CHILDREN_SHOWN:
        shown += f" ... {roles[-1]}"
    return f"{shown} ({len(roles)})"


def _launch_dir(
    directory: Path,
    interpreters: Mapping[str, Sequence[str]] | None = None,
    deploy: str | None = None,
    ssh_options: Sequence[str] = (),
    as_json: bool = False,
    warm: bool = True,
) -> int:
    import trio

    from alpha.launch.launcher import LaunchResult, launch, launch_specs

    route = None
    tunnels = None
    if deploy is None:
        specs, deadline = launch_specs(directory, interpreters)
    else:
        from alpha.launch.deploy import load_deployment
        from alpha.launch.remote import Tunnels, deploy_specs, stage_artifacts

        deployment = load_deployment(deploy)
        local, _ = launch_specs(directory)
        deployment.require_roles(len(local))
        print(f"launch: copying {len(local)} artifact(s) to their nodes", file=sys.stderr)
        stage_artifacts(local, deployment, ssh_options)
        specs, deadline = deploy_specs(directory, deployment, interpreters, ssh_options)
        logs = directory / "logs"
        logs.mkdir(exist_ok=True)
        tunnels = Tunnels(deployment, logs, ssh_options)
        route = tunnels.route
    total = len(specs)
    up = 0

    async def progress(role: int, ports: tuple[int, ...]) -> None:
        nonlocal up
        up += 1
        print(f"launch: role {role} announced {len(ports)} port(s) ({up}/{total})", file=sys.stderr)

    async def main() -> LaunchResult:
        try:
            return await launch(
                specs, deadline=deadline, on_announce=progress, route=route, warm=warm
            )
        finally:
            if tunnels is not None:
                await tunnels.aclose()

    result = trio.run(main)
    failure = result.first_to_fail
    for note in result.notes:  # a warm starter's fault that did not fail the run
        print(f"launch: note: {note}", file=sys.stderr)
    if as_json:
        _print_json(
            {
                "ok": result.ok,
                "directory": str(directory),
                "roles": total,
                "elapsed_s": result.elapsed_s,
                "first_failure": None
                if failure is None
                else {"role": failure.role, "cause": failure.cause},
                "signal": None if result.signal is None else signal.Signals(result.signal).name,
                "logs": str(directory / "logs"),
                "notes": result.notes,
            }
        )
    if failure is not None:
        print(f"launch: role {failure.role} failed first: {failure.cause}", file=sys.stderr)
        print(f"launch: logs are in {directory / 'logs'}", file=sys.stderr)
        return _signal_exit(result.signal) or EXIT_FAILURE
    print(f"launch: {total} role(s) finished in {result.elapsed_s:.2f} s", file=sys.stderr)
    return EXIT_OK


def _launch(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"alpha launch: {directory} is not a directory")
    interpreters = _interpreters("launch", args.interpreter)
    from alpha.artifact.run_json import read_run_json

    read_run_json(directory)  # a folder compile did not write is refused before it is touched
    with hold_folder(directory, "alpha launch"):
        return _launch_dir(
            directory,
            interpreters,
            args.deploy,
            args.ssh_option or (),
            as_json=args.json,
            warm=not args.cold,
        )


def _compile(args: argparse.Namespace) -> int:
    from alpha.app.compile import compile_plan, parse_roles, print_progress
    from alpha.compiler.plan import load_plan

    plan = load_plan(args.plan)
    roles = parse_roles(args.roles, plan.participants)
    directory = Path(args.output)
    with hold_folder(directory, "alpha compile"):
        result = compile_plan(plan, directory, roles, progress=print_progress)
    total = sum(result.artifact_bytes)
    if args.json:
        _print_json(
            {
                "plan": plan.name,
                "participants": plan.participants,
                "directory": str(result.directory),
                "run_json": str(result.run_json),
                "roles": list(result.roles),
                "artifact_bytes": total,
            }
        )
        return EXIT_OK
    print(
        f"compile: {plan.name}: {len(result.roles)} of {plan.participants} role(s), "
        f"{total} bytes of artifacts in {result.directory}"
    )
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from alpha.app.run import main_run

    return main_run(
        args.plan,
        args.output,
        _interpreters("run", args.interpreter),
        args.resume,
        as_json=args.json,
        warm=not args.cold,
    )


def _replicate(args: argparse.Namespace) -> int:
    from alpha.app.run import main_replicate

    return main_replicate(args.plan, as_json=args.json)


def _exchange(args: argparse.Namespace) -> int:
    from alpha.compiler.program import exchange_plan
    from alpha.core.budgets import Budgets

    tree = ParticipantTree(args.n, args.fanout)
    plan = exchange_plan(
        tree.n, tree.fanout, payload=args.payload, budgets=Budgets(deadline=args.deadline)
    )
    directory = Path(args.output or f"runs/{plan.name}")
    with hold_folder(directory, "alpha exchange"):
        return _exchange_in(directory, plan, tree, args.payload, warm=not args.cold)


def _exchange_in(
    directory: Path, plan: Plan, tree: ParticipantTree, payload: int, *, warm: bool
) -> int:
    from alpha.app.compile import compile_plan
    from alpha.app.run import clear_reports, committed_reports

    reports = output_folder(directory / "reports")
    clear_reports(reports)
    compile_plan(plan, directory, range(plan.participants))
    edges = tree.n - 1
    print(
        f"exchange: {tree.n} roles, fan-out {tree.fanout}, depth {tree.depth}, {edges} edge(s), "
        f"{payload} bytes each way per edge; artifacts in {directory}",
        file=sys.stderr,
    )
    code = _launch_dir(directory, warm=warm)
    if code == EXIT_OK:
        # The reports count only as the run committed them (docs/failure.md).
        _, committed = committed_reports(reports, tree.children)
        checked = sum(len(report["edges"]) for report in committed.values()) // 2
        print(f"exchange: {checked} of {edges} edge(s) established once and checked both ways")
        if checked != edges:
            return EXIT_FAILURE
    return code


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        k, n = int(index, 10), int(count, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N such as 2/3, got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"a shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def _checkpoint(args: argparse.Namespace) -> int:
    import hashlib

    import numpy as np

    from alpha.checkpoint.store import open_generation

    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"checkpoint {args.action}: {path} does not exist")
    generation = open_generation(path)
    if args.action == "inspect":
        shards = sum(len(each) for each in generation.shards.values())
        facts = {
            "generation": generation.path.name,
            "path": str(generation.path),
            "manifest_sha256": generation.manifest_sha256,
            "round": generation.round,
            "owners": generation.owners,
            "arrays": {
                name: {
                    "shape": list(shape),
                    "dtype": dtype,
                    "shards": len(generation.shards.get(name, [])),
                }
                for name, (shape, dtype) in sorted(generation.arrays.items())
            },
            "shards": shards,
            "about": generation.about,
        }
        if args.json:
            print(json.dumps(facts, indent=1, sort_keys=True))
            return EXIT_OK
        print(f"generation       {facts['generation']} ({generation.path})")
        print(f"manifest sha256  {generation.manifest_sha256}")
        print(f"round            {generation.round}")
        print(f"owners           {generation.owners} ({shards} shard(s))")
        if "plan_sha256" in generation.about:
            print(f"run              {generation.about.get('run')}")
            print(f"plan sha256      {generation.about['plan_sha256']}")
        for name, (shape, dtype) in sorted(generation.arrays.items()):
            count = len(generation.shards.get(name, []))
            print(f"array {name:<10} {dtype} {list(shape)} in {count} shard(s)")
        return EXIT_OK
    if args.action == "verify":
        checked = generation.verify()
        print(
            f"checkpoint: {generation.path.name}: every manifest and all "
            f"{sum(len(e) for e in generation.shards.values())} shard(s) ({checked} bytes) check",
            file=sys.stderr,
        )
        return EXIT_OK
    arrays = generation.load()
    for name, array in arrays.items():
        digest = hashlib.sha256(array.tobytes()).hexdigest()
        print(f"{name:<10} {array.dtype} {list(array.shape)} sha256 {digest}")
    if args.output is not None:
        from alpha.files import write_atomically

        out = Path(args.output)
        named: dict[str, Any] = dict(arrays)
        write_atomically(out, lambda handle: np.savez(handle, allow_pickle=False, **named))
        print(
            f"checkpoint: {len(arrays)} array(s) of round {generation.round} written to {out}",
            file=sys.stderr,
        )
    return EXIT_OK


def _checkout_gates() -> None:
    """Make the checkout's ``gates`` and ``harness`` importable (first on the path, so that no
    other package of either name is found instead).

    Raises:
        UsageError: ``alpha`` was not imported from a source checkout (an installed wheel).
    """
    if not all((_CHECKOUT / name / "__init__.py").is_file() for name in ("gates", "harness")):
        raise UsageError(
            "observe gate: the gates run from a source checkout of alpha only, with its test "
            "harness, sshd and the AArch64 sysroot; in a checkout, run `make venv` and then "
            "`.venv/bin/alpha observe gate` (docs/install.md)"
        )
    if sys.path[:1] != [str(_CHECKOUT)]:
        sys.path.insert(0, str(_CHECKOUT))


def _gate(args: argparse.Namespace) -> int:
    _checkout_gates()
    from gates.catalogue import GATES
    from gates.run import run_gates, select, to_json

    if args.list:
        for gate in GATES:
            print(f"{gate.name:<32} {gate.scenario.name:<6} {gate.expected:<18} {gate.meaning}")
        return EXIT_OK
    try:
        chosen = select(args.names, args.shard)
    except KeyError as error:
        raise UsageError(f"observe gate: {error.args[0]}") from None
    verdicts = run_gates(chosen)
    if args.json is not None:
        Path(args.json).write_text(to_json(verdicts) + "\n")
    failed = [v for v in verdicts if not v.passed]
    for verdict in failed:
        print(f"gate: {verdict.gate} failed: {verdict.why}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; ``alpha --help`` and ``alpha CMD --help`` print it."""
    parser = _Parser(
        prog="alpha",
        description="Distributed data-parallel learning, one executable per role.",
    )
    parser.add_argument("--version", action="version", version=f"alpha {__version__}")
    # Not required: with no command, main() prints the whole usage, not argparse's one line.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    describe = commands.add_parser("describe", help="describe a participant group or tree")
    what = describe.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    what.required = True

    group = what.add_parser(
        "group",
        help="size, index nodes and digest of a participant group",
        description="Admit a participant group from its textual form and describe it.",
    )
    group.add_argument("text", help="e.g. '(group (stride 0 1 8))'")
    group.add_argument(
        "--universe",
        type=_nonnegative_int,
        default=None,
        help="roles are 0..N-1 (default: one past the largest selected role)",
    )
    group.add_argument("--epoch", type=_nonnegative_int, default=0, help="membership epoch")
    group.add_argument("--json", action="store_true", help="print JSON instead of text")
    group.set_defaults(handler=_describe_group)

    deploy = what.add_parser(
        "deploy",
        help="check a deployment file and show which node runs which role",
        description="Read a deployment file (JSON, docs/deploy.md), check every field, and "
        "print the node of each role. Exits 2 naming the first wrong field.",
    )
    deploy.add_argument("file", metavar="FILE", help="a deployment file")
    deploy.add_argument("--json", action="store_true", help="print JSON instead of text")
    deploy.set_defaults(handler=_describe_deploy)

    tree = what.add_parser(
        "tree",
        help="depth, level sizes and one role's neighbours in a participant tree",
        description="Describe the preorder participant tree of N roles and fan-out F.",
    )
    tree.add_argument("n", type=_nonnegative_int, metavar="N", help="number of roles")
    tree.add_argument("fanout", type=_nonnegative_int, metavar="F", help="fan-out")
    tree.add_argument("--role", type=_nonnegative_int, default=None, help="describe this role")
    tree.add_argument("--json", action="store_true", help="print JSON instead of text")
    tree.set_defaults(handler=_describe_tree)

    run = commands.add_parser(
        "run",
        help="the main job: compile, launch, and compare with the replicated learner",
        description="Compile PLAN (default: the shipped digits plan), launch its participants "
        "on this host with live progress, and compare the final parameters with the "
        "replicated learner's, bit for bit. Exits 1 when they differ or a role fails.",
    )
    run.add_argument("plan", nargs="?", default=None, metavar="PLAN", help="a learn plan")
    _add_output_option(run, default="runs/NAME")
    _add_json_option(run, "the summary")
    run.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue from a checkpoint folder (its latest generation) or a generation "
        "(docs/checkpoints.md)",
    )
    _add_interpreter_option(run)
    _add_cold_option(run)
    run.set_defaults(handler=_run)

    replicate = commands.add_parser(
        "replicate",
        help="train a learn plan in one process; print the final parameter digest",
    )
    replicate.add_argument("plan", metavar="PLAN")
    _add_json_option(replicate, "the digest, rounds and history")
    replicate.set_defaults(handler=_replicate)

    compile_ = commands.add_parser(
        "compile",
        help="check a plan's protocol and write one executable artifact per role",
        description="Check the plan's global protocol, project it to every role, and write "
        "role-NNNNNN.pyz artifacts and run.json into DIR.",
    )
    compile_.add_argument("plan", metavar="PLAN", help="a plan (TOML); see docs/plans.md")
    _add_output_option(compile_, required=True)
    _add_json_option(compile_, "what was written")
    compile_.add_argument(
        "--roles", default=None, metavar="SPEC", help="roles to build: all, or e.g. 0,3,5-7"
    )
    compile_.set_defaults(handler=_compile)

    launch = commands.add_parser(
        "launch",
        help="start the participants in DIR on this host and relay their ports",
        description="Start every role in DIR (artifacts and run.json from `alpha compile`) in "
        "role order, relay announced ports, and wait. Exits 1 naming the role that failed "
        "first.",
    )
    launch.add_argument("dir", metavar="DIR", help="a folder that `alpha compile` wrote")
    launch.add_argument(
        "--deploy",
        default=None,
        metavar="FILE",
        help="run each role on the node a deployment file names, through SSH tunnels "
        "(docs/deploy.md)",
    )
    launch.add_argument(
        "--ssh-option",
        action="append",
        default=None,
        metavar="OPT",
        help="an extra word for every ssh call with --deploy (repeatable), e.g. "
        "-o UserKnownHostsFile=FILE given as two options",
    )
    _add_interpreter_option(launch)
    _add_cold_option(launch)
    _add_json_option(launch, "the outcome")
    launch.set_defaults(handler=_launch)

    exchange = commands.add_parser(
        "exchange",
        help="establish every edge of a tree of processes and exchange checked payloads",
        description="Compile the edge exchange on the tree of N roles and fan-out F (a "
        "sum-check plan of about BYTES each way per edge, one round), launch it on 127.0.0.1, "
        "and check that every edge was established once and carried checked payloads.",
    )
    exchange.add_argument("n", type=_nonnegative_int, metavar="N", help="number of roles")
    exchange.add_argument("fanout", type=_nonnegative_int, metavar="F", help="fan-out")
    exchange.add_argument(
        "--payload", type=_nonnegative_int, default=4096, help="bytes each way per edge"
    )
    _add_output_option(exchange, default="runs/exchange-N-F")
    exchange.add_argument(
        "--deadline", type=float, default=120.0, help="session deadline in seconds"
    )
    _add_cold_option(exchange)
    exchange.set_defaults(handler=_exchange)

    checkpoint = commands.add_parser(
        "checkpoint",
        help="inspect, verify or restore a checkpoint from its path alone",
        description="Read a checkpoint folder (through its LATEST pointer) or one generation "
        "folder; every manifest and shard is checked against its SHA-256 before it is used "
        "(docs/checkpoints.md). Exits 2 naming the shard when one is missing or damaged.",
    )
    actions = checkpoint.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    for action, text in (
        ("inspect", "print the generation's round, owners, arrays and shards"),
        ("verify", "check every manifest and every shard file, whole"),
        ("restore", "load every array (each shard checked) and print its SHA-256"),
    ):
        sub = actions.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        sub.add_argument("path", metavar="PATH", help="a checkpoint folder or a generation folder")
        if action == "inspect":
            sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        if action == "restore":
            sub.add_argument(
                "-o", "--output", default=None, metavar="FILE", help="also write the arrays as .npz"
            )
        sub.set_defaults(handler=_checkpoint)

    observe = commands.add_parser("observe", help="prove the runtime's refusals on real runs")
    observed = observe.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    observed.required = True
    gate = observed.add_parser(
        "gate",
        help="run the gates: one fault each, on a real run, and the refusal it must meet",
        description="Run a control run that must commit, then each gate's faulted run; print "
        "one row per gate (docs/gates.md). Exits 1 if any gate fails, saying why.",
    )
    gate.add_argument("names", nargs="*", metavar="NAME", help="gates to run (default: all)")
    gate.add_argument("--list", action="store_true", help="list the gates and exit")
    gate.add_argument(
        "--shard", type=_shard, default=None, metavar="K/N", help="run every N-th gate from K"
    )
    gate.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    gate.set_defaults(handler=_gate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except AlphaError as error:
        print(f"alpha: error: {one_line(str(error))}", file=sys.stderr)
        return error.exit_code  # its family's: InputInvalid is 2, RunFailed 1
    except OSError as error:
        # The machine refused a file operation (disk full, permissions): not a bug, one line.
        print(f"alpha: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        # Ctrl-C outside a launch (a launch stops its participants and reports it itself).
        print("alpha: error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
