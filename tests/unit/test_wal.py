"""Unit tests of the per-shard write-ahead log (shardq/wal.py) and of the engine's records.

No sockets, no sleeps: every test works on files under tmp_path, with the log's
`allocate` and `sync` seams replaced where a disk fault is wanted, and drives an
`Engine` with a fake clock where jobs are involved (as the shard does: the engine's
`wal_out` goes to `Wal.append`, and `needs_compaction` / `compact(snapshot())` after).
"""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path
from typing import Any

import pytest

from shardq.engine.engine import RESERVED, Engine
from shardq.engine.job import NS, State
from shardq.storage import wal as walmod
from shardq.storage.wal import HEADER, HEADROOM, REC_HEAD, Wal, decode_segment, encode

T0 = 1_000 * NS  #: the fake monotonic clock's start
WALL0 = 1_700_000_000 * NS  #: wall clock minus monotonic clock in the first "process"
SEG = len(HEADER) + 2 * HEADROOM  #: the smallest segment the log accepts


def no_sync(_fd: int) -> None:
    """fsync stand-in: the tests do not need the data on the platter."""


def make_wal(path: Path, segment: int = SEG, fsync_ms: int | None = 0, **kw: Any) -> Wal:
    kw.setdefault("sync", no_sync)
    return Wal(str(path), segment, fsync_ms, **kw)


def replay_all(path: Path, segment: int = SEG) -> tuple[list[list[Any]], Wal]:
    w = make_wal(path, segment)
    return list(w.replay()), w


def J(job_id: int, body: bytes = b"body") -> list[Any]:
    """A whole-job record as Engine.full_record makes it (ready, no deadline)."""
    head = ["J", job_id, job_id, "default", 100, 0, NS, WALL0, int(State.READY), 0]
    return [*head, 0, 0, 0, 0, 0, body]


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.wal"), key=lambda p: int(p.stem))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


# --------------------------------------------------------------------------- format


def test_encode_decode_round_trip() -> None:
    records = [J(1, b"hello"), ["S", 1, int(State.BURIED), 5, 0, 0, 1, 0, 0, 1, 0], ["D", 1]]
    records.append(J(2, bytes(range(256)) * 4))  # binary body, every byte value
    data = HEADER + b"".join(encode(r) for r in records)
    got, end, damaged, torn = decode_segment(data)
    assert got == records
    assert end == len(data)
    assert (damaged, torn) == (0, False)
    # the preallocated zero tail stops reading without being "damage"
    assert decode_segment(data + bytes(4096)) == (records, len(data), 0, False)


def test_record_carries_a_crc_of_its_payload() -> None:
    raw = encode(J(7))
    magic, size, crc = REC_HEAD.unpack_from(raw, 0)
    assert magic == walmod.MAGIC
    assert size == len(raw) - REC_HEAD.size
    import zlib

    assert crc == zlib.crc32(raw[REC_HEAD.size :])


def test_header_has_a_version() -> None:
    assert HEADER.startswith(b"SQWAL")
    assert HEADER[5] == walmod.WAL_VERSION


# --------------------------------------------------------------------------- replay


def test_replay_across_segments_in_order(tmp_path: Path) -> None:
    w = make_wal(tmp_path)
    w.start()
    body = b"x" * 4000
    written: list[list[Any]] = []
    for i in range(1, 200):  # ~800 KB: several segments of 128 KB
        assert w.admit(len(body))
        rec = J(i, body)
        w.append([rec])
        written.append(rec)
        if i % 3 == 0:
            w.append([["D", i]])
            written.append(["D", i])
    w.close()
    assert len(segment_files(tmp_path)) > 3
    got, w2 = replay_all(tmp_path)
    assert got == written
    assert w2.damaged == 0


def test_replay_then_start_never_appends_to_an_old_segment(tmp_path: Path) -> None:
    w = make_wal(tmp_path)
    w.start()
    w.append([J(1)])
    w.close()
    before = (tmp_path / "1.wal").read_bytes()
    w2 = make_wal(tmp_path)
    assert list(w2.replay()) == [J(1)]
    w2.start()
    w2.append([J(2)])
    w2.close()
    assert (tmp_path / "1.wal").read_bytes() == before
    got, _ = replay_all(tmp_path)
    assert got == [J(1), J(2)]


