"""Where a plan's field is written (``alpha.compiler.plan_lines``), and plan refusals that say
so: the file and line of the key, and the known key a misspelt one is closest to."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.plan import load_plan, parse_plan
from alpha.compiler.plan_lines import field_line, written_lines
from alpha.errors import PlanInvalid
from tests.support import PLANS, raises_exactly

# --- the line finder, on generated texts ----------------------------------------------------

_BARE = st.text("abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
# Key text that needs quotes: spaces, '=', '#', brackets and quotes in a key are all TOML.
_QUOTED = st.text("ab =#[]{}'-_", min_size=1, max_size=8).filter(lambda k: "." not in k)
_KEY = st.one_of(_BARE, _QUOTED)
# The text of strings: whatever looks like a key, a header or a comment, on lines of its own.
_STRING_TEXT = st.text("ab =#[]{},\n", max_size=30)


def _key(key: str, style: int) -> str:
    """A key as TOML writes it: bare when it may be, else quoted ("..." or '...')."""
    if style == 0 and all(c.isalnum() or c in "_-" for c in key) and key.isascii():
        return key
    if style == 1 and "'" not in key:
        return f"'{key}'"
    return json.dumps(key)


@st.composite
def _value(draw: st.DrawFn) -> tuple[str, list[tuple[str, int]]]:
    """A value's TOML text and the inline keys it writes: (dotted suffix, line offset)."""
    kind = draw(st.sampled_from(["int", "str", "ml", "lit", "array", "inline", "float"]))
    if kind == "int":
        return str(draw(st.integers(-(10**6), 10**6))), []
    if kind == "float":
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False))), []
    text = draw(_STRING_TEXT)
    if kind == "str":
        return json.dumps(text), []
    if kind == "ml":
        return '"""\n' + text.replace("\\", "") + '"""', []
    if kind == "lit":
        return "'''\n" + text + "'''", []
    if kind == "array":
        items = draw(st.lists(st.integers(0, 99), max_size=4))
        body = "".join(f"\n  {item},  # {draw(_STRING_TEXT).splitlines()[:1]}" for item in items)
        return f"[{body}\n]", []
    keys = draw(st.lists(_BARE, max_size=3, unique=True))
    inner = ", ".join(f"{k} = {json.dumps(draw(_STRING_TEXT))}" for k in keys)
    return "{ " + inner + " }", [(k, 0) for k in keys]


