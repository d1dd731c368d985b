"""Engine unit tests: which job a reserve gets, and waiting reserves (FIFO waiters,
timeouts, DEADLINE_SOON, reserve-job, cancel).

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import Q, reserved, served

from shardq.engine.engine import FINAL, OFFER, RESERVED, SAFETY_MARGIN
from shardq.engine.job import NS
from shardq.protocol import proto

# --------------------------------------------------------------------------- ordering


def test_reserve_takes_priority_then_put_order_across_tubes(q: Q) -> None:
    """The reference's live check: ta{a1:5,a2:3} tb{b1:3,b2:1,b3:5} -> b2, a2, b1, a1, b3."""
    a1 = q.put("ta", pri=5)
    a2 = q.put("ta", pri=3)
    b1 = q.put("tb", pri=3)
    b2 = q.put("tb", pri=1)
    b3 = q.put("tb", pri=5)
    got = [q.reserve_id(1, ("ta", "tb")) for _ in range(5)]
    assert got == [b2, a2, b1, a1, b3]


def test_oldest_means_put_order_stamp_not_id(q: Q) -> None:
    """Ids come in per-shard blocks; the put-order stamp `seq` decides "oldest"."""
    young = q.put(job_id=5, seq=20)
    old = q.put("t", job_id=2000, seq=10)
    assert q.reserve_id(1, ("default", "t")) == old
    assert q.reserve_id(1, ("default", "t")) == young


def test_released_job_keeps_its_put_order_among_equal_priorities(q: Q) -> None:
    a, b = q.put(), q.put()
    assert q.reserve_id(1) == a
    q.e.release(1, a, 0, 0, q.now)
    assert q.reserve_id(1) == a  # older than b
    assert q.reserve_id(1) == b


def test_delayed_jobs_become_ready_at_their_due_time_in_order(q: Q) -> None:
    late = q.put(pri=0, delay=3)
    early = q.put(pri=9, delay=1)
    q.advance(NS - 1)
    assert q.reserve(1, timeout=0) == [FINAL, proto.TIMED_OUT]
    q.advance(1)
    assert q.reserve_id(1) == early
    q.advance(2 * NS)
    assert q.reserve_id(1) == late


def test_delayed_jobs_due_together_are_ordered_by_priority_when_ready(q: Q) -> None:
    a = q.put(pri=5, delay=1)
    b = q.put(pri=1, delay=1)
    q.advance(10 * NS)
    assert [q.reserve_id(1), q.reserve_id(1)] == [b, a]


# --------------------------------------------------------------------------- waiters


def test_waiters_are_served_first_come_first_served(q: Q) -> None:
    """beanstalkd serves 4 blocked reservers 1, 2, 4, 3; shardq fixes that to 1, 2, 3, 4."""
    rids = [q.rid() for _ in range(4)]
    for conn, rid in enumerate(rids, start=1):
        assert q.reserve(conn, rid=rid) is None
    jobs = [q.put() for _ in range(4)]
    assert served(q.events()) == list(zip(rids, jobs, strict=True))


def test_a_waiter_is_served_only_once(q: Q) -> None:
    rid = q.rid()
    q.reserve(1, rid=rid)
    a = q.put()
    b = q.put()
    assert served(q.events()) == [(rid, a)]
    assert q.state(b) == "ready"
    assert q.e.waiters == {}


def test_a_waiter_watching_several_tubes_is_woken_by_any_and_leaves_all(q: Q) -> None:
    rid = q.rid()
    q.reserve(1, ("a", "b", "c"), rid=rid)
    assert [q.stats_tube(t)["current-waiting"] for t in "abc"] == ["1", "1", "1"]
    job = q.put("b")
    assert served(q.events()) == [(rid, job)]
    assert [q.stats_tube(t)["current-waiting"] for t in "abc"] == ["0", "0", "0"]


def test_fifo_holds_across_tubes_of_different_watch_lists(q: Q) -> None:
    r1, r2, r3 = q.rid(), q.rid(), q.rid()
    q.reserve(1, ("a",), rid=r1)
    q.reserve(2, ("a", "b"), rid=r2)
    q.reserve(3, ("b",), rid=r3)
    jb = q.put("b")
    ja = q.put("a")
    jb2 = q.put("b")
    assert served(q.events()) == [(r2, jb), (r1, ja), (r3, jb2)]


