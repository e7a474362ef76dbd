"""Shared-memory regions: the payloads of one edge direction between two roles of one host.

An edge whose two roles the same launcher runs on this host moves its large payloads through a
region, a file in a RAM-backed folder (``/dev/shm``) that both roles open; the TCP connection
stays and carries everything else: the hellos, each frame's header and trailer (the doorbell),
every frame of another kind, the ABORT and the end of stream, so a peer's death is still seen at
once. ``docs/frames.md`` ("Shared-memory regions") is the format.

Why a file and ``pread``/``pwrite`` rather than a mapping: a receiver copies the payload out of
the region into its slot's own buffer before it hashes it, so what it checks is what it keeps,
whatever the sender writes later; and a region cut short by its peer reads short (the frame is
refused as ``Truncated``) instead of killing the reader with ``SIGBUS`` as a mapping would.

Each direction's region is made by its receiver before it sends its hello, sized from the
schedule alone (the DATA slots that direction carries, :meth:`RegionLayout.of`), never from a
peer's bytes, readable and writable by this user only. The sender opens it after the peer's
hello, checks that it is a regular file of this user that no one else may open, of exactly the
layout's size, whose marker names the same run, edge and slots; then it takes the name away, so
nothing is left in the folder once both ends hold the file. Flow control is one counter per slot
in the region: the receiver writes how many frames of the slot it has copied out, and a sender
writes a slot's next payload only once its previous one was taken.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from alpha.core.identity import RunIdentity
from alpha.errors import RegionRefused
from alpha.schedule.local import Choose, Instruction, LocalSchedule, Loop, Recv, Send
from alpha.schedule.role import RoleDescription

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "FOLDER_ENV",
    "REGION_FOLDER",
    "REGION_MAGIC",
    "SHARED_ENV",
    "SHARED_MIN",
    "Area",
    "Region",
    "RegionLayout",
    "Sharing",
    "launch_token",
    "region_folder",
    "run_tag",
    "schedule_extents",
    "sweep_regions",
]

SHARED_MIN: Final = 64 << 10
"""The least payload a DATA slot moves through its edge's region. Below it, the frame stays
whole on TCP: one ``sendmsg`` of a few kilobytes costs less than a ``pwrite``, a ``pread`` and
a counter write (the lean path, docs/frames.md)."""

SHARED_ENV: Final = "ALPHA_SHARED_MEMORY"
"""Set by a launcher that runs every role of the run on this host, to the launch's token
(:func:`launch_token`), in every role's environment alike: only then may an edge use a region
(``[addresses] transport = "auto"``), named with that token. A role started another way, or by
a deployment across hosts, moves every frame over TCP."""

REGION_FOLDER: Final = Path("/dev/shm")
"""Where regions live: a tmpfs, so a region is memory, never disk."""

REGION_MAGIC: Final = b"ALPHASHM"

_FORMAT: Final = 1

# The marker at the start of a region: magic, format, the layout digest, the slot count.
_MARKER: Final = struct.Struct(">8sQ32sQ")

# Each slot's two counters after the marker, u64 big-endian: taken (frames the receiver copied
# out) and written (bytes of the frame in flight the sender has written so far).
_COUNTER: Final = struct.Struct(">Q")
_COUNTERS: Final = 2

# Payload areas start on a page, so a copy into or out of one is page-aligned.
_PAGE: Final = 4096

# Bytes copied in one pwrite/pread at most: Linux moves at most about 2 GiB per call anyway.
_MOVE_MAX: Final = 1 << 30


def _aligned(offset: int) -> int:
    return -(-offset // _PAGE) * _PAGE


def run_tag(identity: RunIdentity) -> str:
    """16 hex digits naming a run in a region's file name (its identity's SHA-256)."""
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def schedule_extents(schedule: LocalSchedule, peer: int, *, sending: bool) -> dict[int, int]:
    """The payload size of every DATA slot ``schedule`` sends to ``peer`` (``sending``) or
    receives from it, by slot number: what both ends of a direction compute alike, each from
    its own schedule."""
    out: dict[int, int] = {}

    def walk(body: Iterable[Instruction]) -> None:
        for ins in body:
            if isinstance(ins, Send if sending else Recv) and ins.peer == peer:
                out[ins.slot] = schedule.region(ins.region).nbytes
            elif isinstance(ins, Loop):
                walk(ins.body)
            elif isinstance(ins, Choose):
                walk(ins.arm0)
                walk(ins.arm1)

    walk(schedule.body)
    return out


@final
@dataclass(frozen=True, slots=True)
class Area:
    """Where one DATA slot's payload lies in its region: ``extent`` bytes at ``offset``; its
    taken counter is the ``index``-th."""

    slot: int
    extent: int
    offset: int
    index: int


@final
@dataclass(frozen=True, slots=True)
class RegionLayout:
    """The layout of one direction's region: the marker, a taken counter per slot, and each
    slot's payload area, page-aligned, slots ascending. ``size`` is the file's exact size."""

    sender: int
    receiver: int
    areas: tuple[Area, ...]
    size: int
    marker: bytes

    @classmethod
    def of(
        cls, identity: RunIdentity, sender: int, receiver: int, extents: Mapping[int, int]
    ) -> RegionLayout | None:
        """The region of the DATA slots in ``extents`` (slot: payload bytes) of at least
        :data:`SHARED_MIN` bytes; None when there is none (the direction needs no region)."""
        chosen = sorted((slot, extent) for slot, extent in extents.items() if extent >= SHARED_MIN)
        if not chosen:
            return None
        offset = _aligned(_MARKER.size + _COUNTERS * _COUNTER.size * len(chosen))
        areas = []
        for index, (slot, extent) in enumerate(chosen):
            areas.append(Area(slot, extent, offset, index))
            offset = _aligned(offset + extent)
        digest = hashlib.sha256(identity.encode())
        digest.update(struct.pack(">QQQ", sender, receiver, len(chosen)))
        for area in areas:
            digest.update(struct.pack(">QQQ", area.slot, area.extent, area.offset))
        marker = _MARKER.pack(REGION_MAGIC, _FORMAT, digest.digest(), len(chosen))
        return cls(sender, receiver, tuple(areas), offset, marker)

    def area(self, slot: int) -> Area | None:
        for area in self.areas:
            if area.slot == slot:
                return area
        return None

    def counter_at(self, area: Area) -> int:
        """Where ``area``'s taken counter is; its written counter follows it."""
        return _MARKER.size + _COUNTERS * _COUNTER.size * area.index


