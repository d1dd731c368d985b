"""The bunqueue front-end's registry, pure (processes/frontends/bunqueue/registry.py): how
jobs move (STEPS), retries with backoff and the DLQ, locks, uniqueKey, dependsOn, what a
disconnect gives back, and the bound on completed jobs."""

from __future__ import annotations

import pytest

from shardq.processes.frontends.bunqueue.registry import (
    ACTIVE,
    CHILDREN,
    COMPLETED,
    DELAYED,
    FAILED,
    WAITING,
    BadStep,
    Registry,
    retry_delay,
)
from shardq.protocol.bunqueue_args import JobSpec


def spec(**kw: object) -> JobSpec:
    return JobSpec("default", {}, **kw)  # type: ignore[arg-type]


def test_a_failed_attempt_is_retried_with_backoff_then_dead_lettered() -> None:
    reg = Registry()
    j = reg.add("q", spec(max_attempts=2, backoff=100), 1000.0)
    reg.pull(j, 1, "w", 30000, 1000.0)
    assert reg.fail(j, "boom", None, 1000.0) is True
    assert j.state == DELAYED and j.attempts == 1 and 1050 <= j.run_at <= 1300
    assert reg.due(j.run_at) == ([j], [])
    assert j.state == WAITING
    reg.pull(j, 1, "w", 30000, 2000.0)
    assert reg.fail(j, "again", None, 2000.0) is False
    assert j.state == FAILED and [h["reason"] for h in j.history] == [
        "explicit_fail",
        "max_attempts_exceeded",
    ]
    reg.revive(j)
    assert (j.state, j.attempts, j.history) == (WAITING, 0, [])


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    reg = Registry()
    j = reg.add("q", spec(backoff=1000), 0.0)
    j.attempts = 3
    assert retry_delay(j, 0.0) == 4000 and retry_delay(j, 0.999) < 12000
    j.attempts = 30
    assert retry_delay(j, 0.5) == 3_600_000
    fixed = reg.add("q", spec(backoff=70, backoff_config={"type": "fixed", "delay": 70}), 0.0)
    fixed.attempts = 5
    assert retry_delay(fixed, 0.9) == 70


def test_locks_tokens_and_an_expired_lock() -> None:
    reg = Registry()
    j = reg.add("q", spec(), 0.0)
    assert reg.lock_error(j, j.id, None) == f"Job not found or not in processing state: {j.id}"
    reg.pull(j, 1, "w", 100, 0.0)
    assert reg.lock_error(j, j.id, None) == f"Lock token required for job {j.id}"
    assert reg.lock_error(j, j.id, "x") == f"Invalid or expired lock token for job {j.id}"
    assert reg.lock_error(j, j.id, j.token) is None
    assert reg.due(100.0) == ([], [j])
    reg.stalled(j, 100.0)
    assert (j.state, j.attempts, j.stall_count, j.token) == (WAITING, 1, 1, None)
    assert reg.take_ready() == [j]


def test_unique_keys_are_held_until_completion() -> None:
    reg = Registry()
    first = reg.add("q", spec(unique_key="k"), 0.0)
    assert reg.duplicate("q", spec(unique_key="k")) is first
    assert reg.duplicate("other", spec(unique_key="k")) is None
    reg.pull(first, 1, None, 0, 0.0)
    reg.ack(first, "r", 1.0)
    assert first.state == COMPLETED and reg.duplicate("q", spec(unique_key="k")) is None


def test_children_wait_for_every_parent() -> None:
    reg = Registry()
    p1, p2 = reg.add("q", spec(), 0.0), reg.add("q", spec(), 0.0)
    child = reg.add("q", spec(depends_on=[p1.id, p2.id]), 0.0)
    assert child.state == CHILDREN
    for parent in (p1, p2):
        reg.pull(parent, 1, None, 0, 0.0)
    assert reg.ack(p1, None, 1.0) == []
    assert reg.ack(p2, None, 1.0) == [child] and child.state == WAITING


def test_a_disconnect_gives_back_what_its_session_pulled() -> None:
    reg = Registry()
    mine, kept, other = (reg.add("q", spec(), 0.0) for _ in range(3))
    for j, job in ((mine, 11), (kept, 12), (other, 13)):
        reg.queued(j, job)
    reg.pull(mine, 1, "w", 30000, 0.0)
    reg.pull(kept, 1, None, 0, 0.0)
    reg.pull(other, 2, None, 0, 0.0)
    reg.deleted([11])  # mine's delete was answered; kept's (12) was not sent
    assert {j.id for j in reg.given_back(1, [12])} == {mine.id, kept.id}
    assert (mine.state, mine.attempts, other.state) == (WAITING, 0, ACTIVE)
    assert reg.take_ready() == [mine]  # put anew
    assert kept.job == 12 and reg.by_job[12] == kept.id  # back in its tube as it was


def test_completed_jobs_past_the_bound_go_oldest_first() -> None:
    reg = Registry()
    reg.max_completed = 2
    jobs = [reg.add("q", spec(), 0.0) for _ in range(3)]
    dropped = []
    for j in jobs:
        reg.pull(j, 1, None, 0, 0.0)
        reg.ack(j, None, 1.0)
        dropped += reg.kept(j)
    assert dropped == [jobs[0]]


def test_a_step_from_the_wrong_state_is_refused() -> None:
    reg = Registry()
    j = reg.add("q", spec(delay=1000), 0.0)
    with pytest.raises(BadStep):
        reg.pull(j, 1, None, 0, 0.0)


def test_lifo_jobs_in_their_tube_are_listed_newest_first_per_priority() -> None:
    reg = Registry()
    jobs = [reg.add("q", spec(lifo=True, priority=p), 1000.0) for p in (0, 0, 5, 0)]
    fifo = reg.add("q", spec(), 1000.0)
    for n, j in enumerate([*jobs, fifo], start=1):
        reg.queued(j, n)
    a, b, c, d = jobs
    assert reg.newest_lifo("q", 0, 10) == [d, b, a]
    assert reg.newest_lifo("q", 0, 2) == [d, b]
    assert reg.newest_lifo("q", 5, 10) == [c]
    reg.pull(d, 1, None, 0, 1000.0)  # no longer in its tube: left out, dropped from the top
    assert reg.newest_lifo("q", 0, 10) == [b, a]
    reg.release(d)
    reg.queued(d, 9)  # put again: the newest
    assert reg.newest_lifo("q", 0, 10) == [d, b, a]
    for j in (a, b, c, d):
        reg.pull(j, 1, None, 0, 1000.0)
    assert reg.newest_lifo("q", 0, 10) == [] and reg.newest_lifo("q", 5, 10) == []
    assert "q" not in reg.lifo
