"""A connection's reserved jobs and the soonest of their deadlines (`Conn.soon_at`): the
heap gives what a scan of every reserved job gave, forgets what has run out, and stays
bounded however long one job is held."""

from __future__ import annotations

import random
import socket

import pytest

from shardq.engine.engine import SAFETY_MARGIN
from shardq.processes.serving.conn import Conn


def conn() -> Conn:
    return Conn(1, socket.socket(), 65535)


def scanned(reserved: dict[int, int], now: int) -> tuple[int | None, dict[int, int]]:
    """What the scan answered, and what it kept."""
    live = {j: d for j, d in reserved.items() if d >= now}
    return (min(live.values()) - SAFETY_MARGIN if live else None), live


@pytest.mark.parametrize("jobs", [200, 3])  # many held; one or two (the heap starts, ends)
def test_soon_at_matches_a_scan(jobs: int) -> None:
    rng = random.Random(7)
    c = conn()
    model: dict[int, int] = {}
    now = 1_000
    for _ in range(20_000):
        op = rng.random()
        job = rng.randrange(jobs)
        if op < 0.45:
            deadline = now + rng.randrange(1, 5_000)
            c.hold(job, deadline)  # a reserve, or a touch of one held already
            model[job] = deadline
        elif op < 0.8:
            c.let_go(job)
            model.pop(job, None)
        else:
            now += rng.randrange(0, 300)
            want, model = scanned(model, now)
            assert c.soon_at(now) == want
            assert c.reserved == model
    c.sock.close()


def test_a_passed_deadline_is_forgotten() -> None:
    c = conn()
    c.hold(5, 100)
    c.hold(6, 300)
    assert c.soon_at(50) == 100 - SAFETY_MARGIN
    assert c.soon_at(200) == 300 - SAFETY_MARGIN
    assert c.reserved == {6: 300}
    c.let_go(6)
    assert c.soon_at(200) is None
    c.sock.close()


def test_the_heap_stays_bounded_under_a_long_held_job() -> None:
    """One job held with the soonest deadline, millions of reserve+delete beside it: the
    stale entries under it are swept, not kept."""
    c = conn()
    c.hold(1, 10)
    for job in range(2, 100_000):
        c.hold(job, 1_000 + job)
        c.let_go(job)
        assert len(c.deadlines) <= 2 * (len(c.reserved) + 1) + 64  # (checked at hold)
    assert c.soon_at(5) == 10 - SAFETY_MARGIN
    c.sock.close()


def test_one_job_at_a_time_keeps_no_heap() -> None:
    """A worker's reserve, delete, reserve...: the one job's deadline is `reserved`'s one
    value; the heap starts only with a second job held, and answers for both."""
    c = conn()
    for job in range(1, 1_000):
        c.hold(job, 1_000 + job)
        assert c.soon_at(job) == 1_000 + job - SAFETY_MARGIN
        c.hold(job, 2_000 + job)  # a touch
        assert c.soon_at(job) == 2_000 + job - SAFETY_MARGIN
        c.let_go(job)
    assert c.deadlines == []
    c.hold(1, 500)
    c.hold(2, 400)
    assert c.soon_at(0) == 400 - SAFETY_MARGIN
    c.let_go(2)
    assert c.soon_at(0) == 500 - SAFETY_MARGIN
    assert c.soon_at(600) is None and c.reserved == {}
    c.sock.close()
