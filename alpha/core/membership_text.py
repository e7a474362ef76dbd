"""The textual form of a participant group: its grammar, read without recursion.

``parse_group(text)`` reads ``(group <selection>)``, where a selection is
``(stride START STEP COUNT)``, ``(repeat COUNT OFFSET <selection>)`` or
``(join <selection> ...)``, and admits it as a
:class:`~alpha.core.membership.ParticipantGroup`. The whole text is read before
any node is built, so a text that breaks the grammar is always a
:class:`GroupSyntaxError`, never an admission refusal. Printing is the value's
own ``str()`` (``alpha.core.membership``); this module only reads, so the values
and their digest import nothing of the grammar.

The grammar and its admission order are documented in ``docs/membership.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias, final

from alpha.core.membership import (
    DEFAULT_INDEX_BUDGET,
    MAX_EXCERPT_CHARS,
    Join,
    ParticipantGroup,
    Repeat,
    Selection,
    Stride,
)
from alpha.errors import GroupSyntaxError

__all__ = ["MAX_NUMBER_DIGITS", "parse_group"]

#: A number in the text has at most 20 digits: enough for any unsigned 64-bit
#: value, so every over-wide number a 64-bit reader could hold still reaches
#: admission and is refused there as RoleOutsideUniverse; longer runs of digits
#: are a syntax error, which also keeps int() far below CPython's digit limit.
MAX_NUMBER_DIGITS: Final = 20

# ASCII whitespace only: a no-break space or other Unicode space in a group's
# text is more likely a copy-paste accident than intent, so it is a syntax error.
_WHITESPACE: Final = frozenset(" \t\n\r\f\v")
_DIGITS: Final = frozenset("0123456789")
_FORMS: Final = ("stride", "repeat", "join")


@final
@dataclass(frozen=True, slots=True)
class _Token:
    """A parenthesis, an atom (a maximal run of other non-space characters) or the end."""

    kind: str  # "(", ")", "atom" or "end"
    text: str
    offset: int


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
        elif c in "()":
            tokens.append(_Token(c, c, i))
            i += 1
        else:
            j = i
            while j < n and text[j] not in _WHITESPACE and text[j] not in "()":
                j += 1
            tokens.append(_Token("atom", text[i:j], i))
            i = j
    tokens.append(_Token("end", "", n))
    return tokens


# A post-order build instruction: ("stride", start, step, count),
# ("repeat", count, offset) or ("join", number of parts).
_Instruction: TypeAlias = tuple[str, int, int, int] | tuple[str, int, int] | tuple[str, int]


@final
@dataclass(slots=True)
class _OpenForm:
    """A repeat (``a`` = count, ``b`` = offset) or a join (``a`` = parts so far) being read."""

    form: str
    a: int
    b: int


class _Parser:
    """Reads the textual form into post-order build instructions, without recursion."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _lex(text)
        self._at = 0

    def _fail(self, token: _Token, expected: str, why: str = "") -> GroupSyntaxError:
        line = self._text.count("\n", 0, token.offset) + 1
        column = token.offset - (self._text.rfind("\n", 0, token.offset) + 1) + 1
        if token.kind == "end":
            found = "the end of the text"
        else:
            shown = token.text
            if len(shown) > MAX_EXCERPT_CHARS:
                shown = shown[:MAX_EXCERPT_CHARS] + "..."
            found = repr(shown)
        return GroupSyntaxError(
            f"expected {expected} at offset {token.offset} (line {line}, column {column}), "
            f"found {found}{why}"
        )

    def _next(self) -> _Token:
        token = self._tokens[self._at]
        if token.kind != "end":
            self._at += 1
        return token

    def _expect(self, kind: str, expected: str) -> _Token:
        token = self._next()
        if token.kind != kind:
            raise self._fail(token, expected)
        return token

    def _keyword(self, words: tuple[str, ...], expected: str) -> str:
        token = self._next()
        if token.kind != "atom" or token.text not in words:
            raise self._fail(token, expected)
        return token.text

    def _number(self, what: str) -> int:
        token = self._next()
        expected = f"{what} (a non-negative decimal integer)"
        if token.kind != "atom":
            raise self._fail(token, expected)
        digits = token.text
        if digits.startswith("-") and len(digits) > 1 and set(digits[1:]) <= _DIGITS:
            raise self._fail(token, expected, ": numbers are unsigned, so '-' is not allowed")
        if not set(digits) <= _DIGITS:
            raise self._fail(token, expected)
        if len(digits) > 1 and digits[0] == "0":
            raise self._fail(token, expected, ": numbers are written without leading zeros")
        if len(digits) > MAX_NUMBER_DIGITS:
            raise self._fail(token, expected, f": a number has at most {MAX_NUMBER_DIGITS} digits")
        return int(digits)

    def parse(self) -> list[_Instruction]:
        """Return the build instructions of the one selection inside ``(group ...)``.

        Raises:
            GroupSyntaxError: the text does not follow the grammar.
        """
        self._expect("(", "'(' to open the group")
        self._keyword(("group",), "'group'")
        program: list[_Instruction] = []
        # Open repeats and joins, innermost last: a repeat waits for its one
        # part, then for ')'; a join takes parts until ')'. Instructions come
        # out in post-order (parts before the form that holds them).
        open_forms: list[_OpenForm] = []
        need_selection = True
        while True:
            if need_selection:
                self._expect("(", "'(' to open a stride, repeat or join")
                form = self._keyword(_FORMS, "'stride', 'repeat' or 'join'")
                if form == "stride":
                    start = self._number("the stride's start")
                    step = self._number("the stride's step")
                    count = self._number("the stride's count")
                    self._expect(")", "')' to close the stride")
                    program.append(("stride", start, step, count))
                    need_selection = False
                elif form == "repeat":
                    count = self._number("the repeat's count")
                    offset = self._number("the repeat's offset")
                    open_forms.append(_OpenForm("repeat", count, offset))
                else:
                    open_forms.append(_OpenForm("join", 0, 0))
                    need_selection = False
                continue
            # A selection just closed (or a join just opened): continue its parent.
            if not open_forms:
                break
            top = open_forms[-1]
            if top.form == "repeat":
                self._expect(")", "')' to close the repeat")
                program.append(("repeat", top.a, top.b))
                open_forms.pop()
                continue
            token = self._next()
            if token.kind == ")":
                program.append(("join", top.a))
                open_forms.pop()
            elif token.kind == "(":
                self._at -= 1  # the part's own '(' is read by the selection branch
                top.a += 1
                need_selection = True
            else:
                raise self._fail(token, "'(' to open a part of the join or ')' to close it")
        self._expect(")", "')' to close the group")
        self._expect("end", "the end of the text")
        return program


