"""The run identity: wire form, part comparison, the three digests, and refusals."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import re
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import alpha.core.digests as digests
import alpha.core.identity as identity
from alpha.compiler.plan import parse_plan
from alpha.compiler.work import run_identity
from alpha.core.digests import (
    CODE_BOUND_LEARNER_DOMAIN,
    CODE_DOMAIN,
    CONTRACT_DOMAIN,
    DELIVERIES,
    DTYPES,
    LEARNER_DOMAIN,
    OPERATIONS,
    TOPOLOGIES,
    canonical_fanout,
    contract_digest,
    learner_digest,
    membership_digest,
)
from alpha.core.identity import (
    DIGEST_SIZE,
    IDENTITY_PART_SIZE,
    IDENTITY_PARTS,
    IDENTITY_SIZE,
    RunIdentity,
)
from alpha.core.membership import MAX_IDENTITY_BYTES
from alpha.core.membership_text import parse_group
from alpha.core.topology import MAX_ROLES, ParticipantTree
from alpha.errors import ContractInvalid, IdentityPartInvalid, LearnerInputInvalid, PlanInvalid
from tests.support import raises_exactly, run_alpha

# Hypothesis examples are kept small so the file runs in seconds; no deadline,
# since a wall-clock bound in a test fails on a loaded machine, not on a bug.
FAST = settings(max_examples=150, deadline=None)

PART = st.binary(min_size=IDENTITY_PART_SIZE, max_size=IDENTITY_PART_SIZE)


# --- constants and purity -------------------------------------------------------------------


def test_constants() -> None:
    assert IDENTITY_PART_SIZE == 32 == DIGEST_SIZE == hashlib.sha256().digest_size
    assert IDENTITY_SIZE == 96
    assert IDENTITY_PARTS == ("learner", "contract", "membership")
    assert LEARNER_DOMAIN == b"alpha/learner/v1"
    assert CONTRACT_DOMAIN == b"alpha/contract/v2"  # v2: integrity and payload digest bound
    assert CODE_DOMAIN == b"alpha/code/v1"
    assert CODE_BOUND_LEARNER_DOMAIN == b"alpha/learner+code/v1"
    assert DTYPES == ("float32", "float64")
    assert OPERATIONS == ("sum",)
    assert TOPOLOGIES == ("tree", "star", "pair")
    assert DELIVERIES == ("all", "one")


# A pure layer: values in, values out; no trio, os, socket or io.
PURE_IMPORTS = frozenset(
    ["__future__", "alpha", "collections", "dataclasses", "hashlib", "numpy", "struct", "typing"]
)


@pytest.mark.parametrize("module", [identity, digests])
def test_module_is_pure(module: ModuleType) -> None:
    tree = ast.parse(inspect.getsource(module))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert imported <= PURE_IMPORTS


# --- RunIdentity ----------------------------------------------------------------------------


@FAST
@given(PART, PART, PART)
def test_encode_decode_round_trip(learner: bytes, contract: bytes, membership: bytes) -> None:
    run = RunIdentity(learner, contract, membership)
    wire = run.encode()
    assert wire == learner + contract + membership
    assert len(wire) == IDENTITY_SIZE
    assert RunIdentity.decode(wire) == run
    assert RunIdentity.decode(bytearray(wire)) == run
    assert RunIdentity.decode(memoryview(wire)) == run


def test_decode_copies_its_buffer() -> None:
    buffer = bytearray(range(IDENTITY_SIZE))
    run = RunIdentity.decode(memoryview(buffer))
    buffer[:] = bytes(IDENTITY_SIZE)
    assert run.encode() == bytes(range(IDENTITY_SIZE))


@pytest.mark.parametrize("size", [0, 1, 32, 64, 95, 97, 192])
def test_decode_refuses_wrong_length(size: int) -> None:
    error = raises_exactly(IdentityPartInvalid, RunIdentity.decode, bytes(size))
    assert f"got {size}" in str(error)
    assert "96" in str(error)


@pytest.mark.parametrize("thing", ["x" * 96, 96, None, [0] * 96])
def test_decode_refuses_non_bytes(thing: object) -> None:
    raises_exactly(TypeError, RunIdentity.decode, thing)


@pytest.mark.parametrize("name", IDENTITY_PARTS)
@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_constructor_refuses_wrong_part_size(name: str, size: int) -> None:
    parts = {part: bytes(IDENTITY_PART_SIZE) for part in IDENTITY_PARTS}
    parts[name] = bytes(size)
    error = raises_exactly(IdentityPartInvalid, RunIdentity, **parts)
    assert name in str(error)
    assert f"got {size}" in str(error)


@pytest.mark.parametrize("name", IDENTITY_PARTS)
@pytest.mark.parametrize("thing", [bytearray(32), "a" * 32, None, memoryview(bytes(32))])
def test_constructor_refuses_non_bytes_part(name: str, thing: object) -> None:
    parts: dict[str, object] = {part: bytes(IDENTITY_PART_SIZE) for part in IDENTITY_PARTS}
    parts[name] = thing
    error = raises_exactly(TypeError, RunIdentity, **parts)
    assert name in str(error)


def test_constructor_checks_parts_in_wire_order() -> None:
    error = raises_exactly(IdentityPartInvalid, RunIdentity, bytes(32), b"", b"")
    assert "contract" in str(error)


def test_identity_is_a_frozen_hashable_value() -> None:
    run = RunIdentity(bytes(32), bytes(range(32)), b"\xff" * 32)
    same = RunIdentity(learner=bytes(32), contract=bytes(range(32)), membership=b"\xff" * 32)
    assert run == same
    assert hash(run) == hash(same)
    assert len({run, same}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.learner = b"\x01" * 32  # type: ignore[misc]


@FAST
@given(
    base=st.tuples(PART, PART, PART),
    other=st.tuples(PART, PART, PART),
    changed=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_differing_parts_names_exactly_the_differing_parts(
    base: tuple[bytes, bytes, bytes],
    other: tuple[bytes, bytes, bytes],
    changed: tuple[bool, bool, bool],
) -> None:
    mixed = tuple(o if c else b for b, o, c in zip(base, other, changed, strict=True))
    first = RunIdentity(*base)
    second = RunIdentity(*mixed)
    expected = tuple(name for name, b, m in zip(IDENTITY_PARTS, base, mixed, strict=True) if b != m)
    assert first.differing_parts(second) == expected
    assert second.differing_parts(first) == expected
    assert (expected == ()) == (first == second)


def test_differing_parts_refuses_non_identity() -> None:
    run = RunIdentity(bytes(32), bytes(32), bytes(32))
    raises_exactly(TypeError, run.differing_parts, run.encode())


def test_short_shows_eight_hex_digits_of_each_part_in_wire_order() -> None:
    run = RunIdentity(bytes.fromhex("1a2b3c4d" * 8), bytes(range(32)), b"\xff" * 32)
    assert run.short() == "learner 1a2b3c4d contract 00010203 membership ffffffff"


@FAST
@given(PART, PART, PART)
def test_short_form(learner: bytes, contract: bytes, membership: bytes) -> None:
    text = RunIdentity(learner, contract, membership).short()
    assert re.fullmatch(r"learner [0-9a-f]{8} contract [0-9a-f]{8} membership [0-9a-f]{8}", text)
    assert text.split()[1::2] == [learner[:4].hex(), contract[:4].hex(), membership[:4].hex()]


# --- the learner digest: a baseline and what changes it -------------------------------------


def base_config() -> dict[str, object]:
    return {
        "seed": 7,
        "decay": 0.5,
        "name": "sgd",
        "layers": [4, 3, 1],
        "nesterov": False,
        "clip": None,
        "schedule": {"kind": "step", "every": 100, "gamma": 0.1},
    }


def base_state() -> list[np.ndarray[Any, Any]]:
    return [
        np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        np.array([0.25, -1.5, 3.0], dtype=np.float64),
        np.array(2, dtype=np.int64),
    ]


def base_samples() -> dict[str, np.ndarray[Any, Any]]:
    return {
        "x": np.linspace(-1, 1, 10, dtype=np.float32).reshape(5, 2),
        "y": np.array([1, 0, 1, 1, 0], dtype=np.uint8),
    }


def base_inputs() -> dict[str, Any]:
    return {
        "program": "alpha.learners.linear:v1",
        "config": base_config(),
        "initial_state": base_state(),
        "rate": 0.01,
        "samples": base_samples(),
    }


def digest_of(**changes: Any) -> bytes:
    inputs = base_inputs()
    inputs.update(changes)
    return learner_digest(**inputs)


BASE = digest_of()


def test_learner_digest_is_a_sha256_and_deterministic() -> None:
    assert len(BASE) == 32
    assert digest_of() == BASE


def test_program_changes_the_digest() -> None:
    assert digest_of(program="alpha.learners.linear:v2") != BASE
    assert digest_of(program="") != BASE
    assert digest_of(program=b"alpha.learners.linear:v1") == BASE  # a str is its UTF-8


def every_config_change() -> list[tuple[str, dict[str, object]]]:
    """For every key of the base config: renamed, dropped, and its value changed."""
    changes: list[tuple[str, dict[str, object]]] = []
    other_values: dict[str, object] = {
        "seed": 8,
        "decay": float(np.nextafter(0.5, 1.0)),
        "name": "sgD",
        "layers": [4, 3, 2],
        "nesterov": True,
        "clip": 0,
        "schedule": {"kind": "step", "every": 100, "gamma": 0.2},
    }
    for key in base_config():
        renamed = {(key + "_" if k == key else k): v for k, v in base_config().items()}
        changes.append((f"rename {key}", renamed))
        dropped = {k: v for k, v in base_config().items() if k != key}
        changes.append((f"drop {key}", dropped))
        changed = base_config()
        changed[key] = other_values[key]
        changes.append((f"change {key}", changed))
    nested = base_config()
    nested["schedule"] = {"kind": "step", "every": 100, "gammA": 0.1}
    changes.append(("rename nested key", nested))
    extra = base_config()
    extra["extra"] = None
    changes.append(("add a None key", extra))
    return changes


@pytest.mark.parametrize(
    "config", [c for _, c in every_config_change()], ids=[i for i, _ in every_config_change()]
)
def test_each_config_key_and_value_changes_the_digest(config: dict[str, object]) -> None:
    assert digest_of(config=config) != BASE


def test_config_changes_are_pairwise_distinct() -> None:
    digests = {digest_of(config=c) for _, c in every_config_change()}
    assert len(digests) == len(every_config_change())


@pytest.mark.parametrize(
    "values",
    [
        (1, 1.0, True, "1", [1], {"1": 1}, None),
        (0, 0.0, -0.0, False, "", [], {}, None),
        ([], (), {}),
        ([1, 2], [2, 1], [[1], 2], [1, [2]]),
    ],
)
def test_config_values_of_different_type_or_shape_differ(values: tuple[object, ...]) -> None:
    digests = [digest_of(config={"v": value}) for value in values]
    # A list and a tuple are the same array, as in JSON; everything else differs.
    expected = len({repr(list(v)) if isinstance(v, tuple) else repr(v) for v in values})
    assert len(set(digests)) == expected


def test_config_key_order_does_not_matter() -> None:
    reordered = dict(reversed(list(base_config().items())))
    schedule = reordered["schedule"]
    assert isinstance(schedule, dict)
    reordered["schedule"] = dict(reversed(list(schedule.items())))
    assert list(reordered) != list(base_config())
    assert digest_of(config=reordered) == BASE


JSON_LIKE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


def reversed_keys(value: object) -> object:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


@FAST
@given(st.dictionaries(st.text(max_size=4), JSON_LIKE, max_size=5))
def test_config_digest_ignores_key_order_at_every_level(config: dict[str, object]) -> None:
    assert digest_of(config=reversed_keys(config)) == digest_of(config=config)


def test_config_ints_of_any_size_are_distinct() -> None:
    values = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**63, 2**64 - 1, 2**64, -(2**64), 2**200]
    digests = {digest_of(config={"n": v}) for v in values}
    assert len(digests) == len(values)


def test_config_float_goes_by_its_bits() -> None:
    assert digest_of(config={"f": 0.1}) == digest_of(
        config={"f": 0.1000000000000000055511151231257827}
    )
    assert digest_of(config={"f": np.float64(0.1)}) == digest_of(config={"f": 0.1})
    assert digest_of(config={"f": 0.0}) != digest_of(config={"f": -0.0})
    assert digest_of(config={"f": 0.1}) != digest_of(config={"f": float(np.nextafter(0.1, 1))})


def test_deep_config_does_not_recurse() -> None:
    deep: object = 1
    for _ in range(20_000):
        deep = {"d": [deep]}
    assert len(digest_of(config={"deep": deep})) == 32


@pytest.mark.parametrize(
    "config",
    [
        {"s": {1, 2}},
        {"b": b"bytes"},
        {"f": np.float32(0.5)},
        {"i": np.int64(3)},
        {"a": np.zeros(2)},
        {"o": object()},
        {"nested": {"x": [1, {2: "int key"}]}},
        {3: "int key"},
    ],
    ids=["set", "bytes", "float32", "int64", "array", "object", "nested int key", "int key"],
)
def test_config_refuses_other_types(config: dict[Any, object]) -> None:
    raises_exactly(TypeError, learner_digest, **{**base_inputs(), "config": config})


def test_config_must_be_a_mapping() -> None:
    for thing in ([("a", 1)], "a=1", None):
        raises_exactly(TypeError, learner_digest, **{**base_inputs(), "config": thing})


def test_config_error_names_the_path() -> None:
    error = raises_exactly(TypeError, digest_of, config={"a": {"b": [0, {1, 2}]}})
    assert "config['a']['b'][1]" in str(error)


def test_config_refuses_cycles() -> None:
    loop: list[object] = []
    loop.append(loop)
    raises_exactly(LearnerInputInvalid, digest_of, config={"loop": loop})
    table: dict[str, object] = {}
    table["self"] = table
    raises_exactly(LearnerInputInvalid, digest_of, config=table)


def test_config_shared_but_acyclic_values_are_fine() -> None:
    shared = [1, 2]
    assert digest_of(config={"a": shared, "b": shared}) == digest_of(
        config={"a": [1, 2], "b": [1, 2]}
    )


def test_lone_surrogates_are_refused() -> None:
    raises_exactly(LearnerInputInvalid, digest_of, program="\ud800")
    raises_exactly(LearnerInputInvalid, digest_of, config={"\ud800": 1})
    raises_exactly(LearnerInputInvalid, digest_of, config={"k": "\udfff"})
    raises_exactly(LearnerInputInvalid, digest_of, samples={"\ud800": np.zeros(1)})


# --- arrays -----------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["initial_state", "samples"])
def test_each_array_value_shape_and_dtype_changes_the_digest(field: str) -> None:
    base = base_inputs()[field]
    names = list(base) if isinstance(base, dict) else list(range(len(base)))
    seen = {BASE}
    for name in names:

        def with_array(array: np.ndarray[Any, Any], name: Any = name) -> bytes:
            arrays = base_inputs()[field]
            arrays[name] = array
            return digest_of(**{field: arrays})

        original = base[name]
        flipped = original.copy()
        flipped.reshape(-1)[-1] += 1
        variants = [
            flipped,
            original.reshape(-1, 1),  # same bytes, another shape
            original.reshape(-1),
            original.reshape(1, *original.shape),
            original.astype(np.int16 if original.dtype.kind == "f" else np.float32),
            original.view(np.dtype(f"u{original.dtype.itemsize}")),  # same bytes, another dtype
        ]
        # Distinct values only: reshaping a 1-d array to 1-d, or a 0-d one to (1,)
        # twice, is not a change.
        keys = {(original.dtype.str, original.shape, original.tobytes())}
        for variant in variants:
            key = (variant.dtype.str, variant.shape, variant.tobytes())
            if key in keys:
                continue
            keys.add(key)
            digest = with_array(variant)
            assert digest not in seen
            seen.add(digest)


@pytest.mark.parametrize("field", ["initial_state", "samples"])
def test_adding_removing_or_reordering_arrays_changes_the_digest(field: str) -> None:
    arrays = base_inputs()[field]
    listed = list(arrays.values()) if isinstance(arrays, dict) else arrays
    variants = [
        listed,
        listed[::-1],
        listed[:-1],
        [*listed, np.zeros(0, dtype=np.float32)],
        {str(i): a for i, a in enumerate(listed)},
    ]
    digests = {BASE, *(digest_of(**{field: v}) for v in variants)}
    assert len(digests) == len(variants) + (1 if isinstance(arrays, dict) else 0)


def test_initial_state_and_samples_are_not_interchangeable() -> None:
    state = base_state()
    assert digest_of(initial_state=state, samples=[]) != digest_of(initial_state=[], samples=state)


def test_array_mapping_order_does_not_matter_but_names_do() -> None:
    samples = base_samples()
    assert digest_of(samples=dict(reversed(list(samples.items())))) == BASE
    assert digest_of(samples={"x": samples["y"], "y": samples["x"]}) != BASE


def test_empty_and_zero_dimensional_arrays() -> None:
    digests = {
        digest_of(samples=[]),
        digest_of(samples={}),
        digest_of(samples=[np.zeros(0, dtype=np.float32)]),
        digest_of(samples=[np.zeros((0, 3), dtype=np.float32)]),
        digest_of(samples=[np.zeros((3, 0), dtype=np.float32)]),
        digest_of(samples=[np.array(0.0, dtype=np.float32)]),
        digest_of(samples=[np.zeros(1, dtype=np.float32)]),
    }
    assert len(digests) == 7


def test_byte_order_and_layout_do_not_matter() -> None:
    state = base_state()
    big_endian = [a.astype(a.dtype.newbyteorder(">")) for a in state]
    assert all(a.dtype.byteorder in ">|" for a in big_endian)
    fortran = [np.asarray(a, order="F") for a in state]
    strided = []
    for a in state:
        wide = np.zeros((*a.shape, 3), dtype=a.dtype)
        wide[..., 1] = a
        strided.append(wide[..., 1])
    assert not strided[0].flags.c_contiguous
    transposed = [a.T.copy().T for a in state]  # F-ordered; 0-d stays 0-d
    for layout in (big_endian, fortran, strided, transposed):
        assert digest_of(initial_state=layout) == BASE


ARRAY_DTYPES = st.sampled_from(
    ["<f2", "<f4", "<f8", "<c8", "<c16", "<i2", "<i8", "<u4", "|u1", "|b1"]
)


@FAST
@given(
    hnp.arrays(
        dtype=ARRAY_DTYPES.map(np.dtype),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    st.sampled_from(["big", "fortran", "strided", "reversed-copy"]),
)
def test_same_values_in_any_layout_give_the_same_digest(
    array: np.ndarray[Any, Any], layout: str
) -> None:
    if layout == "big":
        other = array.astype(array.dtype.newbyteorder(">"))
    elif layout == "fortran":
        other = np.asarray(array, order="F")  # asfortranarray makes 0-d 1-d
    elif layout == "strided":
        wide = np.zeros((*array.shape, 2), dtype=array.dtype)
        wide[..., 0] = array
        other = wide[..., 0]
    else:
        # A view that walks its base backwards (negative strides); 0-d has no axis to flip.
        other = array[::-1].copy()[::-1] if array.ndim else array.copy()
    assert other.tobytes() == array.tobytes() or array.dtype.byteorder != other.dtype.byteorder
    assert digest_of(samples={"a": other}) == digest_of(samples={"a": array})


def test_contiguous_little_endian_arrays_are_hashed_in_place() -> None:
    array = np.arange(1_000, dtype="<f8")
    plan = digests._array_plan(None, array, "x")
    data = digests._array_data(plan)
    assert np.shares_memory(np.frombuffer(data, dtype=np.uint8), array)
    assert bytes(data) == array.tobytes()


@pytest.mark.parametrize(
    "array",
    [
        np.array(["a"]),
        np.array([b"a"]),
        np.array([object()], dtype=object),
        np.zeros(2, dtype=np.longdouble),
        np.zeros(2, dtype=np.clongdouble),
        np.zeros(2, dtype="datetime64[s]"),
        np.zeros(2, dtype="timedelta64[s]"),
        np.zeros(2, dtype=[("a", "<f4")]),
        np.zeros(2, dtype="V4"),
    ],
    ids=lambda a: str(a.dtype),
)
@pytest.mark.parametrize("field", ["initial_state", "samples"])
def test_non_portable_dtypes_are_refused(array: np.ndarray[Any, Any], field: str) -> None:
    error = raises_exactly(TypeError, digest_of, **{field: {"w": array}})
    assert f"{field}['w']" in str(error)


@pytest.mark.parametrize("field", ["initial_state", "samples"])
@pytest.mark.parametrize(
    "arrays",
    [np.zeros(3), [[1.0, 2.0]], [np.float64(1.0)], "abc", None, 3, {1: np.zeros(1)}],
    ids=["bare array", "nested list", "numpy scalar", "str", "None", "int", "int name"],
)
def test_array_collections_are_refused_when_not_arrays(field: str, arrays: object) -> None:
    raises_exactly(TypeError, digest_of, **{field: arrays})


# --- rate and program ------------------------------------------------------------------------


def test_rate_by_one_ulp_changes_the_digest() -> None:
    up = np.nextafter(0.01, 1.0)
    down = np.nextafter(0.01, 0.0)
    digests = {BASE, digest_of(rate=up), digest_of(rate=down), digest_of(rate=float(up))}
    assert len(digests) == 3


def test_rate_goes_by_its_bits_not_its_text() -> None:
    assert digest_of(rate=0.1) == digest_of(rate=0.1000000000000000055511151231257827)
    assert digest_of(rate=0.1) == digest_of(rate=float("0.1"))
    assert digest_of(rate=1) == digest_of(rate=1.0)
    assert digest_of(rate=0.0) != digest_of(rate=-0.0)


@pytest.mark.parametrize("rate", [True, np.float32(0.1), "0.1", None, np.array(0.1)])
def test_rate_refuses_non_floats(rate: object) -> None:
    raises_exactly(TypeError, digest_of, rate=rate)


def test_rate_refuses_ints_beyond_a_double() -> None:
    raises_exactly(LearnerInputInvalid, digest_of, rate=10**400)


@pytest.mark.parametrize("program", [None, 3, ["a"], memoryview(b"a")])
def test_program_refuses_other_types(program: object) -> None:
    raises_exactly(TypeError, digest_of, program=program)


def test_fields_are_length_prefixed_so_bytes_cannot_move_between_them() -> None:
    # The same concatenated bytes, split differently between program and config keys.
    assert digest_of(program="ab", config={"c": 1}) != digest_of(program="a", config={"bc": 1})


# --- the contract digest -----------------------------------------------------------------------

CONTRACT: dict[str, Any] = {
    "dtype": "float32",
    "operation": "sum",
    "topology": "tree",
    "participants": 200_000,
    "fanout": 64,
    "delivery": "all",
}


def contract_of(**changes: Any) -> bytes:
    return contract_digest(**{**CONTRACT, **changes})


def test_each_contract_field_changes_the_digest() -> None:
    variants: list[dict[str, Any]] = [
        {},
        {"dtype": "float64"},
        {"delivery": "one"},
        {"participants": 199_999},
        {"participants": 200_001},
        {"fanout": 63},
        {"fanout": 65},
        {"topology": "star", "fanout": 199_999},
        {"integrity": "sha256"},
        {"payload_digest": "blake3"},
        {"integrity": "sha256", "payload_digest": "blake3"},
    ]
    digests = {contract_of(**v) for v in variants}
    assert len(digests) == len(variants)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 200_000, MAX_ROLES])
def test_star_is_the_tree_of_fanout_n_minus_one(n: int) -> None:
    star_fanout = max(1, n - 1)
    star = contract_of(topology="star", participants=n, fanout=star_fanout)
    assert star == contract_of(topology="tree", participants=n, fanout=star_fanout)
    assert star == contract_of(topology="tree", participants=n, fanout=n + 5)
    assert star == contract_of(topology="star", participants=n, fanout=2**70)


def test_pair_is_the_tree_of_two_roles() -> None:
    pair = contract_of(topology="pair", participants=2, fanout=1)
    assert pair == contract_of(topology="tree", participants=2, fanout=1)
    assert pair == contract_of(topology="star", participants=2, fanout=1)
    assert pair == contract_of(topology="pair", participants=2, fanout=9)


def tree_shape(n: int, fanout: int) -> tuple[tuple[int, ...], ...]:
    tree = ParticipantTree(n, fanout)
    return tuple(tree.children(role) for role in range(n))


@FAST
@given(
    n=st.integers(min_value=1, max_value=40),
    f1=st.integers(min_value=1, max_value=45),
    f2=st.integers(min_value=1, max_value=45),
)
def test_contract_digests_agree_exactly_when_the_trees_agree(n: int, f1: int, f2: int) -> None:
    same_tree = tree_shape(n, f1) == tree_shape(n, f2)
    same_digest = contract_of(participants=n, fanout=f1) == contract_of(participants=n, fanout=f2)
    assert same_tree == same_digest
    assert same_tree == (canonical_fanout(n, f1) == canonical_fanout(n, f2))


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("dtype", "float16", "float32, float64"),
        ("dtype", "Float32", "float32, float64"),
        ("operation", "max", "sum"),
        ("topology", "ring", "tree, star, pair"),
        ("delivery", "some", "all, one"),
        ("integrity", "hmac-md5", "hmac-sha256, sha256"),
        ("payload_digest", "md5", "sha256, blake3"),
    ],
)
def test_contract_refuses_unknown_values(field: str, value: str, allowed: str) -> None:
    error = raises_exactly(ContractInvalid, contract_of, **{field: value})
    assert field in str(error)
    assert allowed in str(error)
    assert repr(value) in str(error)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"participants": 0}, "participants"),
        ({"participants": -1}, "participants"),
        ({"participants": MAX_ROLES + 1}, "participants"),
        ({"fanout": 0}, "fanout"),
        ({"fanout": -3}, "fanout"),
        ({"topology": "pair", "participants": 3}, "participants"),
        ({"topology": "pair", "participants": 1}, "participants"),
        ({"topology": "star", "participants": 10, "fanout": 8}, "fanout"),
    ],
)
def test_contract_refuses_impossible_numbers(changes: dict[str, Any], field: str) -> None:
    error = raises_exactly(ContractInvalid, contract_of, **changes)
    assert str(error).startswith(field)


@pytest.mark.parametrize(
    "changes",
    [
        {"dtype": np.float32},
        {"operation": None},
        {"topology": b"tree"},
        {"delivery": 1},
        {"participants": 4.0},
        {"participants": True},
        {"fanout": "64"},
        {"fanout": False},
    ],
)
def test_contract_refuses_wrong_types(changes: dict[str, Any]) -> None:
    raises_exactly(TypeError, contract_of, **changes)


def test_contract_checks_types_before_values_and_fields_in_order() -> None:
    raises_exactly(TypeError, contract_of, dtype="float16", fanout="1")
    error = raises_exactly(ContractInvalid, contract_of, dtype="float16", operation="max")
    assert str(error).startswith("dtype")
    error = raises_exactly(ContractInvalid, contract_of, delivery="x", participants=0)
    assert str(error).startswith("delivery")
    error = raises_exactly(ContractInvalid, contract_of, participants=0, fanout=0)
    assert str(error).startswith("participants")


def test_canonical_fanout() -> None:
    assert canonical_fanout(1, 1) == 1
    assert canonical_fanout(1, 50) == 1
    assert canonical_fanout(2, 7) == 1
    assert canonical_fanout(13, 3) == 3
    assert canonical_fanout(13, 12) == 12
    assert canonical_fanout(13, 13) == 12
    raises_exactly(TypeError, canonical_fanout, 3, True)
    raises_exactly(ContractInvalid, canonical_fanout, 3, 0)


# --- the membership digest ------------------------------------------------------------------


def test_membership_digest_is_the_group_digest() -> None:
    group = parse_group(
        "(group (repeat 625 320 (repeat 8 40 (repeat 2 20 (stride 0 1 20)))))",
        epoch=3,
        identity=b"job-42",
    )
    assert membership_digest(group) == group.digest()
    assert membership_digest(parse_group("(group (stride 0 1 8))", universe=10)).hex() == (
        "c03ae59865be6c6d250c42f20d0265b786071ea41a03d25dbec817eee8197c7e"
    )


def test_membership_digest_refuses_non_groups() -> None:
    raises_exactly(TypeError, membership_digest, "(group (stride 0 1 8))")


# --- the plan's group identity (membership.identity) ------------------------------------------

PAIR_PLAN = """
[run]
name = "pair"
rounds = 4

