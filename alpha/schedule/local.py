"""A role's local schedule: the instructions projection leaves it, and their JSON form.

Loops stay loops, so a schedule's size does not grow with repeat counts. The JSON form
(``docs/protocol.md``) is what an artifact carries; ``decode`` refuses anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, final

from alpha.checked import int_in
from alpha.errors import ArtifactInvalid
from alpha.schedule.regions import ITEM_SIZES, Region

__all__ = [
    "SCHEDULE_FORMAT",
    "Choose",
    "Fold",
    "Instruction",
    "LocalSchedule",
    "Loop",
    "Op",
    "Recv",
    "Send",
    "decode",
    "encode",
]

SCHEDULE_FORMAT: Final = "alpha-schedule/1"


@final
@dataclass(frozen=True, slots=True)
class Send:
    peer: int
    region: str
    slot: int


@final
@dataclass(frozen=True, slots=True)
class Recv:
    """Receive ``peer``'s frame on ``slot`` straight into ``region``."""

    peer: int
    region: str
    slot: int


@final
@dataclass(frozen=True, slots=True)
class Op:
    name: str
    region: str


@final
@dataclass(frozen=True, slots=True)
class Fold:
    """``region := sources[0] + sources[1] + ...``, left to right: the contract order."""

    region: str
    sources: tuple[str, ...]


@final
@dataclass(frozen=True, slots=True)
class Loop:
    count: int
    body: tuple[Instruction, ...]


@final
@dataclass(frozen=True, slots=True)
class Choose:
    """An agreed choice at this role: evaluate ``selector`` (the authority) or receive the
    word from ``source`` on ``slot``; relay it to ``forward`` in order; run that arm."""

    slot: int
    selector: str | None
    source: int | None
    forward: tuple[int, ...]
    arm0: tuple[Instruction, ...]
    arm1: tuple[Instruction, ...]


Instruction = Send | Recv | Op | Fold | Loop | Choose


@final
@dataclass(frozen=True, slots=True)
class LocalSchedule:
    """Everything one role does, and the buffers it does it with."""

    role: int
    regions: tuple[Region, ...]
    scratch: tuple[tuple[str, str], ...]  # (name, the region it is shaped like)
    body: tuple[Instruction, ...]

    def region(self, name: str) -> Region:
        for region in self.regions:
            if region.name == name:
                return region
        for scratch, like in self.scratch:
            if scratch == name:
                return self.region(like)
        raise KeyError(name)


def _encode_body(body: Sequence[Instruction]) -> list[object]:
    out: list[object] = []
    for ins in body:
        if isinstance(ins, Send):
            out.append(["send", ins.peer, ins.region, ins.slot])
        elif isinstance(ins, Recv):
            out.append(["recv", ins.peer, ins.region, ins.slot])
        elif isinstance(ins, Op):
            out.append(["op", ins.name, ins.region])
        elif isinstance(ins, Fold):
            out.append(["fold", ins.region, list(ins.sources)])
        elif isinstance(ins, Loop):
            out.append(["loop", ins.count, _encode_body(ins.body)])
        else:
            out.append(
                [
                    "choose",
                    ins.slot,
                    ins.selector,
                    ins.source,
                    list(ins.forward),
                    _encode_body(ins.arm0),
                    _encode_body(ins.arm1),
                ]
            )
    return out


def _encode_region(region: Region) -> list[object]:
    if region.transient:
        return [region.name, region.dtype, region.count, region.of, region.offset, True]
    if region.of is not None:
        return [region.name, region.dtype, region.count, region.of, region.offset]
    return [region.name, region.dtype, region.count]


def encode(schedule: LocalSchedule) -> dict[str, object]:
    """The JSON-able form of a schedule (``docs/protocol.md``)."""
    return {
        "format": SCHEDULE_FORMAT,
        "role": schedule.role,
        "regions": [_encode_region(r) for r in schedule.regions],
        "scratch": [list(pair) for pair in schedule.scratch],
        "body": _encode_body(schedule.body),
    }


