"""Unit tests of the pure job engine of one shard (shardq/engine.py, job.py, tube.py).

No sockets, no sleeps: every test drives an `Engine` with a fake clock (an int of
nanoseconds that the test advances and hands to `tick`). Expected behaviour is
beanstalkd 1.12's (see /work/shared/reference/beanstalkd-1.12.md), except where
shardq deliberately fixes it (FIFO waiters, quoted YAML strings, no lost TTR timer).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from shardq.engine.engine import (
    FINAL,
    OFFER,
    RESERVED,
    SAFETY_MARGIN,
    TIMERS_MIN_BOUND,
    WAITING,
    Engine,
    reserved_payload,
)
from shardq.engine.job import NS, URGENT_PRI, State
from shardq.engine.tube import Tube
from shardq.protocol import proto

T0 = 1_000 * NS  #: the fake clock's start; not 0, so "0" never hides a missing addition


# --------------------------------------------------------------------------- harness


class Q:
    """An engine, a fake clock and the id/put-order counters the acceptor would keep."""

    def __init__(self) -> None:
        self.e = Engine()
        self.now = T0
        self.next_id = 1
        self.next_rid = 1

    # clock
    def advance(self, ns: int) -> None:
        self.now += ns
        self.e.tick(self.now)

    def to(self, when: int) -> None:
        assert when >= self.now
        self.now = when
        self.e.tick(self.now)

    def events(self) -> list[tuple[int, list[Any]]]:
        out = list(self.e.events)
        self.e.events.clear()
        return out

    # commands
    def put(
        self,
        tube: str = "default",
        pri: int = 0,
        delay: int = 0,
        ttr: int = 60,
        body: bytes = b"x",
        job_id: int | None = None,
        seq: int | None = None,
    ) -> int:
        if job_id is None:
            job_id = self.next_id
        self.next_id = max(self.next_id, job_id) + 1
        reply = self.e.put(
            job_id, job_id if seq is None else seq, tube, pri, delay, ttr, body, self.now
        )
        assert reply == b"INSERTED %d\r\n" % job_id
        return job_id

    def rid(self) -> int:
        self.next_rid += 1
        return self.next_rid - 1

    def reserve(
        self,
        conn: int,
        tubes: tuple[str, ...] = ("default",),
        timeout: int | None = None,
        soon_at: int | None = None,
        offer: bool = False,
        rid: int | None = None,
    ) -> list[Any] | None:
        timeout_at = None if timeout is None else self.now + timeout * NS
        rid = self.rid() if rid is None else rid
        return self.e.reserve(conn, rid, tubes, self.now, timeout_at, soon_at, offer)

    def reserve_id(self, conn: int, tubes: tuple[str, ...] = ("default",)) -> int:
        """Reserve at once and answer the job id (fails if nothing was ready)."""
        payload = self.reserve(conn, tubes)
        assert payload is not None and payload[0] == RESERVED, payload
        return payload[2]

    def stats_job(self, job_id: int) -> dict[str, str]:
        return parse_yaml(self.e.stats_job(job_id, self.now))

    def stats_tube(self, name: str = "default") -> dict[str, str]:
        return parse_yaml(self.e.stats_tube(name, self.now))

    def state(self, job_id: int) -> str:
        return self.stats_job(job_id)["state"]

    def tube_names(self) -> list[str]:
        """list-tubes as the coordinator prints it: sorted by each tube's order key."""
        return [name for _, name in sorted(self.e.list_tubes())]


def unkey(key: int) -> tuple[int, int, int]:
    """A ready or delayed queue key as (pri or deadline, seq, id)."""
    return (key >> 128, key >> 64 & (1 << 64) - 1, key & (1 << 64) - 1)


def parse_yaml(reply: bytes) -> dict[str, str]:
    """Split an ``OK <n>`` stats reply into key -> raw value text, checking its framing."""
    head, _, rest = reply.partition(b"\r\n")
    assert head.startswith(b"OK "), reply
    assert rest.endswith(b"\n\r\n"), reply
    assert int(head[3:]) == len(rest) - 2, reply
    lines = rest[:-2].decode().split("\n")
    assert lines[0] == "---" and lines[-1] == "", reply
    pairs = [line.split(": ", 1) for line in lines[1:-1]]
    return {key: value for key, value in pairs}


