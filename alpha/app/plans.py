"""``alpha plans [show NAME | copy NAME [DEST]]``: the plans shipped with alpha, by name.

A shipped plan is package data (``alpha/data/plans/NAME.toml``, ``docs/install.md``), so an
installed alpha has them too; ``alpha run NAME`` and ``alpha compile NAME`` take one by name
wherever a plan file is asked for and no such file exists (:func:`resolve_plan`).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from alpha.errors import UsageError
from alpha.files import package_data

__all__ = ["PLANS_DIR", "plans_command", "resolve_plan", "shipped_plans"]

PLANS_DIR: Final = "data/plans"
"""Where the shipped plans lie among the package data of ``alpha``."""


def shipped_plans() -> dict[str, Path]:
    """Every shipped plan by its name (the file's name without ``.toml``), sorted."""
    found = package_data(PLANS_DIR).glob("*.toml")
    return {path.stem: path for path in sorted(found, key=lambda path: path.stem)}


def _nearest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def shipped_plan(name: str) -> Path:
    """The shipped plan ``name``.

    Raises:
        UsageError: no shipped plan has that name; the message names the nearest one.
    """
    plans = shipped_plans()
    if name not in plans:
        raise UsageError(
            f"no shipped plan named {name!r} (`alpha plans` lists them: "
            f"{', '.join(plans)}){_nearest(name, list(plans))}"
        )
    return plans[name]


def resolve_plan(text: str) -> Path:
    """The plan file a command line's PLAN names: the file ``text`` when it exists or looks
    like a path (it has a ``/`` or ends in ``.toml``: reading it says what is wrong), else the
    shipped plan of that name.

    Raises:
        UsageError: ``text`` is neither a file nor a shipped plan's name.
    """
    path = Path(text)
    if path.exists() or "/" in text or path.suffix == ".toml":
        return path
    plans = shipped_plans()
    if text in plans:
        return plans[text]
    raise UsageError(
        f"no plan file {text!r} and no shipped plan of that name (`alpha plans` lists them: "
        f"{', '.join(plans)}){_nearest(text, list(plans))}"
    )


def _summary(path: Path) -> str:
    """The first sentence of the plan's opening comment, which says what the plan is for."""
    said: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        said.append(line.lstrip("#").strip())
    text = " ".join(said)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _companions(plan: Path) -> dict[str, Callable[[], bytes]]:
    """The files a shipped plan names beside itself, by name, each with what makes its bytes:
    its learner module (copied) and a generated data set (made, ``alpha.learner.examples``)."""
    from alpha.compiler.plan import load_plan
    from alpha.learner.examples import GENERATED

    learner = load_plan(plan).learner
    found: dict[str, Callable[[], bytes]] = {}
    if learner is None:
        return found
    if learner.kind == "module" and "/" not in learner.module:
        module = plan.parent / learner.module
        found[learner.module] = module.read_bytes
    if learner.dataset in GENERATED:
        found[learner.dataset] = GENERATED[learner.dataset]
    return found


def plans_command(args: argparse.Namespace) -> int:
    """``alpha plans``: list the shipped plans, show one, or copy one to edit."""
    if args.action == "show":
        print(shipped_plan(args.name).read_text(encoding="utf-8"), end="")
        return 0
    if args.action == "copy":
        source = shipped_plan(args.name)
        target = Path(args.dest) if args.dest else Path(f"{args.name}.toml")
        if target.is_dir():
            target = target / source.name
        besides = _companions(source)
        for path in [target, *(target.parent / name for name in besides)]:
            if path.exists():
                raise UsageError(f"{path} exists; copy to another path, or remove it first")
        target.write_bytes(source.read_bytes())
        for name, make in besides.items():
            (target.parent / name).write_bytes(make())
            print(f"plans: wrote {target.parent / name}")
        print(f"plans: wrote {target}; run it with: alpha run {target}")
        return 0
    plans = shipped_plans()
    width = max(map(len, plans), default=0)
    for name, path in plans.items():
        print(f"{name:<{width}}  {_summary(path)}")
    return 0
