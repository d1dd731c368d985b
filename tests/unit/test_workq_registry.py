"""The Workq registry as a state machine with an injected clock (unix ms), and its journal:
replayed records give the same jobs, a torn tail is cut off."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from shardq.processes.frontends.workq.registry import (
    COMPLETED,
    FAILED,
    HARD_MAX_ATTEMPTS,
    JOB_OVERHEAD_BYTES,
    LEASED,
    NEW,
    PENDING,
    BadStep,
    Registry,
    WorkqJob,
)
from shardq.storage.journal import HEADER
from shardq.storage.packing import pack
from shardq.storage.workq_journal import KINDS, Added, Changed, open_journal

T0 = 1_000_000


def fixed(ident: str = "a", ttr: int = 100, ttl: int = 10_000, **kw: object) -> Added:
    base = dict(
        id=ident,
        name="q",
        ttr=ttr,
        ttl=ttl,
        payload=b"p",
        priority=0,
        max_attempts=0,
        max_fails=0,
        created=T0,
        at=0,
        run=False,
    )
    base.update(kw)
    return Added(**base)  # type: ignore[arg-type]


def queued(reg: Registry, f: Added, job: int = 1) -> WorkqJob:
    j = reg.add(f)
    reg.queued(j, job)
    return j


def test_a_lease_ends_at_its_ttr_and_the_job_is_queued_again() -> None:
    reg = Registry()
    j = queued(reg, fixed(max_attempts=2))
    assert reg.lease(j, T0) and j.state is LEASED and j.job == 0 and reg.by_job == {}
    assert reg.due(T0 + 99) == ([], [])
    assert reg.due(T0 + 100) == ([j], [])
    assert reg.lease_ended(j) and j.state is PENDING
    reg.queued(j, 2)
    assert reg.lease(j, T0 + 200) and j.attempts == 2
    assert reg.due(T0 + 300) == ([j], [])
    assert not reg.lease_ended(j)  # its last attempt: failed, with an empty result
    assert (j.state, j.result, j.success) == (FAILED, b"", False)


def test_a_complete_ends_the_lease_and_its_timer() -> None:
    reg = Registry()
    j = queued(reg, fixed())
    reg.lease(j, T0)
    assert not reg.finish(j, True, b"r")
    assert (j.state, j.result, j.success) == (COMPLETED, b"r", True)
    assert reg.due(T0 + 100) == ([], [])  # the TTR timer is stale now
    with pytest.raises(BadStep):
        reg.finish(j, False, b"")


def test_fails_are_retried_below_max_fails() -> None:
    reg = Registry()
    j = queued(reg, fixed(max_fails=2))
    assert reg.finish(j, False, b"1")  # retried: the caller queues it again
    assert (j.state, j.fails, j.result) == (PENDING, 1, None)
    assert not reg.finish(j, False, b"2")
    assert (j.state, j.fails, j.result) == (FAILED, 2, b"2")


def test_no_lease_past_max_attempts_or_the_hard_limit() -> None:
    reg = Registry()
    j = queued(reg, fixed(max_attempts=1))
    j.attempts = 1
    assert not reg.lease(j, T0) and j.state is FAILED
    k = queued(reg, fixed("b"), job=2)
    k.attempts = HARD_MAX_ATTEMPTS
    assert not reg.lease(k, T0) and k.state is FAILED


def test_jobs_expire_at_their_ttl_from_creation_or_schedule() -> None:
    reg = Registry()
    now = queued(reg, fixed("a", ttl=500))
    later = queued(reg, fixed("b", ttl=500, at=T0 + 1000), job=2)
    run = queued(reg, fixed("c", ttl=0, run=True), job=3)
    assert reg.due(T0 + 500) == ([], [now])
    assert reg.due(T0 + 1499) == ([], [])
    assert reg.due(T0 + 1500) == ([], [later])
    assert run.expires == 0
    reg.expire_now(run, T0 + 2000)
    assert reg.due(T0 + 2000) == ([], [run])


def test_listing_by_priority_and_by_time() -> None:
    reg = Registry()
    lo = queued(reg, fixed("lo", priority=-1))
    hi = queued(reg, fixed("hi", priority=5, created=T0 + 1), job=2)
    old = queued(reg, fixed("old", priority=5), job=3)
    sched = queued(reg, fixed("s", at=T0 + 50), job=4)
    assert reg.listed("q", False, T0) == [old, hi, lo]
    assert reg.listed("q", True, T0) == [sched]
    assert reg.listed("q", False, T0 + 50) == [old, hi, sched, lo]  # its time came: ready


def test_the_journal_replays_to_the_same_jobs(tmp_path: Path) -> None:
    reg = Registry()
    a = queued(reg, fixed("a", priority=3))
    b = queued(reg, fixed("b"), job=2)
    reg.lease(b, T0)
    c = queued(reg, fixed("c"), job=3)
    reg.finish(c, True, b"done")
    book = open_journal(str(tmp_path), sync=True)
    book.rewrite([])
    for j in (a, b, c):
        book.append(j.fixed)
        book.append(j.changed())
    again = Registry()
    again.replay(open_journal(str(tmp_path), sync=False).load())
    assert {i: (j.state, j.job, j.attempts, j.result) for i, j in again.jobs.items()} == {
        "a": (NEW, 1, 0, None),
        "b": (LEASED, 0, 1, None),
        "c": (COMPLETED, 0, 0, b"done"),
    }
    assert again.by_job == {1: "a"}
    assert again.due(T0 + 100) == ([again.jobs["b"]], [])  # the lease's timer is back


def test_a_torn_tail_is_cut_off() -> None:
    data = KINDS.encode(fixed("a")) + KINDS.encode(fixed("b"))
    records, whole = KINDS.decode(data[:-3])
    assert [r.id for r in records] == ["a"] and whole == len(KINDS.encode(fixed("a")))
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    assert [r.id for r in KINDS.decode(bytes(corrupt))[0]] == ["a"]


def test_a_journal_is_rewritten_once_its_garbage_outgrows_what_is_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shardq.storage import journal

    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 1000)
    book = open_journal(str(tmp_path), sync=False)
    reg = Registry()
    j = queued(reg, fixed("a"))
    book.rewrite(reg.snapshot())
    size = (tmp_path / "workq.journal").stat().st_size
    while not book.wants_rewrite(size):
        book.append(j.changed())  # the same job changing: garbage grows, the live set not
    book.rewrite(reg.snapshot())
    assert (tmp_path / "workq.journal").stat().st_size == size
    again = Registry()
    again.replay(open_journal(str(tmp_path), sync=False).load())
    assert list(again.jobs) == ["a"] and again.by_job == {1: "a"}


def test_the_registry_counts_the_bytes_it_holds() -> None:
    reg = Registry()
    j = queued(reg, fixed("a"))
    k = queued(reg, fixed("b"), job=2)
    base = 2 * (1 + JOB_OVERHEAD_BYTES)
    assert reg.bytes == base
    reg.lease(j, T0)
    reg.finish(j, True, b"r" * 100)
    assert reg.bytes == base + 100
    reg.give_up(k)  # its requeue was refused: failed, empty result
    assert (k.state, k.result) == (FAILED, b"")
    reg.drop(j)
    reg.drop(k)
    reg.drop(k)  # twice: counted once
    assert reg.bytes == 0


def test_a_job_the_journal_left_with_no_tube_entry_is_put_back() -> None:
    """The process ended while the janitor put a job back (PENDING, no beanstalk job): after
    the replay the janitor's first turn puts it back."""
    reg = Registry()
    j = queued(reg, fixed("a", max_attempts=3))
    reg.lease(j, T0)
    reg.deleted(j, 1)
    reg.lease_ended(j)  # PENDING; the put back never happened
    records = [*reg.snapshot()]
    again = Registry()
    again.replay(records)
    assert again.next_due() == 0
    orphans = again.take_orphans()
    assert [o.id for o in orphans] == ["a"] and orphans[0].state is PENDING
    assert again.take_orphans() == [] and again.next_due() == T0 + 10_000  # its expiry