def _setup_nothing(q: Q) -> int:
    return q.next_id  # the job the wake-up will put


def _setup_reserved(q: Q) -> int:
    job = q.put(ttr=2)
    assert q.reserve_id(9) == job
    return job


def _setup_delayed(q: Q) -> int:
    return q.put(delay=2)


def _setup_paused(q: Q) -> int:
    q.e.ref("p", 0, 1, q.now)
    job = q.put("p")
    q.e.pause_tube("p", 3, q.now)
    return job


def _setup_offered(q: Q) -> int:
    job = q.put()
    payload = q.reserve(8, offer=True)
    assert payload is not None and payload[0] == OFFER
    return job


#: how a job becomes ready: (what exists before the waiter arrives, what wakes it)
WAKE_UPS: dict[str, tuple[Callable[[Q], int], Callable[[Q, int], Any]]] = {
    "put": (_setup_nothing, lambda q, job: q.put()),
    "release": (_setup_reserved, lambda q, job: q.e.release(9, job, 0, 0, q.now)),
    "delay expiry": (_setup_delayed, lambda q, job: q.advance(2 * NS)),
    "kick": (_setup_delayed, lambda q, job: q.e.kick("default", 1, q.now)),
    "kick-job": (_setup_delayed, lambda q, job: q.e.kick_job(job, q.now)),
    "ttr timeout": (_setup_reserved, lambda q, job: q.advance(2 * NS + 1)),
    "disconnect": (_setup_reserved, lambda q, job: q.e.disconnect(9, q.now)),
    "pause end": (_setup_paused, lambda q, job: q.advance(3 * NS)),
    "decline": (_setup_offered, lambda q, job: q.e.decline(8, job, q.now)),
}


@pytest.mark.parametrize("how", list(WAKE_UPS))
def test_a_waiter_is_served_as_soon_as_a_job_becomes_ready(q: Q, how: str) -> None:
    setup, wake = WAKE_UPS[how]
    job = setup(q)
    q.e.ref("p", 0, 1, q.now)
    rid = q.rid()
    assert q.reserve(1, ("default", "p"), rid=rid) is None
    q.advance(1)
    assert q.events() == []
    wake(q, job)
    assert served(q.events()) == [(rid, job)]
    assert q.state(job) == "reserved"
    assert q.e.jobs[job].owner == 1
    assert q.e.waiters == {}


def test_reserve_timeout_fires_at_its_time_not_before(q: Q) -> None:
    rid = q.rid()
    assert q.reserve(1, timeout=2, rid=rid) is None
    q.advance(2 * NS - 1)
    assert q.events() == []
    q.advance(1)
    assert q.events() == [(rid, [FINAL, proto.TIMED_OUT])]
    assert q.e.waiters == {}
    assert q.stats_tube()["current-waiting"] == "0"
    q.put()  # no longer waiting: the job stays ready
    assert q.events() == []


def test_a_served_waiter_does_not_time_out_later(q: Q) -> None:
    rid = q.rid()
    q.reserve(1, timeout=2, rid=rid)
    q.put(ttr=100)
    assert len(served(q.events())) == 1
    q.advance(10 * NS)
    assert q.events() == []


def test_next_wakeup_is_the_soonest_timer(q: Q) -> None:
    assert q.e.next_wakeup() is None
    q.put(delay=5)
    q.reserve(1, timeout=3)
    assert q.e.next_wakeup() == q.now + 3 * NS


def test_deadline_soon_at_once_when_inside_the_margin_and_nothing_is_ready(q: Q) -> None:
    job = q.put(ttr=1)
    q.reserve_id(1)
    soon_at = q.e.jobs[job].deadline - SAFETY_MARGIN
    assert soon_at <= q.now
    assert q.reserve(1, soon_at=soon_at) == [FINAL, proto.DEADLINE_SOON]
    assert q.reserve(1, timeout=5, soon_at=soon_at) == [FINAL, proto.DEADLINE_SOON]
    assert q.reserve(1, timeout=0, soon_at=soon_at) == [FINAL, proto.DEADLINE_SOON]
    assert q.e.waiters == {}