def _write_segment(path: Path, records: list[list[Any]], tail: bytes = b"") -> bytes:
    data = HEADER + b"".join(encode(r) for r in records) + tail
    path.write_bytes(data)
    return data


def test_torn_last_record_is_cut_off(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    records = [J(1), J(2), ["D", 1], J(3, b"the torn one" * 10)]
    data = _write_segment(tmp_path / "1.wal", records)
    cut = len(data) - 17  # in the middle of the last record's payload
    (tmp_path / "1.wal").write_bytes(data[:cut])
    got, w = replay_all(tmp_path)
    assert got == records[:3]
    assert w.damaged == 0  # a torn tail is the normal end of a crash, not damage
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "cut off" in ln]) == 1, err
    # and the log is usable afterwards: new records land in a new segment
    w.start()
    w.append([J(4)])
    w.close()
    got, _ = replay_all(tmp_path)
    assert got == records[:3] + [J(4)]


def test_torn_record_header_only(tmp_path: Path) -> None:
    data = _write_segment(tmp_path / "1.wal", [J(1), J(2)])
    (tmp_path / "1.wal").write_bytes(data + encode(J(3))[:5])  # half a record head
    got, w = replay_all(tmp_path)
    assert got == [J(1), J(2)]
    assert w.damaged == 0


def test_torn_record_followed_by_preallocated_zeros(tmp_path: Path) -> None:
    rec = encode(J(3, b"z" * 500))
    data = _write_segment(tmp_path / "1.wal", [J(1)])
    (tmp_path / "1.wal").write_bytes(data + rec[:200] + bytes(SEG - len(data) - 200))
    got, w = replay_all(tmp_path)
    assert got == [J(1)]
    assert w.damaged == 0


def test_corrupted_record_in_the_middle_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    records = [J(1), J(2, b"damaged body"), J(3), ["D", 1], J(4)]
    data = bytearray(_write_segment(tmp_path / "1.wal", records, tail=bytes(1000)))
    off = len(HEADER) + len(encode(records[0]))
    data[off + REC_HEAD.size + 3] ^= 0x40  # flip a bit in record 2's payload
    (tmp_path / "1.wal").write_bytes(bytes(data))
    got, w = replay_all(tmp_path)
    assert got == [records[0], *records[2:]]
    assert w.damaged == 1
    assert "damaged" in capsys.readouterr().err


def test_corrupted_record_in_an_older_segment_later_segments_survive(tmp_path: Path) -> None:
    data = bytearray(_write_segment(tmp_path / "1.wal", [J(1), J(2), J(3)]))
    data[len(HEADER) + 1] ^= 0xFF  # the first record's magic
    (tmp_path / "1.wal").write_bytes(bytes(data))
    _write_segment(tmp_path / "2.wal", [J(4), ["D", 2]])
    got, w = replay_all(tmp_path)
    assert got == [J(2), J(3), J(4), ["D", 2]]
    assert w.damaged == 1


def test_damaged_record_with_magic_in_payload_does_not_hide_later_records(
    tmp_path: Path,
) -> None:
    """Bodies are binary: a damaged record may contain the magic bytes. BUG B1."""
    records = [J(1, b"x"), J(2, b"ab\xa5\x5azz"), J(3, b"ok"), ["D", 1]]
    data = bytearray(_write_segment(tmp_path / "1.wal", records))
    off = len(HEADER) + len(encode(records[0]))
    data[off + 6] ^= 0xFF  # record 2's crc
    (tmp_path / "1.wal").write_bytes(bytes(data))
    got, w = replay_all(tmp_path)
    assert got == [records[0], records[2], records[3]]
    assert w.damaged == 1


