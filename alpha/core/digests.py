"""The digests that bind a run (learner, contract, membership), the code digest, and their
canonical encodings; ``docs/identity.md`` says what each binds, and why, and gives the encodings
and known answers. The value they make, :class:`~alpha.core.identity.RunIdentity`, lives in
:mod:`alpha.core.identity` (which imports none of this).

Every encoding is fixed byte by byte (big-endian widths, little-endian array data, floats by
their IEEE-754 binary64 bits), so the digests are the same on any CPU.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, final

import numpy as np
from numpy.typing import NDArray

from alpha.checked import int_in
from alpha.core.identity import IDENTITY_PART_SIZE, RunIdentity
from alpha.core.membership import MAX_ROLES, ParticipantGroup
from alpha.core.sealing import INTEGRITIES, KEYED_INTEGRITY, PAYLOAD_DIGESTS
from alpha.errors import ContractInvalid, LearnerInputInvalid

__all__ = [
    "CODE_BOUND_LEARNER_DOMAIN",
    "CODE_DOMAIN",
    "CONTRACT_DOMAIN",
    "DELIVERIES",
    "DTYPES",
    "LEARNER_DOMAIN",
    "OPERATIONS",
    "TOPOLOGIES",
    "bind_code",
    "canonical_fanout",
    "code_digest",
    "contract_digest",
    "learner_digest",
    "membership_digest",
]

# --- domain tags --------------------------------------------------------------------------

#: Starts every learner digest input (ASCII, no length prefix): a learner encoding
#: can never be read as a contract or group encoding, and ``v1`` names the layout.
LEARNER_DOMAIN: Final = b"alpha/learner/v1"
#: Starts every contract digest input (ASCII, no length prefix), for the same reason.
CONTRACT_DOMAIN: Final = b"alpha/contract/v2"
#: Starts every code digest input (ASCII, no length prefix), for the same reason.
CODE_DOMAIN: Final = b"alpha/code/v1"
#: Starts the input of a learner part bound to code (ASCII, no length prefix): a bound
#: part can never equal a learner digest or a code digest computed from the same bytes.
CODE_BOUND_LEARNER_DOMAIN: Final = b"alpha/learner+code/v1"

# --- the numerical contract's allowed values ------------------------------------------------

#: Element types the combine supports; each fixes the rounding of every add.
DTYPES: Final = ("float32", "float64")
#: Combine operations; only the sum exists so far.
OPERATIONS: Final = ("sum",)
#: Named combine trees: a general tree of fan-out F, the one-level star, the two-role pair.
TOPOLOGIES: Final = ("tree", "star", "pair")
#: Where the combined result goes: to every participant, or to the root only.
DELIVERIES: Final = ("all", "one")

#: The one participant count a pair has.
_PAIR_PARTICIPANTS: Final = 2

# --- encoding primitives --------------------------------------------------------------------

# Every integer width, length and count is an unsigned 64-bit big-endian field,
# as in the group digest, so one reader decodes both.
_U64: Final = struct.Struct(">Q")
# A float is its IEEE-754 binary64 bits, big-endian: equal doubles encode equally,
# whatever decimal text produced them, and no formatting routine is involved.
_F64: Final = struct.Struct(">d")

# Array collections (initial state, samples) start with one of these kind bytes,
# so a list of arrays and a mapping of named arrays never encode alike.
_KIND_SEQUENCE: Final = 0x01
_KIND_MAPPING: Final = 0x02

# Value tags of the canonical config encoding (one byte each).
_TAG_NONE: Final = 0x00
_TAG_FALSE: Final = 0x01
_TAG_TRUE: Final = 0x02
_TAG_INT: Final = 0x03
_TAG_FLOAT: Final = 0x04
_TAG_STR: Final = 0x05
_TAG_LIST: Final = 0x06
_TAG_OBJECT: Final = 0x07

# Array element kinds whose bytes mean the same value on every CPU once made
# little-endian: bool, signed and unsigned integers, IEEE floats and complexes.
_ARRAY_KINDS: Final = frozenset("biufc")
# Float and complex widths that are IEEE-754 formats everywhere. numpy's
# longdouble (12 or 16 bytes) is x87 extended precision on x86-64 but binary128
# on AArch64, so the same value has different bytes: it is refused.
_PORTABLE_FLOAT_SIZES: Final = {"f": frozenset({2, 4, 8}), "c": frozenset({8, 16})}

_Array: TypeAlias = NDArray[Any]
_Arrays: TypeAlias = Sequence[_Array] | Mapping[str, _Array]


def _lengthed(data: bytes) -> bytes:
    """``u64 len(data)`` followed by ``data``."""
    return _U64.pack(len(data)) + data


def _utf8(text: str, what: str) -> bytes:
    """Return ``text`` as UTF-8.

    Raises:
        LearnerInputInvalid: ``text`` holds a lone surrogate, which has no UTF-8 form.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LearnerInputInvalid(f"{what} is not encodable as UTF-8: {exc.reason}") from exc


