"""A front-end's journal: what a protocol front-end knows beyond the beanstalk jobs (Workq's
registry, Kestrel's expiry times), so that ``-b DIR`` keeps it across a restart as the
server's write-ahead log keeps the jobs.

One file per front-end in DIR: frames of ``u32 length | u32 crc32 | msgpack list``, the
list being a record's kind number and its fields (dataclasses, named in the front-end's
record module). Replaying the records in order gives the front-end's state; a torn or
corrupt tail (a crash mid-write) ends the replay there and is cut off. On open the
front-end rewrites the file with only what is live, and again while it runs once the file
passes both `COMPACT_MIN_BYTES` and twice what the front-end says is live
(`wants_rewrite`), so the file stays within a small multiple of what is live.

Each record is written before its command is answered (it survives the process). With
`sync` (the server's ``-f 0``) it is also fsynced before the answer leaves: the front-end
holds the answers of a loop turn and calls `sync_now` once for all of them (group commit).
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import fields
from typing import Any

import msgpack

from shardq.storage.packing import pack

HEADER = struct.Struct("<II")
COMPACT_MIN_BYTES = 16 << 20  #: appended bytes below which a journal is never rewritten

log = logging.getLogger(__name__)


class Kinds:
    """The record classes of one journal, by kind number."""

    def __init__(self, classes: dict[int, type]) -> None:
        self.by_number = classes
        self.number_of = {cls: kind for kind, cls in classes.items()}
        self.names = {cls: [f.name for f in fields(cls)] for cls in classes.values()}

    def encode(self, record: Any) -> bytes:
        """A record's frame: its kind and its fields as they are (not copied: `astuple`
        deep-copies a field that is a dict, 5x the cost of the packing)."""
        kind = type(record)
        values = [getattr(record, name) for name in self.names[kind]]
        payload = pack([self.number_of[kind], *values])
        return HEADER.pack(len(payload), zlib.crc32(payload)) + payload

    def decode(self, data: bytes) -> tuple[list[Any], int]:
        """The records of a journal's bytes, and how many bytes of it are whole."""
        records: list[Any] = []
        at = 0
        while at + HEADER.size <= len(data):
            size, crc = HEADER.unpack_from(data, at)
            payload = data[at + HEADER.size : at + HEADER.size + size]
            if len(payload) < size or zlib.crc32(payload) != crc:
                break
            try:
                kind, *fields = msgpack.unpackb(payload, raw=False)
                records.append(self.by_number[kind](*fields))
            except (ValueError, KeyError, TypeError, msgpack.UnpackException):
                break
            at += HEADER.size + size
        return records, at


class Journal:
    def __init__(self, directory: str, name: str, kinds: Kinds, sync: bool) -> None:
        self.path = os.path.join(directory, name)
        self.kinds = kinds
        self.sync = sync
        self.fd = -1
        self.live_bytes = 0  # the size of the last rewrite
        self.appended = 0  # bytes appended since
        self.dirty = False  # written, not yet fsynced (with `sync`)

    def load(self) -> list[Any]:
        """The records on disk (an empty list for a new journal)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        records, whole = self.kinds.decode(data)
        if whole < len(data):
            torn = len(data) - whole
            log.warning("%s: %d bytes at the end are torn or corrupt: cut off", self.path, torn)
        return records

    def rewrite(self, records: list[Any]) -> None:
        """Replace the file with `records` (atomically: a new file renamed over it), and
        append to it from now on."""
        tmp = self.path + ".new"
        data = b"".join(self.kinds.encode(r) for r in records)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.live_bytes, self.appended = len(data), 0

    def wants_rewrite(self, live_estimate: int) -> bool:
        """The file is big enough, and mostly garbage: `live_estimate` is about what a
        rewrite would write."""
        size = self.live_bytes + self.appended
        return size > COMPACT_MIN_BYTES and size > 2 * live_estimate

    def sync_now(self) -> None:
        """fsync what was written since the last one (a no-op when nothing was); a disk
        error is logged (the front-end goes on: its state is in memory)."""
        if self.dirty and self.fd >= 0:
            self.dirty = False
            try:
                os.fsync(self.fd)
            except OSError as e:
                log.error("%s: fsync: %s", self.path, e)

    def append(self, record: Any) -> None:
        self.append_many([record])

    def append_many(self, records: list[Any]) -> None:
        if self.fd < 0 or not records:
            return
        data = memoryview(b"".join(self.kinds.encode(r) for r in records))
        self.appended += len(data)
        while data:
            data = data[os.write(self.fd, data) :]
        self.dirty = self.sync
