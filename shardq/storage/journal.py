"""A front-end's journal: what a protocol front-end knows beyond the beanstalk jobs (Workq's
registry, Kestrel's expiry times), so that ``-b DIR`` keeps it across a restart as the
server's write-ahead log keeps the jobs.

One file per front-end in DIR: frames of ``u32 length | u32 crc32 | msgpack list``, the
list being a record's kind number and its fields (dataclasses, named in the front-end's
record module). Replaying the records in order gives the front-end's state; a torn or
corrupt tail (a crash mid-write) ends the replay there and is cut off. On open the
front-end rewrites the file with only what is live, and again while it runs once the file
passes both `COMPACT_MIN_BYTES` and twice what the front-end says is live
(`wants_rewrite`), so the file stays within a small multiple of what is live. While it
runs, the rewrite is written by a forked child (`tend`; storage/forked_write.py: the
bunqueue door's 100,000 jobs took 1.3 s in process, a stall for every client): what is
appended meanwhile goes on to the old file and is kept, then appended to the new one
before it is synced and renamed over the old.

Each record is written before its command is answered (it survives the process). With
`sync` (the server's ``-f 0``) it is also fsynced before the answer leaves: the front-end
holds the answers of a loop turn and calls `sync_now` once for all of them (group commit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

import msgpack

from shardq.storage.forked_write import ForkedWrite
from shardq.storage.packing import pack

HEADER = struct.Struct("<II")
NEW = ".new"  #: the new file's name while a rewrite writes it
COMPACT_MIN_BYTES = 16 << 20  #: appended bytes below which a journal is never rewritten
RETRY_S = 1.0  #: after a rewrite failed, the next waits this long, doubled for each
RETRY_MAX_S = 60.0  #: failure in a row, up to this
BATCH = 512  #: records a child writes at a time (IOV_MAX buffers at most)

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
        self.rewriting: ForkedWrite | None = None  #: a rewrite under way, in a child
        self.tail: list[bytes] = []  #: what was appended since it began
        self.retry_at = 0.0  #: monotonic s: no rewrite before (one failed)
        self.failures = 0  #: rewrites that failed in a row

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
        self.stop_rewrite()
        tmp = self.path + NEW
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # (a child of an earlier run may still write that one)
        data = b"".join(self.kinds.encode(r) for r in records)
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._replace_with(tmp, os.open(tmp, os.O_WRONLY | os.O_APPEND), len(data))

    def _replace_with(self, tmp: str, fd: int, size: int) -> None:
        """The synced file `tmp` (open as `fd`, for appending; `size` bytes) in place."""
        os.replace(tmp, self.path)
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = fd
        self.live_bytes, self.appended = size, 0

    def tend(self, live_estimate: int, records: Callable[[], list[Any]]) -> None:
        """Each turn: start a rewrite in a child when one is wanted (`wants_rewrite`), or
        finish the one under way once its child is done: what was appended since is
        appended to the new file, which is synced and renamed over the old. A failure is
        logged; the file goes on as it was, and the next try waits RETRY_S (doubled for each
        failure in a row)."""
        try:
            if self.rewriting is None:
                if self.wants_rewrite(live_estimate) and time.monotonic() >= self.retry_at:
                    encode = self.kinds.encode
                    self.rewriting = ForkedWrite(
                        self.path + NEW, lambda: batches([encode(r) for r in records()])
                    )
                return
            done = self.rewriting.poll()
            if done is None:
                return
            tmp, self.rewriting = self.rewriting.path, None
            tail, self.tail = self.tail, []
            if not done:
                raise OSError(f"the child writing {tmp} failed")
            fd = os.open(tmp, os.O_WRONLY | os.O_APPEND)
            try:
                size = os.fstat(fd).st_size
                write_all(fd, memoryview(b"".join(tail)))
                os.fsync(fd)
                self._replace_with(tmp, fd, size)
            except OSError:
                os.close(fd)
                raise
            self.appended = sum(map(len, tail))
            self.failures = 0
        except OSError as e:
            self.stop_rewrite()
            self.retry_at = time.monotonic() + min(RETRY_S * 2**self.failures, RETRY_MAX_S)
            self.failures += 1
            log.error("%s: cannot rewrite: %s", self.path, e)

    def stop_rewrite(self) -> None:
        """Stop a rewrite under way (its file is removed; the journal is as it was)."""
        if self.rewriting is not None:
            self.rewriting.abandon()
            self.rewriting = None
        self.tail = []

    def wants_rewrite(self, live_estimate: int) -> bool:
        """The file is big enough, and mostly garbage: `live_estimate` is about what a
        rewrite would write."""
        size = self.live_bytes + self.appended
        return self.rewriting is None and size > COMPACT_MIN_BYTES and size > 2 * live_estimate

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
        joined = b"".join(self.kinds.encode(r) for r in records)
        self.appended += len(joined)
        write_all(self.fd, memoryview(joined))
        if self.rewriting is not None:
            self.tail.append(joined)  # for the new file too
        self.dirty = self.sync


def write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def batches(frames: list[bytes]) -> Iterator[list[bytes]]:
    """A rewrite's frames, BATCH at a time (for the child's writes)."""
    for start in range(0, len(frames), BATCH):
        yield frames[start : start + BATCH]