def _bad(why: str) -> ArtifactInvalid:
    return ArtifactInvalid(f"schedule: {why}")


def _int(value: object, what: str) -> int:
    if not int_in(value, 0):
        raise _bad(f"{what} must be an int >= 0, got {value!r}")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string, got {value!r}")
    return value


def _decode_body(raw: object) -> tuple[Instruction, ...]:
    if not isinstance(raw, list):
        raise _bad(f"a body must be a list, got {raw!r}")
    out: list[Instruction] = []
    for item in raw:
        if not isinstance(item, list) or not item:
            raise _bad(f"an instruction must be a non-empty list, got {item!r}")
        tag, args = item[0], item[1:]
        if tag in ("send", "recv") and len(args) == 3:
            cls = Send if tag == "send" else Recv
            out.append(cls(_int(args[0], "peer"), _str(args[1], "region"), _int(args[2], "slot")))
        elif tag == "op" and len(args) == 2:
            out.append(Op(_str(args[0], "op"), _str(args[1], "region")))
        elif tag == "fold" and len(args) == 2 and isinstance(args[1], list):
            out.append(Fold(_str(args[0], "region"), tuple(_str(s, "source") for s in args[1])))
        elif tag == "loop" and len(args) == 2:
            out.append(Loop(_int(args[0], "count"), _decode_body(args[1])))
        elif tag == "choose" and len(args) == 6 and isinstance(args[3], list):
            out.append(
                Choose(
                    _int(args[0], "slot"),
                    None if args[1] is None else _str(args[1], "selector"),
                    None if args[2] is None else _int(args[2], "source"),
                    tuple(_int(p, "forward") for p in args[3]),
                    _decode_body(args[4]),
                    _decode_body(args[5]),
                )
            )
        else:
            raise _bad(f"unknown instruction {item!r}")
    return tuple(out)


def decode(data: object) -> LocalSchedule:
    """A schedule from its JSON-able form.

    Raises:
        ArtifactInvalid: another format, or an instruction or field that is not as documented.
    """
    if not isinstance(data, dict) or data.get("format") != SCHEDULE_FORMAT:
        raise _bad(f"format must be {SCHEDULE_FORMAT!r}")
    regions = []
    for raw in data.get("regions", []):
        if not isinstance(raw, list) or len(raw) not in (3, 5, 6) or raw[1] not in ITEM_SIZES:
            raise _bad(f"a region is [name, dtype, count] or a view [..., of, offset], got {raw!r}")
        of: str | None = None
        offset = 0
        if len(raw) >= 5:
            of = None if len(raw) == 6 and raw[3] is None else _str(raw[3], "of")
            offset = _int(raw[4], "offset")
        if len(raw) == 6 and raw[5] is not True:
            raise _bad(f"a region's sixth field marks it transient: true, got {raw[5]!r}")
        name, count = _str(raw[0], "region"), _int(raw[2], "count")
        regions.append(Region(name, raw[1], count, of, offset, transient=len(raw) == 6))
    whole = {r.name: r for r in regions if r.of is None}
    for region in regions:
        parent = whole.get(region.of or "")
        if region.of is not None and (
            parent is None
            or parent.dtype != region.dtype
            or region.offset + region.count > parent.count
        ):
            raise _bad(f"region {region.name!r} views no range of a region of its dtype")
    scratch = []
    for raw in data.get("scratch", []):
        if not isinstance(raw, list) or len(raw) != 2:
            raise _bad(f"a scratch buffer is [name, region], got {raw!r}")
        scratch.append((_str(raw[0], "scratch"), _str(raw[1], "region")))
    return LocalSchedule(
        role=_int(data.get("role"), "role"),
        regions=tuple(regions),
        scratch=tuple(scratch),
        body=_decode_body(data.get("body")),
    )
