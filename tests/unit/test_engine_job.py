"""Engine unit tests: the job record's packed fields (engine/job.py) and its size.

A job keeps its id, priority and put order in `key`, its ttr, delay and counters in `dur`,
and its creation time, deadline and holder in `hold`; these tests check that every field
reads back what was written, whatever the others hold, including the values a restart can
give (a creation time before this boot's monotonic clock began, a deadline in the past).
"""

from __future__ import annotations

import sys

from shardq.engine.job import Job, State, new_job

BIG = (1 << 64) - 1  #: the largest value a packed 64-bit field holds


def a_job(created: int = 5_000_000_000, ttr: int = 60, delay: int = 0) -> Job:
    return new_job(7, 1_700_000_000_000_000_000, "default", 1024, delay, ttr, b"body", created)


def test_a_job_is_six_slots_and_eighty_bytes() -> None:
    job = a_job()
    assert len(Job.__slots__) == 6
    assert sys.getsizeof(job) <= 80  # with the GC header; ten slots made 112


def test_a_job_just_put_keeps_the_put_s_own_now_as_its_hold() -> None:
    """The jobs of one turn share its `now` object instead of an int each."""
    now = 123_456_789_012_345
    job = a_job(created=now)
    assert job.hold is now
    assert (job.created, job.deadline, job.owner) == (now, 0, 0)


def test_the_key_gives_id_priority_and_put_order() -> None:
    job = a_job()
    assert (job.id, job.pri, job.seq) == (7, 1024, 1_700_000_000_000_000_000)
    job.pri = 2**32 - 1
    assert (job.id, job.pri, job.seq) == (7, 2**32 - 1, 1_700_000_000_000_000_000)


def test_ttr_delay_and_counters_share_dur_without_touching_each_other() -> None:
    job = a_job(ttr=2**32 - 1, delay=5)
    job.set_counters(1, 2, 3, 4, 5)
    assert (job.ttr, job.delay) == (2**32 - 1, 5)
    assert (job.reserves, job.timeouts, job.releases, job.buries, job.kicks) == (1, 2, 3, 4, 5)
    job.delay = 0
    assert (job.ttr, job.delay, job.reserves, job.kicks) == (2**32 - 1, 0, 1, 5)
    job.set_counters(BIG, 0, BIG, 0, BIG)
    assert (job.reserves, job.timeouts, job.releases, job.buries, job.kicks) == (
        BIG,
        0,
        BIG,
        0,
        BIG,
    )
    assert (job.ttr, job.delay) == (2**32 - 1, 0)


def test_created_deadline_and_owner_read_back_whatever_the_others_hold() -> None:
    for created in (0, 1, 5_000_000_000, -1, -(10**18), 2**63 - 1, -(2**63)):
        job = a_job(created=created)
        assert job.created == created
        job.held_by(BIG, 2**62)
        assert (job.created, job.owner, job.deadline) == (created, BIG, 2**62)
        job.owner = 0
        assert (job.created, job.owner, job.deadline) == (created, 0, 2**62)
        job.deadline = -(10**18)  # a delayed job's due time restored from before this boot
        job.owner = 3
        assert (job.created, job.owner, job.deadline) == (created, 3, -(10**18))
        job.created = 42
        assert (job.created, job.owner, job.deadline) == (42, 3, -(10**18))


def test_the_delayed_key_orders_by_due_time_then_put_order() -> None:
    early, late = a_job(), a_job()
    early.deadline, late.deadline = 10, 11
    assert early.delayed_key < late.delayed_key
    assert early.state == State.READY