def test_a_lease_names_its_tube_entry_until_its_delete_is_answered() -> None:
    """A lease is journaled before its beanstalk job is deleted: replayed before the delete
    was answered, the janitor deletes that entry first (it may be back in its tube), and a
    rewrite of the journal keeps it named until then."""
    reg = Registry()
    j = queued(reg, fixed("a"), job=7)
    reg.lease(j, T0)
    assert j.leased_as == 7 and reg.leftovers == [] and reg.next_due() == T0 + 100
    again = Registry()
    again.replay(reg.snapshot())  # the process ended before its delete was answered
    k = again.jobs["a"]
    assert (k.state, k.job, k.leased_as, again.by_job) == (LEASED, 0, 7, {})
    assert again.next_due() == 0
    assert again.take_leftovers() == [k] and again.take_leftovers() == []
    assert [r.leased_as for r in again.snapshot() if isinstance(r, Changed)] == [7]
    again.deleted(k, 7)
    assert k.leased_as == 0 and again.next_due() == T0 + 100
    reg.deleted(j, 7)
    last = Registry()
    last.replay(reg.snapshot())
    assert last.leftovers == [] and last.jobs["a"].leased_as == 0


def test_a_changed_record_of_before_leased_as_is_read() -> None:
    payload = pack([2, "a", int(LEASED), 0, 1, 0, T0 + 100, None, False])
    frame = HEADER.pack(len(payload), zlib.crc32(payload)) + payload
    (rec,), whole = KINDS.decode(frame)
    assert whole == len(frame) and rec.leased_as == 0 and rec.deadline == T0 + 100
