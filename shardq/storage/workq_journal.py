"""The Workq front-end's journal: what a beanstalk job cannot hold of a Workq job (its
UUID, ttl, attempts, fails, result...), so that `-b DIR` keeps Workq jobs whole across a
restart, as the server's write-ahead log keeps the jobs themselves.

One file, DIR/workq.journal: frames of ``u32 length | u32 crc32 | msgpack list``. A record
is `Added` (a job's fixed fields, once), `Changed` (its moving fields, after each change)
or `Dropped`; replaying them in order gives every live job. A torn or corrupt tail (a
crash mid-write) ends the replay there and is cut off. On open the file is rewritten with
only what is live (one Added and one Changed per job), so it never grows past twice the
live set plus what one run adds.

`sync`: fsync after each record (the server's ``-f 0``); otherwise each record is written
before its command is answered (it survives the process, not the machine).
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import astuple, dataclass

import msgpack

FILE = "workq.journal"
HEADER = struct.Struct("<II")

log = logging.getLogger(__name__)


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


@dataclass(slots=True)
class Dropped:
    id: str


Record = Added | Changed | Dropped
KINDS: dict[int, type[Added] | type[Changed] | type[Dropped]] = {1: Added, 2: Changed, 3: Dropped}
KIND_OF = {cls: kind for kind, cls in KINDS.items()}


def encode(record: Record) -> bytes:
    payload = msgpack.packb([KIND_OF[type(record)], *astuple(record)], use_bin_type=True)
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode(data: bytes) -> tuple[list[Record], int]:
    """The records of a journal's bytes, and how many bytes of it are whole."""
    records: list[Record] = []
    at = 0
    while at + HEADER.size <= len(data):
        size, crc = HEADER.unpack_from(data, at)
        payload = data[at + HEADER.size : at + HEADER.size + size]
        if len(payload) < size or zlib.crc32(payload) != crc:
            break
        try:
            kind, *fields = msgpack.unpackb(payload, raw=False)
            records.append(KINDS[kind](*fields))
        except (ValueError, KeyError, TypeError, msgpack.UnpackException):
            break
        at += HEADER.size + size
    return records, at


class Journal:
    def __init__(self, directory: str, sync: bool) -> None:
        self.path = os.path.join(directory, FILE)
        self.sync = sync
        self.fd = -1

    def load(self) -> list[Record]:
        """The records on disk (an empty list for a new journal)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        records, whole = decode(data)
        if whole < len(data):
            log.warning(
                "%s: %d bytes at the end are torn or corrupt: cut off", self.path, len(data) - whole
            )
        return records

    def rewrite(self, records: list[Record]) -> None:
        """Replace the file with `records` (atomically: a new file renamed over it), and
        append to it from now on."""
        tmp = self.path + ".new"
        with open(tmp, "wb") as f:
            f.write(b"".join(encode(r) for r in records))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def append(self, record: Record) -> None:
        self.append_many([record])

    def append_many(self, records: list[Record]) -> None:
        if self.fd < 0 or not records:
            return
        data = memoryview(b"".join(encode(r) for r in records))
        while data:
            data = data[os.write(self.fd, data) :]
        if self.sync:
            os.fsync(self.fd)