def _build(program: list[_Instruction]) -> Selection:
    """Construct the nodes of a post-order program; each node admits itself as it is built."""
    built: list[Selection] = []
    for instruction in program:
        if instruction[0] == "stride" and len(instruction) == 4:
            built.append(Stride(instruction[1], instruction[2], instruction[3]))
        elif instruction[0] == "repeat" and len(instruction) == 3:
            built.append(Repeat(instruction[1], instruction[2], built.pop()))
        else:
            n = instruction[1]
            parts = tuple(built[len(built) - n :])
            del built[len(built) - n :]
            built.append(Join(parts))
    return built[0]


def parse_group(
    text: str,
    *,
    universe: int | None = None,
    epoch: int = 0,
    identity: bytes = b"",
    index_budget: int = DEFAULT_INDEX_BUDGET,
) -> ParticipantGroup:
    """Read and admit a group from its textual form, e.g. ``(group (stride 0 1 8))``.

    Without ``universe`` the universe is one past the largest selected role.
    The whole text is parsed before anything is admitted, so a text with a
    syntax error always raises :class:`GroupSyntaxError`. Then nodes are built
    innermost first, left to right, each admitting itself (empty, then
    overlapping, then role width), then the group (universe, index budget,
    epoch, identity): the first refusal met in that order is raised.

    Raises:
        TypeError: ``text`` is not a str, or another argument has the wrong type.
        GroupSyntaxError: the text does not follow the grammar (a '-' sign
            included); the message gives the offset, line and column, and what
            was expected there.
        EmptySelection: a stride or repeat of count 0, or an empty join.
        OverlappingParts: a non-advancing stride, overlapping or interleaving
            copies of a repeat, or join parts that overlap or are out of order.
        RoleOutsideUniverse: a number or role passes the role width, a role is
            at or past ``universe``, or ``universe > MAX_ROLES``.
        IndexBudgetExceeded: more index nodes than ``index_budget``.
        GroupFieldInvalid: epoch outside ``0..MAX_EPOCH`` or identity longer than
            ``MAX_IDENTITY_BYTES``.
    """
    if not isinstance(text, str):
        raise TypeError(f"a group's text must be a str, not {type(text).__name__}")
    selection = _build(_Parser(text).parse())
    return ParticipantGroup(
        selection,
        universe=selection.last + 1 if universe is None else universe,
        epoch=epoch,
        identity=identity,
        index_budget=index_budget,
    )
