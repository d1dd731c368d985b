"""Engine unit tests: fanout, a per-tube policy (shardq/engine/fanout.py).

A put to a tube whose policy says `fanout` is also put, as a copy with an id of its own, to
every tube of its family that exists (``orders+eu`` for ``orders``); the copies are logged
like any put, so a log replay brings them back.
"""

from __future__ import annotations

import itertools

import pytest
from engine_helpers import Q

from shardq.engine.engine import Engine
from shardq.engine.job import State
from shardq.engine.policy import Policies

COPY_BASE = 1_000_000  #: the ids the test's copy source hands out


@pytest.fixture
def f(q: Q) -> Q:
    """`q` with fanout on `orders`, and a copy id source."""
    q.e.set_policies(Policies({"orders": {"fanout": True}}))
    q.e.copy_id = itertools.count(COPY_BASE).__next__
    return q


def watch(q: Q, *names: str) -> None:
    for name in names:
        q.e.ref(name, 0, 1, q.now)


def test_a_put_is_copied_to_every_tube_of_its_family(f: Q) -> None:
    watch(f, "orders+us", "orders+eu", "ordersx", "other+eu")
    job = f.put("orders", pri=7, ttr=30, body=b"hello")
    assert f.state(job) == "ready"  # the parent keeps its own
    copies = {j.tube: j for j in f.e.jobs.values() if j.id != job}
    assert sorted(copies) == ["orders+eu", "orders+us"]  # family members only
    assert sorted(j.id for j in copies.values()) == [COPY_BASE, COPY_BASE + 1]  # name order
    assert copies["orders+eu"].id == COPY_BASE
    for copy in copies.values():
        assert (copy.pri, copy.ttr, copy.body, copy.state) == (7, 30, b"hello", State.READY)
    stats = f.stats_tube("orders")
    assert (stats["policy-fanout"], stats["total-fanout-copies"]) == ("true", "2")
    assert f.stats_tube("orders+eu")["total-jobs"] == "1"


def test_a_delayed_put_makes_delayed_copies(f: Q) -> None:
    watch(f, "orders+eu")
    f.put("orders", delay=5)
    assert f.state(COPY_BASE) == "delayed"


def test_without_the_policy_or_without_members_nothing_is_copied(q: Q) -> None:
    q.e.copy_id = itertools.count(COPY_BASE).__next__
    watch(q, "orders+eu")
    q.put("orders")
    assert len(q.e.jobs) == 1  # no policy: beanstalkd's behaviour
    q.e.set_policies(Policies({"orders": {"fanout": True}}))
    q.put("lonely")
    q.e.set_policies(Policies({"lonely": {"fanout": True}}))
    q.put("lonely")
    assert len(q.e.jobs) == 3  # no member tube: nothing to copy to


def test_a_member_tube_that_went_away_gets_no_copy(f: Q) -> None:
    watch(f, "orders+eu")
    f.e.ref("orders+eu", 0, -1, f.now)  # nobody watches it, it holds nothing: gone
    f.put("orders")
    assert len(f.e.jobs) == 1
    assert "orders" not in f.e.families


def test_a_put_to_a_member_is_not_copied(f: Q) -> None:
    f.e.set_policies(Policies({"orders*": {"fanout": True}}))
    watch(f, "orders+eu", "orders+us")
    f.put("orders+eu")
    assert len(f.e.jobs) == 1


def test_a_copy_a_members_policy_refuses_is_not_made(f: Q) -> None:
    f.e.set_policies(Policies({"orders": {"fanout": True}, "orders+full": {"max_jobs": 1}}))
    watch(f, "orders+full", "orders+eu")
    f.put("orders")
    f.put("orders")
    assert f.stats_tube("orders+full")["current-jobs-ready"] == "1"
    assert f.stats_tube("orders+eu")["current-jobs-ready"] == "2"
    assert f.stats_tube("orders")["total-fanout-copies"] == "3"


def test_the_copies_come_back_from_the_log(f: Q) -> None:
    f.e.wal_out = []
    watch(f, "orders+eu")
    f.put("orders", body=b"kept")
    replayed = Engine()
    replayed.restore(f.e.wal_out, f.now)
    assert {j.id: (j.tube, j.body) for j in replayed.jobs.values()} == {
        1: ("orders", b"kept"),
        COPY_BASE: ("orders+eu", b"kept"),
    }
    assert replayed.families == {"orders": {"orders+eu"}}