def test_a_ready_job_beats_deadline_soon(q: Q) -> None:
    q.put(ttr=1)
    q.reserve_id(1)
    other = q.put()
    payload = q.reserve(1, soon_at=q.now)
    assert payload is not None and payload[:3] == [RESERVED, reserved(other), other]


def test_deadline_soon_fires_as_an_event_at_soon_at_while_waiting(q: Q) -> None:
    job = q.put(ttr=3)
    q.reserve_id(1)
    soon_at = q.e.jobs[job].deadline - SAFETY_MARGIN
    rid = q.rid()
    assert q.reserve(1, timeout=10, soon_at=soon_at, rid=rid) is None
    q.to(soon_at - 1)
    assert q.events() == []
    q.to(soon_at)
    assert q.events() == [(rid, [FINAL, proto.DEADLINE_SOON])]
    assert q.state(job) == "reserved"  # the TTR itself has not run out


def test_a_timeout_before_soon_at_answers_timed_out(q: Q) -> None:
    q.put(ttr=30)
    q.reserve_id(1)
    rid = q.rid()
    q.reserve(1, timeout=2, soon_at=q.now + 29 * NS, rid=rid)
    q.advance(2 * NS)
    assert q.events() == [(rid, [FINAL, proto.TIMED_OUT])]


def test_a_job_put_while_waiting_inside_the_margin_is_reserved(q: Q) -> None:
    q.put(ttr=5)
    q.reserve_id(1)
    rid = q.rid()
    q.reserve(1, soon_at=q.now + 4 * NS, rid=rid)
    q.advance(NS)
    job = q.put()
    assert served(q.events()) == [(rid, job)]


@pytest.mark.parametrize("how", ["ready", "delayed", "buried"])
def test_reserve_job_takes_a_ready_delayed_or_buried_job_in_any_tube(q: Q, how: str) -> None:
    job = q.put("elsewhere", delay=5 if how == "delayed" else 0, ttr=7, body=b"abc")
    if how == "buried":
        q.e.reserve_job(2, job, q.now)
        q.e.bury(2, job, 0, q.now)
    payload = q.e.reserve_job(1, job, q.now)
    assert payload == [RESERVED, reserved(job, b"abc"), job, q.now + 7 * NS]
    stats = q.stats_job(job)
    assert (stats["state"], stats["time-left"]) == ("reserved", "7")
    assert q.e.owned.ids(1) == [job]
    q.advance(10 * NS)  # a stale delay timer must not touch the reserved job
    assert q.stats_job(job)["timeouts"] == "1"
    assert q.state(job) == "ready"


@pytest.mark.parametrize("conn", [1, 2])
def test_reserve_job_of_a_reserved_job_is_not_found(q: Q, conn: int) -> None:
    job = q.put()
    q.reserve_id(1)
    assert q.e.reserve_job(conn, job, q.now) == [FINAL, proto.NOT_FOUND]
    assert q.e.reserve_job(conn, 99, q.now) == [FINAL, proto.NOT_FOUND]


def test_reserve_job_ignores_pause(q: Q) -> None:
    job = q.put()
    q.e.pause_tube("default", 10, q.now)
    assert q.e.reserve_job(1, job, q.now)[0] == RESERVED


def test_cancel_removes_a_waiter(q: Q) -> None:
    rid = q.rid()
    q.reserve(1, ("a", "b"), timeout=5, rid=rid)
    q.e.cancel(rid)
    q.e.cancel(rid)  # twice is harmless
    assert q.e.waiters == {}
    assert q.stats_tube("a")["current-waiting"] == "0"
    job = q.put("a")
    q.advance(10 * NS)
    assert q.events() == []
    assert q.state(job) == "ready"


def test_disconnect_drops_the_connections_waiters(q: Q) -> None:
    q.reserve(1)
    q.e.disconnect(1, q.now)
    assert q.e.waiters == {}
    q.put()
    assert q.events() == []
