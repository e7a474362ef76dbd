"""The generic readers of a TOML plan's fields: one checked value each, or a refusal.

Each reader takes a table (a ``dict`` as ``tomllib`` returns it) and the dotted name of a field
in it (``topology.fanout``), checks the value's type and range, and returns it; each refusal is
a :class:`alpha.errors.PlanInvalid` whose ``field`` is that dotted name and whose message says
what was found (with its TOML type, :func:`shown`) and what is allowed. Booleans are never
integers or numbers. Which fields a plan has, their order and their ranges are the schema's,
in :mod:`alpha.compiler.plan`; these readers only read one field each.
"""

from __future__ import annotations

import difflib
import ipaddress
import math

from alpha.checked import int_in
from alpha.errors import PlanInvalid

__all__ = [
    "Table",
    "float_at",
    "int_at",
    "ipv4",
    "one_of",
    "optional_int_at",
    "refuse_unknown",
    "required_table",
    "shown",
    "str_at",
    "suggestion",
    "table_at",
]

#: A TOML table as ``tomllib`` reads it.
Table = dict[str, object]


def _kind_of(value: object) -> str:
    """The TOML name of a value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


# The longest value a refusal quotes: a message stays one readable line, and the head of a
# value identifies it.
MAX_SHOWN = 80


def shown(value: object) -> str:
    """A value quoted in a message, with its TOML type (cut to ``MAX_SHOWN`` characters)."""
    text = repr(value)
    if len(text) > MAX_SHOWN:
        text = text[: MAX_SHOWN - 3] + "..."
    return f"{_kind_of(value)} ({text})"


def _key(dotted: str) -> str:
    """The key a dotted field name ends in: ``fanout`` for ``topology.fanout``."""
    return dotted.rsplit(".", 1)[-1]


def suggestion(word: str, known: tuple[str, ...]) -> str | None:
    """The known name closest to a misspelt ``word`` (``rounds`` for ``roundz``), or None when
    none is close (difflib's ratio of at least 0.6)."""
    close = difflib.get_close_matches(word, known, n=1)
    return close[0] if close else None


def refuse_unknown(table: Table, where: str, known: tuple[str, ...]) -> None:
    """Refuse the first key of ``table`` that is not in ``known``, with the known key it is
    closest to, if one is close ("did you mean 'rounds'?").

    Raises:
        PlanInvalid: a key is unknown; ``field`` is ``where.key``.
    """
    for key in table:
        if key in known:
            continue
        near = suggestion(key, known)
        if not where:
            is_table = isinstance(table[key], dict)
            what = f"table [{key}]" if is_table else f"key {key!r} outside a table"
            listed = f"a plan's tables are {', '.join(known)}"
            if near is None:
                raise PlanInvalid(f"unknown {what}; {listed}", field=key)
            named = f"[{near}]" if is_table else f"[{near}] (a table)"
            raise PlanInvalid(f"unknown {what}; did you mean {named}? ({listed})", field=key)
        listed = f"its keys are {', '.join(known)}"
        hint = f"{listed}" if near is None else f"did you mean {near!r}? ({listed})"
        raise PlanInvalid(f"unknown key {key!r} in [{where}]; {hint}", field=f"{where}.{key}")


def table_at(parent: Table, dotted: str, *, required: bool = False) -> Table | None:
    """The sub-table at ``dotted`` (its last part is the key in ``parent``), or None when it
    is absent and not required.

    Raises:
        PlanInvalid: it is absent but required, or not a table.
    """
    key = _key(dotted)
    if key not in parent:
        if required:
            raise PlanInvalid(f"the plan needs a [{dotted}] table", field=dotted)
        return None
    value = parent[key]
    if not isinstance(value, dict):
        raise PlanInvalid(f"must be a table, got {shown(value)}", field=dotted)
    return value


def required_table(parent: Table, dotted: str) -> Table:
    """The sub-table at ``dotted``, which must be there.

    Raises:
        PlanInvalid: it is absent, or not a table.
    """
    table = table_at(parent, dotted, required=True)
    assert table is not None  # required=True raises rather than return None
    return table


def int_at(table: Table, dotted: str, *, low: int, high: int, default: int | None = None) -> int:
    """The integer at ``dotted`` in ``low..high``; ``default`` when absent (None: required).

    Raises:
        PlanInvalid: absent and required, not an integer (booleans refused), or out of range.
    """
    value = optional_int_at(table, dotted, low=low, high=high)
    if value is not None:
        return value
    if default is None:
        raise PlanInvalid(f"is required: an integer in {low}..{high}", field=dotted)
    return default


def optional_int_at(table: Table, dotted: str, *, low: int, high: int) -> int | None:
    """The integer at ``dotted`` in ``low..high``, or None when absent.

    Raises:
        PlanInvalid: not an integer (booleans refused), or out of range.
    """
    key = _key(dotted)
    if key not in table:
        return None
    value = table[key]
    if not int_in(value):
        raise PlanInvalid(f"must be an integer in {low}..{high}, got {shown(value)}", field=dotted)
    if not low <= value <= high:
        raise PlanInvalid(f"must be in {low}..{high}, got {value}", field=dotted)
    return value


def float_at(
    table: Table,
    dotted: str,
    *,
    high: float | None = None,
    default: float | None = None,
    zero: bool = False,
) -> float:
    """The finite number at ``dotted``, above 0 (``zero``: 0 too) and (when ``high`` is given)
    at most ``high``; an integer is read as a float. ``default`` when absent (None: required).

    Raises:
        PlanInvalid: absent and required, not a number (booleans refused), not finite, or out
            of range.
    """
    low = "[0" if zero else "(0"
    allowed = (
        f"a finite number {'at least' if zero else 'above'} 0"
        if high is None
        else f"a number in {low}, {high:g}]"
    )
    key = _key(dotted)
    if key not in table:
        if default is None:
            raise PlanInvalid(f"is required: {allowed}", field=dotted)
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanInvalid(f"must be {allowed}, got {shown(value)}", field=dotted)
    number = float(value)
    above = number >= 0 if zero else number > 0
    if not (math.isfinite(number) and above and (high is None or number <= high)):
        raise PlanInvalid(f"must be {allowed}, got {value!r}", field=dotted)
    return number


def str_at(table: Table, dotted: str, *, default: str | None = None) -> str:
    """The string at ``dotted``; ``default`` when absent (None: required).

    Raises:
        PlanInvalid: absent and required, or not a string.
    """
    key = _key(dotted)
    if key not in table:
        if default is None:
            raise PlanInvalid("is required: a string", field=dotted)
        return default
    value = table[key]
    if not isinstance(value, str):
        raise PlanInvalid(f"must be a string, got {shown(value)}", field=dotted)
    return value


def one_of(table: Table, dotted: str, allowed: tuple[str, ...], *, default: str) -> str:
    """The string at ``dotted``, one of ``allowed``; ``default`` when absent.

    Raises:
        PlanInvalid: not a string, or not one of ``allowed`` (the message lists them).
    """
    key = _key(dotted)
    value = table.get(key, default)
    if not isinstance(value, str) or value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        near = suggestion(value, allowed) if isinstance(value, str) else None
        hint = "" if near is None else f"; did you mean {near!r}?"
        raise PlanInvalid(f"must be one of {choices}, got {shown(value)}{hint}", field=dotted)
    return value


def ipv4(value: object, dotted: str) -> str:
    """``value`` as a canonical IPv4 address string.

    Raises:
        PlanInvalid: not a string, or not a dotted-quad IPv4 address.
    """
    if not isinstance(value, str):
        raise PlanInvalid(f"must be an IPv4 address string, got {shown(value)}", field=dotted)
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError as error:
        raise PlanInvalid(
            f"must be an IPv4 address such as '127.0.0.1', got {value!r} ({error})", field=dotted
        ) from None
