"""The Kestrel front-end's journal records (storage/journal.py has the file): the expiry
of each item set with one, which a beanstalk job cannot hold. `Expires` when an item is
set, `Gone` when it is got, deleted or expired; replayed in order they give the book of
expiries (processes/kestrel/expiry.py)."""

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


KINDS = Kinds({1: Expires, 2: Gone})


def open_journal(directory: str, sync: bool) -> Journal:
    return Journal(directory, FILE, KINDS, sync)
