"""``alpha checkpoint inspect|verify|restore PATH``: a checkpoint read from its path alone, a
checkpoint folder (through its ``LATEST`` pointer) or one generation folder, every manifest and
shard checked against its SHA-256 before it is used (``docs/checkpoints.md``). Named apart from
the :mod:`alpha.checkpoint` package, which reads and writes checkpoints; this module is the
command around it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from alpha.errors import UsageError
from alpha.exitcodes import EXIT_OK

__all__ = ["checkpoint_command"]


def checkpoint_command(args: argparse.Namespace) -> int:
    """``alpha checkpoint ACTION PATH``: inspect prints the generation, verify checks every
    shard whole, restore loads every array (and with ``-o`` writes them as ``.npz``).

    Raises:
        UsageError: ``PATH`` does not exist.
        CheckpointCorrupt: the pointer, a manifest or a shard is missing or damaged (named).
    """
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
