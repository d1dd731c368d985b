"""Engine unit tests: delete, release, bury, kick, kick-job and touch.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

import pytest
from engine_helpers import Q, found

from shardq.engine.job import NS
from shardq.protocol import proto


@pytest.mark.parametrize(
    ("how", "conn", "reply"),
    [
        ("ready", 2, proto.DELETED),
        ("delayed", 2, proto.DELETED),
        ("buried", 2, proto.DELETED),
        ("reserved", 1, proto.DELETED),
        ("reserved", 2, proto.NOT_FOUND),
    ],
)
def test_delete_by_state_and_connection(q: Q, how: str, conn: int, reply: bytes) -> None:
    """Anyone may delete a ready, delayed or buried job; a reserved one only its owner."""
    job = q.put(delay=5 if how == "delayed" else 0)
    if how in ("reserved", "buried"):
        q.reserve_id(conn=1)
    if how == "buried":
        assert q.e.bury(1, job, 0, q.now) == proto.BURIED
    assert q.e.delete(conn, job, q.now) == reply
    stats = q.stats_tube()
    if reply == proto.DELETED:
        assert q.e.peek(job) == proto.NOT_FOUND
        assert q.e.delete(conn, job, q.now) == proto.NOT_FOUND
        assert stats["cmd-delete"] == "1"
        assert all(stats[f"current-jobs-{s}"] == "0" for s in ("ready", "reserved", "delayed"))
        assert stats["current-jobs-buried"] == "0"
    else:
        assert q.state(job) == "reserved"
        assert stats["cmd-delete"] == "0"


def test_delete_of_unknown_job_is_not_found(q: Q) -> None:
    assert q.e.delete(1, 42, q.now) == proto.NOT_FOUND


def test_deleted_reserved_job_does_not_come_back_at_its_ttr(q: Q) -> None:
    job = q.put(ttr=1)
    q.reserve_id(conn=1)
    assert q.e.delete(1, job, q.now) == proto.DELETED
    q.advance(5 * NS)
    assert q.e.peek(job) == proto.NOT_FOUND
    assert q.e.counts()["job-timeouts"] == 0


def test_release_makes_the_job_ready_with_the_new_priority(q: Q) -> None:
    job = q.put(pri=10)
    q.reserve_id(conn=1)
    assert q.e.release(1, job, 7, 0, q.now) == proto.RELEASED
    stats = q.stats_job(job)
    assert (stats["state"], stats["pri"], stats["releases"]) == ("ready", "7", "1")
    assert q.e.release(1, job, 7, 0, q.now) == proto.NOT_FOUND  # already released


def test_release_with_delay_delays_the_job_then_it_becomes_ready(q: Q) -> None:
    job = q.put()
    q.reserve_id(conn=1)
    assert q.e.release(1, job, 3, 2, q.now) == proto.RELEASED
    stats = q.stats_job(job)
    assert (stats["state"], stats["delay"], stats["time-left"]) == ("delayed", "2", "2")
    assert q.e.peek_delayed("default") == found(job)
    assert q.e.peek_ready("default") == proto.NOT_FOUND
    q.advance(2 * NS - 1)
    assert q.state(job) == "delayed"
    q.advance(1)
    assert q.state(job) == "ready"
    assert q.e.peek_ready("default") == found(job)


def test_release_without_delay_resets_the_stored_delay(q: Q) -> None:
    """beanstalkd sets `delay` to the release's delay, 0 included (checked live on 1.12)."""
    job = q.put(delay=5)
    assert q.e.kick("default", 1, q.now) == 1
    q.reserve_id(conn=1)
    assert q.stats_job(job)["delay"] == "5"
    assert q.e.release(1, job, 7, 0, q.now) == proto.RELEASED
    assert q.stats_job(job)["delay"] == "0"


@pytest.mark.parametrize("op", ["release", "bury", "touch"])
def test_release_bury_touch_by_a_non_owner_are_not_found(q: Q, op: str) -> None:
    job = q.put()
    q.reserve_id(conn=1)
    replies = {
        "release": lambda: q.e.release(2, job, 0, 0, q.now),
        "bury": lambda: q.e.bury(2, job, 0, q.now),
        "touch": lambda: q.e.touch(2, job, q.now)[0],
    }
    assert replies[op]() == proto.NOT_FOUND
    assert q.state(job) == "reserved"
    assert q.e.owned.as_dict() == {1: {job}}


