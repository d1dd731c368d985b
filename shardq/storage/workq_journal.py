"""The Workq front-end's journal records (storage/journal.py has the file): what a
beanstalk job cannot hold of a Workq job — its UUID, ttl, attempts, fails, result... A
record is `Added` (a job's fixed fields, once), `Changed` (its moving fields, after each
change) or `Dropped`; replayed in order they give every live job."""

from __future__ import annotations

from dataclasses import dataclass

from shardq.storage.journal import Journal, Kinds

FILE = "workq.journal"


@dataclass(slots=True)
class Added:
    id: str
    name: str
    ttr: int
    ttl: int
    payload: bytes
    priority: int
    max_attempts: int
    max_fails: int
    created: int  # unix ms
    at: int  # scheduled unix ms (0: added)
    run: bool


@dataclass(slots=True)
class Changed:
    id: str
    state: int
    job: int  # its beanstalk job while queued (0: none)
    attempts: int
    fails: int
    deadline: int  # unix ms its lease ends
    result: bytes | None
    success: bool
    #: the beanstalk job its lease took from the tube, until its delete is answered (0:
    #: none; a journal of before this field has none)
    leased_as: int = 0


@dataclass(slots=True)
class Dropped:
    id: str


Record = Added | Changed | Dropped
KINDS = Kinds({1: Added, 2: Changed, 3: Dropped})


def open_journal(directory: str, sync: bool) -> Journal:
    return Journal(directory, FILE, KINDS, sync)
