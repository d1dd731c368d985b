"""The bunqueue front-end's journal records (storage/journal.py has the file): what a
beanstalk job cannot hold of a bunqueue job. A record is `Saved` (a job's whole state,
after each change: its fields by name), `Dropped`, or `Paused` (a queue paused or
resumed); replayed in order they give every live job and the paused queues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shardq.storage.journal import Journal, Kinds

FILE = "bunqueue.journal"


@dataclass(slots=True)
class Saved:
    id: str
    fields: dict[str, Any]


@dataclass(slots=True)
class Dropped:
    id: str


@dataclass(slots=True)
class Paused:
    queue: str
    paused: bool


Record = Saved | Dropped | Paused
KINDS = Kinds({1: Saved, 2: Dropped, 3: Paused})


def open_journal(directory: str, sync: bool) -> Journal:
    return Journal(directory, FILE, KINDS, sync)