@final
class Region:
    """One open region: made by the receiver (:meth:`make`) or opened by the sender
    (:meth:`open`). Every method raises :class:`RegionRefused` for a failing system call,
    naming the edge and the file."""

    __slots__ = ("fd", "layout", "made", "path", "role")

    def __init__(self, fd: int, path: Path, layout: RegionLayout, *, role: int, made: bool) -> None:
        self.fd = fd
        self.path = path
        self.layout = layout
        self.role = role
        self.made = made  # this end made the file: it takes the name away on close

    @property
    def peer(self) -> int:
        layout = self.layout
        return layout.sender if self.role == layout.receiver else layout.receiver

    @classmethod
    def make(cls, folder: Path, name: str, layout: RegionLayout, *, role: int) -> Region:
        """Make the region file ``folder/name`` for ``layout`` (this role receives): new (never
        one that exists), mode 0600, its whole size reserved now, so a full folder fails here
        and not in the middle of a round; the marker written, every counter 0.

        Raises:
            RegionRefused: the file exists already (not this run's to take), or the folder
                cannot hold it.
        """
        path = folder / name
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        flags |= getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise cls._refused(
                layout,
                role,
                path,
                "the file exists already; no region of a live run has "
                "this name, so remove it if no run of this plan is running",
            ) from None
        except OSError as error:
            raise cls._refused(layout, role, path, f"it cannot be made: {error.strerror}") from None
        region = cls(fd, path, layout, role=role, made=True)
        try:
            os.fchmod(fd, 0o600)  # the umask may only narrow it; say it outright
            os.posix_fallocate(fd, 0, layout.size)
            region._pwrite(layout.marker, 0)
        except OSError as error:
            region.close()
            raise cls._refused(
                layout, role, path, f"{layout.size} bytes cannot be reserved: {error.strerror}"
            ) from None
        return region

    @classmethod
    def open(cls, folder: Path, name: str, layout: RegionLayout, *, role: int) -> Region:
        """Open the region the peer made for ``layout`` (this role sends), check it, and take
        its name away (both ends hold the file from now on).

        Raises:
            RegionRefused: there is no such file; it is not a regular file of this user, or
                others may open it; its size or marker is not ``layout``'s.
        """
        path = folder / name
        flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError as error:
            raise cls._refused(
                layout,
                role,
                path,
                f"the peer made no region here ({error.strerror}); both "
                "roles of an edge must be started by one launcher on this host",
            ) from None
        region = cls(fd, path, layout, role=role, made=False)
        try:
            found = os.fstat(fd)
            why = ""
            if not stat.S_ISREG(found.st_mode):
                why = "it is not a regular file"
            elif found.st_uid != os.geteuid():
                why = f"it belongs to user {found.st_uid}, not to this role's user"
            elif stat.S_IMODE(found.st_mode) & 0o077:
                why = f"others may open it (mode {stat.S_IMODE(found.st_mode):04o})"
            elif found.st_size != layout.size:
                why = f"it holds {found.st_size} bytes, the schedule makes {layout.size}"
            elif os.pread(fd, _MARKER.size, 0) != layout.marker:
                why = "its marker names another run, edge or set of slots"
            if why:
                raise cls._refused(layout, role, path, why)
            os.unlink(path)
        except OSError as error:
            region.close()
            raise cls._refused(layout, role, path, error.strerror or str(error)) from None
        except RegionRefused:
            region.close()
            raise
        return region

    # --- payloads ---------------------------------------------------------------------------

    def write(self, area: Area, payload: Buffer) -> None:
        """Write one payload into ``area`` (the sender). Releases the GIL while it copies."""
        view = memoryview(payload).cast("B")
        try:
            self._pwrite(view, area.offset)
        except OSError as error:
            raise self._refused(
                self.layout, self.role, self.path, f"a payload cannot be written: {error.strerror}"
            ) from None

    def _pwrite(self, data: Buffer, offset: int) -> None:
        view = memoryview(data).cast("B")
        done = 0
        while done < view.nbytes:
            done += os.pwrite(self.fd, view[done : done + _MOVE_MAX], offset + done)

    def read_into(self, view: memoryview, offset: int) -> int:
        """Copy bytes at ``offset`` of the region into ``view`` (the receiver); return how many:
        fewer than asked only when the region was cut short, 0 past its end. Releases the GIL."""
        try:
            return os.preadv(self.fd, [view[:_MOVE_MAX]], offset)
        except OSError as error:
            raise self._refused(
                self.layout, self.role, self.path, f"a payload cannot be read: {error.strerror}"
            ) from None

    # --- flow control -----------------------------------------------------------------------

    def taken(self, area: Area) -> int:
        """How many frames of ``area``'s slot the receiver has copied out (the sender asks);
        a counter cut off reads as 0, so the sender waits, bounded by its budget."""
        return self._counter(self.layout.counter_at(area))

    def take(self, area: Area, count: int) -> None:
        """Record that ``count`` frames of ``area``'s slot are copied out (the receiver)."""
        self._set(self.layout.counter_at(area), count)

    def written(self, area: Area) -> int:
        """How many bytes of the large payload in flight in ``area`` the sender has written
        (the receiver asks, once the frame's header is in); it copies no further."""
        return self._counter(self.layout.counter_at(area) + _COUNTER.size)

    def wrote(self, area: Area, count: int) -> None:
        """Record that the first ``count`` bytes of the payload in flight are written."""
        self._set(self.layout.counter_at(area) + _COUNTER.size, count)

    def write_piece(self, area: Area, piece: memoryview, at: int) -> None:
        """Write ``piece`` at byte ``at`` of ``area``'s payload, then record the bytes up to
        its end as written (the sender of a large payload, a piece at a time). Releases the
        GIL while it copies."""
        try:
            self._pwrite(piece, area.offset + at)
        except OSError as error:
            raise self._refused(
                self.layout, self.role, self.path, f"a payload cannot be written: {error.strerror}"
            ) from None
        self.wrote(area, at + len(piece))

    def _counter(self, offset: int) -> int:
        try:
            data = os.pread(self.fd, _COUNTER.size, offset)
        except OSError as error:
            raise self._refused(
                self.layout, self.role, self.path, f"a counter cannot be read: {error.strerror}"
            ) from None
        if len(data) != _COUNTER.size:
            return 0
        return int(_COUNTER.unpack(data)[0])

    def _set(self, offset: int, value: int) -> None:
        try:
            self._pwrite(_COUNTER.pack(value), offset)
        except OSError as error:
            raise self._refused(
                self.layout, self.role, self.path, f"a counter cannot be written: {error.strerror}"
            ) from None

    def close(self) -> None:
        """Close the file; the end that made it takes its name away if it is still there."""
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        os.close(fd)
        if self.made:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass  # the sender took the name away once it held the file
            except OSError:
                pass  # the launcher's sweep takes it (docs/launch.md)

    @staticmethod
    def _refused(layout: RegionLayout, role: int, path: Path, why: str) -> RegionRefused:
        peer = layout.sender if role == layout.receiver else layout.receiver
        return RegionRefused(
            role=role,
            peer=peer,
            sender=layout.sender,
            receiver=layout.receiver,
            path=str(path),
            why=why,
        )


