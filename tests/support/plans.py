"""The one plan builder: a plan's TOML text from its tables, each test naming only its values.

``[run]`` and ``[membership]`` (roles ``0 .. roles-1``) are always written; every other table
is a keyword argument, written in the order given, with ``None`` for "no such table" and, inside
a table, ``None`` for "leave the key out" (the plan's default then holds). ``extra`` is text
written last, so it belongs to the last table written (an optimizer's constants in
``[learner]``, ``may_change`` in ``[checkpoint]``) or opens tables of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from alpha.compiler.plan import Plan, parse_plan

Table = Mapping[str, object]


def toml_value(value: object) -> str:
    """``value`` as a TOML value that reads back equal: a bool, an int, a float (``repr``:
    'inf', '1e-05' and '0.1' are all TOML floats), a str (a basic string; quote, backslash and
    control characters escaped as TOML wants) or a list of these."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_escaped(c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML value written for {type(value).__name__}")


def _escaped(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    if c < " " or c == "\x7f":
        return f"\\u{ord(c):04x}"
    return c


def plan_text(
    name: str, *, roles: int, rounds: int, extra: str = "", **tables: Table | None
) -> str:
    """A plan's text: ``[run]``, ``[membership]``, then ``tables``, then ``extra``."""
    lines = [
        "[run]",
        f"name = {toml_value(name)}",
        f"rounds = {toml_value(rounds)}",
        "[membership]",
        f'group = "(group (stride 0 1 {roles}))"',
    ]
    for table, fields in tables.items():
        if fields is None:
            continue
        lines.append(f"[{table}]")
        lines += [f"{key} = {toml_value(v)}" for key, v in fields.items() if v is not None]
    return "\n".join(lines) + "\n" + extra


def plan_of(
    name: str,
    *,
    roles: int,
    rounds: int,
    source: str = "<plan>",
    extra: str = "",
    **tables: Table | None,
) -> Plan:
    """The plan :func:`plan_text` writes, read by ``parse_plan`` (its refusals raised)."""
    return parse_plan(
        plan_text(name, roles=roles, rounds=rounds, extra=extra, **tables), source=source
    )


#: The small Adam learner the checkpoint and resume tests run: fast, and with an optimizer state
#: a resume must carry.
SMALL_ADAM: Final[Table] = {
    "kind": "mlp",
    "hidden": 8,
    "rate": 0.01,
    "seed": 5,
    "batch": 8,
    "optimizer": "adam",
}


def checkpointed_text(
    name: str,
    *,
    roles: int,
    rounds: int,
    checkpoint: Table | None,
    receive: float = 10.0,
    extra: str = "",
) -> str:
    """A plan of :data:`SMALL_ADAM` on a tree of fan-out 2 with ``[checkpoint]`` ``checkpoint``
    (None: no such table), roomy budgets (``receive`` as given)."""
    return plan_text(
        name,
        roles=roles,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        budgets={"accept": 30.0, "receive": receive, "start": 30.0},
        work={"kind": "learn"},
        learner=SMALL_ADAM,
        checkpoint=checkpoint,
        extra=extra,
    )


def recovery_plan(
    path: Path,
    *,
    roles: int,
    rounds: int,
    restarts: int,
    rate: float = 0.01,
    contributors: int | None = None,
    backoff: float = 0.1,
    folder: Path | None = None,
) -> Path:
    """Write to ``path`` the plan the restart tests run: a small learner on a tree of fan-out
    2, a generation every 2 rounds (in ``folder``, else the run folder's), ``[recovery]`` with
    ``restarts`` and ``backoff``; with ``contributors``, ``learner.contributors`` and
    ``lost_role = 'drop'`` (else the default, ``'restart'``). A file, since ``'drop'`` reads
    the plan file again."""
    learner: dict[str, object] = {"kind": "mlp", "hidden": 8, "rate": rate, "seed": 5, "batch": 8}
    recovery = f"[recovery]\nrestarts = {restarts}\nbackoff = {backoff}\n"
    if contributors is not None:
        learner["contributors"] = contributors
        recovery += "lost_role = 'drop'\n"
    text = plan_text(
        "restarts",
        roles=roles,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        budgets={"accept": 30.0, "receive": 3.0, "start": 30.0},
        work={"kind": "learn"},
        learner=learner,
        checkpoint={"every": 2} if folder is None else {"every": 2, "folder": str(folder)},
        extra=recovery,
    )
    path.write_text(text)
    return path
