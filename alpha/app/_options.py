"""The options several commands share, in one place: their argument types (each refusal one
line through :class:`argparse.ArgumentTypeError`, so ``alpha`` exits 2 naming the option), the
``-o``/``--json``/``--cold``/``--trace``/``--interpreter`` options under the same names and
help everywhere, and how a command prints its ``--json`` object.

Only the parser (``alpha.app.cli``) and the command modules beside it import this module; it
imports nothing heavier than the standard library at import time, so ``alpha --help`` stays
cheap.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence

from alpha.errors import UsageError


def nonnegative_int(text: str) -> int:
    """A count or a role as typed: a decimal whole number, 0 or more."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def interpreter(text: str) -> tuple[str, tuple[str, ...]]:
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


def interpreters(
    command: str, given: Sequence[tuple[str, tuple[str, ...]]] | None
) -> dict[str, tuple[str, ...]]:
    """The ``--interpreter`` options of ``command`` as a map; a target given twice is refused."""
    chosen: dict[str, tuple[str, ...]] = {}
    for target, words in given or ():
        if target in chosen:
            raise UsageError(f"{command}: --interpreter gives {target} twice")
        chosen[target] = words
    return chosen


def folder(text: str) -> str:
    """An output folder's path as typed: an empty one names no folder (it would be the
    current one, which no command should fill with its files unasked)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder; give one, e.g. -o runs/x")
    return text


def existing_path(text: str) -> str:
    """A path to read as typed (``alpha run --resume``): it must exist, so that a mistyped one
    is told as such at once, before a plan is read or a folder made."""
    if not os.path.exists(text):  # a link to nothing included
        raise argparse.ArgumentTypeError(
            f"{text!r} does not exist; give a checkpoint folder or one of its generation "
            "folders (docs/checkpoints.md)"
        )
    return text


def shard(text: str) -> tuple[int, int]:
    """``K/N`` (``alpha observe gate --shard``): the K-th of N shards, 1 <= K <= N."""
    index, _, count = text.partition("/")
    try:
        k, n = int(index, 10), int(count, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N such as 2/3, got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"a shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def add_output_option(
    parser: argparse.ArgumentParser, *, required: bool = False, default: str = ""
) -> None:
    """``-o DIR`` (also ``--output DIR`` and ``--dir DIR``): every command that writes a folder
    takes it under the same names."""
    parser.add_argument(
        "-o",
        "--output",
        "--dir",
        dest="output",
        type=folder,
        required=required,
        default=None,
        metavar="DIR",
        help=f"the folder to write{f' (default {default})' if default else ''}",
    )


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: ``what`` as one object on stdout, printed by :func:`print_json`."""
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as one JSON object on stdout (docs/cli.md), progress still on stderr",
    )


def add_cold_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cold",
        action="store_true",
        help="start every role in an interpreter of its own instead of forking it from the "
        "warm starter (docs/launch.md)",
    )


TRACE_HERE_ONLY = (
    "{command}: --trace traces roles this host starts (their traces go into the run folder's "
    "trace/); with --deploy or --slurm the roles run on other nodes: leave --trace out"
)
"""The refusal of ``--trace`` where the roles run on other hosts (``docs/trace.md``)."""


def add_trace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        action="store_true",
        help="every role writes a trace of its frames, local operations and waits into the "
        "run folder's trace/, within the plan's [trace] bounds; alpha observe trace and "
        "alpha observe diff read them (docs/trace.md)",
    )


def add_interpreter_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interpreter",
        type=interpreter,
        action="append",
        default=None,
        metavar="TARGET=COMMAND",
        help="start the roles built for TARGET (x86_64, aarch64) with COMMAND (split as a "
        "shell would) before the artifact instead of this Python; repeatable, once per target "
        "(see docs/emulation.md)",
    )


def add_deploy_options(parser: argparse.ArgumentParser) -> None:
    """``--deploy FILE`` and ``--ssh-option OPT`` (``alpha launch``, ``alpha run``)."""
    parser.add_argument(
        "--deploy",
        default=None,
        metavar="FILE",
        help="run each role on the node a deployment file names, through SSH tunnels "
        "(docs/deploy.md)",
    )
    parser.add_argument(
        "--ssh-option",
        action="append",
        default=None,
        metavar="OPT",
        help="an extra word for every ssh call with --deploy (repeatable), e.g. "
        "-o UserKnownHostsFile=FILE given as two options",
    )


def add_slurm_options(parser: argparse.ArgumentParser) -> None:
    """``--slurm`` and ``--slurm-option WORD`` (``alpha run``)."""
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="run the roles on the nodes of a Slurm allocation, one srun step per attempt: "
        "inside salloc or an sbatch script, or one asked for with --slurm-option "
        "(docs/slurm.md)",
    )
    parser.add_argument(
        "--slurm-option",
        action="append",
        default=None,
        metavar="WORD",
        help="with --slurm outside an allocation: a word for the salloc that makes one "
        "(repeatable), e.g. --slurm-option=--nodes=3 --slurm-option=--time=30",
    )


def _tagged(option: str) -> Callable[[str], tuple[str, str]]:
    """An override option's argument as ``(option, text)``: it is read (as TOML) with the
    plan, so that a wrong one is refused as a plan's key is (``PlanInvalid``, docs/plans.md)."""

    def tag(text: str) -> tuple[str, str]:
        return (option, text)

    tag.__name__ = option.lstrip("-")  # argparse names a type by it in its messages
    return tag


def add_override_options(parser: argparse.ArgumentParser, *, roles: bool = True) -> None:
    """The plan overrides (docs/plans.md, "Overrides"): ``--roles N`` (unless ``roles`` is
    false: ``alpha compile``'s ``--roles`` selects the roles to build), ``--fanout F``,
    ``--rounds R`` and repeatable ``--set TABLE.KEY=VALUE``, all collected in the order given
    into ``args.overrides`` (a list of ``(option, text)``, or None)."""
    group = parser.add_argument_group(
        "plan overrides", "set a plan's values as if written in its file (docs/plans.md)"
    )
    if roles:
        group.add_argument(
            "--roles",
            dest="overrides",
            action="append",
            type=_tagged("--roles"),
            metavar="N",
            help="run the roles 0..N-1 (membership.roles = N, replacing the plan's group)",
        )
    for option, key, metavar in (
        ("--fanout", "topology.fanout", "F"),
        ("--rounds", "run.rounds", "R"),
    ):
        group.add_argument(
            option,
            dest="overrides",
            action="append",
            type=_tagged(option),
            metavar=metavar,
            help=f"set {key} = {metavar}",
        )
    group.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=_tagged("--set"),
        metavar="TABLE.KEY=VALUE",
        help="set any plan field; VALUE is a TOML value, a bare word a string (repeatable, "
        "applied in order)",
    )


def print_json(data: Mapping[str, object]) -> None:
    """A command's ``--json`` object: sorted keys, and no NaN (which is not JSON)."""
    print(json.dumps(data, indent=2, sort_keys=True, allow_nan=False))