# --- the learner digest -------------------------------------------------------------------


def learner_digest(
    *,
    program: str | bytes,
    config: Mapping[str, object],
    initial_state: _Arrays,
    rate: float,
    samples: _Arrays,
) -> bytes:
    """SHA-256 (32 bytes) of the learner's program, config, initial state, rate and samples.

    The input is ``LEARNER_DOMAIN`` and then five fields in that order, each a
    ``u64`` byte length and the field's bytes (see ``docs/identity.md``):

    * ``program``: its bytes; a str stands for its UTF-8, so ``"f"`` and ``b"f"`` agree;
    * ``config``: the canonical config encoding (type-tagged values, keys sorted,
      floats by their bits): key order does not matter, ``1``, ``1.0`` and ``True`` differ;
    * ``initial_state`` and ``samples``: each array's little-endian dtype, shape and
      C-order little-endian bytes, so byte order and memory layout do not matter.
      A mapping is encoded sorted by name; a sequence in its order;
    * ``rate``: its IEEE-754 binary64 bits, so any text for the same double agrees,
      and ``-0.0`` differs from ``0.0``.

    A contiguous little-endian array is hashed in place; others are converted one
    array at a time.

    Raises:
        TypeError: a field has the wrong type: ``program`` not str or bytes; ``config``
            not a mapping, a key not a str, or a value other than None, bool, int,
            float, str, list, tuple or mapping; an array collection not a sequence
            or mapping of numpy arrays, or a name not a str; an array whose dtype is
            not bool, integer, or float/complex of a portable width (no object,
            string, structured, datetime or longdouble arrays); ``rate`` not a
            float or int (a bool or numpy float32 included).
        LearnerInputInvalid: a str holds a lone surrogate (no UTF-8 form), the config
            contains itself, or an int ``rate`` is too large for a double.
    """
    program_bytes = _program_bytes(program)
    config_bytes = _config_bytes(config)
    state = _arrays_plan(initial_state, "initial_state")
    rate_bytes = _F64.pack(_rate_value(rate))
    sample_plan = _arrays_plan(samples, "samples")
    h = hashlib.sha256(LEARNER_DOMAIN)
    h.update(_lengthed(program_bytes))
    h.update(_lengthed(config_bytes))
    for piece in _arrays_pieces(state):
        h.update(piece)
    h.update(_lengthed(rate_bytes))
    for piece in _arrays_pieces(sample_plan):
        h.update(piece)
    return h.digest()


def _program_bytes(program: object) -> bytes:
    """The program's bytes: a str's UTF-8, or the bytes themselves.

    Raises:
        TypeError: ``program`` is neither str nor bytes-like.
        LearnerInputInvalid: a str holds a lone surrogate.
    """
    if isinstance(program, str):
        return _utf8(program, "the program")
    if isinstance(program, bytes | bytearray):
        return bytes(program)
    raise TypeError(f"the program must be str or bytes, not {type(program).__name__}")


def _rate_value(rate: object) -> float:
    """The rate as a double.

    Raises:
        TypeError: ``rate`` is not a float or int; bools are refused (``True`` as a
            rate is a bug), and so is numpy float32, whose widening to a double
            would silently pick one of several plausible values.
        LearnerInputInvalid: an int too large for a double.
    """
    if isinstance(rate, bool) or not isinstance(rate, float | int):
        raise TypeError(f"the rate must be a float, not {type(rate).__name__}")
    try:
        return float(rate)
    except OverflowError as exc:
        raise LearnerInputInvalid(f"the rate {rate} is too large for a double") from exc


