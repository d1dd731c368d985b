"""The shard's job timings (shardq/engine/timing.py): fixed-bucket histograms, wait = first
reserve − (put + delay), run = delete − last reserve of a job deleted while reserved, and
nothing kept when metrics are off."""

from __future__ import annotations

from engine_helpers import Q

from shardq.engine.job import NS
from shardq.engine.timing import JOB_BOUNDS_S, MAX_TUBES, OTHER_TUBE, Histogram, Timing
from shardq.protocol import proto

MS = NS // 1000


def timed() -> Q:
    q = Q()
    q.e.timing = Timing()
    return q


def counts(hist: Histogram) -> list[int]:
    return hist.snapshot()[0]


def test_a_value_on_a_bound_is_in_that_bucket_and_beyond_the_last_in_the_extra_one() -> None:
    hist = Histogram((0.001, 0.01))
    hist.observe(0)
    hist.observe(MS)  # exactly 1 ms: the "le 0.001" bucket
    hist.observe(MS + 1)
    hist.observe(10 * MS + 1)
    assert counts(hist) == [2, 1, 1]
    assert hist.snapshot()[1] == 0 + MS + MS + 1 + 10 * MS + 1


def test_wait_is_first_reserve_minus_put_and_delay_and_run_is_delete_minus_reserve() -> None:
    q = timed()
    job = q.put("a", delay=2)
    q.advance(2 * NS + 7 * MS)  # due after 2 s, reserved 7 ms later
    assert q.reserve_id(1, ("a",)) == job
    q.advance(40 * MS)
    assert q.e.delete(1, job, q.now) == proto.DELETED
    timing = q.e.timing
    assert timing is not None
    wait, run = timing.wait["a"].snapshot(), timing.run["a"].snapshot()
    assert wait[1] == 7 * MS and sum(wait[0]) == 1
    assert run[1] == 40 * MS and sum(run[0]) == 1
    assert wait[0][JOB_BOUNDS_S.index(0.01)] == 1  # 7 ms: ≤ 10 ms
    assert run[0][JOB_BOUNDS_S.index(0.05)] == 1  # 40 ms: ≤ 50 ms
    assert timing.touched == {}


def test_only_the_first_reserve_waits_and_the_last_reserve_runs() -> None:
    q = timed()
    job = q.put("a")
    q.advance(5 * MS)
    q.reserve_id(1, ("a",))
    q.advance(100 * MS)
    assert q.e.release(1, job, 0, 0, q.now) == proto.RELEASED
    q.advance(NS)
    q.reserve_id(2, ("a",))
    q.advance(3 * MS)
    q.e.delete(2, job, q.now)
    timing = q.e.timing
    assert timing is not None
    assert timing.wait["a"].snapshot() == [timing.wait["a"].counts, 5 * MS]
    assert sum(timing.wait["a"].counts) == 1
    assert timing.run["a"].total == 3 * MS and sum(timing.run["a"].counts) == 1


def test_a_touched_job_runs_from_its_reserve_not_its_touch() -> None:
    q = timed()
    job = q.put("a", ttr=10)
    q.reserve_id(1, ("a",))
    q.advance(5 * NS)
    assert q.e.touch(1, job, q.now)[0] == proto.TOUCHED
    q.advance(2 * NS)
    q.e.delete(1, job, q.now)
    timing = q.e.timing
    assert timing is not None
    assert timing.run["a"].total == 7 * NS
    assert timing.touched == {}


def test_a_touch_is_forgotten_with_its_reservation() -> None:
    q = timed()
    job = q.put("a", ttr=10)
    q.reserve_id(1, ("a",))
    q.advance(NS)
    q.e.touch(1, job, q.now)
    assert q.e.release(1, job, 0, 0, q.now) == proto.RELEASED
    timing = q.e.timing
    assert timing is not None and timing.touched == {}
    q.advance(NS)
    q.reserve_id(2, ("a",))
    q.e.touch(2, job, q.now)
    q.e.disconnect(2, q.now)  # its holder leaves: the job is ready, the touch still noted
    q.advance(NS)
    q.reserve_id(3, ("a",))  # a new reservation forgets it
    q.advance(3 * MS)
    q.e.delete(3, job, q.now)
    assert timing.run["a"].total == 3 * MS
    assert timing.touched == {}


def test_a_job_deleted_when_not_reserved_has_no_run_time() -> None:
    q = timed()
    buried = q.put("a")
    ready = q.put("a")
    q.reserve_id(1, ("a",))
    q.e.bury(1, buried, 0, q.now)
    q.e.delete(1, buried, q.now)
    q.e.delete(1, ready, q.now)
    timing = q.e.timing
    assert timing is not None
    assert "a" not in timing.run
    assert sum(timing.wait["a"].counts) == 1


def test_tubes_past_the_maximum_share_one_histogram() -> None:
    q = timed()
    for i in range(MAX_TUBES + 3):
        q.put(f"t{i}")
        q.reserve_id(1, (f"t{i}",))
    timing = q.e.timing
    assert timing is not None
    assert len(timing.wait) == MAX_TUBES + 1
    assert sum(timing.wait[OTHER_TUBE].counts) == 3


def test_without_timing_the_engine_keeps_nothing() -> None:
    q = Q()
    job = q.put("a")
    q.reserve_id(1, ("a",))
    q.e.delete(1, job, q.now)
    assert q.e.timing is None


def test_timed_sync_records_each_call() -> None:
    timing = Timing()
    ticks = iter([10, 10 + 300_000, 50, 50 + 2 * MS])
    synced: list[int] = []
    sync = timing.timed_sync(synced.append, ticks.__next__)
    sync(3)
    sync(4)
    assert synced == [3, 4]
    assert sum(timing.fsync.counts) == 2
    assert timing.fsync.total == 300_000 + 2 * MS


def test_snapshot_adds_what_the_shell_gives() -> None:
    timing = Timing()

    def wal_figures() -> dict[str, int]:
        return {"wal_bytes_written": 5, "wal_disk_bytes": 8}

    timing.extra = wal_figures
    snap = timing.snapshot()
    assert snap["wal_bytes_written"] == 5 and snap["wal_disk_bytes"] == 8
    assert snap["wait"] == {} and snap["run"] == {}


def test_tube_table_is_stats_tube_in_order() -> None:
    q = Q()
    q.put("a")
    q.put("a", delay=5)
    table = {row[0]: row for row in q.e.tube_table(q.now)}
    stats = q.stats_tube("a")
    assert [str(v) for v in table["a"]] == list(stats.values())
