"""``alpha describe group|deploy|tree``: what a participant group, a deployment file or a
participant tree comes to, as text or (``--json``) one object. Nothing is written or started;
a wrong input is one line and exit 2, as :func:`alpha.app.cli.main` prints it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from alpha.core.membership import ParticipantGroup
from alpha.core.membership_text import parse_group
from alpha.core.topology import ParticipantTree
from alpha.exitcodes import EXIT_OK

__all__ = ["describe_deploy", "describe_group", "describe_tree"]

# How many of a node's children `describe tree` lists before abbreviating:
# a fan-out of 64 still fits on one terminal line or two.
_CHILDREN_SHOWN = 16


def describe_group(args: argparse.Namespace) -> int:
    """``alpha describe group TEXT``: the group's size, index nodes, ends and digest.

    Raises:
        GroupSyntaxError: the text does not follow the grammar (the offset named).
        AdmissionError: the group is refused (empty, overlapping, outside the universe...).
    """
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


def describe_deploy(args: argparse.Namespace) -> int:
    """``alpha describe deploy FILE``: the deployment's transport, root, each role's node and
    the spares, in the order they are taken.

    Raises:
        DeployInvalid: the file does not read or a field is wrong (the first named).
    """
    from alpha.launch.deploy import load_deployment

    deployment = load_deployment(args.file)
    if args.json:
        facts = {
            "transport": deployment.transport,
            "remote_root": deployment.remote_root,
            "roles": [
                {"role": role, **_vars_of(node)} for role, node in enumerate(deployment.nodes)
            ],
            "spares": [_vars_of(node) for node in deployment.spares],
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
    for index, node in enumerate(deployment.spares):
        print(
            f"spare {index:<6} {node.pod_id} at {node.host} port {node.port}, GPU minor "
            f"{node.minor}, key {node.ssh_key}"
        )
    return EXIT_OK


def _vars_of(node: object) -> dict[str, object]:
    """A frozen dataclass with slots as a dict of its fields."""
    import dataclasses

    assert dataclasses.is_dataclass(node) and not isinstance(node, type)
    return dataclasses.asdict(node)


def describe_tree(args: argparse.Namespace) -> int:
    """``alpha describe tree N F [--role R]``: the tree's depth and level sizes, and one role's
    parent, children, edges, subtree and path from the root.

    Raises:
        TopologyError: N or F is out of range, or R is not a role of the tree.
    """
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
