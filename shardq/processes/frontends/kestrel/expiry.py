"""Expiry times of the items set through the Kestrel door.

A beanstalk job has no expiry, so the front-end keeps one for each job a Kestrel ``set``
gave one: job id -> (unix ms, queue), and a heap by time for the janitor, which deletes
jobs as they expire. In this process's memory only: lost when the front-end or the server
restarts (the jobs then stay, without expiry), and never known for jobs put through the
beanstalk door. Entries go when the job is got, deleted or expired, so the book holds at
most one entry per live job that was set with an expiry.

With ``-b DIR`` every change is journaled (storage/kestrel_journal.py, DIR/kestrel.journal)
and the book is read back at start, so expiries survive a restart as the items do. A disk
error is logged and the book goes on in memory.
"""

from __future__ import annotations

import heapq
import logging

from shardq.processes.frontends.kestrel.fanout import Fanout
from shardq.storage.journal import Journal
from shardq.storage.kestrel_journal import Expires, Gone, Record, open_journal

log = logging.getLogger(__name__)
LIVE_ENTRY_BYTES = 40  #: about what one live entry takes in the journal


class ExpiryBook:
    def __init__(self) -> None:
        self.at: dict[int, tuple[int, str]] = {}  # job id -> (expiry, unix ms; queue)
        self.heap: list[tuple[int, int]] = []  # (expiry, job id); stale entries skipped
        self.book: Journal | None = None
        self.fanout: Fanout | None = None  # its children are journaled here too

    def keep(self, directory: str, sync: bool, fanout: Fanout) -> None:
        """Journal the book and `fanout`'s children in `directory` (the -b directory), after
        reading them back."""
        self.book = open_journal(directory, sync)
        self.fanout = fanout
        for rec in self.book.load():
            if isinstance(rec, Expires):
                self.at[rec.job] = (rec.at, rec.queue)
                heapq.heappush(self.heap, (rec.at, rec.job))
            elif isinstance(rec, Gone):
                self.at.pop(rec.job, None)
            else:
                fanout.replay(rec)
        self.book.rewrite(self.live())
        fanout.journal = self.write
        log.info("kestrel: %d expiry times from the journal", len(self.at))

    def unsynced(self) -> bool:
        return self.book is not None and self.book.dirty

    def sync(self) -> None:
        if self.book is not None:
            self.book.sync_now()

    def live(self) -> list[Record]:
        out: list[Record] = [Expires(job, at, queue) for job, (at, queue) in self.at.items()]
        return out + (self.fanout.live() if self.fanout is not None else [])

    def write(self, record: Record) -> None:
        if self.book is None:
            return
        try:
            self.book.append(record)
        except OSError as e:
            log.error("kestrel journal: %s", e)

    def tend(self) -> None:
        """Each turn: the journal rewritten (in a child) when mostly garbage."""
        if self.book is not None:
            self.book.tend(LIVE_ENTRY_BYTES * len(self.at), self.live)

    def __len__(self) -> int:
        return len(self.at)

    def add(self, job: int, expires_ms: int, queue: str) -> None:
        self.at[job] = (expires_ms, queue)
        heapq.heappush(self.heap, (expires_ms, job))
        self.write(Expires(job, expires_ms, queue))

    def forget(self, job: int) -> None:
        if self.at.pop(job, None) is not None:
            self.write(Gone(job))

    def expired(self, job: int, now_ms: int) -> bool:
        entry = self.at.get(job)
        return entry is not None and entry[0] <= now_ms

    def queue_of(self, job: int) -> str:
        entry = self.at.get(job)
        return entry[1] if entry is not None else ""

    def next_due(self) -> int | None:
        """The earliest expiry (unix ms) still in the book, or None."""
        while self.heap and self.heap[0][1] not in self.at:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    def again(self, jobs: list[int]) -> None:
        """Jobs `due` gave out whose deletion may not have happened (the janitor's server
        connection went midway): due again, those still in the book."""
        for job in jobs:
            entry = self.at.get(job)
            if entry is not None:
                heapq.heappush(self.heap, (entry[0], job))

    def due(self, now_ms: int, most: int) -> list[int]:
        """Up to `most` jobs past their expiry, taken off the heap (they stay in the book
        until `forget`)."""
        jobs: list[int] = []
        while self.heap and len(jobs) < most and self.heap[0][0] <= now_ms:
            expires, job = heapq.heappop(self.heap)
            entry = self.at.get(job)
            if entry is not None and entry[0] == expires:
                jobs.append(job)
        return jobs