# ------------------------------------------------------------------- expired_to


def expiring(q: Q, **more: object) -> Q:
    q.e.set_policies(Policies({"orders": {"max_age": 10, "expired_to": "+late", **more}}))
    q.e.ref("orders", 1, 0, q.now)  # a producer uses it: the tube stays when its jobs go
    return q


def test_an_expired_job_moves_to_its_target_ready_keeping_its_id(q: Q) -> None:
    from shardq.engine.job import NS

    q.e.wal_out = []
    q.e.audit = []
    expiring(q)
    ready = q.put("orders", pri=3, ttr=20, body=b"r")
    delayed = q.put("orders", delay=100, body=b"d")
    buried = q.put("orders", body=b"b")
    assert q.reserve_id(1, ("orders",)) == buried
    q.e.bury(1, buried, 0, q.now)
    q.e.wal_out.clear()
    q.advance(10 * NS)
    for job_id in (ready, delayed, buried):
        stats = q.stats_job(job_id)
        assert (stats["tube"], stats["state"], stats["age"]) == ("orders+late", "ready", "0")
    assert q.stats_job(ready)["pri"] == "3" and q.stats_job(ready)["ttr"] == "20"
    orders, late = q.stats_tube("orders"), q.stats_tube("orders+late")
    assert (orders["total-expired"], orders["total-expired-moved"]) == ("3", "3")
    assert orders["policy-expired-to"] == '"orders+late"'
    assert (late["current-jobs-ready"], late["total-jobs"]) == ("3", "3")
    assert orders["current-jobs-ready"] == "0" and orders["current-bytes"] == "0"
    assert [r.tube for r in q.e.wal_out] == ["orders+late"] * 3  # re-logged where they went
    assert [e[1] for e in q.e.audit[-2:]] == ["delete", "put"]  # one life ends, one starts
    replayed = Engine()
    replayed.restore([*q.e.snapshot()], q.now)
    assert {j.tube for j in replayed.jobs.values()} == {"orders+late"}


def test_a_held_job_moves_once_it_is_let_go(q: Q) -> None:
    from shardq.engine.job import NS

    expiring(q)
    job = q.put("orders")
    assert q.reserve_id(1, ("orders",)) == job
    q.advance(20 * NS)
    assert q.stats_job(job)["tube"] == "orders"  # not taken from its worker
    q.e.release(1, job, 0, 0, q.now)
    q.advance(NS)
    assert q.stats_job(job)["tube"] == "orders+late"


def test_a_waiter_on_the_target_gets_the_moved_job(q: Q) -> None:
    from engine_helpers import served

    from shardq.engine.job import NS

    expiring(q)
    job = q.put("orders")
    assert q.reserve(1, ("orders+late",), rid=77) is None
    q.advance(10 * NS)
    assert served(q.events()) == [(77, job)]


def test_a_target_without_room_means_the_job_is_deleted(q: Q) -> None:
    from shardq.engine.job import NS

    q.e.set_policies(
        Policies(
            {
                "orders": {"max_age": 10, "expired_to": "orders+late"},
                "orders+late": {"max_jobs": 1},
            }
        )
    )
    q.e.ref("orders", 1, 0, q.now)
    first, second = q.put("orders"), q.put("orders")
    q.advance(10 * NS)
    assert q.stats_job(first)["tube"] == "orders+late"
    assert q.e.peek(second) == b"NOT_FOUND\r\n"
    stats = q.stats_tube("orders")
    assert (stats["total-expired"], stats["total-expired-moved"]) == ("2", "1")


def test_the_targets_own_max_age_counts_from_the_move(q: Q) -> None:
    from shardq.engine.job import NS

    q.e.set_policies(
        Policies({"orders": {"max_age": 10, "expired_to": "+late"}, "orders+late": {"max_age": 10}})
    )
    job = q.put("orders")
    q.advance(10 * NS)
    q.advance(10 * NS - 1)
    assert q.stats_job(job)["tube"] == "orders+late"  # 10 s in it less 1 ns
    q.advance(1)
    assert q.e.peek(job) == b"NOT_FOUND\r\n"
