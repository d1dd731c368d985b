"""Engine unit tests: per-tube policies enforced (shardq/engine/policing.py).

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py. Each test gives
the engine its policies with `set_policies`, as a shard does at start-up and on SIGHUP.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import Q

from shardq.engine.engine import Engine
from shardq.engine.job import NS, State
from shardq.engine.policy import Policies
from shardq.engine.records import DELETE, STATE
from shardq.protocol import proto
from shardq.protocol.replies import put_reply


def policed(q: Q, **policy: Any) -> Q:
    """`q` with `policy` on the tube "p" (and on no other)."""
    q.e.set_policies(Policies({"p": policy}))
    return q


def try_put(q: Q, body: bytes = b"x", tube: str = "p", delay: int = 0) -> bytes:
    """The put's reply, as the shard formats the engine's answer."""
    job_id = q.next_id
    q.next_id += 1
    return put_reply(job_id, q.e.put(job_id, job_id, tube, 0, delay, 60, body, q.now))


def tube_of(q: Q, name: str = "p") -> Any:
    return q.e.tubes[name]


# ------------------------------------------------------------------- max_jobs, max_bytes


def test_put_past_max_jobs_is_out_of_memory_counting_jobs_in_every_state(q: Q) -> None:
    policed(q, max_jobs=4)
    reserved, buried = q.put("p"), q.put("p")
    q.put("p", delay=30)
    assert q.reserve_id(1, ("p",)) == reserved
    assert q.reserve_id(2, ("p",)) == buried
    assert q.e.bury(2, buried, 0, q.now) == proto.BURIED
    q.put("p")  # ready
    assert tube_of(q).jobs() == 4
    assert try_put(q) == proto.OUT_OF_MEMORY
    assert try_put(q, tube="other").startswith(b"INSERTED")  # no policy there


def test_a_delete_makes_room_under_max_jobs(q: Q) -> None:
    policed(q, max_jobs=2)
    first = q.put("p")
    q.put("p")
    assert try_put(q) == proto.OUT_OF_MEMORY
    assert q.e.delete(0, first, q.now) == proto.DELETED
    assert try_put(q).startswith(b"INSERTED")
    assert try_put(q) == proto.OUT_OF_MEMORY


def test_max_bytes_counts_body_sizes(q: Q) -> None:
    policed(q, max_bytes=10)
    q.put("p", body=b"12345")
    assert try_put(q, b"123456") == proto.OUT_OF_MEMORY
    assert try_put(q, b"12345").startswith(b"INSERTED")  # exactly at the limit
    assert tube_of(q).body_bytes == 10
    assert try_put(q, b"").startswith(b"INSERTED")  # an empty body takes no bytes
    assert try_put(q, b"1") == proto.OUT_OF_MEMORY


def test_a_refused_put_changes_nothing(q: Q) -> None:
    q.e.wal_out = []
    policed(q, max_jobs=1)
    q.put("p")
    records = len(q.e.wal_out)
    total = q.e.total_jobs
    assert try_put(q) == proto.OUT_OF_MEMORY
    assert len(q.e.wal_out) == records
    assert q.e.total_jobs == total
    assert q.stats_tube("p")["total-jobs"] == "1"


def test_a_refused_put_leaves_no_empty_tube_behind(q: Q) -> None:
    q.e.set_policies(Policies({"defaults": {"max_bytes": 1}}))
    assert try_put(q, b"too big", tube="fresh") == proto.OUT_OF_MEMORY
    assert "fresh" not in q.e.tubes


# ------------------------------------------------------------------- discard_old


def test_discard_old_drops_the_oldest_ready_job_not_the_lowest_priority(q: Q) -> None:
    q.e.wal_out = []
    q.e.audit = []
    policed(q, max_jobs=3, discard_old=True)
    old = q.put("p", pri=9)  # the oldest, but the least urgent
    mid = q.put("p", pri=0)
    new = q.put("p", pri=5)
    q.e.wal_out.clear()
    q.e.audit.clear()
    assert try_put(q).startswith(b"INSERTED")
    assert q.e.peek(old) == proto.NOT_FOUND
    assert all(q.e.peek(j) != proto.NOT_FOUND for j in (mid, new))
    assert tube_of(q).discarded == 1
    assert tube_of(q).jobs() == 3
    assert [r[0] for r in q.e.wal_out] == [DELETE, "J"]  # logged as a delete, then the put
    assert q.e.wal_out[0][1] == old
    assert [(e[1], e[2]) for e in q.e.audit] == [("delete", old), ("put", q.next_id - 1)]
    assert q.stats_tube("p")["cmd-delete"] == "0"  # no delete command was given


def test_discard_old_skips_jobs_that_are_not_ready(q: Q) -> None:
    policed(q, max_jobs=3, discard_old=True)
    held = q.put("p")
    delayed = q.put("p", delay=60)
    ready = q.put("p")
    assert q.reserve_id(1, ("p",)) == held
    assert try_put(q).startswith(b"INSERTED")
    assert q.e.peek(ready) == proto.NOT_FOUND
    assert q.state(held) == "reserved"
    assert q.state(delayed) == "delayed"


def test_discard_old_refuses_when_no_ready_job_can_make_room(q: Q) -> None:
    policed(q, max_jobs=2, discard_old=True)
    a = q.put("p")
    q.put("p", delay=60)
    assert q.reserve_id(1, ("p",)) == a
    assert try_put(q) == proto.OUT_OF_MEMORY
    assert tube_of(q).discarded == 0


def test_discard_old_drops_nothing_unless_it_can_drop_enough(q: Q) -> None:
    policed(q, max_bytes=10, discard_old=True)
    small = q.put("p", body=b"12")
    big = q.put("p", body=b"12345678", delay=60)  # not ready: cannot be dropped
    assert try_put(q, b"123456789") == proto.OUT_OF_MEMORY  # 2 freed bytes are not enough
    assert q.e.peek(small) != proto.NOT_FOUND
    assert try_put(q, b"11").startswith(b"INSERTED")  # dropping `small` is enough
    assert q.e.peek(small) == proto.NOT_FOUND
    assert q.e.peek(big) != proto.NOT_FOUND


def test_discard_old_drops_as_many_as_the_bytes_need(q: Q) -> None:
    policed(q, max_bytes=10, discard_old=True)
    ids = [q.put("p", body=b"123") for _ in range(3)]  # 9 bytes
    assert try_put(q, b"1234567").startswith(b"INSERTED")  # 6 must go: the two oldest
    assert [q.e.peek(j) == proto.NOT_FOUND for j in ids] == [True, True, False]
    assert tube_of(q).discarded == 2
    assert tube_of(q).body_bytes == 10


def test_a_body_larger_than_max_bytes_is_refused_even_with_discard_old(q: Q) -> None:
    policed(q, max_bytes=4, discard_old=True)
    first = q.put("p", body=b"1")
    assert try_put(q, b"12345") == proto.OUT_OF_MEMORY
    assert q.e.peek(first) != proto.NOT_FOUND


def test_discard_old_follows_jobs_in_and_out_of_the_ready_queue(q: Q) -> None:
    """Released, kicked and offered jobs keep their place in put order."""
    policed(q, max_jobs=3, discard_old=True)
    a, b, c = q.put("p"), q.put("p"), q.put("p")
    assert q.reserve_id(1, ("p",)) == a
    assert q.e.release(1, a, 100, 0, q.now) == proto.RELEASED  # ready again, still oldest
    assert try_put(q).startswith(b"INSERTED")
    assert q.e.peek(a) == proto.NOT_FOUND
    assert q.reserve_id(1, ("p",)) == b
    assert q.e.bury(1, b, 0, q.now) == proto.BURIED
    assert try_put(q).startswith(b"INSERTED")  # b is buried: c goes
    assert q.e.peek(c) == proto.NOT_FOUND
    assert q.e.kick("p", 1, q.now) == 1
    assert try_put(q).startswith(b"INSERTED")  # b is ready again and the oldest
    assert q.e.peek(b) == proto.NOT_FOUND


# ------------------------------------------------------------------- max_reserves, max_timeouts


def test_release_past_max_reserves_buries_and_answers_buried(q: Q) -> None:
    q.e.wal_out = []
    policed(q, max_reserves=2)
    job = q.put("p", pri=7)
    assert q.reserve_id(1, ("p",)) == job
    assert q.e.release(1, job, 7, 0, q.now) == proto.RELEASED  # reserved once
    assert q.reserve_id(1, ("p",)) == job
    q.e.wal_out.clear()
    assert q.e.release(1, job, 3, 0, q.now) == proto.BURIED  # reserved twice: spent
    stats = q.stats_job(job)
    assert (stats["state"], stats["pri"], stats["reserves"]) == ("buried", "3", "2")
    assert (stats["releases"], stats["buries"]) == ("1", "1")
    assert tube_of(q).policy_buried == 1
    assert [(r[0], r[1], r[2]) for r in q.e.wal_out] == [(STATE, job, int(State.BURIED))]
    assert q.e.peek_buried("p") == b"FOUND %d 1\r\nx\r\n" % job
    assert q.e.kick("p", 5, q.now) == 1  # an operator may give it another go


def test_a_delayed_release_past_max_reserves_buries_too(q: Q) -> None:
    policed(q, max_reserves=1)
    job = q.put("p")
    q.reserve_id(1, ("p",))
    assert q.e.release(1, job, 0, 30, q.now) == proto.BURIED
    assert q.state(job) == "buried"


def test_ttr_timeout_past_max_reserves_buries(q: Q) -> None:
    policed(q, max_reserves=1)
    job = q.put("p", ttr=1)
    q.reserve_id(1, ("p",))
    q.advance(2 * NS)
    assert q.state(job) == "buried"
    assert q.stats_job(job)["timeouts"] == "1"
    assert q.e.counts()["job-timeouts"] == 1


def test_max_timeouts_buries_at_the_timeout_that_reaches_it(q: Q) -> None:
    q.e.wal_out = []
    policed(q, max_timeouts=2)
    job = q.put("p", ttr=1)
    q.reserve_id(1, ("p",))
    q.e.wal_out.clear()
    q.advance(2 * NS)
    assert q.state(job) == "ready"  # one timeout
    assert [(r[0], r[2], r[7]) for r in q.e.wal_out] == [(STATE, int(State.READY), 1)]
    q.reserve_id(1, ("p",))
    q.advance(2 * NS)
    assert q.state(job) == "buried"
    assert tube_of(q).policy_buried == 1
    assert q.stats_job(job)["timeouts"] == "2"


def test_max_timeouts_does_not_bury_at_a_release(q: Q) -> None:
    policed(q, max_timeouts=1)
    job = q.put("p", ttr=1)
    q.reserve_id(1, ("p",))
    assert q.e.release(1, job, 0, 0, q.now) == proto.RELEASED


def test_a_closing_connection_buries_a_job_past_max_reserves(q: Q) -> None:
    policed(q, max_reserves=1)
    job = q.put("p")
    other = q.put("default")
    q.reserve_id(1, ("p",))
    q.reserve_id(1, ("default",))
    q.e.disconnect(1, q.now)
    assert q.state(job) == "buried"
    assert q.state(other) == "ready"


def test_policy_burials_and_discards_are_noted_as_bury_and_delete_events(q: Q) -> None:
    q.e.audit = []
    policed(q, max_reserves=1, max_jobs=1, discard_old=True)
    job = q.put("p")
    q.reserve_id(1, ("p",))
    assert q.e.release(1, job, 0, 0, q.now) == proto.BURIED
    assert [e[1] for e in q.e.audit] == ["put", "reserve", "bury"]


def test_tubes_without_a_policy_log_nothing_more(q: Q) -> None:
    """A TTR timeout is logged only in a tube with a policy (its count matters there)."""
    q.e.wal_out = []
    q.e.set_policies(Policies({"p": {"max_timeouts": 5}}))
    job = q.put("default", ttr=1)
    q.reserve_id(1)
    q.e.wal_out.clear()
    q.advance(2 * NS)
    assert q.e.wal_out == []
    assert q.state(job) == "ready"


# ------------------------------------------------------------------- reload, restart


def test_a_lowered_limit_keeps_the_jobs_and_refuses_the_next_put(q: Q) -> None:
    policed(q, max_jobs=5)
    for _ in range(3):
        q.put("p")
    policed(q, max_jobs=2)
    assert tube_of(q).jobs() == 3
    assert try_put(q) == proto.OUT_OF_MEMORY
    q.e.set_policies(Policies())
    assert try_put(q).startswith(b"INSERTED")


def test_discard_old_turned_on_by_a_reload_knows_the_ready_jobs(q: Q) -> None:
    policed(q, max_jobs=2)
    a = q.put("p")
    q.put("p")
    policed(q, max_jobs=2, discard_old=True)
    assert try_put(q).startswith(b"INSERTED")
    assert q.e.peek(a) == proto.NOT_FOUND


@pytest.mark.parametrize("compacted", [False, True])
def test_a_restart_from_the_log_keeps_discards_burials_and_counts(compacted: bool) -> None:
    q = Q()
    q.e.wal_out = []
    policed(q, max_jobs=3, discard_old=True, max_reserves=1)
    dropped = q.put("p", body=b"a")
    held = q.put("p", body=b"bb")
    q.put("p", body=b"ccc")
    assert q.reserve_id(1, ("p",)) == dropped
    assert q.e.release(1, dropped, 0, 0, q.now) == proto.BURIED
    assert q.reserve_id(1, ("p",)) == held
    assert try_put(q, b"dddd").startswith(b"INSERTED")  # drops the oldest ready: ccc
    records = q.e.snapshot() if compacted else list(q.e.wal_out)

    again = Engine()
    again.set_policies(Policies({"p": {"max_jobs": 3, "discard_old": True, "max_reserves": 1}}))
    again.restore([list(r) for r in records], q.now)
    tube = again.tubes["p"]
    assert tube.jobs() == 3
    assert tube.body_bytes == 1 + 2 + 4
    assert again.jobs[dropped].state == State.BURIED
    assert again.jobs[held].state == State.READY  # a reserved job comes back ready
    assert list(tube.by_age or []) == sorted(tube.by_age or [])
    assert len(tube.by_age or []) == 2
    assert again.put(99, 99, "p", 0, 0, 60, b"e", q.now) is True
    assert held not in again.jobs  # the oldest ready job after the restart


# ------------------------------------------------------------------- stats-tube


def test_stats_tube_of_a_tube_without_a_policy_is_beanstalkds(q: Q) -> None:
    from shardq.protocol.stats_keys import STATS_TUBE_KEYS

    q.e.set_policies(Policies({"p": {"max_jobs": 5}, "z": {"max_jobs": 0}}))
    q.put("default")
    q.put("z")
    for name in ("default", "z"):  # no entry, or one that sets nothing
        assert list(q.stats_tube(name)) == list(STATS_TUBE_KEYS)


def test_stats_tube_shows_the_policy_after_beanstalkds_keys(q: Q) -> None:
    from shardq.protocol.stats_keys import POLICY_TUBE_KEYS, STATS_TUBE_KEYS

    policed(q, max_jobs=2, max_bytes=100, discard_old=True, max_reserves=1)
    first = q.put("p", body=b"abc")
    q.put("p", body=b"de")
    assert try_put(q, b"f").startswith(b"INSERTED")  # discards `first`
    job = q.reserve_id(1, ("p",))
    assert q.e.release(1, job, 0, 0, q.now) == proto.BURIED
    stats = q.stats_tube("p")
    assert list(stats) == list(STATS_TUBE_KEYS + POLICY_TUBE_KEYS)
    assert {key: stats[key] for key in POLICY_TUBE_KEYS} == {
        "policy-max-jobs": "2",
        "policy-max-bytes": "100",
        "policy-discard-old": "true",
        "policy-max-reserves": "1",
        "policy-max-timeouts": "0",
        "policy-max-age": "0",
        "policy-max-reserved": "0",
        "policy-reserve-rate": "0",
        "policy-fanout": "false",
        "policy-expired-to": '""',
        "current-bytes": "3",
        "total-discarded": "1",
        "total-policy-buried": "1",
        "total-expired": "0",
        "total-fanout-copies": "0",
        "total-expired-moved": "0",
    }
    assert stats["current-jobs-buried"] == "1"
    assert first not in q.e.jobs
    raw = q.e.stats_tube("p", q.now)
    assert b"\npause-time-left: 0\npolicy-max-jobs: 2\n" in raw


# ------------------------------------------------------------------- max_age


def test_a_job_past_max_age_is_deleted_and_counted(q: Q) -> None:
    q.e.wal_out = []
    q.e.audit = []
    policed(q, max_age=10)
    q.e.ref("p", 1, 0, q.now)  # a producer uses it: the tube stays when its jobs go
    buried = q.put("p")
    assert q.reserve_id(1, ("p",)) == buried
    assert q.e.bury(1, buried, 0, q.now) == proto.BURIED
    ready = q.put("p")
    q.advance(4 * NS)
    delayed = q.put("p", delay=100)
    q.e.wal_out.clear()
    q.advance(6 * NS - 1)
    assert q.e.peek(ready) != proto.NOT_FOUND  # 10 s less 1 ns old
    q.advance(1)
    assert q.e.peek(ready) == proto.NOT_FOUND
    assert q.e.peek(buried) == proto.NOT_FOUND  # buried jobs age too
    assert [(r[0], r[1]) for r in q.e.wal_out] == [(DELETE, buried), (DELETE, ready)]
    assert q.e.audit[-1][1:3] == ("delete", ready)
    q.advance(4 * NS)
    assert q.e.peek(delayed) == proto.NOT_FOUND  # delayed ones too
    assert tube_of(q).expired == 3
    assert q.stats_tube("p")["cmd-delete"] == "0"


def test_a_reserved_job_is_not_taken_from_its_worker(q: Q) -> None:
    policed(q, max_age=10)
    job = q.put("p", ttr=100)
    assert q.reserve_id(1, ("p",)) == job
    q.advance(30 * NS)
    assert q.state(job) == "reserved"
    assert q.e.release(1, job, 0, 0, q.now) == proto.RELEASED
    q.advance(NS)  # looked at again within a second
    assert q.e.peek(job) == proto.NOT_FOUND


def test_a_reserved_job_past_max_age_goes_at_its_ttr(q: Q) -> None:
    policed(q, max_age=1)
    job = q.put("p", ttr=3)
    assert q.reserve_id(1, ("p",)) == job
    q.advance(3 * NS)  # its TTR runs out a nanosecond later
    assert q.state(job) == "reserved"
    q.advance(1)
    assert q.e.peek(job) == proto.NOT_FOUND


def test_a_job_deleted_before_its_age_leaves_no_trace(q: Q) -> None:
    policed(q, max_age=5)
    job = q.put("p")
    assert q.e.delete(0, job, q.now) == proto.DELETED
    q.advance(10 * NS)
    assert "p" not in q.e.tubes or tube_of(q).expired == 0


def test_the_last_expired_job_takes_an_unused_tube_with_it(q: Q) -> None:
    policed(q, max_age=5)
    q.put("p")
    q.advance(5 * NS)
    assert "p" not in q.e.tubes  # nobody uses or watches it


def test_a_reload_that_sets_grows_or_drops_max_age(q: Q) -> None:
    job = q.put("p")
    policed(q, max_age=5)  # set after the put: counts from the put
    q.advance(3 * NS)
    policed(q, max_age=20)  # grown before it fired
    q.advance(3 * NS)
    assert q.e.peek(job) != proto.NOT_FOUND
    policed(q, max_age=10)  # shrunk
    q.advance(4 * NS)
    assert q.e.peek(job) == proto.NOT_FOUND
    kept = q.put("p")
    q.e.set_policies(Policies())  # dropped: nothing expires
    q.advance(60 * NS)
    assert q.e.peek(kept) != proto.NOT_FOUND


def test_max_age_counts_from_the_logged_put_time_after_a_restart() -> None:
    q = Q()
    q.e.wal_out = []
    policed(q, max_age=10)
    old = q.put("p")
    q.advance(6 * NS)
    young = q.put("p")
    records = [list(r) for r in q.e.wal_out]

    again = Engine()
    again.wall_offset = 7 * NS  # another monotonic clock after a restart
    again.set_policies(Policies({"p": {"max_age": 10}}))
    restart_now = q.now - 7 * NS
    again.restore(records, restart_now)
    assert sorted(again.jobs) == [old, young]
    again.tick(restart_now + 4 * NS)  # `old` is 10 s old
    assert sorted(again.jobs) == [young]
    again.tick(restart_now + 10 * NS)
    assert len(again.jobs) == 0
