"""Engine unit tests: offers, the cross-shard reserve (offer, accept, decline).

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

import pytest
from engine_helpers import Q, found, reserved, served

from shardq.engine.engine import FINAL, NONE_BETTER, OFFER, RESERVED, WAITING
from shardq.engine.job import NS, State
from shardq.protocol import proto


def test_offer_reserve_with_a_ready_job_offers_it(q: Q) -> None:
    job = q.put(pri=4, ttr=9, body=b"hey", seq=77)
    payload = q.reserve(5, offer=True)
    assert payload == [OFFER, reserved(job, b"hey"), job, 9 * NS, 4, 77, 5]
    assert q.state(job) == "ready"  # clients still see it as ready
    assert q.stats_tube()["current-jobs-ready"] == "1"
    assert q.e.peek(job) == found(job, b"hey")
    assert q.reserve(6, timeout=0) == [FINAL, proto.TIMED_OUT]  # nobody else can take it
    assert q.e.reserve_job(6, job, q.now) == [FINAL, proto.NOT_FOUND]


def test_accept_makes_an_offered_job_reserved_by_that_connection(q: Q) -> None:
    job = q.put(ttr=9)
    q.reserve(5, offer=True)
    q.advance(NS)
    q.e.accept(5, job, q.now)
    stats = q.stats_job(job)
    assert (stats["state"], stats["reserves"], stats["time-left"]) == ("reserved", "1", "9")
    assert q.e.jobs[job].owner == 5
    assert q.stats_tube()["current-jobs-reserved"] == "1"
    assert q.stats_tube()["current-jobs-ready"] == "0"
    assert q.e.release(5, job, 0, 0, q.now) == proto.RELEASED


def test_offer_reserve_with_nothing_ready_waits_and_offers_later(q: Q) -> None:
    rid = q.rid()
    assert q.reserve(5, ("a",), timeout=1, soon_at=q.now + NS, offer=True, rid=rid) == [WAITING]
    q.advance(5 * NS)  # offer mode leaves the deadlines to the serving process
    assert q.events() == []
    job = q.put("a")
    events = q.events()
    assert [(r, p[0], p[2]) for r, p in events] == [(rid, OFFER, job)]


def test_decline_puts_the_job_back_in_its_place(q: Q) -> None:
    first = q.put(pri=1)
    q.reserve(5, offer=True)
    second = q.put(pri=1)
    q.e.decline(5, first, q.now)
    assert q.e.peek_ready("default") == found(first)
    assert q.stats_job(first)["reserves"] == "0"
    assert q.reserve_id(1) == first
    assert q.reserve_id(1) == second


def test_decline_serves_the_next_waiter(q: Q) -> None:
    r1, r2 = q.rid(), q.rid()
    q.reserve(5, offer=True, rid=r1)
    q.reserve(6, rid=r2)
    job = q.put()
    assert [(r, p[0]) for r, p in q.events()] == [(r1, OFFER)]
    q.e.decline(5, job, q.now)
    assert served(q.events()) == [(r2, job)]


@pytest.mark.parametrize("op", ["accept", "decline"])
def test_accept_or_decline_by_another_connection_is_ignored(q: Q, op: str) -> None:
    job = q.put()
    q.reserve(5, offer=True)
    getattr(q.e, op)(6, job, q.now)
    assert q.e.jobs[job].state == State.OFFERED
    assert q.e.jobs[job].owner == 5


def test_accept_after_decline_is_ignored(q: Q) -> None:
    job = q.put()
    q.reserve(5, offer=True)
    q.e.decline(5, job, q.now)
    q.e.accept(5, job, q.now)
    assert q.state(job) == "ready"
    assert q.e.owned.as_dict() == {}


def test_disconnect_declines_offers_and_releases_reserved_jobs_at_once(q: Q) -> None:
    held = q.put(ttr=100)
    q.reserve_id(5)
    offered = q.put()
    q.reserve(5, offer=True)
    q.e.disconnect(5, q.now)
    assert [q.state(j) for j in (held, offered)] == ["ready", "ready"]
    assert q.stats_job(held)["releases"] == "0"  # not a client release
    assert q.e.owned.as_dict() == {}
    assert q.stats_tube()["current-jobs-ready"] == "2"


def test_a_job_a_closed_connection_held_is_logged_as_released_at_once(q: Q) -> None:
    """The event log has every state change: the give-back too, as a release with no delay
    (the job's own put delay is not the release's); a declined offer was never reserved."""
    q.e.audit = []
    held = q.put(delay=1, ttr=100)
    q.advance(NS)  # its delay is over: ready
    q.reserve_id(5)
    offered = q.put()
    q.reserve(5, offer=True)
    q.e.disconnect(5, q.now)
    rows = [(r[1], r[2], r[5]) for r in q.e.audit]
    assert rows == [
        ("put", held, 1),
        ("reserve", held, 1),
        ("put", offered, 0),
        ("release", held, 0),
    ]


def test_offered_jobs_count_as_urgent_like_other_ready_jobs(q: Q) -> None:
    """stats says an offered job is ready (state and current-jobs-ready), so it is urgent too."""
    q.put(pri=0)
    q.reserve(5, offer=True)
    stats = q.stats_tube()
    assert stats["current-jobs-ready"] == "1"
    assert stats["current-jobs-urgent"] == "1"


def test_cancel_does_not_touch_a_job_already_offered(q: Q) -> None:
    rid = q.rid()
    q.reserve(5, offer=True, rid=rid)
    job = q.put()
    q.events()
    q.e.cancel(rid)
    assert q.e.jobs[job].state == State.OFFERED
    q.e.decline(5, job, q.now)
    assert q.state(job) == "ready"


# The two halves of a reserve over the hosted shard and one other (serving/cross.py,
# `reserve_against_home`): the hosted shard's best job offered with no waiter left behind,
# and the other shard's reserve of a job only if it comes before that offer.


def test_offer_best_offers_the_best_job_and_leaves_no_waiter_when_none_is_ready(q: Q) -> None:
    assert q.e.offer_best(5, ("a", "b"), q.now) is None
    assert not q.e.waiters
    later = q.put("b", pri=2, seq=30)
    best = q.put("a", pri=1, seq=40)
    payload = q.e.offer_best(5, ("a", "b"), q.now)
    assert payload is not None and payload[:3] == [OFFER, reserved(best), best]
    assert (payload[4], payload[5]) == (1, 40)  # its priority and put order
    assert q.e.jobs[best].state == State.OFFERED and q.state(later) == "ready"


@pytest.mark.parametrize(
    ("pri", "seq", "wins"),
    [(5, 11, True), (5, 9, False), (6, 1, True), (4, 99, False), (5, 10, False)],
)
def test_reserve_better_reserves_only_a_job_that_comes_before_the_bound(
    q: Q, pri: int, seq: int, wins: bool
) -> None:
    """The job here has priority 5, put at 10; the other shard offered (pri, seq)."""
    job = q.put(pri=5, ttr=9, seq=10)
    payload = q.e.reserve_better(7, ("default",), q.now, pri, seq)
    if wins:
        assert payload == [RESERVED, reserved(job), job, q.now + 9 * NS]
        stats = q.stats_job(job)
        assert (stats["state"], stats["reserves"]) == ("reserved", "1")
    else:
        assert payload == [NONE_BETTER]
        assert q.state(job) == "ready" and q.stats_job(job)["reserves"] == "0"
    assert not q.e.waiters  # never a waiter


def test_reserve_better_with_nothing_ready_answers_none_better_and_waits_for_nothing(
    q: Q,
) -> None:
    assert q.e.reserve_better(7, ("default",), q.now, 5, 10) == [NONE_BETTER]
    assert not q.e.waiters
    assert q.stats_tube()["current-waiting"] == "0"