def test_file_with_bad_header_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _write_segment(tmp_path / "1.wal", [J(1)])
    bad = bytearray(_write_segment(tmp_path / "2.wal", [J(2)]))
    bad[0:5] = b"NOPE!"
    (tmp_path / "2.wal").write_bytes(bytes(bad))
    future = bytearray(_write_segment(tmp_path / "3.wal", [J(3)]))
    future[5] = walmod.WAL_VERSION + 1  # a version this reader does not know
    (tmp_path / "3.wal").write_bytes(bytes(future))
    _write_segment(tmp_path / "4.wal", [J(4)])
    got, w = replay_all(tmp_path)
    assert got == [J(1), J(4)]
    assert w.damaged == 2
    assert capsys.readouterr().err.count("skipped") >= 2
    w.start()  # never overwrites a segment it skipped
    assert w.index == 5


def test_garbage_file_does_not_stop_start_up(tmp_path: Path) -> None:
    (tmp_path / "1.wal").write_bytes(os.urandom(5000))
    _write_segment(tmp_path / "2.wal", [J(9)])
    got, w = replay_all(tmp_path)
    assert got == [J(9)]
    assert w.damaged == 1


# --------------------------------------------------------------------------- disk faults


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


# --------------------------------------------------------------------------- engine + log


class Shard:
    """An Engine and a Wal wired as shard.py wires them, with a fake clock."""

    def __init__(self, path: Path, segment: int = SEG, mono0: int = T0, wall: int = WALL0):
        self.path = path
        self.now = mono0
        self.wal = make_wal(path, segment)
        self.e = Engine()
        self.e.wall_offset = wall
        self.e.restore(self.wal.replay(), self.now)
        self.wal.start()
        self.e.wal_out = []
        self.next_id = 1 + max(self.e.jobs, default=0)
        self.compactions = 0
        self.refused = 0

    def commit(self) -> None:
        if self.e.wal_out:
            self.wal.append(self.e.wal_out)
            self.e.wal_out.clear()
        self.wal.maybe_sync(1e12)
        if self.wal.needs_compaction(self.e.live_bytes):
            self.wal.compact(self.e.snapshot())
            self.compactions += 1

    def put(self, body: bytes, tube: str = "default", pri: int = 100, delay: int = 0) -> int:
        if not self.wal.admit(len(body)):
            self.refused += 1
            return 0
        job_id = self.next_id
        self.next_id += 1
        self.e.put(job_id, job_id, tube, pri, delay, 60, body, self.now)
        self.commit()
        return job_id

    def reserve(self, conn: int = 1, tubes: tuple[str, ...] = ("default",)) -> int:
        got = self.e.reserve(conn, 0, tubes, self.now, self.now, None)
        assert got is not None and got[0] == RESERVED, got
        self.commit()
        return got[2]

    def do(self, method: str, *args: Any) -> Any:
        out = getattr(self.e, method)(*args, self.now)
        self.commit()
        return out

    def close(self) -> None:
        self.wal.close()


def stats_job(e: Engine, job_id: int, now: int) -> dict[str, str]:
    raw = e.stats_job(job_id, now)
    assert raw.startswith(b"OK "), raw
    lines = raw.split(b"\r\n")[1].decode().splitlines()[1:]
    return {k.strip(): v.strip().strip('"') for k, v in (ln.split(":", 1) for ln in lines if ln)}


def restart(old: Shard, wall_elapsed_s: int = 3) -> Shard:
    """A new process: another monotonic clock, the wall clock `wall_elapsed_s` later."""
    old.close()
    wall_now = old.now + old.e.wall_offset + wall_elapsed_s * NS
    mono = 77_000 * NS  # the new process's monotonic clock (say, after a reboot)
    return Shard(old.path, old.wal.segment_bytes, mono0=mono, wall=wall_now - mono)


