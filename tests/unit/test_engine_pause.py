"""Engine unit tests: pause-tube.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from engine_helpers import Q, found, served

from shardq.engine.engine import FINAL
from shardq.engine.job import NS
from shardq.protocol import proto


def test_pause_tube_of_an_unknown_tube_is_not_found(q: Q) -> None:
    assert q.e.pause_tube("nosuch", 1, q.now) == proto.NOT_FOUND


def test_a_paused_tube_is_skipped_by_reserve_but_not_by_peek(q: Q) -> None:
    job = q.put()
    assert q.e.pause_tube("default", 2, q.now) == proto.PAUSED
    assert q.e.peek_ready("default") == found(job)
    assert q.reserve(1, timeout=0) == [FINAL, proto.TIMED_OUT]
    stats = q.stats_tube()
    assert (stats["pause"], stats["pause-time-left"], stats["cmd-pause-tube"]) == ("2", "2", "1")
    q.advance(NS + NS // 2)
    assert q.stats_tube()["pause-time-left"] == "0"  # 0.5 s truncated
    assert q.stats_tube()["pause"] == "2"
    q.advance(NS // 2)
    stats = q.stats_tube()
    assert (stats["pause"], stats["pause-time-left"]) == ("0", "0")
    assert q.reserve_id(1) == job


def test_a_paused_tube_is_skipped_in_favour_of_a_worse_job_elsewhere(q: Q) -> None:
    q.put("p", pri=0)
    other = q.put("o", pri=100)
    q.e.pause_tube("p", 5, q.now)
    assert q.reserve_id(1, ("p", "o")) == other


def test_waiters_wake_when_the_pause_ends(q: Q) -> None:
    q.e.pause_tube("default", 3, q.now)
    rid = q.rid()
    q.reserve(1, rid=rid)
    job = q.put()  # put ignores the pause but does not serve the waiter
    assert q.events() == []
    q.advance(3 * NS - 1)
    assert q.events() == []
    q.advance(1)
    assert served(q.events()) == [(rid, job)]


def test_pause_zero_pauses_for_one_nanosecond(q: Q) -> None:
    job = q.put()
    assert q.e.pause_tube("default", 0, q.now) == proto.PAUSED
    assert q.reserve(1, timeout=0) == [FINAL, proto.TIMED_OUT]
    assert q.stats_tube()["pause"] == "0"
    q.advance(1)
    assert q.reserve_id(1) == job


def test_a_second_pause_replaces_the_first(q: Q) -> None:
    job = q.put()
    q.e.pause_tube("default", 10, q.now)
    q.e.pause_tube("default", 2, q.now)
    assert q.stats_tube()["cmd-pause-tube"] == "2"
    q.advance(2 * NS)
    assert q.reserve_id(1) == job
    q.e.pause_tube("default", 2, q.now)
    q.e.pause_tube("default", 10, q.now)
    q.advance(2 * NS)  # the first pause's timer must not end the second pause
    assert q.stats_tube()["pause"] == "10"


def test_kick_into_a_paused_tube_does_not_serve_waiters(q: Q) -> None:
    job = q.put(delay=50)
    q.e.pause_tube("default", 5, q.now)
    rid = q.rid()
    q.reserve(1, rid=rid)
    q.e.kick("default", 1, q.now)
    assert q.events() == []
    q.advance(5 * NS)
    assert served(q.events()) == [(rid, job)]


def test_when_pauses_end_together_the_waiter_gets_the_best_job_of_all_tubes(q: Q) -> None:
    """beanstalkd 1.12 live: pa{pri 5}, pb{pri 1}, both paused 1 s, reserve -> pb's job."""
    q.put("pa", pri=5)
    best = q.put("pb", pri=1)
    q.e.pause_tube("pa", 1, q.now)
    q.now += 1000  # pb is paused a microsecond later, as two commands would be
    q.e.pause_tube("pb", 1, q.now)
    rid = q.rid()
    q.reserve(1, ("pa", "pb"), rid=rid)
    q.advance(2 * NS)  # one tick after both pauses ended
    assert served(q.events()) == [(rid, best)]


def test_a_pause_that_ended_before_the_tick_still_serves_the_oldest_waiter_first(q: Q) -> None:
    """A shard handles a batch before it ticks: a reserve may arrive after a pause ended but
    before the pause timer ran. The waiter that came first must still be served first."""
    job = q.put()
    q.e.pause_tube("default", 1, q.now)
    first = q.rid()
    assert q.reserve(1, rid=first) is None
    q.now += NS  # the pause is over; no tick yet
    later = q.reserve(2)
    q.e.tick(q.now)
    assert served(q.events()) == [(first, job)]
    assert later is None