def reserved(job_id: int, body: bytes = b"x") -> bytes:
    return b"RESERVED %d %d\r\n%s\r\n" % (job_id, len(body), body)


def found(job_id: int, body: bytes = b"x") -> bytes:
    return b"FOUND %d %d\r\n%s\r\n" % (job_id, len(body), body)


def served(events: list[tuple[int, list[Any]]]) -> list[tuple[int, int]]:
    """(rid, job id) of each RESERVED event."""
    return [(rid, p[2]) for rid, p in events if p[0] == RESERVED]


@pytest.fixture
def q() -> Q:
    return Q()


# --------------------------------------------------------------------------- replies


def test_put_answers_inserted_and_peek_shows_the_body(q: Q) -> None:
    assert q.e.put(7, 7, "default", 0, 0, 60, b"hello", q.now) == b"INSERTED 7\r\n"
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
        b'OK 145\r\n---\nid: 1\ntube: "yml"\nstate: ready\npri: 1025\nage: 0\ndelay: 0\n'
        b"ttr: 60\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
        b"buries: 0\nkicks: 0\n\r\n"
    )
    assert q.e.stats_job(99, q.now) == proto.NOT_FOUND


def test_stats_tube_reply_is_byte_exact(q: Q) -> None:
    q.e.ref("yml", 1, 0, q.now)
    q.put("yml", pri=1025)
    assert q.e.stats_tube("yml", q.now) == (
        b'OK 263\r\n---\nname: "yml"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 1\n'
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
    assert q.e.kick("default", 1, q.now) == b"KICKED 1\r\n"
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
    assert q.e.owned == {1: {job}}


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
        assert q.e.kick("default", 1, q.now) == b"KICKED 1\r\n"
    assert kicked == [c, a, b]


def test_kick_takes_buried_jobs_first_and_leaves_delayed_ones(q: Q) -> None:
    delayed = q.put(delay=10)
    b1, b2 = q.put(), q.put()
    for job in (b1, b2):
        q.e.reserve_job(1, job, q.now)
        q.e.bury(1, job, 0, q.now)
    assert q.e.kick("default", 5, q.now) == b"KICKED 2\r\n"
    assert [q.state(j) for j in (delayed, b1, b2)] == ["delayed", "ready", "ready"]
    assert q.stats_job(b1)["kicks"] == "1"
    assert q.e.kick("default", 5, q.now) == b"KICKED 1\r\n"
    assert q.state(delayed) == "ready"
    assert q.stats_job(delayed)["kicks"] == "1"
    assert q.stats_job(delayed)["delay"] == "10"  # kick keeps the stored delay
    assert q.e.kick("default", 5, q.now) == b"KICKED 0\r\n"


def test_kick_bound_and_delayed_kick_order_is_by_due_time(q: Q) -> None:
    late = q.put(delay=30)
    early = q.put(delay=10)
    middle = q.put(delay=20)
    assert q.e.kick("default", 0, q.now) == b"KICKED 0\r\n"
    assert q.e.kick("default", 2, q.now) == b"KICKED 2\r\n"
    assert [q.state(j) for j in (early, middle, late)] == ["ready", "ready", "delayed"]


def test_kick_of_a_tube_that_does_not_exist_kicks_nothing(q: Q) -> None:
    assert q.e.kick("nosuch", 10, q.now) == b"KICKED 0\r\n"


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
    assert q.e.owned[1] == {job}
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
    assert q.e.owned == {}
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


# --------------------------------------------------------------------------- offers


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
    q.advance(5 * NS)  # offer mode leaves the deadlines to the acceptor
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
    assert q.e.owned == {}


def test_disconnect_declines_offers_and_releases_reserved_jobs_at_once(q: Q) -> None:
    held = q.put(ttr=100)
    q.reserve_id(5)
    offered = q.put()
    q.reserve(5, offer=True)
    q.e.disconnect(5, q.now)
    assert [q.state(j) for j in (held, offered)] == ["ready", "ready"]
    assert q.stats_job(held)["releases"] == "0"  # not a client release
    assert q.e.owned == {}
    assert q.stats_tube()["current-jobs-ready"] == "2"


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


# --------------------------------------------------------------------------- pause


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


# --------------------------------------------------------------------------- tubes and GC


def test_default_always_exists(q: Q) -> None:
    assert q.tube_names() == ["default"]
    q.e.ref("default", 1, 1, q.now)
    q.e.ref("default", -1, -1, q.now)
    job = q.put()
    q.e.delete(1, job, q.now)
    assert q.tube_names() == ["default"]
    assert Engine(owns_default=False).list_tubes() == []


def test_a_tube_lives_while_it_is_used_watched_or_holds_jobs(q: Q) -> None:
    q.e.ref("t", 1, 0, q.now)
    assert "t" in q.tube_names()
    assert q.stats_tube("t")["current-using"] == "1"
    q.e.ref("t", 0, 1, q.now)
    q.e.ref("t", -1, 0, q.now)
    assert q.stats_tube("t")["current-watching"] == "1"
    job = q.put("t")
    q.e.ref("t", 0, -1, q.now)
    assert "t" in q.tube_names()  # the job keeps it
    q.e.reserve_job(1, job, q.now)
    q.e.bury(1, job, 0, q.now)
    assert "t" in q.tube_names()
    assert q.e.delete(1, job, q.now) == proto.DELETED
    assert "t" not in q.tube_names()
    assert q.e.stats_tube("t", q.now) == proto.NOT_FOUND


def test_a_reserved_job_keeps_its_tube_alive(q: Q) -> None:
    job = q.put("t")
    q.e.reserve_job(1, job, q.now)
    q.e.ref("t", 1, 0, q.now)
    q.e.ref("t", -1, 0, q.now)
    assert "t" in q.tube_names()
    assert q.e.delete(1, job, q.now) == proto.DELETED
    assert "t" not in q.tube_names()


def test_a_collected_tube_loses_its_pause_and_stats(q: Q) -> None:
    q.e.ref("t", 1, 0, q.now)
    q.e.pause_tube("t", 100, q.now)
    job = q.put("t")
    q.e.delete(1, job, q.now)
    q.e.ref("t", -1, 0, q.now)
    q.e.ref("t", 1, 0, q.now)
    stats = q.stats_tube("t")
    assert (stats["pause"], stats["cmd-pause-tube"], stats["cmd-delete"]) == ("0", "0", "0")
    assert stats["total-jobs"] == "0"


def test_list_tubes_order_emulates_swap_remove(q: Q) -> None:
    """beanstalkd removes a tube by moving the last one into its slot."""
    for i, name in enumerate(["a", "b", "c", "d"]):
        q.e.ref(name, 1, 0, q.now + i)
    assert q.tube_names() == ["default", "a", "b", "c", "d"]
    q.e.ref("b", -1, 0, q.now)
    assert q.tube_names() == ["default", "a", "d", "c"]
    q.e.ref("e", 1, 0, q.now + 10)
    assert q.tube_names() == ["default", "a", "d", "c", "e"]
    q.e.ref("e", -1, 0, q.now)  # removing the last one moves nothing
    assert q.tube_names() == ["default", "a", "d", "c"]
    q.e.ref("a", -1, 0, q.now)
    assert q.tube_names() == ["default", "c", "d"]


def test_list_tubes_keeps_creation_order_for_tubes_created_at_the_same_instant(q: Q) -> None:
    """A shard handles a whole batch with one `now`: `watch zz`, `watch aa` pipelined."""
    q.e.ref("zz", 0, 1, q.now)
    q.e.ref("aa", 0, 1, q.now)
    q.e.ref("mm", 0, 1, q.now)
    assert q.tube_names() == ["default", "zz", "aa", "mm"]
    q.e.ref("zz", 0, -1, q.now)
    assert q.tube_names() == ["default", "mm", "aa"]


def test_list_tubes_matches_beanstalkds_swap_remove_array_under_random_gc(q: Q) -> None:
    """Replay random use/ignore against a model of beanstalkd's `tubes` array (ms.c)."""
    rng = random.Random(11)
    array = ["default"]  # beanstalkd: append on create, a[i] = a[--len] on delete
    refs: dict[str, int] = {}
    for _ in range(2000):
        q.now += rng.randint(1, 1000)  # strictly increasing, one tube per instant
        name = rng.choice("abcdefgh")
        if refs.get(name) and rng.random() < 0.5:
            refs[name] -= 1
            q.e.ref(name, 0, -1, q.now)
            if refs[name] == 0:
                hole = array.index(name)
                array[hole] = array[-1]
                array.pop()
        else:
            if not refs.get(name):
                array.append(name)
            refs[name] = refs.get(name, 0) + 1
            q.e.ref(name, 0, 1, q.now)
        assert q.tube_names() == array
    assert q.e.counts()["current-tubes"] == len(array)


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


# --------------------------------------------------------------------------- randomized model


TUBES = ("default", "a", "b", "c")


@dataclass
class MConn:
    cid: int
    use: str
    watch: list[str]
    rid: int | None = None  # a waiting reserve
    rid_offer: bool = False
    rid_expire: tuple[int, bytes] | None = None  # when and how the waiting reserve ends
    offers: set[int] = field(default_factory=set)


class Model:
    """Drives an engine with random commands and checks the invariants after every step."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.q = Q()
        self.conns: dict[int, MConn] = {}
        self.next_cid = 1
        self.live: set[int] = set()  # ids put and not deleted
        self.holder: dict[int, int] = {}  # job -> conn it is reserved by
        self.timeouts: dict[int, int] = {}  # job -> timeouts seen so far
        self.by_rid: dict[int, int] = {}  # waiting rid -> conn
        self.total: dict[int, tuple[Tube, int]] = {}  # id(tube) -> (tube, puts into it)
        self.log: list[str] = []
        for _ in range(4):
            self.connect()

    # ---- connections
    def connect(self) -> None:
        cid = self.next_cid
        self.next_cid += 1
        use = self.rng.choice(TUBES)
        watch = self.rng.sample(TUBES, self.rng.randint(1, 3))
        self.conns[cid] = MConn(cid, use, watch)
        self.q.e.ref(use, 1, 0, self.q.now)
        for t in watch:
            self.q.e.ref(t, 0, 1, self.q.now)

    def disconnect(self, c: MConn) -> None:
        self.q.e.disconnect(c.cid, self.q.now)
        if c.rid is not None:
            del self.by_rid[c.rid]
        for job, conn in list(self.holder.items()):
            if conn == c.cid:
                del self.holder[job]
        self.q.e.ref(c.use, -1, 0, self.q.now)
        for t in c.watch:
            self.q.e.ref(t, 0, -1, self.q.now)
        del self.conns[c.cid]
        self.connect()

    # ---- helpers
    def take(self, job: int, conn: int) -> None:
        assert job not in self.holder, f"job {job} handed to {conn} while held by {self.holder}"
        self.holder[job] = conn

    def soon_at(self, c: MConn) -> int | None:
        deadlines = [self.q.e.jobs[j].deadline for j, conn in self.holder.items() if conn == c.cid]
        return min(deadlines) - SAFETY_MARGIN if deadlines else None

    def best_ready(self, tubes: list[str]) -> int | None:
        heads = []
        for name in tubes:
            tube = self.q.e.tubes.get(name)
            if tube is not None and tube.ready and not tube.paused(self.q.now):
                heads.append(tube.ready[0])
        return unkey(min(heads))[2] if heads else None

    def held_by(self, c: MConn) -> list[int]:
        return sorted(j for j, conn in self.holder.items() if conn == c.cid)

    # ---- one step
    def step(self) -> None:
        rng, q = self.rng, self.q
        idle = [c for c in self.conns.values() if c.rid is None and not c.offers]
        ops = ["advance", "put", "put", "reserve", "reserve", "delete", "kick", "kick_job"]
        ops += ["pause", "watch", "disconnect", "reserve_job", "cancel", "resolve"]
        ops += ["release", "release", "bury", "touch", "use"]
        op = rng.choice(ops)
        self.log.append(op)
        before = set(q.e.waiters)
        if op == "advance":
            wake = q.e.next_wakeup()
            choice = rng.random()
            if wake is not None and choice < 0.3:
                q.to(max(q.now, wake))
            elif wake is not None and choice < 0.4:
                q.to(max(q.now, wake - 1))
            else:
                q.advance(rng.choice([0, 1, NS // 3, NS, 2 * NS + 7]))
            self.reconcile_timeouts()
        elif op == "put" and self.conns:
            c = rng.choice(list(self.conns.values()))
            job = q.put(
                c.use,
                pri=rng.choice([0, 1, 1023, 1024, 5000]),
                delay=rng.choice([0, 0, 0, 1, 2]),
                ttr=rng.choice([1, 2, 5]),
            )
            self.live.add(job)
            self.timeouts[job] = 0
            tube = q.e.tubes[c.use]
            self.total[id(tube)] = (tube, self.total.get(id(tube), (tube, 0))[1] + 1)
        elif op == "reserve" and idle:
            c = rng.choice(idle)
            offer = rng.random() < 0.3
            timeout = rng.choice([None, 0, 1, 3])
            soon_at = self.soon_at(c)
            best = self.best_ready(c.watch)
            if offer:  # a cross-shard reserve: the acceptor keeps the deadlines
                timeout, soon_at = None, None
            rid = q.rid()
            payload = q.reserve(c.cid, tuple(c.watch), timeout, soon_at, offer, rid=rid)
            if best is not None:  # invariant 4: the best ready job, and it beats DEADLINE_SOON
                assert payload is not None and payload[0] in (RESERVED, OFFER), payload
                assert payload[2] == best
            if payload is None or payload[0] == WAITING:
                assert best is None
                c.rid, c.rid_offer = rid, offer
                self.by_rid[rid] = c.cid
                timeout_at = None if timeout is None else q.now + timeout * NS
                c.rid_expire = None
                if (
                    not offer
                    and soon_at is not None
                    and (timeout_at is None or soon_at <= timeout_at)
                ):
                    c.rid_expire = (soon_at, proto.DEADLINE_SOON)
                elif not offer and timeout_at is not None:
                    c.rid_expire = (timeout_at, proto.TIMED_OUT)
            elif payload[0] == RESERVED:
                assert not offer
                self.take(payload[2], c.cid)
            elif payload[0] == OFFER:
                assert offer
                c.offers.add(payload[2])
            else:
                assert payload[0] == FINAL
                if soon_at is not None and q.now >= soon_at:
                    assert payload[1] == proto.DEADLINE_SOON
                else:
                    assert payload[1] == proto.TIMED_OUT and timeout == 0
        elif op == "reserve_job" and idle and self.live:
            c = rng.choice(idle)
            job = rng.choice(sorted(self.live))
            state = q.e.jobs[job].state
            payload = q.e.reserve_job(c.cid, job, q.now)
            if state in (State.READY, State.DELAYED, State.BURIED):
                assert payload[0] == RESERVED
                self.take(job, c.cid)
            else:
                assert payload == [FINAL, proto.NOT_FOUND]
        elif op == "delete" and idle and self.live:
            c = rng.choice(idle)
            job = rng.choice(sorted(self.live))
            expect = self.holder.get(job, c.cid) == c.cid and q.e.jobs[job].state != State.OFFERED
            reply = q.e.delete(c.cid, job, q.now)
            assert reply == (proto.DELETED if expect else proto.NOT_FOUND)
            if reply == proto.DELETED:
                self.live.discard(job)
                self.holder.pop(job, None)
        elif op in ("release", "bury", "touch") and idle:
            c = rng.choice(idle)
            mine = self.held_by(c)
            others = sorted(self.live - set(mine))
            if not mine and not others:
                return
            job = rng.choice(mine) if mine and rng.random() < 0.85 else rng.choice(others or mine)
            pri = rng.choice([0, 1024, 7])
            if op == "release":
                reply = q.e.release(c.cid, job, pri, rng.choice([0, 0, 1]), q.now)
                ok = proto.RELEASED
            elif op == "bury":
                reply = q.e.bury(c.cid, job, pri, q.now)
                ok = proto.BURIED
            else:
                reply = q.e.touch(c.cid, job, q.now)[0]
                ok = proto.TOUCHED
            assert reply == (ok if job in mine else proto.NOT_FOUND)
            if job in mine and op != "touch":
                del self.holder[job]
        elif op == "kick" and self.conns:
            c = rng.choice(list(self.conns.values()))
            tube = q.e.tubes.get(c.use)
            buried, delayed = len(tube.buried), len(tube.delayed)
            bound = rng.choice([0, 1, 2, 100])
            expect = min(bound, buried if buried else delayed)
            assert q.e.kick(c.use, bound, q.now) == b"KICKED %d\r\n" % expect
        elif op == "kick_job" and self.live:
            job = rng.choice(sorted(self.live))
            kickable = q.e.jobs[job].state in (State.BURIED, State.DELAYED)
            assert q.e.kick_job(job, q.now) == (proto.KICKED if kickable else proto.NOT_FOUND)
        elif op == "pause":
            name = rng.choice(TUBES)
            exists = name in q.e.tubes
            reply = q.e.pause_tube(name, rng.choice([0, 1, 2]), q.now)
            assert reply == (proto.PAUSED if exists else proto.NOT_FOUND)
        elif op == "watch" and idle:
            c = rng.choice(idle)
            name = rng.choice(TUBES)
            if name in c.watch and len(c.watch) > 1:
                c.watch.remove(name)
                q.e.ref(name, 0, -1, q.now)
            elif name not in c.watch:
                c.watch.append(name)
                q.e.ref(name, 0, 1, q.now)
        elif op == "use" and idle:
            c = rng.choice(idle)
            old, c.use = c.use, rng.choice(TUBES)
            q.e.ref(c.use, 1, 0, q.now)
            q.e.ref(old, -1, 0, q.now)
        elif op == "disconnect" and self.conns:
            self.disconnect(rng.choice(list(self.conns.values())))
        elif op == "cancel":
            waiting = [c for c in self.conns.values() if c.rid is not None]
            if waiting:
                c = rng.choice(waiting)
                q.e.cancel(c.rid)
                del self.by_rid[c.rid]
                c.rid = None
        elif op == "resolve":
            offered = [c for c in self.conns.values() if c.offers]
            if offered:
                c = rng.choice(offered)
                job = c.offers.pop()
                if rng.random() < 0.6:
                    q.e.accept(c.cid, job, q.now)
                    self.take(job, c.cid)
                else:
                    q.e.decline(c.cid, job, q.now)
        self.handle_events(before)
        self.check()

    def reconcile_timeouts(self) -> None:
        """Jobs whose TTR ran out in this tick are no longer held (before any re-serving)."""
        for job in list(self.holder):
            now_timeouts = self.q.e.jobs[job].timeouts
            if now_timeouts > self.timeouts[job]:
                assert now_timeouts == self.timeouts[job] + 1
                self.timeouts[job] = now_timeouts
                del self.holder[job]
        for job in self.live:
            self.timeouts[job] = self.q.e.jobs[job].timeouts

    def handle_events(self, waiters_before: set[int]) -> None:
        q = self.q
        served_from: list[tuple[int, str]] = []
        for rid, payload in q.events():
            assert rid in self.by_rid, f"event for a reserve that is not waiting: {rid} {payload}"
            assert rid in waiters_before
            c = self.conns[self.by_rid.pop(rid)]
            assert c.rid == rid
            c.rid = None
            kind = payload[0]
            if kind == RESERVED:
                assert not c.rid_offer
                self.take(payload[2], c.cid)
                served_from.append((rid, q.e.jobs[payload[2]].tube))
            elif kind == OFFER:
                assert c.rid_offer
                c.offers.add(payload[2])
                served_from.append((rid, q.e.jobs[payload[2]].tube))
            else:
                assert kind == FINAL and c.rid_expire is not None
                when, reply = c.rid_expire
                assert payload[1] == reply
                assert when <= q.now
        # invariant 5: nobody older still waits on a tube a younger waiter was served from
        for rid, tube in served_from:
            for w in q.e.waiters.values():
                assert not (tube in w.tubes and w.rid < rid), f"{w.rid} skipped for {rid}"

    # ---- invariants
    def check(self) -> None:
        e, now = self.q.e, self.q.now
        assert set(e.jobs) == self.live  # nothing lost, nothing invented
        places: list[int] = []
        for name, tube in e.tubes.items():
            assert tube.name == name
            ready_ids = [unkey(k)[2] for k in tube.ready]
            for key in tube.ready:
                job = e.jobs[unkey(key)[2]]
                assert (job.state, job.tube, unkey(key)) == (
                    State.READY,
                    name,
                    (job.pri, job.seq, job.id),
                )
            for key in tube.delayed:
                job = e.jobs[unkey(key)[2]]
                assert (job.state, job.tube, unkey(key)) == (
                    State.DELAYED,
                    name,
                    (job.deadline, job.seq, job.id),
                )
                assert job.deadline > now, "a due delayed job was not promoted"
            for job_id in tube.buried:
                assert (e.jobs[job_id].state, e.jobs[job_id].tube) == (State.BURIED, name)
            places += ready_ids + [unkey(k)[2] for k in tube.delayed] + list(tube.buried)
            mine = [j for j in e.jobs.values() if j.tube == name]
            reserved = sum(j.state == State.RESERVED for j in mine)
            offered = sum(j.state == State.OFFERED for j in mine)
            urgent = sum(unkey(k)[0] < URGENT_PRI for k in tube.ready)
            urgent += sum(j.state == State.OFFERED and j.pri < URGENT_PRI for j in mine)
            assert (tube.reserved, tube.offered, tube.urgent) == (reserved, offered, urgent)
            assert tube.in_use(), f"tube {name} should have been collected"
            stats = self.q.stats_tube(name)
            assert int(stats["current-jobs-ready"]) == len(ready_ids) + offered
            assert int(stats["current-jobs-reserved"]) == reserved
            assert int(stats["current-jobs-delayed"]) == len(tube.delayed)
            assert int(stats["current-jobs-buried"]) == len(tube.buried)
            assert int(stats["current-jobs-urgent"]) == urgent
            assert int(stats["current-waiting"]) == len(tube.waiters)
            assert int(stats["total-jobs"]) == self.total.get(id(tube), (tube, 0))[1]
            using = sum(c.use == name for c in self.conns.values())
            watching = sum(name in c.watch for c in self.conns.values())
            assert (tube.using, tube.watching) == (using, watching)
            # invariant 3: a waiter never sits next to a ready job it could take
            if tube.waiters:
                assert not (tube.ready and not tube.paused(now)), (
                    f"{name} has ready jobs and waiters"
                )
            if tube.pause:
                assert tube.unpause_at > now, "a pause that ended was not noticed"
        for c in self.conns.values():
            for name in [c.use, *c.watch]:
                assert name in e.tubes
        held = [j for ids in e.owned.values() for j in ids]
        assert len(places) + len(held) == len(e.jobs)
        assert set(places) | set(held) == set(e.jobs), "a job is in no place or in two"
        for conn, ids in e.owned.items():
            assert ids
            for job_id in ids:
                job = e.jobs[job_id]
                assert job.owner == conn and job.state in (State.RESERVED, State.OFFERED)
        # invariant 1: reserved by exactly the connection the model handed it to
        reserved_now = {j.id: j.owner for j in e.jobs.values() if j.state == State.RESERVED}
        assert reserved_now == self.holder
        for job_id in reserved_now:
            assert e.jobs[job_id].deadline >= now, "a TTR timer was lost"
        offered_now = {j.id: j.owner for j in e.jobs.values() if j.state == State.OFFERED}
        assert offered_now == {j: c.cid for c in self.conns.values() for j in c.offers}
        # waiters
        assert set(e.waiters) == set(self.by_rid)
        for rid, w in e.waiters.items():
            assert w.conn == self.by_rid[rid]
            for name in w.tubes:
                assert e.tubes[name].waiters.get(rid) is w
            if w.expire_at is not None:
                assert w.expire_at > now, "a reserve timeout was lost"
        assert e.counts()["current-jobs-reserved"] == len(self.holder)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_keep_every_invariant(seed: int) -> None:
    model = Model(seed)
    for i in range(3000):
        try:
            model.step()
        except AssertionError as err:
            raise AssertionError(f"seed {seed}, step {i}, ops {model.log[-8:]}: {err}") from err


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
