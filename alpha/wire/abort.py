"""The cause an ABORT frame carries: a fixed-size, canonical record. Pure: bytes in, bytes out.

A role that fails sends one ABORT frame on every edge it can still write (``docs/failure.md``),
so that every role stops at once and names the original cause, not the broken connection it
sees next. The frame is checked like any other (identity, edge, version, SHA-256); its payload
is exactly ``ABORT_EXTENT`` bytes (``alpha.wire.frame``'s kinds table fixes its slot and
extent), laid out as ``docs/frames.md`` says:

==========  =====  ====================================================================
offset      width  field
==========  =====  ====================================================================
0           4      origin: the role that failed first (unsigned, big-endian)
4           4      edge low role, or ``0xFFFFFFFF`` when the cause names no edge
8           4      edge high role, or ``0xFFFFFFFF`` (both or neither)
12          8      round, or ``2**64 - 1`` outside the rounds
20          1      length of the cause's class name, 1..64
21          n      the class name, ASCII letters and digits, starting with a letter
21+n        2      length of the detail in bytes
23+n        m      the detail: UTF-8, one line, cut at a character boundary to fit
23+n+m      rest   zero bytes
==========  =====  ====================================================================

Decoding accepts exactly the bytes encoding produces: any other length, a non-zero pad byte,
a name that is not an identifier or a detail that is not UTF-8 refuses with ``AbortInvalid``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Final, final

from alpha.errors import AbortInvalid, RoundAborted
from alpha.wire.frame import ABORT_EXTENT, ABORT_SLOT

__all__ = ["MAX_NAME", "AbortCause", "decode_cause", "encode_cause"]

MAX_NAME: Final = 64
"""The longest class name carried (Alpha's longest is about 25 characters)."""

_NONE32: Final = 0xFFFF_FFFF
_NONE64: Final = 2**64 - 1
_FIXED: Final = struct.Struct(">IIIQB")
_NAME: Final = re.compile(rb"[A-Za-z][A-Za-z0-9]*")
_DETAIL_ROOM: Final = ABORT_EXTENT - _FIXED.size - MAX_NAME - 2


@final
@dataclass(frozen=True, slots=True)
class AbortCause:
    """Why a run aborted, as the role that failed first saw it."""

    origin: int
    cause: str
    edge: tuple[int, int] | None
    round: int | None
    detail: str

    @classmethod
    def of(cls, error: RoundAborted) -> AbortCause:
        """The cause ``error`` carries, to pass on unchanged."""
        return cls(error.origin, error.cause, error.edge, error.round, error.detail)

    def refusal(self, *, role: int, peer: int) -> RoundAborted:
        """What ``role`` raises on hearing this cause from ``peer``."""
        return RoundAborted(
            role=role,
            peer=peer,
            origin=self.origin,
            cause=self.cause,
            edge=self.edge,
            round=self.round,
            detail=self.detail,
        )


def _fit(detail: str) -> bytes:
    """``detail`` on one line, as UTF-8, cut at a character boundary to fit the frame."""
    data = " ".join(detail.split()).encode("utf-8", "replace")
    if len(data) <= _DETAIL_ROOM:
        return data
    return data[:_DETAIL_ROOM].decode("utf-8", "ignore").encode("utf-8")


def encode_cause(cause: AbortCause) -> bytes:
    """The ABORT payload for ``cause``: exactly :data:`ABORT_EXTENT` bytes.

    A class name that is not an ASCII identifier of at most :data:`MAX_NAME` characters is
    sent as ``Unknown``; a detail that does not fit is cut.
    """
    name = cause.cause.encode("ascii", "replace")
    if len(name) > MAX_NAME or _NAME.fullmatch(name) is None:
        name = b"Unknown"
    low, high = (_NONE32, _NONE32) if cause.edge is None else sorted(cause.edge)
    round_ = _NONE64 if cause.round is None else cause.round
    detail = _fit(cause.detail)
    body = (
        _FIXED.pack(cause.origin, low, high, round_, len(name))
        + name
        + len(detail).to_bytes(2, "big")
        + detail
    )
    return body + bytes(ABORT_EXTENT - len(body))


def decode_cause(data: bytes, *, role: int, peer: int) -> AbortCause:
    """The cause in an ABORT payload that ``role`` received from ``peer``.

    Raises:
        AbortInvalid: ``data`` is not exactly what :func:`encode_cause` writes.
    """

    def refuse(detail: str) -> AbortInvalid:
        return AbortInvalid(
            f"the abort's cause is malformed: {detail}",
            role=role,
            peer=peer,
            slot=ABORT_SLOT,
            version=0,
            field="payload",
        )

    if len(data) != ABORT_EXTENT:
        raise refuse(f"{len(data)} bytes instead of {ABORT_EXTENT}")
    origin, low, high, round_, name_length = _FIXED.unpack_from(data)
    if (low == _NONE32) != (high == _NONE32) or (low != _NONE32 and low >= high):
        raise refuse(f"edge {low}-{high} is neither two roles in order nor none")
    position = _FIXED.size
    name = data[position : position + name_length]
    if not 1 <= name_length <= MAX_NAME or _NAME.fullmatch(name) is None:
        raise refuse("the class name is not an identifier of 1 to 64 ASCII characters")
    position += name_length
    detail_length = int.from_bytes(data[position : position + 2], "big")
    position += 2
    if detail_length > _DETAIL_ROOM or position + detail_length > ABORT_EXTENT:
        raise refuse(f"the detail's length {detail_length} does not fit")
    try:
        detail = data[position : position + detail_length].decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("the detail is not UTF-8") from None
    if detail != " ".join(detail.split()):
        raise refuse("the detail is not one line of single spaces")
    if any(data[position + detail_length :]):
        raise refuse("bytes after the detail are not zero")
    return AbortCause(
        origin=origin,
        cause=name.decode("ascii"),
        edge=None if low == _NONE32 else (low, high),
        round=None if round_ == _NONE64 else round_,
        detail=detail,
    )
