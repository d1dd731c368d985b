"""Unit tests of the write-ahead log under disk faults: a full disk (the
preallocation and `admit`) and failing or policy-driven syncs.

No sockets, no sleeps: every test works on files under tmp_path (helpers in
wal_helpers.py), with the log's `allocate` and `sync` seams replaced where a disk
fault is wanted.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from wal_helpers import J, make_wal, replay_all, segment_files

from shardq.storage.wal import HEADROOM, REC_HEAD, Wal


class FlakyAllocate:
    """posix_fallocate stand-in that fails with ENOSPC while `full` is set."""

    def __init__(self) -> None:
        self.full = False
        self.calls = 0

    def __call__(self, fd: int, offset: int, length: int) -> None:
        self.calls += 1
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.posix_fallocate(fd, offset, length)


def _fill_segment(w: Wal) -> None:
    """Append until the current segment has no room for a 1000-byte put."""
    while w.offset + 1000 + REC_HEAD.size + 64 + HEADROOM <= w.segment_bytes:
        w.append([J(1, b"f" * 2000)])


def test_admit_refuses_when_allocation_fails_and_recovers(tmp_path: Path) -> None:
    alloc = FlakyAllocate()
    w = make_wal(tmp_path, allocate=alloc)
    w.start()
    assert w.admit(1000)
    _fill_segment(w)
    alloc.full = True
    assert not w.admit(1000)
    assert w.full
    assert not w.admit(1000)  # still full: still refused, no exception
    assert [p.name for p in segment_files(tmp_path)] == ["1.wal"]  # no half-made segment
    # deletes and state changes still fit in the headroom
    w.append([["D", 1]] * 100)
    alloc.full = False
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
    alloc = FlakyAllocate()
    w = make_wal(tmp_path, allocate=alloc)
    w.start()
    alloc.full = True  # the disk fills up after the segment was made
    batch = []
    for i in range(200):  # one turn of 200 pipelined 1000-byte puts
        if w.admit(1000):
            batch.append(J(i + 1, b"p" * 1000))
    w.append(batch)
    assert w.offset <= w.segment_bytes, (
        f"{len(batch)} puts admitted, {w.offset} bytes written into a segment "
        f"preallocated to {w.segment_bytes}"
    )


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