@pytest.mark.parametrize("op", ["release", "bury", "touch"])
def test_release_bury_touch_of_a_job_that_is_not_reserved_are_not_found(q: Q, op: str) -> None:
    job = q.put()
    replies = {
        "release": lambda: q.e.release(1, job, 0, 0, q.now),
        "bury": lambda: q.e.bury(1, job, 0, q.now),
        "touch": lambda: q.e.touch(1, job, q.now)[0],
    }
    assert replies[op]() == proto.NOT_FOUND
    assert q.state(job) == "ready"


def test_bury_sets_the_priority_and_counts(q: Q) -> None:
    job = q.put(pri=10)
    q.reserve_id(conn=1)
    assert q.e.bury(1, job, 3, q.now) == proto.BURIED
    stats = q.stats_job(job)
    assert (stats["state"], stats["pri"], stats["buries"]) == ("buried", "3", "1")
    assert q.stats_tube()["current-jobs-buried"] == "1"
    assert q.e.peek_buried("default") == found(job)


def test_buried_jobs_are_kept_in_bury_order_not_id_or_priority(q: Q) -> None:
    a, b, c = q.put(pri=1), q.put(pri=2), q.put(pri=3)
    for job in (c, a, b):
        q.e.reserve_job(1, job, q.now)
        q.e.bury(1, job, 0, q.now)
    assert q.e.peek_buried("default") == found(c)
    kicked = []
    for _ in range(3):
        head = q.e.peek_buried("default")
        kicked.append(int(head.split()[1]))
        assert q.e.kick("default", 1, q.now) == 1
    assert kicked == [c, a, b]


def test_kick_takes_buried_jobs_first_and_leaves_delayed_ones(q: Q) -> None:
    delayed = q.put(delay=10)
    b1, b2 = q.put(), q.put()
    for job in (b1, b2):
        q.e.reserve_job(1, job, q.now)
        q.e.bury(1, job, 0, q.now)
    assert q.e.kick("default", 5, q.now) == 2
    assert [q.state(j) for j in (delayed, b1, b2)] == ["delayed", "ready", "ready"]
    assert q.stats_job(b1)["kicks"] == "1"
    assert q.e.kick("default", 5, q.now) == 1
    assert q.state(delayed) == "ready"
    assert q.stats_job(delayed)["kicks"] == "1"
    assert q.stats_job(delayed)["delay"] == "10"  # kick keeps the stored delay
    assert q.e.kick("default", 5, q.now) == 0


def test_kick_bound_and_delayed_kick_order_is_by_due_time(q: Q) -> None:
    late = q.put(delay=30)
    early = q.put(delay=10)
    middle = q.put(delay=20)
    assert q.e.kick("default", 0, q.now) == 0
    assert q.e.kick("default", 2, q.now) == 2
    assert [q.state(j) for j in (early, middle, late)] == ["ready", "ready", "delayed"]


def test_kick_of_a_tube_that_does_not_exist_kicks_nothing(q: Q) -> None:
    assert q.e.kick("nosuch", 10, q.now) == 0


@pytest.mark.parametrize(
    ("how", "reply"),
    [
        ("buried", proto.KICKED),
        ("delayed", proto.KICKED),
        ("ready", proto.NOT_FOUND),
        ("reserved", proto.NOT_FOUND),
        ("unknown", proto.NOT_FOUND),
    ],
)
def test_kick_job_by_state(q: Q, how: str, reply: bytes) -> None:
    job = q.put(delay=5 if how == "delayed" else 0)
    if how in ("buried", "reserved"):
        q.reserve_id(conn=1)
    if how == "buried":
        q.e.bury(1, job, 0, q.now)
    assert q.e.kick_job(99 if how == "unknown" else job, q.now) == reply
    if reply == proto.KICKED:
        assert q.state(job) == "ready"
        assert q.stats_job(job)["kicks"] == "1"


def test_touch_answers_the_new_deadline_and_moves_the_ttr(q: Q) -> None:
    job = q.put(ttr=10)
    q.reserve_id(conn=1)
    q.advance(8 * NS)
    assert q.e.touch(1, job, q.now) == [proto.TOUCHED, q.now + 10 * NS]
    q.advance(5 * NS)  # past the first deadline: the old timer must not fire
    assert q.state(job) == "reserved"
    assert q.stats_job(job)["time-left"] == "5"
    q.advance(5 * NS)  # exactly the new deadline: not yet
    assert q.state(job) == "reserved"
    q.advance(1)
    assert q.state(job) == "ready"
    assert q.stats_job(job)["timeouts"] == "1"
