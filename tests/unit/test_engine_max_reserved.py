"""Engine unit tests: the per-tube concurrency limit max_reserved (engine/limits.py,
engine/throttling.py), on the injected clock.

Harness and expectations: engine_helpers.py, limits_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import Q, served
from limits_helpers import limited, reload, timed_out

from shardq.engine.engine import FINAL, OFFER, RESERVED, WAITING
from shardq.engine.job import NS
from shardq.protocol import proto

# ------------------------------------------------------------------- max_reserved


def test_a_tube_at_max_reserved_hands_out_nothing_more(q: Q) -> None:
    limited(q, max_reserved=2)
    a, b, c = q.put("p"), q.put("p"), q.put("p")
    assert q.reserve_id(1, ("p",)) == a
    assert q.reserve_id(2, ("p",)) == b
    assert timed_out(q)
    assert q.stats_tube("p")["current-jobs-ready"] == "1"
    assert q.e.peek_ready("p") != proto.NOT_FOUND  # peek is not limited
    assert q.e.delete(1, a, q.now) == proto.DELETED
    assert q.reserve_id(3, ("p",)) == c
    assert timed_out(q)


def test_other_tubes_are_not_limited(q: Q) -> None:
    limited(q, max_reserved=1)
    q.put("p")
    q.put("p")
    others = [q.put("default") for _ in range(3)]
    q.reserve_id(1, ("p",))
    assert [q.reserve_id(1) for _ in range(3)] == others


def held_then(q: Q, how: str, job: int) -> None:
    """Make job `job` (reserved by connection 1, TTR 1) stop being held, `how`."""
    if how == "delete":
        assert q.e.delete(1, job, q.now) == proto.DELETED
    elif how == "release":
        assert q.e.release(1, job, 5, 0, q.now) == proto.RELEASED
    elif how == "release-delayed":
        assert q.e.release(1, job, 0, 30, q.now) == proto.RELEASED
    elif how == "bury":
        assert q.e.bury(1, job, 0, q.now) == proto.BURIED
    elif how == "timeout":
        q.advance(2 * NS)
    elif how == "close":
        q.e.disconnect(1, q.now)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how", ["delete", "release", "release-delayed", "bury", "timeout", "close"]
)
def test_a_held_job_let_go_serves_the_waiting_reserve(q: Q, how: str) -> None:
    limited(q, max_reserved=1)
    first = q.put("p", pri=1, ttr=1)
    second = q.put("p", pri=2, ttr=60)
    assert q.reserve_id(1, ("p",)) == first
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None  # waits: the tube is at its limit
    assert q.stats_tube("p")["current-waiting"] == "1"
    q.advance(NS // 2)
    assert q.events() == []
    held_then(q, how, first)
    # ready again with its priority 1 it is the best job; released with 5, the other is
    expect = first if how in ("timeout", "close") else second
    assert served(q.events()) == [(rid, expect)]


def test_a_policy_burial_serves_the_waiting_reserve(q: Q) -> None:
    limited(q, max_reserved=1, max_reserves=1)
    first, second = q.put("p"), q.put("p")
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    assert q.e.release(1, first, 0, 0, q.now) == proto.BURIED  # max_reserves
    assert served(q.events()) == [(rid, second)]


def test_a_reserve_with_timeout_at_the_limit_times_out(q: Q) -> None:
    limited(q, max_reserved=1)
    q.put("p")
    q.put("p")
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p",), timeout=1, rid=rid) is None
    q.advance(NS - 1)
    assert q.events() == []
    q.advance(1)
    assert q.events() == [(rid, [FINAL, proto.TIMED_OUT])]


def test_a_reserve_watching_several_tubes_takes_a_job_elsewhere(q: Q) -> None:
    limited(q, max_reserved=1)
    q.put("p", pri=0)
    q.put("p", pri=0)
    worse = q.put("default", pri=100)
    q.reserve_id(1, ("p",))
    assert q.reserve_id(2, ("p", "default")) == worse  # p's better job is not eligible


def test_a_waiter_on_several_tubes_is_served_by_whichever_opens_first(q: Q) -> None:
    limited(q, max_reserved=1)
    held = q.put("p")
    waiting_in_p = q.put("p")
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p", "default"), rid=rid) is None
    other = q.put("default")
    assert served(q.events()) == [(rid, other)]
    rid = q.rid()
    assert q.reserve(2, ("p", "default"), rid=rid) is None
    assert q.e.delete(1, held, q.now) == proto.DELETED
    assert served(q.events()) == [(rid, waiting_in_p)]


def test_waiters_are_served_first_come_one_per_free_slot(q: Q) -> None:
    limited(q, max_reserved=2)
    ids = [q.put("p") for _ in range(4)]
    q.reserve_id(1, ("p",))
    q.reserve_id(1, ("p",))
    r1, r2 = q.rid(), q.rid()
    assert q.reserve(2, ("p",), rid=r1) is None
    assert q.reserve(3, ("p",), rid=r2) is None
    assert q.e.delete(1, ids[0], q.now) == proto.DELETED
    assert served(q.events()) == [(r1, ids[2])]
    assert q.e.delete(1, ids[1], q.now) == proto.DELETED
    assert served(q.events()) == [(r2, ids[3])]


def test_a_tube_at_its_limit_offers_nothing_and_offered_jobs_count(q: Q) -> None:
    limited(q, max_reserved=1)
    first, second = q.put("p"), q.put("p")
    payload = q.reserve(5, ("p",), offer=True)
    assert payload is not None and payload[:1] == [OFFER] and payload[2] == first
    assert timed_out(q)  # the offered job counts: the tube is at its limit
    rid = q.rid()
    assert q.reserve(6, ("p",), offer=True, rid=rid) == [WAITING]  # offers nothing
    q.e.decline(5, first, q.now)
    events = q.events()
    assert [(r, p[0], p[2]) for r, p in events] == [(rid, OFFER, first)]
    q.e.accept(6, first, q.now)
    assert q.stats_tube("p")["current-jobs-reserved"] == "1"
    assert timed_out(q)
    assert q.e.delete(6, first, q.now) == proto.DELETED
    assert q.reserve_id(7, ("p",)) == second


def test_reserve_job_is_not_refused_at_the_limit_but_counts(q: Q) -> None:
    limited(q, max_reserved=1)
    a, b, c = q.put("p"), q.put("p"), q.put("p")
    q.reserve_id(1, ("p",))
    assert q.e.reserve_job(1, b, q.now)[0] == RESERVED
    assert q.stats_tube("p")["current-jobs-reserved"] == "2"
    assert q.e.delete(1, a, q.now) == proto.DELETED
    assert timed_out(q)  # still one held: at the limit
    assert q.e.delete(1, b, q.now) == proto.DELETED
    assert q.reserve_id(1, ("p",)) == c


def test_a_reload_raising_max_reserved_serves_the_waiters_at_once(q: Q) -> None:
    limited(q, max_reserved=1)
    ids = [q.put("p") for _ in range(3)]
    q.reserve_id(1, ("p",))
    r1, r2 = q.rid(), q.rid()
    assert q.reserve(2, ("p",), rid=r1) is None
    assert q.reserve(3, ("p",), rid=r2) is None
    reload(q, max_reserved=2)
    assert served(q.events()) == [(r1, ids[1])]
    reload(q)  # no policy at all: no limit
    assert served(q.events()) == [(r2, ids[2])]
    assert "policy-max-reserved" not in q.stats_tube("p")


def test_a_reload_lowering_max_reserved_keeps_the_held_jobs(q: Q) -> None:
    limited(q, max_reserved=3)
    ids = [q.put("p") for _ in range(4)]
    q.reserve_id(1, ("p",))
    q.reserve_id(1, ("p",))
    reload(q, max_reserved=1)
    assert q.stats_tube("p")["current-jobs-reserved"] == "2"
    assert timed_out(q)
    assert q.e.delete(1, ids[0], q.now) == proto.DELETED
    assert timed_out(q)  # one held: still at the limit of 1
    assert q.e.delete(1, ids[1], q.now) == proto.DELETED
    assert q.reserve_id(1, ("p",)) == ids[2]


def test_pause_and_max_reserved_both_close_the_tube(q: Q) -> None:
    limited(q, max_reserved=1)
    held = q.put("p")
    waiting_for = q.put("p")
    q.reserve_id(1, ("p",))
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    assert q.e.pause_tube("p", 5, q.now) == proto.PAUSED
    assert q.e.delete(1, held, q.now) == proto.DELETED
    assert q.events() == []  # a slot is free, but the tube is paused
    q.advance(5 * NS)
    assert served(q.events()) == [(rid, waiting_for)]


def test_the_pause_ending_does_not_open_a_tube_at_its_limit(q: Q) -> None:
    limited(q, max_reserved=1)
    held = q.put("p")
    waiting_for = q.put("p")
    q.reserve_id(1, ("p",))
    assert q.e.pause_tube("p", 1, q.now) == proto.PAUSED
    rid = q.rid()
    assert q.reserve(2, ("p",), rid=rid) is None
    q.advance(2 * NS)
    assert q.events() == []
    assert q.e.delete(1, held, q.now) == proto.DELETED
    assert served(q.events()) == [(rid, waiting_for)]


# ------------------------------------------------------------------- stats-tube


@pytest.mark.parametrize(
    ("policy", "shown"),
    [
        ({"max_reserved": 4}, ("4", "0")),
        ({"reserve_rate": 2}, ("0", "2")),
        ({"reserve_rate": 0.5}, ("0", "0.5")),
        ({"reserve_rate": 2.0, "max_reserved": 1}, ("1", "2")),
    ],
)
def test_stats_tube_shows_the_limits(q: Q, policy: dict[str, Any], shown: tuple[str, str]) -> None:
    limited(q, **policy)
    q.put("p")
    stats = q.stats_tube("p")
    assert (stats["policy-max-reserved"], stats["policy-reserve-rate"]) == shown
    keys = list(stats)
    assert keys.index("policy-reserve-rate") == keys.index("policy-max-age") + 2
    assert keys.index("current-bytes") == keys.index("policy-reserve-rate") + 3  # fanout,
    # expired-to: later policy keys come before current-bytes


def test_a_tube_without_limits_has_no_throttle(q: Q) -> None:
    limited(q, max_jobs=5)
    assert q.e.ensure_tube("p", q.now).throttle is None
    assert q.e.ensure_tube("default", q.now).throttle is None
    limited(q, max_reserved=1)
    assert q.e.tubes["p"].throttle is not None
