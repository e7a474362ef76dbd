"""``alpha checkpoint list|inspect|verify|restore PATH``: a checkpoint read from its path alone,
a checkpoint folder (through its ``LATEST`` pointer) or one generation folder, every manifest and
shard checked against its SHA-256 before it is used (``docs/checkpoints.md``). Named apart from
the :mod:`alpha.checkpoint` package, which reads and writes checkpoints; this module is the
command around it.

``restore`` writes a NumPy ``.npz`` of named, shaped arrays: the flat parameter vector split
into the model's tensors (``alpha.learner.model.Model.layout``: ``W1``, ``b1``, ``W2``, ``b2``,
or ``W``, ``b`` for the linear model), each optimizer array of the parameters' length split the
same way under its own name (``m.W1``, ``v.b2``, ...), each one-element optimizer array as a
scalar (``p1``, ``p2``), and the round (``round``). A generation that records no model (not
a learner run's) is written with each array under its own name and shape, and the round.
:func:`named_arrays` makes that layout and :func:`flat_arrays` takes it back to the
generation's flat arrays, element for element.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from alpha.errors import CheckpointCorrupt, LearnerModuleInvalid, UsageError
from alpha.exitcodes import EXIT_OK
from alpha.learner.model import CLASSES, FEATURES, Model
from alpha.learner.program import recorded

__all__ = ["ROUND_KEY", "checkpoint_command", "flat_arrays", "model_of", "named_arrays"]

ROUND_KEY: Final = "round"
"""The ``.npz`` entry holding the generation's round (rounds done), a 0-d int64 array."""

_PARAMETERS: Final = "w"  # the parameters' array name in a generation (alpha.learner.saving)

Array = npt.NDArray[Any]


def model_of(about: Mapping[str, object], arrays: Mapping[str, Array], where: str) -> Model | None:
    """The model whose parameters a generation holds, from what its ``about`` records
    (``model``: ``hidden``, ``dtype``; ``features`` and ``classes`` when not the digits'; a
    learner module's ``program`` and ``layout``), checked against its parameters' length and
    dtype; None when it records no model (a generation not written by a learner run).

    Raises:
        CheckpointCorrupt: the model it records is malformed or does not fit the arrays.
    """
    if "model" not in about:
        return None
    model = about.get("model")
    record = model if isinstance(model, dict) else {}
    hidden, dtype = record.get("hidden", "missing"), record.get("dtype")
    features, classes = record.get("features", FEATURES), record.get("classes", CLASSES)
    w = arrays.get(_PARAMETERS)
    fits = (
        (hidden is None or (type(hidden) is int and hidden > 0))
        and isinstance(dtype, str)
        and all(type(n) is int and n > 0 for n in (features, classes))
    )
    if not fits or w is None:
        raise CheckpointCorrupt(
            f"{where}: about.model {model!r} does not name a model with parameters "
            f"{_PARAMETERS!r}: its arrays cannot be named"
        )
    assert isinstance(dtype, str) and isinstance(features, int) and isinstance(classes, int)
    try:
        found = _recorded_model(record, hidden, dtype, features, classes)
    except LearnerModuleInvalid as error:
        raise CheckpointCorrupt(f"{where}: about.model: {error}") from None
    if w.shape != (found.size,) or str(w.dtype) != dtype:
        raise CheckpointCorrupt(
            f"{where}: its parameters are {w.dtype!s} {list(w.shape)}, but about.model "
            f"{model!r} has {found.size} {dtype} parameters"
        )
    return found