def test_restore_reproduces_jobs(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    ready = s.put(b"ready", pri=7)
    delayed = s.put(b"delayed", delay=10)
    b1, b2, b3 = s.put(b"b1"), s.put(b"b2"), s.put(b"b3")
    released = s.put(b"released", pri=50)
    reserved = s.put(b"reserved", pri=60)
    gone = s.put(b"deleted", pri=1)
    kicked = s.put(b"kicked", pri=70)
    s.do("delete", 1, gone)
    # bury b2, b3, b1 in that order (not id order); b1 was buried twice
    for job_id in (b1,):
        s.e.reserve_job(1, job_id, s.now)
        s.do("bury", 1, job_id, 9)
        s.do("kick_job", job_id)
    for job_id in (b2, b3, b1, kicked):
        s.e.reserve_job(1, job_id, s.now)
        s.do("bury", 1, job_id, 9)
    s.do("kick_job", kicked)
    s.e.reserve_job(1, released, s.now)
    s.do("release", 1, released, 3, 0)  # new priority 3
    s.e.reserve_job(1, reserved, s.now)
    s.commit()
    s.now += 2 * NS
    before = {j: stats_job(s.e, j, s.now) for j in s.e.jobs}

    r = restart(s, wall_elapsed_s=3)  # 5 s of the 10 s delay are over
    assert gone not in r.e.jobs
    assert set(r.e.jobs) == {ready, delayed, b1, b2, b3, released, reserved, kicked}
    after = {j: stats_job(r.e, j, r.now) for j in r.e.jobs}
    for job_id in (ready, b1, b2, b3, released, kicked):
        for key in ("state", "pri", "reserves", "timeouts", "releases", "buries", "kicks", "tube"):
            assert after[job_id][key] == before[job_id][key], (job_id, key)
    assert after[reserved]["state"] == "ready"  # a reserved job comes back ready
    assert after[reserved]["pri"] == "60"
    assert after[released]["pri"] == "3" and after[released]["state"] == "ready"
    assert after[released]["releases"] == "1"
    assert after[kicked]["state"] == "ready" and after[kicked]["kicks"] == "1"
    assert after[b1]["buries"] == "2" and after[b1]["kicks"] == "1"
    assert after[delayed]["state"] == "delayed"
    assert after[delayed]["time-left"] == "5"  # absolute due time, via the wall clock
    # the job's age continues too (created on the wall clock)
    assert int(after[ready]["age"]) == int(before[ready]["age"]) + 3
    # buried: bury order kept (peek-buried, then kick one at a time)
    order = []
    for _ in range(3):
        head = r.e.peek_buried("default")
        order.append(int(head.split()[1]))
        r.do("kick", "default", 1)
    assert order == [b2, b3, b1]
    # the delayed job becomes ready when its (absolute) time comes
    r.now += 4 * NS
    r.e.tick(r.now)
    assert stats_job(r.e, delayed, r.now)["state"] == "delayed"
    r.now += 2 * NS
    r.e.tick(r.now)
    assert stats_job(r.e, delayed, r.now)["state"] == "ready"


def test_restore_delay_over_while_down_comes_back_ready(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    j = s.put(b"d", delay=5)
    r = restart(s, wall_elapsed_s=30)
    assert stats_job(r.e, j, r.now)["state"] == "ready"
    assert r.reserve() == j


def test_restore_release_with_delay_keeps_priority_and_due_time(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    j = s.put(b"r", pri=500)
    s.e.reserve_job(1, j, s.now)
    s.do("release", 1, j, 2, 20)
    r = restart(s, wall_elapsed_s=5)
    st = stats_job(r.e, j, r.now)
    assert (st["state"], st["pri"], st["time-left"], st["releases"]) == ("delayed", "2", "15", "1")


def test_restore_survives_compaction(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    keep = s.put(b"keep", pri=11)
    bur = [s.put(b"bur%d" % i) for i in range(3)]
    for j in reversed(bur):
        s.e.reserve_job(1, j, s.now)
        s.do("bury", 1, j, 1)
    s.wal.compact(s.e.snapshot())
    r = restart(s)
    assert set(r.e.jobs) == {keep, *bur}
    order = []
    for _ in range(3):
        order.append(int(r.e.peek_buried("default").split()[1]))
        r.do("kick", "default", 1)
    assert order == list(reversed(bur))


def test_compaction_keeps_live_records_and_removes_old_segments(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    body = b"y" * 3000
    live = [s.put(body) for _ in range(5)]
    for _ in range(150):  # ~450 KB of churn: several segments
        j = s.put(body)
        s.do("delete", 1, j)
    assert s.compactions >= 1
    first = s.wal.index
    s.wal.compact(s.e.snapshot())
    assert [p.name for p in segment_files(tmp_path)] == [f"{first + 1}.wal"]
    assert s.wal.stats()["binlog-oldest-index"] == first + 1
    assert s.wal.stats()["binlog-records-migrated"] > 0
    r = restart(s)
    assert sorted(r.e.jobs) == sorted(live)
    assert all(r.e.jobs[j].body == body for j in live)


def test_disk_use_stays_bounded_during_long_churn(tmp_path: Path) -> None:
    """Millions come and go around a few jobs that live forever (one buried, one delayed)."""
    rng = random.Random(3)
    seg = 8 * HEADROOM  # (with the smallest segment, the headroom is half of every segment)
    s = Shard(tmp_path, segment=seg)
    forever = [s.put(b"forever-%d" % i + b"." * 500) for i in range(8)]
    s.e.reserve_job(1, forever[0], s.now)
    s.do("bury", 1, forever[0], 0)
    s.put(b"far future", delay=10**6)
    window: list[int] = []
    peak = 0
    for n in range(20_000):
        if len(window) < 50 and rng.random() < 0.55 or not window:
            j = s.put(b"c%d-" % n + b"w" * rng.randint(50, 800))
            if j:
                window.append(j)
        else:
            s.do("delete", 1, window.pop(rng.randrange(len(window))))
        if n % 50 == 0:
            used = disk_bytes(tmp_path)
            bound = 2 * s.e.live_bytes + 2 * s.wal.segment_bytes + HEADROOM
            peak = max(peak, used)
            assert used <= bound, (n, used, bound, len(list(tmp_path.iterdir())))
    assert s.refused == 0
    assert s.compactions >= 5
    assert s.wal.stats()["binlog-records-written"] > 20_000 // 2
    live = set(s.e.jobs)
    r = restart(s)
    assert set(r.e.jobs) == live
    assert r.e.jobs[forever[0]].state == State.BURIED
    assert peak <= 2 * seg + 2 * 100_000


def test_put_after_replay_and_the_log_is_reused(tmp_path: Path) -> None:
    s = Shard(tmp_path)
    a = s.put(b"a")
    r = restart(s)
    b = r.put(b"b")
    r2 = restart(r)
    assert sorted(r2.e.jobs) == [a, b]


def test_resent_put_of_a_replayed_job_is_not_duplicated(tmp_path: Path) -> None:
    """The acceptor resends what a restarted shard never answered, a put included.

    If the shard logged the put and died before replying, the resent put arrives for a
    job the replay already rebuilt. It must not make a second copy of the job (two
    ready entries, two deliveries, a live_bytes that never comes down).
    """
    s = Shard(tmp_path)
    j = s.put(b"once")
    r = restart(s)
    r.e.put(j, j, "default", 100, 0, 60, b"once", r.now)  # the resent request
    r.commit()
    first = r.reserve(conn=1)
    assert first == j
    again = r.e.reserve(2, 0, ("default",), r.now, r.now, None)
    assert again is not None and again[0] != RESERVED, "the job was handed out twice"


def test_damaged_records_are_reported_in_stats(tmp_path: Path) -> None:
    """The issue: a damaged record is skipped and counted, in a log line *and a stats field*.
    BUG B3: Wal.stats() has no such field (only binlog-* indexes and record counts)."""
    records = [J(1), J(2), J(3)]
    data = bytearray(_write_segment(tmp_path / "1.wal", records))
    data[len(HEADER) + REC_HEAD.size + 2] ^= 0x01  # record 1's payload
    (tmp_path / "1.wal").write_bytes(bytes(data))
    _, w = replay_all(tmp_path)
    assert w.damaged == 1
    stats = w.stats()
    counted = {k: v for k, v in stats.items() if "damaged" in k or "skipped" in k}
    assert list(counted.values()) == [1], stats
