"""The ``alpha`` command line.

Every subcommand is a thin shell over a library call. A bad argument or input
prints one line naming what is wrong and exits with :data:`EXIT_USAGE`; no
traceback reaches the user for an error Alpha raised on purpose. Exit codes
are documented in ``docs/exit-codes.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from alpha import __version__
from alpha.errors import AdmissionError, AlphaError, GroupSyntaxError, TopologyError, UsageError
from alpha.membership import ParticipantGroup, parse_group
from alpha.topology import ParticipantTree

EXIT_OK = 0
#: A run or check was carried out and failed (a refusal, an aborted round).
EXIT_FAILURE = 1
#: The command line, a plan or an input text is wrong; nothing was started.
EXIT_USAGE = 2

# Errors that mean "what you typed is wrong", as opposed to a run that failed.
_INPUT_ERRORS = (UsageError, GroupSyntaxError, AdmissionError, TopologyError)

# How many of a node's children `describe tree` lists before abbreviating:
# a fan-out of 64 still fits on one terminal line or two.
_CHILDREN_SHOWN = 16


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and a usage exit code."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


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


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; ``alpha --help`` and ``alpha CMD --help`` print it."""
    parser = _Parser(
        prog="alpha",
        description="Distributed data-parallel learning, one executable per role.",
    )
    parser.add_argument("--version", action="version", version=f"alpha {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except AlphaError as error:
        print(f"alpha: error: {_one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, _INPUT_ERRORS) else EXIT_FAILURE


def _one_line(text: str) -> str:
    return " ".join(text.split())
