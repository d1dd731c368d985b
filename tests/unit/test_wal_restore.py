"""Unit tests of the engine and its write-ahead log together: restore after a
restart, compaction and disk use.

No sockets, no sleeps: every test works on files under tmp_path and drives an
`Engine` with a fake clock, as the shard does: the engine's `wal_out` goes to
`Wal.append`, and `needs_compaction` / `compact(snapshot())` after.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from wal_helpers import SEG, T0, WALL0, disk_bytes, make_wal, segment_files

from shardq.engine.engine import RESERVED, Engine
from shardq.engine.job import NS, State
from shardq.storage.wal import HEADROOM


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
            self.compact()
            self.compactions += 1

    def compact(self) -> None:
        self.wal.compact(self.e.snapshot())

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
    """The serving process resends what a restarted shard never answered, a put included.

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
