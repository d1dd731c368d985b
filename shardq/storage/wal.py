"""A shard's write-ahead log: append-only segments, group commit, replay, compaction.

Layout: DIR/<index>.wal, index 1, 2, 3, … Each segment starts with an 8-byte header
(b"SQWAL" + version byte + 2 reserved bytes), and holds at most the segment size.

Room on disk: a segment's file is preallocated as it fills, GROW_BYTES at a time (just what
is needed where that much is not free), up to the segment size, and cut to what it holds
when the next segment starts. A put is admitted only once the bytes of its record, plus
HEADROOM for the deletes and state changes that follow, are preallocated: a full disk is
met when a put is admitted, where it is refused cleanly (OUT_OF_MEMORY), not in the middle
of a write; and a shard writes into whatever space is left instead of needing a whole
free segment.

After the header come records (their frames, the payloads' kinds, damage and torn tails,
and how to change the format: storage/segment_format.py).

Compaction: when the segments hold more than twice the live jobs' bytes plus one
segment, a snapshot of every live job is written to a segment of its own, synced, and the
older segments are deleted (a snapshot that finds no room is removed, and the log goes on
as it was). Disk use stays proportional to live data. The shard's compaction runs in a
forked child while the shard goes on (`start_compaction`, `poll_compaction`: 1,000,000 jobs
took 6.2 s to write in process, a stall for every client); after a write or sync error
(`rewrite`) it runs in process.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shardq.protocol.stats_keys import BINLOG_DAMAGED_KEY, BINLOG_KEYS
from shardq.storage.forked_write import ForkedWrite
from shardq.storage.segment_format import HEADER, REC_HEAD, WAL_VERSION, decode_segment, frames

logger = logging.getLogger(__name__)

HEADROOM = 64 * 1024  #: room kept in each segment for deletes and state changes
GROW_BYTES = 256 * 1024  #: a segment's preallocation grows by this much at a time
COMPACT_RETRY_S = 1.0  #: after a compaction failed, the next try waits this long, doubled
COMPACT_RETRY_MAX_S = 60.0  #: for each failure in a row (no room, a child killed) up to this
IOV_MAX = 1024  #: buffers one pwritev takes (Linux's UIO_MAXIOV)
NEW = ".new"  #: a segment's name while a compaction writes it


def chunks(snapshot: Sequence[Sequence[Any]], header: bool = True) -> Iterator[list[bytes]]:
    """A snapshot's records as a segment's frames, IOV_MAX buffers at a time (with the
    segment's header first, for a whole file)."""
    if header:
        yield [HEADER]
    for start in range(0, len(snapshot), IOV_MAX // 2):
        yield frames(snapshot[start : start + IOV_MAX // 2])


class Wal:
    """The log of one shard. Not thread-safe; the shard's loop is its only user."""

    def __init__(
        self,
        directory: str,
        segment_bytes: int,
        fsync_ms: int | None,
        allocate: Callable[[int, int, int], None] = os.posix_fallocate,
        sync: Callable[[int], None] = os.fsync,
    ) -> None:
        self.dir = directory
        self.segment_bytes = max(segment_bytes, len(HEADER) + HEADROOM * 2)
        self.fsync_ms = fsync_ms  # None: never; 0: before every reply; else at most every ms
        self.allocate = allocate  # seams for tests: disk full, failing fsync
        self.sync = sync
        os.makedirs(directory, exist_ok=True)
        self.segments: dict[int, int] = {}  # index -> bytes used
        self.fd = -1
        self.index = 0
        self.offset = 0
        self.dirty = False
        self.last_sync = 0.0
        self.records_written = 0
        self.bytes_written = 0  #: appended since start (the metrics endpoint's counter)
        self.records_migrated = 0
        self.damaged = 0
        self.full = False  # the last put found no room: puts are refused until one fits
        self.admitted = 0  # bytes promised to puts of this turn, not yet appended
        self.allocated = 0  # bytes of the current segment preallocated (its file's size)
        self.compact_after = 0.0  # monotonic s: no compaction before (one found no room)
        self.compact_failures = 0  #: in a row
        self.compacting: ForkedWrite | None = None  #: a compaction under way, in a child
        self.compacting_at = 0  #: the index its segment takes
        self.compacting_jobs = 0  #: how many jobs it writes

    # ---------------------------------------------------------------- start-up
    def replay(self) -> Iterator[list[Any]]:
        """Every record of every segment, oldest first; then a fresh segment is opened."""
        names = os.listdir(self.dir)
        for name in names:
            if name.endswith(".wal" + NEW):  # a compaction a crash or a stop cut short
                os.unlink(os.path.join(self.dir, name))
        indexes = sorted(int(n[:-4]) for n in names if n.endswith(".wal"))
        for index in indexes:
            path = self._path(index)
            with open(path, "rb") as f:
                data = f.read()
            if not data.startswith(HEADER[:6]):
                logger.warning(
                    "wal: %s: not a shardq log of version %d; skipped", path, WAL_VERSION
                )
                self.damaged += 1
                self.segments[index] = len(data)
                continue
            records, end, damaged, torn = decode_segment(data)
            self.damaged += damaged
            if damaged:
                logger.warning("wal: %s: %d damaged record(s) skipped", path, damaged)
            if torn and index == indexes[-1]:
                logger.warning("wal: %s: torn last record cut off at byte %d", path, end)
            elif torn:
                self.damaged += 1
                logger.warning("wal: %s: damaged tail skipped at byte %d", path, end)
            self.segments[index] = end
            yield from records
        self.index = max(indexes, default=0)

    def start(self) -> None:
        """Open a new segment to write to (never append to a segment a crash may have torn)."""
        self._open_segment()

    # ---------------------------------------------------------------- writing
    def _path(self, index: int) -> str:
        return os.path.join(self.dir, f"{index}.wal")

    def _new_segment(self, size: int) -> tuple[int, int]:
        """The next segment's file, `size` bytes preallocated and its header written:
        (fd, index). OSError (no room, a failing disk): no file is left behind."""
        index = self.index + 1
        path = self._path(index)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.allocate(fd, 0, size)
            os.pwrite(fd, HEADER, 0)
        except OSError:
            os.close(fd)
            os.unlink(path)
            raise
        return fd, index

    def _open_segment(self, room: int = 0) -> None:
        """Go on in a new segment with `room` bytes (and the headroom) preallocated; the
        current one is synced, cut to what it holds and closed. OSError: nothing changed."""
        size = len(HEADER) + room + HEADROOM
        fd, index = self._new_segment(size)
        if self.fd >= 0:
            try:
                self._sync_now()
            except OSError:
                os.close(fd)
                os.unlink(self._path(index))
                raise
            with contextlib.suppress(OSError):  # its unused preallocation is free space again
                os.ftruncate(self.fd, self.offset)
            os.close(self.fd)
        self.fd, self.index, self.offset, self.allocated = fd, index, len(HEADER), size
        self.segments[index] = self.offset
        self._sync_dir()

    def _grow(self, end: int) -> None:
        """Preallocate the current segment up to `end` at least: GROW_BYTES more (within
        the segment size) where that much is free, else just to `end`. OSError: no room."""
        start = self.allocated
        target = max(end, min(start + GROW_BYTES, self.segment_bytes))
        try:
            self.allocate(self.fd, start, target - start)
        except OSError:
            if target == end:
                raise
            self.allocate(self.fd, start, end - start)  # the last bytes of a nearly full disk
            target = end
        self.allocated = target

    def admit(self, nbytes: int) -> bool:
        """May a put of about this many bytes be taken? (False: answer OUT_OF_MEMORY.)

        Puts of one turn are appended together at its end, so each admitted put reserves its
        room until then: the bytes of the turn's records plus HEADROOM are preallocated
        before the put is taken, and a batch never runs past them.
        """
        need = nbytes + REC_HEAD.size + 64
        end = self.offset + self.admitted + need + HEADROOM
        try:
            if end > self.segment_bytes:
                # Nothing of this turn is written yet (it is appended at the turn's end), so
                # the whole turn can move to a new segment, made now while a put can still
                # be refused.
                if len(HEADER) + self.admitted + need + HEADROOM > self.segment_bytes:
                    return False  # more than a segment holds in one turn: the client retries
                self._open_segment(self.admitted + need)
            elif end > self.allocated:
                self._grow(end)
        except OSError as e:
            if not self.full:
                logger.error("wal: %s: no room for a put (%s); refusing puts", self.dir, e.strerror)
            self.full = True
            return False
        if self.full:
            logger.warning("wal: %s: room again; taking puts", self.dir)
            self.full = False
        self.admitted += need
        return True

    def append(self, records: Sequence[Sequence[Any]]) -> None:
        """Write a batch of records with one write (group commit; IOV_MAX frames a call,
        never joined: a turn's puts are held once, not twice); sync per policy later.
        OSError: not written (no room even past the headroom, or a failing disk)."""
        parts = frames(records)
        size = sum(map(len, parts))
        self.admitted = 0
        if self.offset + size > self.segment_bytes:
            with contextlib.suppress(OSError):  # else: this segment grows past its size
                self._open_segment(size)
        self._write(parts, size)
        self.records_written += len(records)

    def _write(self, parts: list[bytes], size: int) -> None:
        """Append the frames (`size` bytes in all) to the current segment, preallocating
        what it lacks first."""
        end = self.offset + size
        if end > self.allocated:
            self._grow(end)
        offset = self.offset
        for start in range(0, len(parts), IOV_MAX):
            offset += os.pwritev(self.fd, parts[start : start + IOV_MAX], offset)
        if offset != end:
            raise OSError(errno.ENOSPC, f"{offset - self.offset} of {size} bytes written")
        self.offset = end
        self.segments[self.index] = end
        self.bytes_written += size
        self.dirty = True

    def sync_due(self, now: float) -> float | None:
        """When the unsynced tail must be synced (None: nothing to do or never)."""
        if not self.dirty or self.fsync_ms is None:
            return None
        return self.last_sync + self.fsync_ms / 1000

    def maybe_sync(self, now: float) -> None:
        due = self.sync_due(now)
        if due is not None and now >= due:
            self._sync_now()
            self.last_sync = now

    def _sync_now(self) -> None:
        if self.dirty and self.fd >= 0:
            self.sync(self.fd)
            self.dirty = False

    def _sync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # ---------------------------------------------------------------- compaction
    def _compaction_failed(self) -> None:
        """No compaction for COMPACT_RETRY_S, doubled for each failure in a row: a disk that
        stays full, or a child the kernel kills for its memory, is not tried every second."""
        wait = min(COMPACT_RETRY_S * 2**self.compact_failures, COMPACT_RETRY_MAX_S)
        self.compact_failures += 1
        self.compact_after = time.monotonic() + wait

    def needs_compaction(self, live_bytes: int) -> bool:
        if self.compacting is not None:
            return False
        used = sum(self.segments.values())
        if len(self.segments) < 2 or used <= 2 * live_bytes + self.segment_bytes:
            return False
        return not self.compact_after or time.monotonic() >= self.compact_after

    def compact(self, snapshot: Sequence[Sequence[Any]]) -> None:
        """Rewrite the live jobs into a new segment, then drop every older one. OSError (no
        room for them, a failing disk): the new segment is removed, the log goes on where
        it was, and `needs_compaction` says no for COMPACT_RETRY_S."""
        old = list(self.segments)  # every segment there is (none yet: a log that never started)
        before = (self.fd, self.index, self.offset, self.allocated, self.dirty)
        self.allocated = len(HEADER) + HEADROOM
        self.fd, self.index = self._new_segment(self.allocated)
        self.offset = self.segments[self.index] = len(HEADER)
        try:
            for parts in chunks(snapshot, False):
                self._write(parts, sum(map(len, parts)))
            self.sync(self.fd)
        except OSError:
            os.close(self.fd)
            os.unlink(self._path(self.index))
            del self.segments[self.index]
            self.fd, self.index, self.offset, self.allocated, self.dirty = before
            self._compaction_failed()
            raise
        self.dirty, self.compact_after, self.compact_failures = False, 0.0, 0
        self.last_sync = time.monotonic()
        self.records_migrated += len(snapshot)
        if before[0] >= 0:
            os.close(before[0])  # dropped below: the snapshot holds what it held
        for index in old:
            os.unlink(self._path(index))
            del self.segments[index]
        self._sync_dir()

    def start_compaction(self, snapshot: Callable[[], Sequence[Sequence[Any]]], jobs: int) -> None:
        """Compact without a stall (storage/forked_write.py): the next index is kept for the
        snapshot and writing goes on in a new segment after it, while a forked child writes
        `snapshot()` (its `jobs` live jobs, as they are now) into the kept one;
        `poll_compaction` puts it in place once synced, and drops every older segment. A
        crash at any point replays the same jobs: the segments before the snapshot then
        those after it, or the snapshot then those after it. OSError (no room for a new
        segment, no fork): nothing is under way, and `needs_compaction` says no for
        COMPACT_RETRY_S."""
        kept = self.index + 1
        self.index = kept
        try:
            self._open_segment()
            self.compacting = ForkedWrite(self._path(kept) + NEW, lambda: chunks(snapshot()))
        except OSError:
            if self.index == kept:  # no segment was opened after it
                self.index = kept - 1
            self._compaction_failed()
            raise
        self.compacting_at, self.compacting_jobs = kept, jobs

    def poll_compaction(self) -> bool | None:
        """The compaction under way, if it is done: its segment in place and the older ones
        dropped (True), or it failed (False: tried again after COMPACT_RETRY_S). None: none
        is done. OSError: the rename or the drop failed (the log replays all the same)."""
        writer = self.compacting
        done = None if writer is None else writer.poll()
        if writer is None or done is None:
            return None
        self.compacting = None
        if not done:
            self._compaction_failed()
            return False
        kept = self.compacting_at
        path = self._path(kept)
        os.rename(writer.path, path)
        self.segments[kept] = os.stat(path).st_size
        self._sync_dir()  # in place before anything older goes
        for index in [i for i in self.segments if i < kept]:
            os.unlink(self._path(index))
            del self.segments[index]
        self._sync_dir()
        self.records_migrated += self.compacting_jobs
        self.compact_failures = 0
        return True

    def stop_compaction(self) -> None:
        """Stop a compaction under way (its file is removed; the log is as it was)."""
        if self.compacting is not None:
            self.compacting.abandon()
            self.compacting = None

    def rewrite(self, snapshot: Sequence[Sequence[Any]]) -> None:
        """After a write or sync error: leave the current segment as it is (its tail may be
        torn or unsynced: a failed fsync may have dropped its dirty pages), write `snapshot`
        (every live job) to a new segment, sync it and the directory, then drop every older
        segment. OSError: nothing is dropped; try again later."""
        self.stop_compaction()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        self.dirty = False
        self.admitted = 0
        self.compact_after = 0.0  # the caller keeps its own pace
        self.compact(snapshot)

    def stats(self) -> dict[str, int]:
        """The binlog-* fields of `stats` (the damaged count only when there was damage)."""
        values = (
            min(self.segments, default=0),  # oldest index
            self.index,  # current index
            self.records_migrated,
            self.records_written,
        )
        fields = dict(zip(BINLOG_KEYS, values, strict=True))
        if self.damaged:
            fields[BINLOG_DAMAGED_KEY] = self.damaged
        return fields

    def figures(self) -> dict[str, int]:
        """The log's bytes for the metrics endpoint: appended since start, and on disk now."""
        return {
            "wal_bytes_written": self.bytes_written,
            "wal_disk_bytes": sum(self.segments.values()),
        }

    def close(self) -> None:
        self.stop_compaction()
        if self.fd >= 0:
            self._sync_now()
            size = self.offset
            os.ftruncate(self.fd, size)  # a cleanly closed segment is cut to its used length
            os.close(self.fd)
            self.fd = -1
