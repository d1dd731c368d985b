"""Unit tests of the write-ahead log under disk faults: a full disk (the
preallocation as a segment grows, `admit`, compaction without room) and failing or
policy-driven syncs.

No sockets, no sleeps: every test works on files under tmp_path (helpers in
wal_helpers.py), with the log's `allocate` and `sync` seams replaced where a disk
fault is wanted.
"""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import pytest
from wal_helpers import J, make_wal, replay_all, segment_files

from shardq.storage.segment_format import HEADER, REC_HEAD
from shardq.storage.wal import GROW_BYTES, HEADROOM, Wal


class Disk:
    """posix_fallocate stand-in for a disk with `free` bytes left: what a file grows by is
    taken from them, ENOSPC when it does not fit (space a file gives back is not counted)."""

    def __init__(self, free: float = math.inf) -> None:
        self.free = free

    def __call__(self, fd: int, offset: int, length: int) -> None:
        grows = max(0, offset + length - os.fstat(fd).st_size)
        if grows > self.free:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.posix_fallocate(fd, offset, length)
        self.free -= grows


def _fill_segment(w: Wal) -> None:
    """Append until the current segment has no room for a 1000-byte put."""
    while w.offset + 1000 + REC_HEAD.size + 64 + HEADROOM <= w.segment_bytes:
        assert w.admit(1000)
        w.append([J(1, b"f" * 1000)])


def test_admit_refuses_when_allocation_fails_and_recovers(tmp_path: Path) -> None:
    disk = Disk()
    w = make_wal(tmp_path, allocate=disk)
    w.start()
    assert w.admit(1000)
    _fill_segment(w)
    disk.free = 0
    assert not w.admit(1000)
    assert w.full
    assert not w.admit(1000)  # still full: still refused, no exception
    assert [p.name for p in segment_files(tmp_path)] == ["1.wal"]  # no half-made segment
    # deletes and state changes still fit in the headroom
    w.append([["D", 1]] * 100)
    disk.free = math.inf
    assert w.admit(1000)
    assert not w.full
    assert w.index == 2
    w.append([J(2)])
    w.close()
    got, _ = replay_all(tmp_path)
    assert got[-1] == J(2)


def test_admitted_puts_of_one_turn_fit_the_preallocated_segment(tmp_path: Path) -> None:
    """The shard admits every put of a turn, then appends them in one write (group commit).

    Every admitted byte must land in preallocated space: with the disk full, a write past
    the preallocated end is exactly the mid-write ENOSPC the preallocation is there to
    avoid. BUG B2: `admit` does not count what was admitted but not yet appended.
    """
    disk = Disk()
    w = make_wal(tmp_path, allocate=disk)
    w.start()
    assert w.admit(1000)
    w.append([J(1, b"p" * 1000)])
    disk.free = 0  # the disk fills up after the segment was allocated
    batch = []
    for i in range(200):  # one turn of 200 pipelined 1000-byte puts
        if w.admit(1000):
            batch.append(J(i + 2, b"p" * 1000))
    assert batch
    w.append(batch)  # within what was preallocated: no allocation, so no ENOSPC
    assert w.offset <= w.allocated <= w.segment_bytes, (
        f"{len(batch)} puts admitted, {w.offset} bytes written into a segment "
        f"preallocated to {w.allocated}"
    )


def test_a_segment_is_preallocated_as_it_fills_and_cut_when_done(tmp_path: Path) -> None:
    """A segment takes only what it holds, plus the headroom and one step of growth: a
    shard needs no whole free segment (issue 22, item 12)."""
    w = make_wal(tmp_path, segment=4 << 20)
    w.start()
    first = segment_files(tmp_path)[0]
    assert first.stat().st_size == len(HEADER) + HEADROOM
    job = 0
    while w.index == 1:
        job += 1
        assert w.admit(10_000)
        w.append([J(job, b"b" * 10_000)])
        if w.index == 1:
            size = first.stat().st_size
            assert w.offset + HEADROOM <= size <= w.offset + HEADROOM + GROW_BYTES + 10_100
            assert size <= w.segment_bytes
    assert first.stat().st_size == w.segments[1]  # the closed one: cut to what it holds
    w.close()
    got, _ = replay_all(tmp_path)
    assert [r[1] for r in got] == list(range(1, job + 1))


def test_the_last_bytes_of_a_nearly_full_disk_are_used(tmp_path: Path) -> None:
    """Less than a growth step left: puts are taken until the next one does not fit."""
    disk = Disk(free=HEADROOM + GROW_BYTES // 3)
    w = make_wal(tmp_path, segment=4 << 20, allocate=disk)
    w.start()
    taken = 0
    while w.admit(1000):
        taken += 1
        w.append([J(taken, b"x" * 1000)])
    assert w.full
    assert taken * 1000 > GROW_BYTES // 3 - 20_000
    assert disk.free < 1000 + REC_HEAD.size + 64  # what it refused does not fit
    w.append([["D", j] for j in range(1, 100)])  # the headroom: deletes are still logged
    w.close()
    got, _ = replay_all(tmp_path)
    assert len(got) == taken + 99


def test_a_compaction_without_room_changes_nothing(tmp_path: Path) -> None:
    """A snapshot that does not fit leaves no segment behind; the log goes on as it was,
    and compaction is not tried again at once."""
    disk = Disk()
    w = make_wal(tmp_path, allocate=disk)
    w.start()
    for _ in range(2):
        _fill_segment(w)
        assert w.admit(1000)  # the next segment
        w.append([J(2, b"s" * 1000)])
    before = ([p.name for p in segment_files(tmp_path)], dict(w.segments), w.index, w.offset)
    snapshot = [J(j, b"live" * 500) for j in range(100, 200)]
    assert w.needs_compaction(0)
    disk.free = HEADROOM + 50_000  # room for part of the snapshot only
    with pytest.raises(OSError):
        w.compact(snapshot)
    assert ([p.name for p in segment_files(tmp_path)], w.segments, w.index, w.offset) == before
    assert not w.needs_compaction(0)  # not in every turn while there is no room
    w.append([["D", 2]])  # into the segment it was writing
    w.close()
    got, _ = replay_all(tmp_path)
    assert got[-2:] == [J(2, b"s" * 1000), ["D", 2]]


def test_failing_sync_raises(tmp_path: Path) -> None:
    def bad_sync(_fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    w = make_wal(tmp_path, sync=bad_sync)
    w.start()
    w.append([J(1)])
    with pytest.raises(OSError):
        w.maybe_sync(1e9)


def test_sync_policies(tmp_path: Path) -> None:
    calls: list[int] = []
    for fsync_ms, expect_due in ((0, 0.0), (50, 0.05), (None, None)):
        w = make_wal(tmp_path / str(fsync_ms), fsync_ms=fsync_ms, sync=calls.append)
        w.start()
        assert w.sync_due(0.0) is None  # nothing written, nothing due
        w.append([J(1)])
        assert w.sync_due(0.0) == expect_due
        calls.clear()
        w.maybe_sync(10.0)
        assert len(calls) == (0 if fsync_ms is None else 1)
        assert w.sync_due(10.0) is None or fsync_ms is None