def sweep_regions(token: str, folder: Path = REGION_FOLDER) -> list[Path]:
    """Remove every region file of the launch ``token`` left in ``folder`` (made by a role
    killed before its peer took the name); return what was removed."""
    removed: list[Path] = []
    mark = f"-{token}-"
    try:
        names = [
            entry
            for entry in folder.iterdir()
            if entry.name.startswith("alpha-") and entry.name[22:40] == mark
        ]
    except OSError:
        return removed
    for path in names:
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


FOLDER_ENV: Final = "ALPHA_REGION_FOLDER"
"""Names another folder for regions than :data:`REGION_FOLDER` (a RAM-backed one, for tests
and hosts whose ``/dev/shm`` is small); the launcher sweeps the same folder."""

_TOKEN: Final = re.compile(r"[0-9a-f]{16}")


def launch_token() -> str:
    """A new launch's token (16 random hex digits), the value of :data:`SHARED_ENV`."""
    return secrets.token_hex(8)


def region_folder(environ: Mapping[str, str]) -> Path:
    """The folder regions live in under ``environ``."""
    return Path(environ.get(FOLDER_ENV) or REGION_FOLDER)


@final
@dataclass(frozen=True, slots=True)
class Sharing:
    """What one role's edges share: per peer, the layout of the region it makes for the
    peer's payloads and of the one it opens for its own (None where that direction moves
    nothing of :data:`SHARED_MIN` bytes or more); the launch's token and the folder."""

    token: str
    folder: Path
    layouts: Mapping[int, tuple[RegionLayout | None, RegionLayout | None]]

    def path(self, identity: RunIdentity, sender: int, receiver: int) -> str:
        """The file name of the region of ``sender`` to ``receiver`` in this launch: both
        ends know all of it, and no other launch has its token."""
        return f"alpha-{run_tag(identity)}-{self.token}-{sender}-{receiver}"

    @classmethod
    def of(
        cls, description: RoleDescription, schedule: LocalSchedule, environ: Mapping[str, str]
    ) -> Sharing | None:
        """The sharing of ``description``'s edges under ``environ``; None when every frame
        stays on TCP: the plan says ``tcp``, or no launcher gave a token (it runs roles on
        other hosts, or none started this one)."""
        token = environ.get(SHARED_ENV, "")
        if description.transport != "auto" or not _TOKEN.fullmatch(token):
            return None
        identity = description.identity
        role = description.role
        layouts = {}
        for edge in description.edges:
            peer = edge.peer
            incoming = RegionLayout.of(
                identity, peer, role, schedule_extents(schedule, peer, sending=False)
            )
            outgoing = RegionLayout.of(
                identity, role, peer, schedule_extents(schedule, peer, sending=True)
            )
            if incoming is not None or outgoing is not None:
                layouts[peer] = (incoming, outgoing)
        return cls(token, region_folder(environ), layouts)