# -- config --


def _config_bytes(config: object) -> bytes:
    """The canonical encoding of a config mapping (see docs/identity.md).

    Iterative, so a deeply nested config never meets Python's recursion limit;
    containers on the current path are tracked, so a config that contains
    itself is refused instead of looping.

    Raises:
        TypeError: ``config`` is not a mapping, a key is not a str, or a value has
            a type outside None, bool, int, float, str, list, tuple, mapping.
        LearnerInputInvalid: a str holds a lone surrogate, or a container contains itself.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"the config must be a mapping, not {type(config).__name__}")
    out = bytearray()
    # Work items: ("value", v, where) encodes v; ("bytes", b, _) appends b;
    # ("leave", container, _) ends a container's visit (for the cycle check).
    work: list[tuple[str, object, str]] = [("value", config, "config")]
    on_path: set[int] = set()
    while work:
        action, item, where = work.pop()
        if action == "bytes":
            assert isinstance(item, bytes)
            out += item
            continue
        if action == "leave":
            on_path.discard(id(item))
            continue
        # bool before int: True is an int in Python but a distinct JSON value.
        if item is None:
            out.append(_TAG_NONE)
        elif isinstance(item, bool):
            out.append(_TAG_TRUE if item else _TAG_FALSE)
        elif isinstance(item, int):
            # Two's complement, big-endian, bit_length // 8 + 1 bytes: always room
            # for the sign bit, and one length for each value, so no int is cut.
            out.append(_TAG_INT)
            out += _lengthed(item.to_bytes(item.bit_length() // 8 + 1, "big", signed=True))
        elif isinstance(item, float):
            out.append(_TAG_FLOAT)
            out += _F64.pack(item)
        elif isinstance(item, str):
            out.append(_TAG_STR)
            out += _lengthed(_utf8(item, where))
        elif isinstance(item, Mapping | list | tuple):
            if id(item) in on_path:
                raise LearnerInputInvalid(f"{where} contains itself")
            on_path.add(id(item))
            work.append(("leave", item, where))
            if isinstance(item, Mapping):
                _push_object(item, where, out, work)
            else:
                out.append(_TAG_LIST)
                out += _U64.pack(len(item))
                for index in range(len(item) - 1, -1, -1):
                    work.append(("value", item[index], f"{where}[{index}]"))
        else:
            raise TypeError(
                f"{where} is a {type(item).__name__}; config values are None, bool, int, "
                "float, str, list, tuple or a mapping with str keys"
            )
    return bytes(out)


def _push_object(
    item: Mapping[object, object], where: str, out: bytearray, work: list[tuple[str, object, str]]
) -> None:
    """Write an object's header and schedule its entries, sorted by the keys' UTF-8 bytes.

    Raises:
        TypeError: a key is not a str.
        LearnerInputInvalid: a key holds a lone surrogate.
    """
    entries: list[tuple[bytes, object, str]] = []
    for key, value in item.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} has a key of type {type(key).__name__}; keys must be str")
        entries.append((_utf8(key, f"the key {key!r} of {where}"), value, f"{where}[{key!r}]"))
    # UTF-8 byte order is code point order, so this is also the order of sorted(keys).
    entries.sort(key=lambda entry: entry[0])
    out.append(_TAG_OBJECT)
    out += _U64.pack(len(entries))
    for key_bytes, value, path in reversed(entries):
        work.append(("value", value, path))
        work.append(("bytes", _lengthed(key_bytes), path))


# -- arrays --


@final
@dataclass(frozen=True, slots=True)
class _ArrayPlan:
    """One array, checked, with its encoded header, ready to stream."""

    name: bytes | None  # UTF-8 name in a mapping; None in a sequence
    header: bytes  # dtype, ndim, shape, data length
    array: _Array
    little: np.dtype[Any]  # the dtype in little-endian (or byte-order-free) form


@final
@dataclass(frozen=True, slots=True)
class _CollectionPlan:
    """A checked array collection: its kind byte, its arrays and its field length."""

    kind: int
    arrays: tuple[_ArrayPlan, ...]
    length: int  # bytes of the field body, computed without touching the data


def _arrays_plan(arrays: object, what: str) -> _CollectionPlan:
    """Check an array collection and compute its field length, touching no array data.

    Computing the length first lets the field be length-prefixed like every
    other field while each array's bytes are still streamed, never gathered.

    Raises:
        TypeError: ``arrays`` is not a sequence or mapping of numpy arrays, a name
            is not a str, or an array's dtype is not portable (see ``learner_digest``).
        LearnerInputInvalid: a name holds a lone surrogate.
    """
    named: list[tuple[bytes | None, object, str]]
    if isinstance(arrays, Mapping):
        kind = _KIND_MAPPING
        by_name: list[tuple[bytes, object, str]] = []
        for key, value in arrays.items():
            if not isinstance(key, str):
                raise TypeError(f"{what} has a name of type {type(key).__name__}; names are str")
            by_name.append((_utf8(key, f"the name {key!r} in {what}"), value, f"{what}[{key!r}]"))
        # Sorted by name, like config keys: a state is the same whatever order it was built in.
        by_name.sort(key=lambda entry: entry[0])
        named = list(by_name)
    elif isinstance(arrays, Sequence) and not isinstance(arrays, str | bytes | bytearray):
        kind = _KIND_SEQUENCE
        named = [(None, value, f"{what}[{index}]") for index, value in enumerate(arrays)]
    else:
        raise TypeError(
            f"{what} must be a sequence or a mapping of numpy arrays, not {type(arrays).__name__}"
        )
    plans = tuple(_array_plan(name, value, where) for name, value, where in named)
    length = 1 + _U64.size  # kind byte and count
    for plan in plans:
        if plan.name is not None:
            length += _U64.size + len(plan.name)
        length += len(plan.header) + plan.array.nbytes
    return _CollectionPlan(kind, plans, length)


def _array_plan(name: bytes | None, value: object, where: str) -> _ArrayPlan:
    """Check one array and encode its header.

    Raises:
        TypeError: ``value`` is not a numpy array or its dtype is not portable.
    """
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where} must be a numpy array, not {type(value).__name__}")
    dtype = value.dtype
    widths = _PORTABLE_FLOAT_SIZES.get(dtype.kind)
    if dtype.kind not in _ARRAY_KINDS or (widths is not None and dtype.itemsize not in widths):
        raise TypeError(
            f"{where} has dtype {dtype}; the learner digest takes bool, integer, float16/32/64 "
            "and complex64/128 arrays, whose bytes mean the same value on every CPU"
        )
    # newbyteorder("<") leaves one-byte types as "|", which has no byte order to fix.
    little = dtype.newbyteorder("<")
    dtype_text = little.str.encode("ascii")
    header = (
        _lengthed(dtype_text)
        + _U64.pack(value.ndim)
        + b"".join(_U64.pack(dim) for dim in value.shape)
        + _U64.pack(value.nbytes)
    )
    return _ArrayPlan(name, header, value, little)


def _arrays_pieces(plan: _CollectionPlan) -> Iterator[bytes | memoryview]:
    """Yield the length-prefixed field of an array collection, piece by piece."""
    yield _U64.pack(plan.length) + bytes([plan.kind]) + _U64.pack(len(plan.arrays))
    for array_plan in plan.arrays:
        if array_plan.name is not None:
            yield _lengthed(array_plan.name)
        yield array_plan.header
        yield _array_data(array_plan)


def _array_data(plan: _ArrayPlan) -> memoryview:
    """The array's elements in C order, little-endian, as one flat byte view.

    ``ascontiguousarray`` returns the array itself when it is already C-contiguous
    in the little-endian dtype, so a large state is hashed without a copy; a
    big-endian or strided array is converted (one copy of that array only).
    """
    contiguous = np.ascontiguousarray(plan.array, dtype=plan.little)
    return contiguous.reshape(-1).view(np.uint8).data


# --- the code --------------------------------------------------------------------------


def code_digest(sources: Iterable[tuple[str, bytes]]) -> bytes:
    """SHA-256 (32 bytes) of the code that computes a run: each source's name and bytes.

    ``sources`` are ``(name, bytes)`` pairs, the name relative to the package's
    parent (``"alpha/wire/frame.py"``), as an artifact's archive names its members. The
    input is ``CODE_DOMAIN``, ``u64`` count, then for each source in order of its
    name's UTF-8 bytes: ``bytes(name)`` and ``bytes(source)``. Only names and bytes
    enter, so where the sources lie, their timestamps and the interpreter that
    reads them do not; the order the pairs come in does not either. See
    ``docs/identity.md``.

    Raises:
        TypeError: a name is not a str or a source is not bytes.
        LearnerInputInvalid: a name holds a lone surrogate, or two sources share a name
            (which one is the code would be a guess).
    """
    named: list[tuple[bytes, bytes]] = []
    for name, source in sources:
        if not isinstance(name, str):
            raise TypeError(f"a source's name must be a str, not {type(name).__name__}")
        if not isinstance(source, bytes):
            raise TypeError(f"the source {name!r} must be bytes, not {type(source).__name__}")
        named.append((_utf8(name, f"the source name {name!r}"), source))
    named.sort(key=lambda entry: entry[0])
    for index in range(1, len(named)):
        if named[index][0] == named[index - 1][0]:
            raise LearnerInputInvalid(f"two sources are named {named[index][0].decode()!r}")
    h = hashlib.sha256(CODE_DOMAIN)
    h.update(_U64.pack(len(named)))
    for name_bytes, source in named:
        h.update(_lengthed(name_bytes))
        h.update(_U64.pack(len(source)))
        h.update(source)
    return h.digest()


def bind_code(identity: RunIdentity, code: bytes) -> RunIdentity:
    """``identity`` with its learner part bound to ``code`` (a :func:`code_digest`).

    The learner part becomes the SHA-256 of ``CODE_BOUND_LEARNER_DOMAIN``, the
    learner digest and the code digest (32 bytes each, no length prefixes); the
    contract and membership parts are kept. Every compiled run's identity is bound
    so: the same learner computed by other code is another learner.

    Raises:
        TypeError: ``identity`` is not a :class:`RunIdentity` or ``code`` is not bytes.
        LearnerInputInvalid: ``code`` is not ``IDENTITY_PART_SIZE`` (32) bytes.
    """
    if not isinstance(identity, RunIdentity):
        raise TypeError(f"bind_code binds a RunIdentity, not {type(identity).__name__}")
    if not isinstance(code, bytes):
        raise TypeError(f"the code digest must be bytes, not {type(code).__name__}")
    if len(code) != IDENTITY_PART_SIZE:
        raise LearnerInputInvalid(
            f"the code digest must be {IDENTITY_PART_SIZE} bytes, got {len(code)}"
        )
    learner = hashlib.sha256(CODE_BOUND_LEARNER_DOMAIN + identity.learner + code).digest()
    return RunIdentity(learner, identity.contract, identity.membership)


# --- the contract digest ------------------------------------------------------------------


def canonical_fanout(participants: int, fanout: int) -> int:
    """The smallest fan-out that builds the same participant tree as ``(participants, fanout)``.

    A node with ``d`` descendants has ``min(F, d)`` children, and no node has more
    than ``n - 1`` descendants, so every ``F >= n - 1`` builds the same tree (the
    star); below that the root alone has ``F`` children, so distinct fan-outs
    build distinct trees. The canonical value is ``min(F, max(1, n - 1))``; two
    ``(n, F)`` build the same tree exactly when ``n`` and this value agree.

    Raises:
        TypeError: an argument is not an int (bools are refused).
        ContractInvalid: ``participants`` is outside ``1..MAX_ROLES`` or ``fanout < 1``.
    """
    n = _count(participants, "participants")
    f = _count(fanout, "fanout")
    if not 1 <= n <= MAX_ROLES:
        raise ContractInvalid(f"participants must be in 1..{MAX_ROLES} (MAX_ROLES), got {n}")
    if f < 1:
        raise ContractInvalid(f"fanout must be at least 1, got {f}")
    return min(f, max(1, n - 1))


def _count(value: object, what: str) -> int:
    """Return ``value`` if it is an int that is not a bool.

    Raises:
        TypeError: it is not.
    """
    if not int_in(value):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def _choice(value: str, what: str, allowed: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed`` (its type is already checked).

    Raises:
        ContractInvalid: ``value`` is outside ``allowed``; the message lists them.
    """
    if value not in allowed:
        raise ContractInvalid(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def contract_digest(
    *,
    dtype: str,
    operation: str,
    topology: str,
    participants: int,
    fanout: int,
    delivery: str,
    integrity: str = KEYED_INTEGRITY,
    payload_digest: str = "sha256",
) -> bytes:
    """SHA-256 (32 bytes) of the contract: the inputs that fix the combine's rounding, and how
    its frames are sealed (``integrity``, ``payload_digest``), so that roles that seal frames
    differently never take each other's frames.

    The topology is normalized to the tree it builds: ``"star"`` is the tree of
    fan-out ``n - 1`` and ``"pair"`` the tree of two roles, so ``("star", n, n-1)``,
    ``("tree", n, n-1)`` and ``("tree", n, F)`` for any ``F >= n - 1`` share a
    digest (same tree, same combine order), while trees of different shape never
    do. The topology name itself is not encoded. See ``docs/identity.md``.

    Checks run in this order: every argument's type, then participants, fanout, dtype,
    operation, topology, delivery, integrity, payload digest, and last whether the numbers
    fit the named topology.

    Raises:
        TypeError: a str field is not a str, or ``participants``/``fanout`` is not
            an int (bools are refused).
        ContractInvalid: dtype not in ``DTYPES``, operation not in ``OPERATIONS``,
            topology not in ``TOPOLOGIES``, delivery not in ``DELIVERIES``, integrity
            not in ``INTEGRITIES``, payload_digest not in ``PAYLOAD_DIGESTS``,
            participants outside ``1..MAX_ROLES``, fanout below 1, a ``"pair"``
            whose participants are not 2, or a ``"star"`` whose fanout is below
            ``n - 1`` (it would build a deeper tree, not a star). The message
            names the field and its allowed values.
    """
    for what, text in (
        ("dtype", dtype),
        ("operation", operation),
        ("topology", topology),
        ("delivery", delivery),
        ("integrity", integrity),
        ("payload_digest", payload_digest),
    ):
        if not isinstance(text, str):
            raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    _count(participants, "participants")
    _count(fanout, "fanout")
    _choice(dtype, "dtype", DTYPES)
    _choice(operation, "operation", OPERATIONS)
    _choice(topology, "topology", TOPOLOGIES)
    _choice(delivery, "delivery", DELIVERIES)
    _choice(integrity, "integrity", INTEGRITIES)
    _choice(payload_digest, "payload_digest", PAYLOAD_DIGESTS)
    tree_fanout = canonical_fanout(participants, fanout)
    star_fanout = max(1, participants - 1)
    if topology == "pair" and participants != _PAIR_PARTICIPANTS:
        raise ContractInvalid(
            f"participants must be {_PAIR_PARTICIPANTS} for topology 'pair', got {participants}"
        )
    if topology == "star" and tree_fanout != star_fanout:
        raise ContractInvalid(
            f"fanout must be at least {star_fanout} (participants - 1) for topology 'star' "
            f"with {participants} participants, got {fanout}"
        )
    h = hashlib.sha256(CONTRACT_DOMAIN)
    h.update(_lengthed(dtype.encode("ascii")))
    h.update(_lengthed(operation.encode("ascii")))
    h.update(_U64.pack(participants))
    h.update(_U64.pack(tree_fanout))
    h.update(_lengthed(delivery.encode("ascii")))
    h.update(_lengthed(integrity.encode("ascii")))
    h.update(_lengthed(payload_digest.encode("ascii")))
    return h.digest()


# --- the membership digest ----------------------------------------------------------------


def membership_digest(group: ParticipantGroup) -> bytes:
    """The group's own digest (universe, epoch, identity, selection); see docs/membership.md.

    Raises:
        TypeError: ``group`` is not a :class:`ParticipantGroup`.
    """
    if not isinstance(group, ParticipantGroup):
        raise TypeError(f"the membership is a ParticipantGroup, not {type(group).__name__}")
    return group.digest()
