"""The ``alpha`` command line: the parser and the dispatch to each command's module.

Every subcommand is a thin shell over a library call, in a module of its own beside this one
(``describe``, ``run`` with ``replicate``, ``compile``, ``launch_command``, ``exchange``,
``checkpoint_command``, ``observe``); the options several share are in ``_options``. This module
imports a command's module only when that command runs, so ``alpha --help`` and a light command
such as ``alpha describe tree`` load neither trio, nor numpy, nor the launcher.

An error Alpha raised on purpose prints one line naming what is wrong and exits with the code
its family carries (``AlphaError.exit_code``): :data:`EXIT_USAGE` for a bad argument or input
(``InputInvalid``), :data:`EXIT_FAILURE` for a run that failed (``RunFailed``); no traceback
reaches the user. Exit codes are documented in ``docs/exit-codes.md``.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NoReturn

from alpha import __version__
from alpha.app._options import (
    add_cold_option,
    add_deploy_options,
    add_interpreter_option,
    add_json_option,
    add_output_option,
    add_override_options,
    add_slurm_options,
    add_trace_option,
    existing_path,
    nonnegative_int,
    shard,
)
from alpha.errors import AlphaError, UsageError, one_line
from alpha.exitcodes import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

# The exit codes are re-exported: a caller of main() compares its result with them.
__all__ = [
    "COMMANDS",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and a usage exit code, and whose unknown
    word among choices (a command, ``WHAT``, ``ACTION``) is told the nearest one."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # The suggestion comes from the parser's own choices: no command's module is loaded.
        if action.choices is None or value in action.choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        choices = [str(choice) for choice in action.choices]
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise argparse.ArgumentError(
            action,
            f"invalid choice: {value!r}{hint} (choose from {', '.join(map(repr, choices))})",
        )

    def error(self, message: str) -> NoReturn:
        # A subcommand names itself ("run: argument ..."); main() prefixes "alpha: error:".
        command = self.prog.removeprefix("alpha").strip()
        raise UsageError(f"{command}: {message}" if command else message)


# Each command's module is imported only when that command runs (as pip's command table does):
# building the parser, and so `alpha --help`, loads no command's module, and a light command
# (describe) loads neither trio nor the launcher. The imports are written out, inside the
# functions below, so that the layering check and the import floors see every edge.


def _describe_group(args: argparse.Namespace) -> int:
    from alpha.app.describe import describe_group

    return describe_group(args)


def _describe_deploy(args: argparse.Namespace) -> int:
    from alpha.app.describe import describe_deploy

    return describe_deploy(args)


def _describe_tree(args: argparse.Namespace) -> int:
    from alpha.app.describe import describe_tree

    return describe_tree(args)


def _run(args: argparse.Namespace) -> int:
    if args.round is not None and args.resume is None:
        # Refused before the plan is read: --round picks a generation of --resume's folder.
        raise UsageError(
            "run: argument --round: needs --resume FOLDER, the checkpoint folder whose "
            f"generation of round {args.round} to resume from"
        )
    from alpha.app.run import run_command

    return run_command(args)


def _replicate(args: argparse.Namespace) -> int:
    from alpha.app.run import replicate_command

    return replicate_command(args)


def _compile(args: argparse.Namespace) -> int:
    from alpha.app.compile import compile_command

    return compile_command(args)


def _launch(args: argparse.Namespace) -> int:
    from alpha.app.launch_command import launch_command

    return launch_command(args)


def _exchange(args: argparse.Namespace) -> int:
    from alpha.app.exchange import exchange_command

    return exchange_command(args)


def _checkpoint(args: argparse.Namespace) -> int:
    from alpha.app.checkpoint_command import checkpoint_command

    return checkpoint_command(args)


def _observe_gate(args: argparse.Namespace) -> int:
    from alpha.app.observe import observe_gate

    return observe_gate(args)


def _observe_trace(args: argparse.Namespace) -> int:
    from alpha.app.trace_command import observe_trace

    return observe_trace(args)


def _observe_diff(args: argparse.Namespace) -> int:
    from alpha.app.trace_command import observe_diff

    return observe_diff(args)


def _rounds(text: str) -> tuple[int, int]:
    from alpha.app.trace_command import round_window

    return round_window(text)


def _emulation(args: argparse.Namespace) -> int:
    from alpha.app.emulation_command import emulation_command

    return emulation_command(args)


def _plans(args: argparse.Namespace) -> int:
    from alpha.app.plans import plans_command

    return plans_command(args)


#: Every leaf command's words and the function that runs it.
COMMANDS: Final[Mapping[tuple[str, ...], Callable[[argparse.Namespace], int]]] = {
    ("describe", "group"): _describe_group,
    ("describe", "deploy"): _describe_deploy,
    ("describe", "tree"): _describe_tree,
    ("run",): _run,
    ("replicate",): _replicate,
    ("compile",): _compile,
    ("launch",): _launch,
    ("exchange",): _exchange,
    **dict.fromkeys(
        (
            ("checkpoint", "list"),
            ("checkpoint", "inspect"),
            ("checkpoint", "verify"),
            ("checkpoint", "restore"),
        ),
        _checkpoint,
    ),
    ("observe", "gate"): _observe_gate,
    ("observe", "trace"): _observe_trace,
    ("observe", "diff"): _observe_diff,
    ("plans",): _plans,
    ("emulation",): _emulation,
    ("emulation", "show"): _emulation,
    ("emulation", "build"): _emulation,
    ("plans", "show"): _plans,
    ("plans", "copy"): _plans,
}


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
        type=nonnegative_int,
        default=None,
        help="roles are 0..N-1 (default: one past the largest selected role)",
    )
    group.add_argument("--epoch", type=nonnegative_int, default=0, help="membership epoch")
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
    tree.add_argument("n", type=nonnegative_int, metavar="N", help="number of roles")
    tree.add_argument("fanout", type=nonnegative_int, metavar="F", help="fan-out")
    tree.add_argument("--role", type=nonnegative_int, default=None, help="describe this role")
    tree.add_argument("--json", action="store_true", help="print JSON instead of text")
    tree.set_defaults(handler=_describe_tree)

    run = commands.add_parser(
        "run",
        help="the main job: compile, launch, and compare with the replicated learner",
        description="Compile PLAN (default: the shipped digits plan), launch its participants "
        "on this host (or, with --deploy, on a deployment's nodes; with --slurm, on a Slurm "
        "allocation's) with live progress, and "
        "compare the final parameters with the "
        "replicated learner's, bit for bit. Exits 1 when they differ or a role fails.",
    )
    run.add_argument(
        "plan",
        nargs="?",
        default=None,
        metavar="PLAN",
        help="a learn plan: a file, or a shipped plan's name (alpha plans); default digits",
    )
    add_output_option(run, default="runs/NAME")
    add_json_option(run, "the summary")
    run.add_argument(
        "--resume",
        type=existing_path,
        default=None,
        metavar="PATH",
        help="continue from a checkpoint folder (its latest generation) or a generation "
        "(docs/checkpoints.md)",
    )
    run.add_argument(
        "--round",
        type=nonnegative_int,
        default=None,
        metavar="R",
        help="with --resume FOLDER: resume from FOLDER's generation of round R "
        "(alpha checkpoint list FOLDER shows them)",
    )
    run.add_argument(
        "--restarts",
        type=nonnegative_int,
        default=None,
        metavar="K",
        help="after a failure that may be retried (a role lost, a frame refused, a budget), "
        "start again from the latest generation, as a new epoch, at most K times (default: "
        "the plan's [recovery] restarts, else 0; docs/recovery.md)",
    )
    add_interpreter_option(run)
    add_deploy_options(run)  # with --restarts, a spare takes a gone node's roles
    add_slurm_options(run)
    add_cold_option(run)
    add_trace_option(run)
    add_override_options(run)
    run.set_defaults(handler=_run)

    replicate = commands.add_parser(
        "replicate",
        help="train a learn plan in one process; print the final parameter digest",
    )
    replicate.add_argument("plan", metavar="PLAN")
    add_json_option(replicate, "plan, digest, rounds (done) and diverged_at")
    add_override_options(replicate)
    replicate.set_defaults(handler=_replicate)

    compile_ = commands.add_parser(
        "compile",
        help="check a plan's protocol and write one executable artifact per role",
        description="Check the plan's global protocol, project it to every role, and write "
        "role-NNNNNN.pyz artifacts and run.json into DIR.",
    )
    compile_.add_argument(
        "plan",
        metavar="PLAN",
        help="a plan (TOML, docs/plans.md), or a shipped plan's name (alpha plans)",
    )
    add_output_option(compile_, required=True)
    add_json_option(compile_, "what was written")
    compile_.add_argument(
        "--roles", default=None, metavar="SPEC", help="roles to build: all, or e.g. 0,3,5-7"
    )
    add_override_options(compile_, roles=False)  # the run's roles: --set membership.roles=N
    compile_.set_defaults(handler=_compile)

    launch = commands.add_parser(
        "launch",
        help="start the participants in DIR on this host and relay their ports",
        description="Start every role in DIR (artifacts and run.json from `alpha compile`) in "
        "role order, relay announced ports, and wait. Exits 1 naming the role that failed "
        "first.",
    )
    launch.add_argument("dir", metavar="DIR", help="a folder that `alpha compile` wrote")
    add_deploy_options(launch)
    add_interpreter_option(launch)
    add_cold_option(launch)
    add_trace_option(launch)
    add_json_option(launch, "the outcome")
    launch.set_defaults(handler=_launch)

    exchange = commands.add_parser(
        "exchange",
        help="establish every edge of a tree of processes and exchange checked payloads",
        description="Compile the edge exchange on the tree of N roles and fan-out F (a "
        "sum-check plan of about BYTES each way per edge, one round), launch it on 127.0.0.1, "
        "and check that every edge was established once and carried checked payloads.",
    )
    exchange.add_argument("n", type=nonnegative_int, metavar="N", help="number of roles")
    exchange.add_argument("fanout", type=nonnegative_int, metavar="F", help="fan-out")
    exchange.add_argument(
        "--payload",
        type=nonnegative_int,
        default=4096,
        metavar="BYTES",
        help="bytes each way per edge (default %(default)s)",
    )
    add_output_option(exchange, default="runs/exchange-N-F")
    exchange.add_argument(
        "--deadline", type=float, default=120.0, help="session deadline in seconds"
    )
    add_cold_option(exchange)
    exchange.set_defaults(handler=_exchange)

    checkpoint = commands.add_parser(
        "checkpoint",
        help="list, inspect, verify or restore a checkpoint from its path alone",
        description="Read a checkpoint folder (through its LATEST pointer) or one generation "
        "folder; every manifest and shard is checked against its SHA-256 before it is used "
        "(docs/checkpoints.md). Exits 2 naming the shard when one is missing or damaged.",
    )
    actions = checkpoint.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    for action, text in (
        ("list", "list a checkpoint folder's generations: round, run, when, size, LATEST"),
        ("inspect", "print the generation's round, owners, arrays and shards"),
        ("verify", "check every manifest and every shard file, whole"),
        (
            "restore",
            "load every array (each shard checked), print its SHA-256, and with OUT write "
            "the model's named, shaped tensors, the optimizer's arrays and the round as .npz",
        ),
    ):
        sub = actions.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        if action == "list":
            sub.add_argument("path", metavar="FOLDER", help="a checkpoint folder")
        else:
            sub.add_argument(
                "path", metavar="PATH", help="a checkpoint folder or a generation folder"
            )
        if action in ("list", "inspect"):
            sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        if action == "restore":
            sub.add_argument(
                "out", nargs="?", default=None, metavar="OUT", help="write the arrays as .npz"
            )
            sub.add_argument("-o", "--output", default=None, metavar="FILE", help="the same as OUT")
        sub.set_defaults(handler=_checkpoint)

    plans = commands.add_parser(
        "plans",
        help="list the plans shipped with alpha; show or copy one",
        description="List the plans shipped with alpha (alpha run NAME and alpha compile NAME "
        "take one by name); show one, or copy it to edit.",
    )
    plans.set_defaults(handler=_plans, action=None)
    plan_actions = plans.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    show = plan_actions.add_parser("show", help="print a shipped plan's TOML")
    show.add_argument("name", metavar="NAME", help="a shipped plan's name (alpha plans)")
    show.set_defaults(handler=_plans)
    copy = plan_actions.add_parser("copy", help="copy a shipped plan to a file, to edit it")
    copy.add_argument("name", metavar="NAME", help="a shipped plan's name (alpha plans)")
    copy.add_argument(
        "dest", nargs="?", default=None, metavar="DEST", help="the file or folder (./NAME.toml)"
    )
    copy.set_defaults(handler=_plans)

    emulation = commands.add_parser(
        "emulation",
        help="show or build what runs AArch64 roles on this host (qemu-aarch64)",
        description="A role built for aarch64 runs on an x86-64 host as a real AArch64 "
        "CPython under qemu-aarch64 (docs/emulation.md); alpha run and alpha launch use it "
        "when no --interpreter aarch64=... is given. With no ACTION, or show: print the "
        "interpreter prefix, or what is missing (exit 2). build: build its sysroot and site.",
    )
    emulation.set_defaults(handler=_emulation, action="show", json=False, home=None)
    emulation_actions = emulation.add_subparsers(
        dest="action", metavar="ACTION", parser_class=_Parser
    )
    shown = emulation_actions.add_parser("show", help="print the interpreter prefix")
    add_json_option(shown, "home and interpreter")
    shown.add_argument(
        "--home", default=None, metavar="DIR", help="where it was built (default as build's)"
    )
    shown.set_defaults(handler=_emulation)
    build = emulation_actions.add_parser(
        "build",
        help="build the AArch64 sysroot and site (about 90 MB to download, once)",
        description="Build, into DIR (default $ALPHA_AARCH64_HOME, a checkout's .cache/aarch64, "
        "or ~/.cache/alpha/aarch64), the Debian arm64 CPython and the aarch64 trio and numpy "
        "at this alpha's versions. Needs qemu-user, apt-get and network; a build that is "
        "current returns at once.",
    )
    build.add_argument("home", nargs="?", default=None, metavar="DIR", help="where to build")
    build.set_defaults(handler=_emulation)

    observe = commands.add_parser(
        "observe", help="prove the runtime's refusals on real runs; see and compare traced runs"
    )
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
        "--shard", type=shard, default=None, metavar="K/N", help="run every N-th gate from K"
    )
    add_json_option(gate, "the rows (instead of the table)")
    gate.set_defaults(handler=_observe_gate)
    traced = observed.add_parser(
        "trace",
        help="merge a traced run's traces into a Chrome trace and draw a sequence chart",
        description="Read the traces a run wrote with --trace (DIR/trace/role-NNNNNN.trace), "
        "write them as one Chrome trace (Trace Event Format JSON: a track per role, an arrow "
        "from each send to its receive; Perfetto's UI opens it) and draw a sequence chart of "
        "a window of rounds as a PNG, a refused frame and an abort's spread marked "
        "(docs/trace.md). Exits 2 when DIR holds no readable trace.",
    )
    traced.add_argument("dir", metavar="DIR", help="a traced run's folder (or its trace/)")
    traced.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="the Chrome trace's file (default DIR/trace.json)",
    )
    traced.add_argument(
        "--png", default=None, metavar="FILE", help="the chart's file (default DIR/trace.png)"
    )
    traced.add_argument(
        "--rounds",
        type=_rounds,
        default=None,
        metavar="A:B",
        help="the chart's rounds, counted from 0 (default: a failed run's first refusal and "
        "the round before; else rounds 0 and 1)",
    )
    add_json_option(traced, "what was read and written")
    traced.set_defaults(handler=_observe_trace)
    diff = observed.add_parser(
        "diff",
        help="name the first frame whose payload differs between two traced runs of one plan",
        description="Compare the DATA and CHOICE frames of two traced runs of one plan, "
        "aligned by role, edge, slot and version, and name the first (round, role, frame) "
        "whose payload digest differs, with what each run computed there (docs/trace.md). "
        "Exits 0 when they are equal, 1 when they differ, 2 when they cannot be compared.",
    )
    diff.add_argument("dir_a", metavar="DIR_A", help="a traced run's folder (or its trace/)")
    diff.add_argument("dir_b", metavar="DIR_B", help="another traced run of the same plan")
    add_json_option(diff, "the comparison")
    diff.set_defaults(handler=_observe_diff)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code.

    SIGINT, SIGTERM and SIGHUP stop any command the same way: one line naming the signal and
    what was stopped, removed or kept (``alpha.app.interrupted``), and 128 + the signal;
    never a traceback, a ``KeyboardInterrupt`` inside trio's exception group included."""
    from alpha.app.interrupted import interrupt_line, interrupted_by, signals_as_interrupts

    words = ["alpha"]
    with signals_as_interrupts():
        try:
            return _main(argv, words)
        except BaseException as error:
            stopped = interrupted_by(error)
            if stopped is None:
                raise
            # The command's own words name it ("compile:", "checkpoint verify:").
            command = " ".join(words[1:]) or "alpha"
            print(interrupt_line(command, stopped.signal, stopped.detail), file=sys.stderr)
            return stopped.exit_code


def _main(argv: Sequence[str] | None, words: list[str]) -> int:
    """:func:`main` but for interrupts; ``words`` gets the command's words once parsed."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        words += [
            word
            for word in (args.command, getattr(args, "what", None), getattr(args, "action", None))
            if isinstance(word, str)
        ]
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except AlphaError as error:
        print(f"alpha: error: {one_line(str(error))}", file=sys.stderr)
        return error.exit_code  # its family's: InputInvalid is 2, RunFailed 1
    except OSError as error:
        # The machine refused a file operation (disk full, permissions): not a bug, one line.
        print(f"alpha: error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_FAILURE
