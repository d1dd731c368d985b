"""Engine unit tests: the replies of put, reserve, peek and the stats commands.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import Q, found

from shardq.engine.engine import FINAL, RESERVED, reserved_payload
from shardq.engine.job import NS, URGENT_PRI
from shardq.protocol import proto


def test_put_answers_inserted_and_peek_shows_the_body(q: Q) -> None:
    assert q.e.put(7, 7, "default", 0, 0, 60, b"hello", q.now) is True  # INSERTED 7
    assert q.e.peek(7) == b"FOUND 7 5\r\nhello\r\n"
    assert q.e.peek(8) == proto.NOT_FOUND


def test_put_with_an_empty_body_and_crlf_inside_the_body(q: Q) -> None:
    a = q.put(body=b"")
    b = q.put(body=b"a\r\nb\x00")
    assert q.e.peek(a) == b"FOUND 1 0\r\n\r\n"
    assert q.e.peek(b) == b"FOUND 2 5\r\na\r\nb\x00\r\n"


def test_reserve_answers_reserved_with_id_and_ttr_deadline(q: Q) -> None:
    job = q.put(ttr=30, body=b"hello")
    payload = q.reserve(conn=1)
    assert payload == [RESERVED, b"RESERVED 1 5\r\nhello\r\n", job, q.now + 30 * NS]
    assert q.state(job) == "reserved"


def test_reserve_with_nothing_ready_and_timeout_zero_is_timed_out_at_once(q: Q) -> None:
    assert q.reserve(conn=1, timeout=0) == [FINAL, proto.TIMED_OUT]
    assert q.e.waiters == {}


def test_reserve_with_nothing_ready_waits_silently(q: Q) -> None:
    assert q.reserve(conn=1) is None
    assert q.stats_tube()["current-waiting"] == "1"


def test_stats_job_reply_is_byte_exact(q: Q) -> None:
    q.e.ref("yml", 1, 0, q.now)
    job = q.put("yml", pri=1025)
    assert q.e.stats_job(job, q.now) == (
        b"OK 143\r\n---\nid: 1\ntube: yml\nstate: ready\npri: 1025\nage: 0\ndelay: 0\n"
        b"ttr: 60\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
        b"buries: 0\nkicks: 0\n\r\n"
    )
    assert q.e.stats_job(99, q.now) == proto.NOT_FOUND


def test_stats_tube_reply_is_byte_exact(q: Q) -> None:
    q.e.ref("yml", 1, 0, q.now)
    q.put("yml", pri=1025)
    assert q.e.stats_tube("yml", q.now) == (
        b"OK 261\r\n---\nname: yml\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 1\n"
        b"current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
        b"total-jobs: 1\ncurrent-using: 1\ncurrent-watching: 0\ncurrent-waiting: 0\n"
        b"cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n\r\n"
    )
    assert q.e.stats_tube("nosuch", q.now) == proto.NOT_FOUND


def test_stats_job_age_and_time_left_truncate_toward_zero(q: Q) -> None:
    job = q.put(ttr=3)
    q.advance(2 * NS + NS // 2)
    assert q.stats_job(job)["age"] == "2"
    q.reserve_id(conn=1)
    q.advance(NS // 2)
    assert q.stats_job(job)["time-left"] == "2"  # 2.5 s left
    # a deadline that has passed but whose timer has not run yet shows negative time
    q.now += 3 * NS  # no tick
    assert q.stats_job(job)["time-left"] == "0"  # -0.5 s truncates to 0
    q.now += NS
    assert q.stats_job(job)["time-left"] == "-1"


def test_put_with_ttr_zero_stores_one_second(q: Q) -> None:
    job = q.put(ttr=0)
    assert q.stats_job(job)["ttr"] == "1"


def test_peek_shows_a_job_in_any_state(q: Q) -> None:
    ready, delayed, res, bur = q.put(), q.put(delay=9), q.put(), q.put()
    q.e.reserve_job(1, res, q.now)
    q.e.reserve_job(1, bur, q.now)
    q.e.bury(1, bur, 0, q.now)
    for job in (ready, delayed, res, bur):
        assert q.e.peek(job) == found(job)


def test_peek_ready_delayed_buried_look_only_at_the_given_tube(q: Q) -> None:
    q.put("other", pri=0)
    q.put("other", delay=5)
    assert q.e.peek_ready("default") == proto.NOT_FOUND
    assert q.e.peek_delayed("default") == proto.NOT_FOUND
    assert q.e.peek_buried("default") == proto.NOT_FOUND
    assert q.e.peek_ready("nosuch") == proto.NOT_FOUND
    assert q.e.peek_delayed("nosuch") == proto.NOT_FOUND
    assert q.e.peek_buried("nosuch") == proto.NOT_FOUND
    assert q.e.peek_ready("other") == found(1)
    assert q.e.peek_delayed("other") == found(2)


def test_peek_ready_is_the_best_priority_then_oldest(q: Q) -> None:
    q.put(pri=5)
    b = q.put(pri=1)
    q.put(pri=1)
    assert q.e.peek_ready("default") == found(b)


def test_peek_delayed_is_the_soonest_due(q: Q) -> None:
    q.put(delay=9)
    soon = q.put(delay=2)
    assert q.e.peek_delayed("default") == found(soon)


def _reserve_release(q: Q, job: int) -> None:
    q.reserve_id(1)
    q.e.release(1, job, 0, 0, q.now)


def _reserve_bury(q: Q, job: int) -> None:
    q.reserve_id(1)
    q.e.bury(1, job, 0, q.now)


def _reserve_time_out(q: Q, job: int) -> None:
    q.reserve_id(1)
    q.advance(60 * NS + 1)


def _reserve_bury_kick(q: Q, job: int) -> None:
    _reserve_bury(q, job)
    q.e.kick_job(job, q.now)


@pytest.mark.parametrize(
    ("action", "expect"),
    [
        (lambda q, job: None, {}),
        (lambda q, job: q.reserve_id(1), {"reserves": 1}),
        (_reserve_release, {"reserves": 1, "releases": 1}),
        (_reserve_bury, {"reserves": 1, "buries": 1}),
        (_reserve_time_out, {"reserves": 1, "timeouts": 1}),
        (_reserve_bury_kick, {"reserves": 1, "buries": 1, "kicks": 1}),
    ],
)
def test_stats_job_counters(q: Q, action: Callable[[Q, int], Any], expect: dict[str, int]) -> None:
    job = q.put()
    action(q, job)
    stats = q.stats_job(job)
    for name in ("reserves", "timeouts", "releases", "buries", "kicks"):
        assert stats[name] == str(expect.get(name, 0)), name


def test_urgent_counts_ready_jobs_below_priority_1024(q: Q) -> None:
    q.put(pri=0)
    q.put(pri=URGENT_PRI - 1)
    q.put(pri=URGENT_PRI)
    q.put(pri=5, delay=3)
    stats = q.stats_tube()
    assert (stats["current-jobs-urgent"], stats["current-jobs-ready"]) == ("2", "3")
    job = q.reserve_id(1)
    assert q.stats_tube()["current-jobs-urgent"] == "1"
    q.e.release(1, job, URGENT_PRI, 0, q.now)  # released as not urgent
    assert q.stats_tube()["current-jobs-urgent"] == "1"
    assert q.e.counts()["current-jobs-urgent"] == 1


def test_tube_total_jobs_and_engine_counts(q: Q) -> None:
    q.put()
    q.put("b", delay=1)
    job = q.put("b")
    q.e.reserve_job(1, job, q.now)
    assert q.stats_tube("b")["total-jobs"] == "2"
    assert q.e.counts() == {
        "current-jobs-urgent": 1,
        "current-jobs-ready": 1,
        "current-jobs-reserved": 1,
        "current-jobs-delayed": 1,
        "current-jobs-buried": 0,
        "job-timeouts": 0,
        "total-jobs": 3,
        "current-tubes": 2,
    }


def test_reserved_payload_matches_job_reply() -> None:
    q = Q()
    job = q.put(body=b"payload")
    q.e.reserve_job(1, job, q.now)
    the_job = q.e.jobs[job]
    assert reserved_payload(the_job) == [
        RESERVED,
        proto.job_reply(b"RESERVED", job, b"payload"),
        job,
        the_job.deadline,
    ]
