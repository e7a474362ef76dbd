"""Overrides: a plan's values set from the command line (``alpha run PLAN --rounds 5 --set
learner.rate=0.1``), applied to the plan's table before it is checked, so an overridden plan is
the plan as if the value were written in its file (docs/plans.md, "Overrides").

Each option is one :class:`Override`: the option as typed (``--set``, ``--rounds``), the
dotted key it sets and the TOML value. ``--roles N`` is ``membership.roles = N``,
``--fanout F`` is ``topology.fanout = F`` and ``--rounds R`` is ``run.rounds = R``. A
``--set KEY=VALUE`` reads ``KEY`` as a TOML key (dotted, quoted parts allowed) and ``VALUE`` as
a TOML value; a bare word that is no TOML value (``adam``, ``127.0.0.1``) is a string. Setting
``membership.roles`` replaces the plan's ``membership.group``, and setting ``membership.group``
its ``membership.roles``: the command line says the run's roles once.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, final

from alpha.compiler._fields import Table, shown
from alpha.errors import PlanInvalid

__all__ = [
    "OPTION_KEYS",
    "Override",
    "apply_overrides",
    "origin_of",
    "override",
    "overrides_of",
]

#: The options that set one key each, and the key.
OPTION_KEYS: Final = {
    "--roles": "membership.roles",
    "--fanout": "topology.fanout",
    "--rounds": "run.rounds",
}

# A word taken as a string when it is no TOML value: no spaces, quotes, brackets or '='.
_BARE_WORD: Final = re.compile(r"[^\s\"'\[\]{}=#,]+")
# The keys that say the run's roles: setting one from the command line drops the other.
_ROLES_KEYS: Final[dict[tuple[str, ...], str]] = {
    ("membership", "roles"): "group",
    ("membership", "group"): "roles",
}


@final
@dataclass(frozen=True, slots=True)
class Override:
    """One value set from the command line.

    Attributes:
        option: the option as typed: ``--set``, ``--roles``, ``--fanout`` or ``--rounds``.
        text: its argument as typed (``run.rounds=5`` for ``--set``, ``5`` for ``--rounds``).
        parts: the key's parts (``("run", "rounds")``).
        value: the TOML value (a str, int, float, bool, list or dict).
    """

    option: str
    text: str
    parts: tuple[str, ...]
    value: object

    @property
    def key(self) -> str:
        """The dotted key: ``run.rounds``."""
        return ".".join(self.parts)

    @property
    def origin(self) -> str:
        """The option as a message names it: ``--set run.rounds=5``, ``--rounds 5``."""
        return f"{self.option} {self.text}"

    @property
    def argv(self) -> tuple[str, str]:
        """The option as command-line words, to repeat it."""
        return (self.option, self.text)

    def recorded(self) -> dict[str, object]:
        """What ``run.json`` records of it (``overrides``, docs/artifacts.md)."""
        return {"option": self.option, "key": self.key, "value": self.value}


def _toml_value(option: str, text: str, raw: str) -> object:
    """``raw`` as a TOML value; a bare word that is none is a string."""
    try:
        document = tomllib.loads(f"v = {raw}")
        if "\n" in raw or "\r" in raw or list(document) != ["v"]:
            raise tomllib.TOMLDecodeError("one value, on one line")
        value = document["v"]
    except tomllib.TOMLDecodeError:
        if _BARE_WORD.fullmatch(raw):
            return raw
        raise PlanInvalid(
            f"{raw!r} is not a TOML value (a number, true or false, a quoted string, an array "
            "or an inline table) nor a bare word; quote a string that has spaces or quotes",
            where=f"{option} {text}",
        ) from None
    if isinstance(value, datetime.date | datetime.time):
        raise PlanInvalid(
            f"no plan field takes a date or time, got {raw!r}", where=f"{option} {text}"
        )
    return value


def _key_parts(option: str, text: str, key: str) -> tuple[str, ...]:
    """The parts of a TOML key as typed (``learner.rate``, ``addresses.edges."0-1"``)."""
    try:
        if "\n" in key or "\r" in key:
            raise tomllib.TOMLDecodeError("one key, on one line")
        tree: object = tomllib.loads(f"{key} = 0")
        parts: list[str] = []
        while isinstance(tree, dict):  # one key per level: the dotted key read back
            if len(tree) != 1:
                raise tomllib.TOMLDecodeError("one key")
            (part, tree), *_ = tree.items()
            parts.append(part)
        if tree != 0:
            raise tomllib.TOMLDecodeError("one key")
    except tomllib.TOMLDecodeError:
        raise PlanInvalid(
            f"{key.strip()!r} is not a key: name a plan field as TABLE.KEY, e.g. run.rounds",
            where=f"{option} {text}",
        ) from None
    return tuple(parts)


def override(option: str, text: str) -> Override:
    """One command-line option as an :class:`Override`: ``--set`` with ``KEY=VALUE``, or one
    of :data:`OPTION_KEYS` with its value.

    Raises:
        PlanInvalid: ``--set`` has no ``=``, its key is no TOML key, or the value is neither a
            TOML value nor a bare word; ``where`` names the option.
        ValueError: ``option`` is none of these options (a caller's mistake).
    """
    if option == "--set":
        key, equals, raw = text.partition("=")
        if not equals:
            raise PlanInvalid(
                f"expected TABLE.KEY=VALUE such as run.rounds=5, got {text!r}",
                where=f"{option} {text}",
            )
        parts = _key_parts(option, text, key)
    elif option in OPTION_KEYS:
        parts, raw = tuple(OPTION_KEYS[option].split(".")), text
    else:
        raise ValueError(f"no override option {option!r}")
    return Override(option, text, parts, _toml_value(option, text, raw.strip()))


def overrides_of(given: Iterable[tuple[str, str]] | None) -> tuple[Override, ...]:
    """The ``(option, text)`` pairs a command line collected, in order, as overrides.

    Raises:
        PlanInvalid: one of them does not read (:func:`override`).
    """
    return tuple(override(option, text) for option, text in given or ())


def apply_overrides(root: Table, overrides: Sequence[Override]) -> None:
    """Set each override's value in the plan's table ``root``, in order (a later one wins),
    making the tables on its way that are absent.

    Raises:
        PlanInvalid: a part on the way is a value, not a table (``where`` names the option).
    """
    for each in overrides:
        table = root
        for index, part in enumerate(each.parts[:-1]):
            inner = table.setdefault(part, {})
            if not isinstance(inner, dict):
                raise PlanInvalid(
                    f"is {shown(inner)}, not a table, so it has no key {each.parts[-1]!r}",
                    field=".".join(each.parts[: index + 1]),
                    where=each.origin,
                )
            table = inner
        table[each.parts[-1]] = each.value
        other = _ROLES_KEYS.get(each.parts)
        if other is not None:
            table.pop(other, None)


def origin_of(field: str, overrides: Sequence[Override]) -> Override | None:
    """The last override that set ``field``, a table above it or a key under it: where a
    refusal of ``field`` came from. None: the plan's text wrote it."""
    for each in reversed(overrides):
        key = each.key
        if field == key or key.startswith(field + ".") or field.startswith(key + "."):
            return each
    return None
