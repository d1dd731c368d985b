"""The Kestrel front-end's journal records (storage/journal.py has the file): what a
beanstalk job cannot hold. `Expires` when an item is set with an expiry, `Gone` when it is
got, deleted or expired (processes/frontends/kestrel/expiry.py); `Child` when a fanout queue becomes
known, `Unchild` when a client deletes it (processes/frontends/kestrel/fanout.py). Replayed in order
they give both back."""

from __future__ import annotations

from dataclasses import dataclass

from shardq.storage.journal import Journal, Kinds

FILE = "kestrel.journal"


@dataclass(slots=True)
class Expires:
    job: int  # the beanstalk job id of the item
    at: int  # unix ms
    queue: str


@dataclass(slots=True)
class Gone:
    job: int


@dataclass(slots=True)
class Child:
    queue: str  # a fanout queue, PARENT+NAME


@dataclass(slots=True)
class Unchild:
    queue: str


Record = Expires | Gone | Child | Unchild
KINDS = Kinds({1: Expires, 2: Gone, 3: Child, 4: Unchild})


def open_journal(directory: str, sync: bool) -> Journal:
    return Journal(directory, FILE, KINDS, sync)