@st.composite
def _plan(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """A TOML text of tables, keys, dotted keys, inline tables, strings, arrays and comments,
    and the line (from 1) of each field it writes."""
    lines: list[str] = []
    where: dict[str, int] = {}

    def noise() -> None:
        for _ in range(draw(st.integers(0, 2))):
            lines.append(draw(st.sampled_from(["", "# x = 1", "   # [table]", "\t"])))

    def entries(prefix: str, keys: list[str]) -> None:
        for index, key in enumerate(keys):
            noise()
            parts = [key]
            if draw(st.booleans()):
                parts = [f"D{index}", key]  # a dotted key (upper case: no other key's name)
            written = " . ".join(_key(part, draw(st.integers(0, 2))) for part in parts)
            text, inline = draw(_value())
            line = len(lines) + 1
            name = ".".join([*filter(None, [prefix]), *parts])
            where[name] = line
            for suffix, offset in inline:
                where[f"{name}.{suffix}"] = line + offset
            lines.append(
                f"{written} = {text}  # = [x]" if "\n" not in text else f"{written} = {text}"
            )
            lines[-1:] = lines[-1].split("\n")

    # Keys before any header (upper case: no table's name).
    entries("", [f"R{key}" for key in draw(st.lists(_KEY, max_size=2, unique=True))])
    for table in draw(st.lists(_BARE, max_size=4, unique=True)):
        noise()
        where[table] = len(lines) + 1
        lines.append(
            f"[{draw(st.sampled_from(['', ' ']))}{table}{draw(st.sampled_from(['', ' ']))}]"
        )
        entries(table, draw(st.lists(_KEY, max_size=4, unique=True)))
    noise()
    return "\n".join(lines) + "\n", where


@settings(max_examples=300, deadline=None)
@given(_plan())
def test_the_line_of_every_key_and_header_is_found(plan: tuple[str, dict[str, int]]) -> None:
    text, where = plan
    tomllib.loads(text)  # the generated text is TOML, as a plan's must be before it is checked
    for name, line in where.items():
        assert field_line(text, name) == line, (name, text)


@settings(max_examples=100, deadline=None)
@given(_plan())
def test_the_scan_reads_every_generated_text_to_its_end(plan: tuple[str, dict[str, int]]) -> None:
    text, where = plan
    assert {name for name, _ in written_lines(text)} >= set(where)


def test_a_missing_key_gets_its_tables_line_and_an_absent_table_none() -> None:
    text = '# a plan\n\n[run]\nname = "t"\n\n[topology]\nshape = "star"\n'
    assert field_line(text, "run.rounds") == 3
    assert field_line(text, "topology.shape") == 7
    assert field_line(text, "membership") is None
    assert field_line(text, "") is None


def test_a_table_written_through_its_sub_tables_gets_the_first() -> None:
    text = '[addresses.edges]\n"0-1" = "127.0.0.2"\n'
    assert field_line(text, "addresses") == 1
    assert field_line(text, "addresses.edges.0-1") == 2


# --- refusals that say where --------------------------------------------------------------

_DIGITS = (PLANS / "digits.toml").read_text(encoding="utf-8")


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_unknown_key_names_the_file_the_line_and_the_closest_key(tmp_path: Path) -> None:
    path = _written(tmp_path, _DIGITS.replace("rounds = 30", "roundz = 30"))
    error = raises_exactly(PlanInvalid, load_plan, path)
    line = _DIGITS.splitlines().index("rounds = 30") + 1
    assert str(error) == (
        f"{path}:{line}: run.roundz: unknown key 'roundz' in [run]; did you mean 'rounds'? "
        "(its keys are name, rounds, epoch)"
    )
    assert (error.field, error.line, error.where) == ("run.roundz", line, f"{path}:{line}")


def test_an_unknown_table_is_told_the_closest_table(tmp_path: Path) -> None:
    path = _written(tmp_path, _DIGITS.replace("[learner]", "[learnr]"))
    error = raises_exactly(PlanInvalid, load_plan, path)
    line = _DIGITS.splitlines().index("[learner]") + 1
    assert str(error).startswith(
        f"{path}:{line}: learnr: unknown table [learnr]; did you mean [learner]? (a plan's "
        "tables are run, membership,"
    )


def test_a_key_close_to_none_lists_the_keys_without_a_guess() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, _DIGITS.replace("rounds = 30", "zzz = 1"))
    assert "did you mean" not in str(error)
    assert str(error).endswith("unknown key 'zzz' in [run]; its keys are name, rounds, epoch")


def test_a_bad_value_gets_the_line_of_its_key(tmp_path: Path) -> None:
    path = _written(tmp_path, _DIGITS.replace("fanout = 2", "fanout = 0"))
    error = raises_exactly(PlanInvalid, load_plan, path)
    line = _DIGITS.splitlines().index("fanout = 2") + 1
    assert str(error).startswith(f"{path}:{line}: topology.fanout: must be in 1..")


def test_a_misspelt_choice_is_told_the_closest_one(tmp_path: Path) -> None:
    path = _written(tmp_path, _DIGITS.replace('shape = "tree"', 'shape = "tre"'))
    message = str(raises_exactly(PlanInvalid, load_plan, path))
    assert message.endswith("got a string ('tre'); did you mean 'tree'?")


def test_a_missing_key_names_its_tables_line(tmp_path: Path) -> None:
    path = _written(tmp_path, _DIGITS.replace("rounds = 30\n", ""))
    message = str(raises_exactly(PlanInvalid, load_plan, path))
    assert message.startswith(f"{path}:{_DIGITS.splitlines().index('[run]') + 1}: run.rounds: ")


def test_a_plan_read_from_text_gets_the_line_but_no_prefix() -> None:
    error = raises_exactly(PlanInvalid, parse_plan, _DIGITS.replace("rounds = 30", "roundz = 30"))
    assert str(error).startswith("run.roundz: ")
    assert error.line == _DIGITS.splitlines().index("rounds = 30") + 1
