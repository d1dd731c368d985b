"""Engine unit tests: the per-tube rate limit reserve_rate, a token bucket (engine/limits.py,
engine/throttling.py), on the injected clock; and both limits together.

Harness and expectations: engine_helpers.py, limits_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from engine_helpers import Q, served
from limits_helpers import MS, limited, reload, timed_out

from shardq.engine.engine import FINAL, OFFER, RESERVED, WAITING
from shardq.engine.job import NS
from shardq.engine.policy import Policies
from shardq.protocol import proto

# ------------------------------------------------------------------- reserve_rate


def test_reserve_rate_hands_out_a_burst_then_one_per_interval(q: Q) -> None:
    limited(q, reserve_rate=2)  # a bucket of 2 tokens, one back every 0.5 s
    ids = [q.put("p") for _ in range(5)]
    assert [q.reserve_id(1, ("p",)) for _ in range(2)] == ids[:2]
    assert timed_out(q)
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    q.advance(NS // 2 - 1)
    assert q.events() == []
    q.advance(1)  # the next token is due: the T_TOKEN timer serves the waiter
    assert served(q.events()) == [(rid, ids[2])]
    assert timed_out(q)
    q.advance(NS // 2)
    assert q.reserve_id(3, ("p",)) == ids[3]


def test_a_fractional_rate_gives_one_job_every_so_many_seconds(q: Q) -> None:
    limited(q, reserve_rate=0.5)  # a bucket of 1, one token every 2 s
    ids = [q.put("p") for _ in range(3)]
    assert q.reserve_id(1, ("p",)) == ids[0]
    assert timed_out(q)
    q.advance(2 * NS - 1)
    assert timed_out(q)
    q.advance(1)
    assert q.reserve_id(1, ("p",)) == ids[1]


def test_a_fractional_burst_refills_continuously(q: Q) -> None:
    limited(q, reserve_rate=2.5)  # 2.5 tokens: two at once, the third 0.2 s later
    ids = [q.put("p") for _ in range(4)]
    assert [q.reserve_id(1, ("p",)) for _ in range(2)] == ids[:2]
    assert timed_out(q)
    q.advance(200 * MS - 1)
    assert timed_out(q)
    q.advance(1)
    assert q.reserve_id(1, ("p",)) == ids[2]


def test_an_idle_bucket_fills_up_to_its_burst_and_no_more(q: Q) -> None:
    limited(q, reserve_rate=3)
    ids = [q.put("p") for _ in range(8)]
    q.advance(3600 * NS)
    assert [timed_out(q) for _ in range(4)] == [False, False, False, True]
    q.advance(NS)  # three more tokens
    assert [timed_out(q) for _ in range(4)] == [False, False, False, True]
    assert q.stats_tube("p")["current-jobs-ready"] == str(len(ids) - 6)


def test_rate_waiters_are_served_first_come_one_per_token(q: Q) -> None:
    limited(q, reserve_rate=1)
    ids = [q.put("p") for _ in range(3)]
    assert q.reserve_id(1, ("p",)) == ids[0]
    r1, r2, r3 = q.rid(), q.rid(), q.rid()
    for conn, rid in ((2, r1), (3, r2), (4, r3)):
        assert q.reserve(conn, ("p",), rid=rid) is None
    q.advance(NS)
    assert served(q.events()) == [(r1, ids[1])]
    q.advance(NS)
    assert served(q.events()) == [(r2, ids[2])]
    q.advance(5 * NS)
    assert q.events() == []  # no job left: r3 waits on
    job = q.put("p")
    assert served(q.events()) == [(r3, job)]  # the bucket had refilled meanwhile


def test_a_reserve_with_timeout_shorter_than_the_next_token_times_out(q: Q) -> None:
    limited(q, reserve_rate=0.5)
    q.put("p")
    left = q.put("p")
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p",), timeout=1, rid=rid) is None
    q.advance(NS)
    assert q.events() == [(rid, [FINAL, proto.TIMED_OUT])]
    rid = q.rid()
    assert q.reserve(2, ("p",), timeout=5, rid=rid) is None
    q.advance(NS)  # 2 s after the first reserve: a token
    assert served(q.events()) == [(rid, left)]


def test_a_reserve_watching_several_tubes_skips_an_empty_bucket(q: Q) -> None:
    limited(q, reserve_rate=1)
    q.put("p", pri=0)
    better_but_limited = q.put("p", pri=0)
    worse = q.put("default", pri=500)
    q.reserve_id(1, ("p",))
    assert q.reserve_id(2, ("p", "default")) == worse
    rid = q.rid()
    assert q.reserve(2, ("p", "default"), rid=rid) is None
    q.advance(NS)
    assert served(q.events()) == [(rid, better_but_limited)]


def test_offers_take_a_token_and_a_decline_gives_it_back(q: Q) -> None:
    limited(q, reserve_rate=1)
    first, second = q.put("p"), q.put("p")
    payload = q.reserve(5, ("p",), offer=True)
    assert payload is not None and payload[0] == OFFER and payload[2] == first
    rid = q.rid()
    assert q.reserve(6, ("p",), offer=True, rid=rid) == [WAITING]  # no token: no offer
    q.e.decline(5, first, q.now)
    assert [(r, p[0], p[2]) for r, p in q.events()] == [(rid, OFFER, first)]  # its token
    q.e.accept(6, first, q.now)
    assert timed_out(q)
    q.advance(NS)
    assert q.reserve_id(7, ("p",)) == second


def test_reserve_job_overdraws_the_bucket(q: Q) -> None:
    limited(q, reserve_rate=1)
    a, b, c = q.put("p"), q.put("p"), q.put("p")
    assert q.reserve_id(1, ("p",)) == a
    assert q.e.reserve_job(1, b, q.now)[0] == RESERVED  # not refused
    q.advance(NS)
    assert timed_out(q)  # the token that came went to reserve-job
    q.advance(NS)
    assert q.reserve_id(1, ("p",)) == c


def test_a_reload_raising_the_rate_serves_waiters_at_the_new_rate(q: Q) -> None:
    limited(q, reserve_rate=0.1)  # one every 10 s
    ids = [q.put("p") for _ in range(4)]
    q.reserve_id(1, ("p",))
    r1, r2 = q.rid(), q.rid()
    assert q.reserve(2, ("p",), rid=r1) is None
    assert q.reserve(3, ("p",), rid=r2) is None
    q.advance(5 * NS)  # half a token
    reload(q, reserve_rate=10)  # the bucket keeps its half token: the rest in 50 ms
    assert q.events() == []
    q.advance(50 * MS)
    assert served(q.events()) == [(r1, ids[1])]
    q.advance(100 * MS)
    assert served(q.events()) == [(r2, ids[2])]
    assert q.stats_tube("p")["policy-reserve-rate"] == "10"


def test_a_reload_dropping_the_rate_serves_waiters_at_once(q: Q) -> None:
    limited(q, reserve_rate=0.1)
    ids = [q.put("p") for _ in range(2)]
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    reload(q, max_jobs=100)  # a policy still, but no rate
    assert served(q.events()) == [(rid, ids[1])]


def test_a_reload_lowering_the_rate_keeps_the_tokens_up_to_the_new_burst(q: Q) -> None:
    limited(q, reserve_rate=10)
    for _ in range(6):
        q.put("p")
    assert [timed_out(q) for _ in range(3)] == [False] * 3  # 7 tokens left
    reload(q, reserve_rate=1)  # a bucket of 1: full
    assert [timed_out(q) for _ in range(2)] == [False, True]
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    q.advance(NS)
    assert len(served(q.events())) == 1


def test_a_tube_made_again_keeps_its_bucket(q: Q) -> None:
    limited(q, reserve_rate=0.5)
    job = q.put("p")
    assert q.reserve_id(1, ("p",)) == job
    assert q.e.delete(1, job, q.now) == proto.DELETED
    assert "p" not in q.e.tubes  # nothing uses, watches or holds it
    assert q.e.buckets == {"p": q.now + 2 * NS}
    q.put("p")
    assert timed_out(q)  # not refilled by going away
    q.advance(2 * NS)
    assert not timed_out(q)


def test_a_gone_tubes_bucket_is_forgotten_once_full(q: Q) -> None:
    limited(q, reserve_rate=0.5)
    job = q.put("p")
    q.reserve_id(1, ("p",))
    q.e.delete(1, job, q.now)
    q.advance(2 * NS)
    assert q.e.buckets == {}


def test_both_limits_together(q: Q) -> None:
    limited(q, max_reserved=1, reserve_rate=1)
    a, b, c = q.put("p"), q.put("p"), q.put("p")
    assert q.reserve_id(1, ("p",)) == a
    q.advance(5 * NS)  # tokens enough, but one held
    assert timed_out(q)
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    assert q.e.delete(1, a, q.now) == proto.DELETED
    assert served(q.events()) == [(rid, b)]
    assert q.e.delete(2, b, q.now) == proto.DELETED
    assert timed_out(q)  # a free slot, but b took the bucket's one token
    q.advance(NS)
    assert q.reserve_id(3, ("p",)) == c


def test_stale_token_timers_are_compacted_away(q: Q) -> None:
    from shardq.engine.timers import T_TOKEN

    limited(q, reserve_rate=1)
    q.put("p")
    q.reserve_id(1, ("p",))
    live = [t for t in q.e.timers if t[2] == T_TOKEN]
    assert len(live) == 1
    q.e.set_policies(Policies(), q.now)  # the tube loses its rate: the timer is dead
    q.e._compact_timers()
    assert [t for t in q.e.timers if t[2] == T_TOKEN] == []
