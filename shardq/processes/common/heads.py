"""Each shard's best ready job per tube, published where every serving process can read it.

A reserve over tubes on the hosted shard and on others is settled in process when the
hosted shard's best job comes first: the other shards are not asked (serving/cross.py,
`reserve_against_home`). To know that without a round trip, each shard writes, at the end
of every turn and before any of its replies leaves, the (priority, put order) of the best
ready job of each of its tubes into a file of the run directory that every serving
process maps (`HeadTable`); a reserve compares its own best job with what the other
shards' files say.

Only one direction of error is allowed, and the layout keeps to it: what a file says may
be better than the shard's real best job (a job reserved since, a slot two tubes share
holding the better of both, a job handed out this turn), never worse than a job a client
could know to be there. A put is published before its INSERTED leaves; a job that comes
back to ready by a timer (a delay, a TTR, a pause) may not be published yet, so the file
also says when the shard's next timer is due, and a reader whose clock has passed it asks
the shard. A serving process that gives jobs back to a shard (a closed connection's, an
offer it declines) doubts the shard's file until the shard has answered: reserves ask it
meanwhile (serving/cross.py, `doubt_heads`). A reader that sees a better head, a file not
yet valid (a shard starting, or restarted and publishing again) or no file asks the shard,
as before.

The file: a header (version, valid, next due, in ns of the monotonic clock every process
shares) and SLOTS slots (version, present, priority, put order), a tube in slot
crc32(name) % SLOTS. Each is written under its own version, odd while it changes (a
seqlock): a reader takes a value only when the version was even and the same before and
after it read. One process writes a file (the shard's); it zeroes it in place when it
starts, so that a reader that mapped it before sees the restart.

A shard publishes only while someone reads: the file ends with the time until which it is
*wanted*, which every reader pushes forward (to WANT_NS ahead, at most once a WANT_NS /
4) when it looks. A shard whose file nobody wanted lately marks it not valid and stops
writing it (a turn then costs no publishing: measured, 14 % of a one-client turn's
instructions); once wanted again, it publishes every tube and then marks it valid, at the
end of its next turn. Until then readers ask, which is always right: a reserve over two
shards is then answered one round trip later, never wrongly.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterable
from zlib import crc32

SLOTS = 4096  #: a power of two (slot = crc32 & (SLOTS - 1))
NEVER = (1 << 63) - 1  #: next due when the shard has no timer
_VERSION = struct.Struct("<I")
_HEADER = struct.Struct("<Iq")  # valid, next due
_SLOT = struct.Struct("<IIQ")  # present, priority, put order
_WANTED = struct.Struct("<q")  # wanted until (readers write it; the writer only reads it)
HEADER_BYTES = 16  #: version + header, padded
SLOT_BYTES = 24  #: version + slot, padded
WANTED_AT = HEADER_BYTES + SLOTS * SLOT_BYTES  #: where the wanted-until time is
SIZE = WANTED_AT + 8
WANT_NS = 5_000_000_000  #: a reader wants a table for this long after it last looked

#: (priority, put order) of a tube's best ready job, or None
Head = tuple[int, int] | None


def path_of(run_dir: str, shard: int) -> str:
    return os.path.join(run_dir, f"heads-{shard}")


def slot_of(name: str) -> int:
    return crc32(name.encode()) & (SLOTS - 1)


class HeadTable:
    """One shard's published heads: written by the shard (`publish`, `set_due`,
    `set_valid`), read by the serving processes (`beats`)."""

    __slots__ = ("_map", "_members", "_due", "_valid", "_wants_until")

    def __init__(self, mapped: mmap.mmap) -> None:
        self._map = mapped
        #: the writer's: slot -> the names of its tubes published there
        self._members: dict[int, set[str]] = {}
        self._due = NEVER  #: the writer's: the next due it last wrote
        self._valid = False  #: the writer's: what it last wrote
        self._wants_until = 0  #: a reader's: the wanted-until time it last wrote

    @classmethod
    def publisher(cls, path: str) -> HeadTable:
        """The shard's own table, zeroed in place (not valid, every slot empty)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, SIZE)
            mapped = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        table = cls(mapped)
        table.set_valid(False)
        mapped[HEADER_BYTES:] = bytes(SIZE - HEADER_BYTES)  # (versions even: 0)
        return table

    @classmethod
    def reader(cls, path: str) -> HeadTable | None:
        """Another shard's table, or None while it has not made it yet."""
        try:
            fd = os.open(path, os.O_RDWR)  # (it writes when it wants the table: `want`)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size < SIZE:
                return None  # being made
            mapped = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        return cls(mapped)

    def close(self) -> None:
        self._map.close()

    # ----------------------------------------------------------------- the writer
    def _write(self, offset: int, layout: struct.Struct, *values: int) -> None:
        m = self._map
        version = _VERSION.unpack_from(m, offset)[0] | 1  # odd: being written
        _VERSION.pack_into(m, offset, version)
        layout.pack_into(m, offset + 4, *values)
        _VERSION.pack_into(m, offset, (version + 1) & 0xFFFFFFFF)

    @property
    def valid(self) -> bool:
        """The writer's: whether it last marked the table valid."""
        return self._valid

    def set_valid(self, valid: bool) -> None:
        self._valid = valid
        self._write(0, _HEADER, int(valid), self._due)

    def wanted(self, now: int) -> bool:
        """The writer's: has a reader looked at the table within WANT_NS of `now`?"""
        return _WANTED.unpack_from(self._map, WANTED_AT)[0] > now

    def set_due(self, due: int | None) -> None:
        """When the shard's next timer is due (None: it has none)."""
        due = NEVER if due is None else due
        if due != self._due:
            self._due = due
            self._write(0, _HEADER, int(self._valid), due)

    def publish(self, names: Iterable[str], head_of: Callable[[str], Head]) -> None:
        """The heads of these tubes, as `head_of` gives them now (None: none ready, or the
        tube is gone). A slot holds the better of the tubes that share it."""
        members = self._members
        for name in names:
            slot = slot_of(name)
            sharing = members.get(slot)
            if sharing is None:
                sharing = members[slot] = set()
            sharing.add(name)
            best: Head = None
            for member in list(sharing):
                head = head_of(member)
                if head is None:
                    sharing.discard(member)
                elif best is None or head < best:
                    best = head
            if not sharing:
                del members[slot]
            offset = HEADER_BYTES + slot * SLOT_BYTES
            if best is None:
                self._write(offset, _SLOT, 0, 0, 0)
            else:
                self._write(offset, _SLOT, 1, *best)

    # ----------------------------------------------------------------- a reader
    def _read(self, offset: int, layout: struct.Struct) -> tuple[int, ...]:
        m = self._map
        while True:
            before = _VERSION.unpack_from(m, offset)[0]
            values = layout.unpack_from(m, offset + 4)
            if not before & 1 and _VERSION.unpack_from(m, offset)[0] == before:
                return values

    def want(self, now: int) -> None:
        """Tell the writer the table is read: wanted until WANT_NS from `now` (written at
        most once a WANT_NS / 4)."""
        if self._wants_until - now < WANT_NS - WANT_NS // 4:
            self._wants_until = now + WANT_NS
            _WANTED.pack_into(self._map, WANTED_AT, self._wants_until)

    def marked_valid(self) -> bool:
        """A reader's: does the file say it is valid now?"""
        return bool(self._read(0, _HEADER)[0])

    def wanted_again(self) -> None:
        """The writer restarted (it zeroed the file): write the wanted time at the next look."""
        self._wants_until = 0

    def beats(self, names: Iterable[str], pri: int, seq: int, now: int) -> bool:
        """May this shard hold a job of these tubes that comes before (pri, seq)? True
        also when the table cannot say (not valid, or a timer of the shard is due). A
        reader marks the table wanted (`want`) before it asks this, so that a writer that
        had stopped publishing starts again."""
        valid, due = self._read(0, _HEADER)
        if not valid or due <= now:
            return True
        for name in names:
            present, head_pri, head_seq = self._read(
                HEADER_BYTES + slot_of(name) * SLOT_BYTES, _SLOT
            )
            if present and (head_pri, head_seq) < (pri, seq):
                return True
        return False