def _recorded_model(
    record: Mapping[str, object], hidden: object, dtype: str, features: int, classes: int
) -> Model:
    """The shipped model, or a learner module's as its recorded layout names it.

    Raises:
        LearnerModuleInvalid: the recorded program or layout is malformed.
    """
    program = record.get("program")
    if program is None:
        assert hidden is None or isinstance(hidden, int)
        return Model.shipped(hidden, dtype, features, classes)
    layout = record.get("layout")
    name = program.get("name") if isinstance(program, dict) else None
    sha = program.get("sha256") if isinstance(program, dict) else None
    if not isinstance(name, str) or not isinstance(sha, str) or not isinstance(layout, list):
        raise LearnerModuleInvalid(str(name), "its program or layout is not recorded")
    pairs = tuple(
        (entry[0], tuple(entry[1])) if isinstance(entry, list) and len(entry) == 2 else ("", ())
        for entry in layout
    )
    return Model(recorded(name, sha, pairs), dtype, features, classes)


def named_arrays(model: Model | None, arrays: Mapping[str, Array], round: int) -> dict[str, Array]:
    """The ``.npz`` layout of a generation's flat ``arrays`` (module docstring): copies, never
    views of ``arrays``. Without a ``model`` each array keeps its own name and shape."""
    named: dict[str, Array] = {}
    # The parameters first, then the optimizer's arrays by name.
    for name, flat in sorted(arrays.items(), key=lambda item: (item[0] != _PARAMETERS, item[0])):
        if model is None:
            named[name] = flat.copy()
        elif flat.shape == (model.size,):
            prefix = "" if name == _PARAMETERS else f"{name}."
            for part, values in model.unpack(flat).items():
                named[f"{prefix}{part}"] = values.copy()
        elif flat.size == 1:
            named[name] = flat.reshape(()).copy()
        else:
            named[name] = flat.copy()
    named[ROUND_KEY] = np.array(round, dtype=np.int64)
    return named


def flat_arrays(model: Model, named: Mapping[str, Array]) -> tuple[dict[str, Array], int]:
    """The generation's flat arrays and round from the ``.npz`` layout (the inverse of
    :func:`named_arrays`)."""
    parts = {name for name, _ in model.layout}
    flat: dict[str, Array] = {}
    groups: dict[str, dict[str, Array]] = {}
    for key, values in named.items():
        if key == ROUND_KEY:
            continue
        head, dot, tail = key.rpartition(".")
        if key in parts:
            groups.setdefault(_PARAMETERS, {})[key] = values
        elif dot and tail in parts:
            groups.setdefault(head, {})[tail] = values
        else:
            flat[key] = values.reshape(-1)
    for name, group in groups.items():
        flat[name] = np.concatenate([group[part].reshape(-1) for part, _ in model.layout])
    return flat, int(named[ROUND_KEY])


def checkpoint_command(args: argparse.Namespace) -> int:
    """``alpha checkpoint ACTION PATH``: list shows a folder's generations, inspect prints the
    generation, verify checks every shard whole, restore loads every array (and with an output
    file writes them, named and shaped, as ``.npz``).

    Raises:
        UsageError: ``PATH`` does not exist, ``list`` was given no folder, or restore was
            given two different output files, or a folder as one.
        CheckpointCorrupt: the pointer, a manifest or a shard is missing or damaged (named).
    """
    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"checkpoint {args.action}: {path} does not exist")
    if args.action == "list":
        return _list(path, as_json=args.json)
    from alpha.checkpoint.store import open_generation

    out = _restore_output(args) if args.action == "restore" else None
    generation = open_generation(path)
    if args.action == "inspect":
        return _inspect(generation, as_json=args.json)
    if args.action == "verify":
        checked = generation.verify()
        print(
            f"checkpoint: {generation.path.name}: every manifest and all "
            f"{sum(len(e) for e in generation.shards.values())} shard(s) ({checked} bytes) check",
            file=sys.stderr,
        )
        return EXIT_OK
    import hashlib

    arrays = generation.load()
    where = f"checkpoint {generation.path.name}"
    model = model_of(generation.about, arrays, where)  # before anything is printed or written
    for name, array in arrays.items():
        digest = hashlib.sha256(array.tobytes()).hexdigest()
        print(f"{name:<10} {array.dtype} {list(array.shape)} sha256 {digest}")
    if out is not None:
        from alpha.files import write_atomically

        named = named_arrays(model, arrays, generation.round)
        write_atomically(out, lambda handle: np.savez(handle, allow_pickle=False, **named))
        listed = ", ".join(f"{key} {list(value.shape)}" for key, value in named.items())
        print(
            f"checkpoint: round {generation.round} written to {out}: {listed}",
            file=sys.stderr,
        )
    return EXIT_OK