[membership]
group = "(group (stride 0 1 2))"
{extra}

[topology]
shape = "pair"

[work]
kind = "sum-check"
size = 256
"""


def pair_plan(extra: str = "") -> str:
    return PAIR_PLAN.format(extra=extra)


JOB = "6a6f622d3432" + "00" * 26  # 32 bytes: "job-42", then zeros


def test_a_plan_sets_the_group_identity_and_so_the_membership_part() -> None:
    plain = parse_plan(pair_plan())
    tagged = parse_plan(pair_plan(f'identity = "{JOB}"'))
    assert plain.group.identity == b""
    assert tagged.group.identity == bytes.fromhex(JOB)
    assert tagged.group.digest() != plain.group.digest()
    # Two runs of the same group, kept apart by the membership part alone.
    assert run_identity(tagged).differing_parts(run_identity(plain)) == ("membership",)
    assert (
        membership_digest(tagged.group)
        == parse_group("(group (stride 0 1 2))", identity=bytes.fromhex(JOB)).digest()
    )
    # Bytes, not text: either case of the same hex is the same identity.
    upper = parse_plan(pair_plan(f'identity = "{JOB.upper()}"'))
    assert upper.group == tagged.group
    other = parse_plan(pair_plan(f'identity = "{JOB[:-2]}01"'))
    assert other.group.digest() != tagged.group.digest()


def test_the_group_identity_keeps_the_universe_and_epoch() -> None:
    text = pair_plan(f'universe = 9\nidentity = "{JOB}"').replace(
        "rounds = 4", "rounds = 4\nepoch = 5"
    )
    plan = parse_plan(text)
    assert (plan.group.universe, plan.group.epoch) == (9, 5)
    assert plan.group == parse_group(
        "(group (stride 0 1 2))", universe=9, epoch=5, identity=bytes.fromhex(JOB)
    )


@pytest.mark.parametrize(
    ("value", "identity_bytes"),
    [
        ('""', b""),
        ('"00"', b"\x00"),
        (f'"{"ff" * MAX_IDENTITY_BYTES}"', b"\xff" * MAX_IDENTITY_BYTES),
    ],
)
def test_the_group_identity_bounds(value: str, identity_bytes: bytes) -> None:
    assert parse_plan(pair_plan(f"identity = {value}")).group.identity == identity_bytes


@pytest.mark.parametrize(
    "value",
    [
        '"abc"',  # an odd count of digits
        '"zz"',
        '"0x00"',
        '" 00"',
        '"00 "',
        '"00\\n"',
        '"é0"',
        f'"{"00" * (MAX_IDENTITY_BYTES + 1)}"',  # one byte past MAX_IDENTITY_BYTES
        "1",
        "true",
        '["00"]',
    ],
)
def test_a_malformed_group_identity_is_refused_naming_the_field(value: str) -> None:
    error = raises_exactly(PlanInvalid, parse_plan, pair_plan(f"identity = {value}"))
    assert isinstance(error, PlanInvalid)
    assert error.field == "membership.identity"
    assert str(error).startswith("membership.identity: must be a string of hex digits")
    assert "\n" not in str(error)


def test_compile_refuses_a_malformed_group_identity_with_exit_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(pair_plan('identity = "xyz"'))
    done = run_alpha("compile", str(plan), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "membership.identity" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_run_identity_binds_all_three() -> None:
    group = parse_group("(group (stride 0 1 8))")
    run = RunIdentity(BASE, contract_of(), membership_digest(group))
    other = RunIdentity(digest_of(rate=0.02), contract_of(), membership_digest(group))
    assert run.differing_parts(other) == ("learner",)
    assert RunIdentity.decode(run.encode()) == run


# --- known answers ----------------------------------------------------------------------------

# The worked examples of docs/identity.md. If one of these changes, the encoding
# changed: bump the domain tag's version rather than re-pin.
KNOWN_LEARNER = "eda09baa03d05cb27971ca49b5ae52c580e83467579a9f6894be02d821dc45ed"
KNOWN_CONTRACT = "40b45309f3a091c94fa80d87508b5324902810b6d55b1b283a6765fc5c918737"
# the same contract with [contract] integrity = "sha256" (layout 2 frames)
KNOWN_UNKEYED_CONTRACT = "8f2558e5435f69496717707c2d247e7f3409b97882f93b82ed9870aabbe279d9"


def known_learner() -> bytes:
    return learner_digest(
        program="linear",
        config={"seed": 7, "decay": 0.5, "name": "sgd"},
        initial_state=[np.array([1.0, 2.0], dtype=np.float32)],
        rate=0.25,
        samples={"x": np.array([[1, -2]], dtype=np.int8)},
    )


def u64(value: int) -> bytes:
    return struct.pack(">Q", value)


def field(body: bytes) -> bytes:
    return u64(len(body)) + body


def test_known_learner_digest() -> None:
    assert known_learner().hex() == KNOWN_LEARNER


def test_known_learner_digest_reproduces_from_the_documented_layout() -> None:
    config = (
        b"\x07" + u64(3)  # object, three keys sorted by UTF-8: decay, name, seed
        + field(b"decay") + b"\x04" + struct.pack(">d", 0.5)
        + field(b"name") + b"\x05" + field(b"sgd")
        + field(b"seed") + b"\x03" + field(b"\x07")
    )  # fmt: skip
    state = (
        b"\x01" + u64(1)  # sequence of one array
        + field(b"<f4") + u64(1) + u64(2) + u64(8) + struct.pack("<ff", 1.0, 2.0)
    )  # fmt: skip
    samples = (
        b"\x02" + u64(1)  # mapping of one named array
        + field(b"x") + field(b"|i1") + u64(2) + u64(1) + u64(2) + u64(2) + b"\x01\xfe"
    )  # fmt: skip
    data = (
        b"alpha/learner/v1"
        + field(b"linear")
        + field(config)
        + field(state)
        + field(struct.pack(">d", 0.25))
        + field(samples)
    )
    assert hashlib.sha256(data).hexdigest() == KNOWN_LEARNER
    assert digests._config_bytes({"seed": 7, "decay": 0.5, "name": "sgd"}) == config


def test_known_contract_digest() -> None:
    assert contract_of().hex() == KNOWN_CONTRACT
    assert contract_of(integrity="sha256").hex() == KNOWN_UNKEYED_CONTRACT
    data = (
        b"alpha/contract/v2"
        + field(b"float32")
        + field(b"sum")
        + u64(200_000)
        + u64(64)
        + field(b"all")
    )
    keyed = data + field(b"hmac-sha256") + field(b"sha256")
    assert len(keyed) == 103
    assert hashlib.sha256(keyed).hexdigest() == KNOWN_CONTRACT
    unkeyed = data + field(b"sha256") + field(b"sha256")
    assert hashlib.sha256(unkeyed).hexdigest() == KNOWN_UNKEYED_CONTRACT
