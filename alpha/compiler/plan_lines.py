"""Where a plan's field is written: the line of its key in the plan's text.

``tomllib`` gives no positions, so a refusal's field (``run.rounds``, ``learner.optimizer``,
``addresses.edges.0-1``) is found by scanning the text: table headers (``[learner]``,
``[[x]]``), keys and dotted keys (``a.b = 1``, quoted parts included) and the keys of inline
tables (``opt = { kind = "adam" }``), skipping strings (multi-line ones too), arrays spanning
lines and comments. The text is valid TOML (it was read before any field was checked); a text
the scanner does not follow ends the scan, and a field it does not find has no line.

A field's line is the first line that writes it: its key, or its table's header. A field
nothing writes (a required key that is missing) is given the line of the nearest table that
holds it, and a table written only through its sub-tables the line of the first of them.
O(size of the text).
"""

from __future__ import annotations

import bisect
import contextlib
import tomllib
from typing import Final

__all__ = ["field_line", "written_lines"]

_BARE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Stop(Exception):
    """The scanner met text it does not follow; what it found so far stands."""


class _Scanner:
    """One pass over a TOML text, noting the dotted name and offset of each key and header."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.found: list[tuple[str, int]] = []

    # --- characters -----------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.text[index] if index < len(self.text) else ""

    def starts(self, token: str) -> bool:
        return self.text.startswith(token, self.at)

    def spaces(self) -> None:
        """Skip spaces and tabs on this line."""
        while self.peek() in (" ", "\t") and self.peek():
            self.at += 1

    def comment(self) -> None:
        """Skip a comment to the end of its line (the newline stays)."""
        if self.peek() == "#":
            end = self.text.find("\n", self.at)
            self.at = len(self.text) if end < 0 else end

    def blank(self) -> None:
        """Skip spaces, newlines and comments."""
        while True:
            self.spaces()
            self.comment()
            if self.peek() in ("\n", "\r") and self.peek():
                self.at += 1
                continue
            return

    # --- keys -----------------------------------------------------------------------------

    def key(self) -> list[str]:
        """A dotted key's parts, each decoded."""
        parts = [self.simple_key()]
        while True:
            self.spaces()
            if self.peek() != ".":
                return parts
            self.at += 1
            self.spaces()
            parts.append(self.simple_key())

    def simple_key(self) -> str:
        char = self.peek()
        if char == '"':
            start = self.at
            self.basic_string()
            value = tomllib.loads(f"k = {self.text[start : self.at]}")["k"]
            assert isinstance(value, str)
            return value
        if char == "'":
            start = self.at
            self.literal_string()
            return self.text[start + 1 : self.at - 1]
        start = self.at
        while self.peek() in _BARE and self.peek():
            self.at += 1
        if self.at == start:
            raise _Stop
        return self.text[start : self.at]

    # --- values ---------------------------------------------------------------------------

    def basic_string(self) -> None:
        """Past a ``"..."`` string (escapes included)."""
        self.at += 1
        while True:
            char = self.peek()
            if char in ("", "\n"):
                raise _Stop
            self.at += 2 if char == "\\" else 1
            if char == '"':
                return

    def literal_string(self) -> None:
        end = self.text.find("'", self.at + 1)
        if end < 0 or "\n" in self.text[self.at : end]:
            raise _Stop
        self.at = end + 1

    def multiline(self, quote: str) -> None:
        """Past a ``\"\"\"...\"\"\"`` or ``'''...'''`` string; up to two more quotes end it."""
        self.at += 3
        while True:
            char = self.peek()
            if not char:
                raise _Stop
            if char == "\\" and quote == '"':
                self.at += 2
                continue
            if self.starts(quote * 3):
                self.at += 3
                for _ in range(2):
                    if self.peek() == quote:
                        self.at += 1
                return
            self.at += 1

    def value(self, path: list[str] | None) -> None:
        """Past one value; the keys of an inline table are noted under ``path`` (None: not
        noted, as inside an array)."""
        if self.starts('"""') or self.starts("'''"):
            self.multiline(self.peek())
        elif self.peek() == '"':
            self.basic_string()
        elif self.peek() == "'":
            self.literal_string()
        elif self.peek() == "[":
            self.array()
        elif self.peek() == "{":
            self.inline_table(path)
        else:  # a number, a boolean, a date or time (which may hold a space)
            start = self.at
            while self.peek() and self.peek() not in ",]}#\n\r":
                self.at += 1
            if self.at == start:
                raise _Stop

    def array(self) -> None:
        self.at += 1
        while True:
            self.blank()
            if self.peek() == "]":
                self.at += 1
                return
            self.value(None)
            self.blank()
            if self.peek() == ",":
                self.at += 1
            elif self.peek() != "]":
                raise _Stop

    def inline_table(self, path: list[str] | None) -> None:
        self.at += 1
        while True:
            self.spaces()
            if self.peek() == "}":
                self.at += 1
                return
            start = self.at
            parts = self.key()
            self.spaces()
            if self.peek() != "=":
                raise _Stop
            self.at += 1
            self.spaces()
            inner = None if path is None else [*path, *parts]
            if inner is not None:
                self.found.append((".".join(inner), start))
            self.value(inner)
            self.spaces()
            if self.peek() == ",":
                self.at += 1
            elif self.peek() != "}":
                raise _Stop

    # --- statements -----------------------------------------------------------------------

    def document(self) -> None:
        table: list[str] = []
        while True:
            self.blank()
            if not self.peek():
                return
            start = self.at
            if self.peek() == "[":
                double = self.starts("[[")
                self.at += 2 if double else 1
                self.spaces()
                table = self.key()
                self.spaces()
                closing = "]]" if double else "]"
                if not self.starts(closing):
                    raise _Stop
                self.at += len(closing)
                self.found.append((".".join(table), start))
                continue
            parts = [*table, *self.key()]
            self.spaces()
            if self.peek() != "=":
                raise _Stop
            self.at += 1
            self.spaces()
            self.found.append((".".join(parts), start))
            self.value(parts)


def written_lines(text: str) -> list[tuple[str, int]]:
    """Each table header and key of ``text`` in order: its dotted name (parts decoded, joined
    with ``.``) and its line, from 1. Stops at text it does not follow. O(size of text)."""
    scanner = _Scanner(text)
    with contextlib.suppress(_Stop, tomllib.TOMLDecodeError, AssertionError):
        scanner.document()
    newlines = [index for index, char in enumerate(text) if char == "\n"]
    return [(name, bisect.bisect_left(newlines, at) + 1) for name, at in scanner.found]


def field_line(text: str, field: str) -> int | None:
    """The line of ``text`` that writes ``field`` (a refusal's dotted name): its key or
    header; else the first line under it (a table written through its sub-tables); else the
    line of the nearest table above it (a key that is missing). None when nothing is found,
    or for the empty field (the plan as a whole)."""
    if not field:
        return None
    written = written_lines(text)
    for name, line in written:
        if name == field:
            return line
    for name, line in written:
        if name.startswith(field + "."):
            return line
    parts = field.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        above = ".".join(parts[:cut])
        for name, line in written:
            if name == above:
                return line
    return None