class PeerHeads:
    """A serving process's view of the other shards' tables, each mapped on first use."""

    __slots__ = ("_run_dir", "_tables", "_doubted")

    def __init__(self, run_dir: str) -> None:
        self._run_dir = run_dir
        self._tables: dict[int, HeadTable] = {}
        #: shard -> how many of our jobs-giving-back requests it has not answered yet: its
        #: table may be worse than its jobs until it has
        self._doubted: dict[int, int] = {}

    def _open(self, shard: int) -> HeadTable | None:
        """The shard's table, mapped now (None: it has not made it yet)."""
        table = HeadTable.reader(path_of(self._run_dir, shard))
        if table is not None:
            self._tables[shard] = table
        return table

    def doubt(self, shard: int) -> None:
        self._doubted[shard] = self._doubted.get(shard, 0) + 1

    def trust(self, shard: int) -> None:
        left = self._doubted.pop(shard, 0) - 1
        if left > 0:
            self._doubted[shard] = left

    def forget(self, shard: int) -> None:
        """The shard restarted: what it was asked before is moot (its table is new, and
        wanted by no one yet)."""
        self._doubted.pop(shard, None)
        table = self._tables.get(shard)
        if table is not None:
            table.wanted_again()

    def want(self, by_shard: Iterable[int], home: int, now: int) -> None:
        """Mark the tables of these shards but `home` wanted (HeadTable.want): a reserve
        over them would read them, whichever way it is settled this time."""
        tables = self._tables
        for shard in by_shard:
            if shard != home:
                table = tables.get(shard) or self._open(shard)
                if table is not None:
                    table.want(now)

    def beaten(
        self, others: Iterable[tuple[int, Iterable[str]]], pri: int, seq: int, now: int
    ) -> bool:
        """May one of these shards hold a job of its tubes that comes before (pri, seq)?
        (True also when one cannot say: no table yet, not valid, a timer due.) The caller
        has marked their tables wanted (`want`): a reserve does, however it is settled."""
        tables, doubted = self._tables, self._doubted
        for shard, tubes in others:
            if doubted and shard in doubted:
                return True
            table = tables.get(shard)
            if table is None:
                table = self._open(shard)
                if table is None:
                    return True
            if table.beats(tubes, pri, seq, now):
                return True
        return False
