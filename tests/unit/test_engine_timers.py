"""Engine unit tests: the TTR of reserved jobs, late ticks and the timer heap's bound.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from engine_helpers import Q, served

from shardq.engine.engine import FINAL, TIMERS_MIN_BOUND
from shardq.engine.job import NS
from shardq.engine.timers import FRESH_NS
from shardq.protocol import proto

# --------------------------------------------------------------------------- TTR


def test_ttr_runs_out_strictly_after_the_deadline(q: Q) -> None:
    job = q.put(ttr=2)
    q.reserve_id(1)
    deadline = q.now + 2 * NS
    q.to(deadline)
    assert q.state(job) == "reserved"
    q.to(deadline + 1)
    stats = q.stats_job(job)
    assert (stats["state"], stats["timeouts"], stats["reserves"]) == ("ready", "1", "1")
    assert q.e.counts()["job-timeouts"] == 1
    assert q.e.owned.as_dict() == {}
    assert q.e.release(1, job, 0, 0, q.now) == proto.NOT_FOUND


def test_a_timed_out_job_cannot_be_deleted_by_its_former_owner_while_another_holds_it(
    q: Q,
) -> None:
    job = q.put(ttr=1)
    q.reserve_id(1)
    q.advance(NS + 1)
    assert q.reserve_id(2) == job
    assert q.e.delete(1, job, q.now) == proto.NOT_FOUND
    assert q.e.touch(1, job, q.now)[0] == proto.NOT_FOUND
    assert q.e.delete(2, job, q.now) == proto.DELETED


def test_a_late_tick_times_out_every_overdue_job(q: Q) -> None:
    jobs = [q.put(ttr=t) for t in (1, 2, 3)]
    for _ in jobs:
        q.reserve_id(1)
    q.advance(100 * NS)
    assert [q.state(j) for j in jobs] == ["ready"] * 3
    assert q.e.counts()["job-timeouts"] == 3


def test_touch_repeatedly_keeps_the_job(q: Q) -> None:
    job = q.put(ttr=2)
    q.reserve_id(1)
    for _ in range(10):
        q.advance(NS)
        assert q.e.touch(1, job, q.now)[0] == proto.TOUCHED
    q.advance(2 * NS)
    assert q.state(job) == "reserved"
    q.advance(1)
    assert q.state(job) == "ready"


def test_a_late_tick_runs_timers_in_time_order(q: Q) -> None:
    job = q.put(delay=1)
    served_rid = q.rid()
    q.reserve(1, timeout=2, rid=served_rid)
    timed_out_rid = q.rid()
    q.reserve(2, ("other",), timeout=1, rid=timed_out_rid)
    q.put("other", delay=2)
    q.advance(10 * NS)  # one late tick: delay 1 s, timeout 1 s, timeout 2 s, delay 2 s
    events = q.events()
    assert served(events) == [(served_rid, job)]
    assert (timed_out_rid, [FINAL, proto.TIMED_OUT]) in events
    assert len(events) == 2


# --------------------------------------------------------------------------- timer heap


def test_timer_heap_stays_bounded_under_reserve_delete_churn(q: Q) -> None:
    """Every reserve sets a TTR timer that is not removed when the job is deleted; the heap
    is compacted so it stays within twice the live timers (plus a floor), not one entry per
    reserve of the last TTR."""
    for _ in range(20_000):
        job = q.put(ttr=60)
        assert q.reserve_id(1) == job
        assert q.e.delete(1, job, q.now) == proto.DELETED
        q.advance(1000)
    assert len(q.e.timers) <= TIMERS_MIN_BOUND + 1


def test_timer_compaction_keeps_the_live_timers(q: Q) -> None:
    """Compaction must not drop a timer that still has work: delayed jobs still become ready,
    reserved jobs still time out, and a waiting reserve still times out."""
    delayed = q.put(delay=5)
    held = q.put(ttr=10)
    assert q.reserve_id(1) == held
    waiting = q.reserve(2, ("other",), timeout=7)
    assert waiting is None
    for _ in range(TIMERS_MIN_BOUND + 10):  # churn past the bound: at least one compaction
        job = q.put(tube="churn")
        assert q.reserve_id(3, ("churn",)) == job
        assert q.e.delete(3, job, q.now) == proto.DELETED
    assert len(q.e.timers) < TIMERS_MIN_BOUND  # compacted
    q.advance(5 * NS)
    assert q.state(delayed) == "ready"
    q.advance(2 * NS)
    assert [payload[1] for _, payload in q.events()] == [proto.TIMED_OUT]
    q.advance(4 * NS)
    assert q.state(held) == "ready"  # its TTR ran out


# --------------------------------------------------------------------------- fresh timers


def test_a_job_deleted_soon_after_its_reserve_never_joins_the_heap(q: Q) -> None:
    """A reserve's TTR timer waits among the fresh ones for FRESH_NS: a job deleted sooner
    costs the heap nothing, and once that time has passed nothing of it is left."""
    for _ in range(100):
        job = q.put(ttr=60)
        assert q.reserve_id(1) == job
        assert q.e.delete(1, job, q.now) == proto.DELETED
        q.advance(1_000)
    assert q.e.timers == [] and len(q.e.fresh) - q.e.fresh_head == 100
    q.advance(FRESH_NS)
    assert q.e.timers == [] and q.e.fresh == []
    assert q.e.next_wakeup() is None


def test_a_held_job_s_timer_joins_before_it_is_due(q: Q) -> None:
    """The least TTR, held: its timer is in the heap before its deadline, and the wake-ups
    asked for never pass it."""
    job = q.put(ttr=1)
    q.reserve_id(1)
    deadline = q.now + NS
    while (wake := q.e.next_wakeup()) is not None and wake <= deadline:
        q.to(wake)
    assert q.state(job) == "reserved" and q.now < deadline
    assert [timer[0] for timer in q.e.timers] == [deadline + 1]
    q.to(deadline + 1)
    assert q.state(job) == "ready"


def test_fresh_timers_stay_bounded_while_the_clock_stands_still(q: Q) -> None:
    """Reserves faster than FRESH_NS (here: no time passes at all) sweep the fresh timers of
    deleted jobs, and keep the live ones."""
    held = q.put(ttr=5)
    assert q.reserve_id(2) == held
    for _ in range(3 * TIMERS_MIN_BOUND):
        job = q.put(tube="churn")
        assert q.reserve_id(3, ("churn",)) == job
        assert q.e.delete(3, job, q.now) == proto.DELETED
        assert len(q.e.fresh) - q.e.fresh_head <= TIMERS_MIN_BOUND + 1
    q.advance(5 * NS)
    assert q.state(held) == "reserved"
    q.advance(1)
    assert q.state(held) == "ready"
