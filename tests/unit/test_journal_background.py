"""A front-end's journal rewritten by a forked child while the front-end goes on
(`Journal.tend`; storage/forked_write.py): what is appended meanwhile reaches the new file,
and a rewrite that fails leaves the journal as it was.

Workq's registry and journal; real forks and files under tmp_path. A test waits for the
child to end (its real work), never by a sleep.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_workq_registry import fixed, queued

from shardq.processes.frontends.workq.registry import Registry
from shardq.storage import journal
from shardq.storage.journal import Journal
from shardq.storage.workq_journal import open_journal


def replayed(path: Path) -> Registry:
    again = Registry()
    again.replay(open_journal(str(path), sync=False).load())
    return again


def garbage_until_wanted(book: Journal, reg: Registry) -> None:
    j = reg.jobs["a"]
    while not book.wants_rewrite(reg.bytes):
        book.append(j.changed())  # the same job changing: garbage grows, the live set not


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 1000)


def child_done(book: Journal) -> None:
    assert book.rewriting is not None
    book.rewriting.poll(block=True)


def test_what_is_appended_while_the_child_writes_reaches_the_new_file(
    tmp_path: Path, small: None
) -> None:
    book = open_journal(str(tmp_path), sync=True)
    reg = Registry()
    queued(reg, fixed("a"))
    book.rewrite(reg.snapshot())
    garbage_until_wanted(book, reg)
    big = (tmp_path / "workq.journal").stat().st_size
    book.tend(reg.bytes, reg.snapshot)
    assert book.rewriting is not None  # under way, in a child
    b = queued(reg, fixed("b"), job=2)  # after the fork: only the old file and the tail
    book.append(b.fixed)
    book.append(b.changed())
    child_done(book)
    book.tend(reg.bytes, reg.snapshot)  # the turn that finds it done
    assert book.rewriting is None and not (tmp_path / "workq.journal.new").exists()
    assert (tmp_path / "workq.journal").stat().st_size < big
    book.append(reg.jobs["a"].changed())  # appended to the new file from now on
    again = replayed(tmp_path)
    assert sorted(again.jobs) == ["a", "b"] and again.by_job == {1: "a", 2: "b"}


def failing() -> list[object]:
    raise RuntimeError("the child fails")


def test_a_failed_rewrite_leaves_the_journal_as_it_was(
    tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal, "RETRY_S", 3600.0)  # no second try within the test
    book = open_journal(str(tmp_path), sync=False)
    reg = Registry()
    queued(reg, fixed("a"))
    book.rewrite(reg.snapshot())
    garbage_until_wanted(book, reg)
    book.tend(reg.bytes, failing)
    b = queued(reg, fixed("b"), job=2)
    book.append(b.fixed)
    child_done(book)
    book.tend(reg.bytes, reg.snapshot)
    assert book.rewriting is None and not (tmp_path / "workq.journal.new").exists()
    book.tend(reg.bytes, reg.snapshot)
    assert book.rewriting is None  # the next try waits
    assert sorted(replayed(tmp_path).jobs) == ["a", "b"]


def test_rewrites_that_fail_in_a_row_wait_longer_each_time(
    tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(journal.time, "monotonic", lambda: clock[0])
    book = open_journal(str(tmp_path), sync=False)
    reg = Registry()
    queued(reg, fixed("a"))
    book.rewrite(reg.snapshot())
    garbage_until_wanted(book, reg)
    waits = []
    for _ in range(3):
        book.tend(reg.bytes, failing)
        child_done(book)
        book.tend(reg.bytes, reg.snapshot)  # finds it failed
        waits.append(book.retry_at - clock[0])
        clock[0] = book.retry_at
    assert waits == [1.0, 2.0, 4.0]
    book.tend(reg.bytes, reg.snapshot)
    child_done(book)
    book.tend(reg.bytes, reg.snapshot)
    assert book.rewriting is None and book.failures == 0
    assert sorted(replayed(tmp_path).jobs) == ["a"]