def _restore_output(args: argparse.Namespace) -> Path | None:
    """``restore``'s output file: ``OUT`` or ``-o OUT`` (the same if both are given).

    Raises:
        UsageError: two different files, or a folder.
    """
    given = {each for each in (args.out, args.output) if each is not None}
    if len(given) > 1:
        raise UsageError(
            f"checkpoint restore: two output files given ({' and '.join(sorted(given))}): "
            "give one, as OUT or -o"
        )
    if not given:
        return None
    out = Path(given.pop())
    if out.is_dir():
        raise UsageError(f"checkpoint restore: {out} is a folder: give a file, say {out}/w.npz")
    return out


def _inspect(generation: Any, *, as_json: bool) -> int:
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
    if as_json:
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


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _size(count: int) -> str:
    """Bytes as a person reads them: 812 B, 14.2 KiB, 3.0 MiB."""
    if count < 1024:
        return f"{count} B"
    power = min(int(math.log(count, 1024)), 3)
    return f"{count / 1024**power:.1f} {('B', 'KiB', 'MiB', 'GiB')[power]}"


def _list(folder: Path, *, as_json: bool) -> int:
    """``alpha checkpoint list FOLDER``: every published generation of the folder by round.

    Raises:
        UsageError: ``folder`` is a generation folder or not a folder.
    """
    from alpha.checkpoint.store import MANIFEST, list_generations

    if not folder.is_dir():
        raise UsageError(f"checkpoint list: {folder} is not a folder")
    if (folder / MANIFEST).is_file():
        raise UsageError(
            f"checkpoint list: {folder} is one generation: list its checkpoint folder "
            f"({folder.parent}), or inspect this one with alpha checkpoint inspect"
        )
    listed, pointer, problem = list_generations(folder)
    pointed = any(each.latest for each in listed)
    if pointer and not pointed:
        problem = f"it names {pointer}, which is not a published generation of {folder}"
    if as_json:
        facts = {
            "folder": str(folder),
            "latest": pointer if pointed else None,
            "pointer_problem": problem or None,
            "generations": [
                {
                    "generation": each.path.name,
                    "path": str(each.path),
                    "round": each.round,
                    "run": each.run,
                    "plan_sha256": each.plan_sha256,
                    "written": _when(each.written),
                    "bytes": each.bytes,
                    "latest": each.latest,
                    "problem": each.problem or None,
                }
                for each in listed
            ],
        }
        print(json.dumps(facts, indent=1, sort_keys=True))
        return EXIT_OK
    if not listed:
        print(f"checkpoint: {folder} holds no published generation")
        return EXIT_OK
    rows = [("round", "generation", "run", "written", "size", "")]
    for each in listed:
        run = each.run if each.run is not None else "-"
        note = "LATEST" if each.latest else ""
        if each.problem:
            note = f"{note} does not read: {each.problem}".strip()
        rows.append(
            (str(each.round), each.path.name, run, _when(each.written), _size(each.bytes), note)
        )
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    for row in rows:
        cells = [row[0].rjust(widths[0])] + [row[c].ljust(widths[c]) for c in range(1, 5)]
        print("  ".join([*cells, row[5]]).rstrip())
    if not pointed:
        said = f"does not read: {problem}" if problem else "is not there"
        print(f"checkpoint: {folder / 'LATEST'} {said}: no generation is the latest")
    return EXIT_OK
