"""The bytes of a shard's log segment (storage/wal.py): an 8-byte header (b"SQWAL" + version
byte + 2 reserved bytes), then records:

    b"\\xa5\\x5a" | u32 payload length | u32 crc32(payload) | payload (msgpack list)

The payloads are the engine's records, laid out in shardq/engine/records.py: ["J", …] a
whole job, ["S", …] a job's new state, ["D", id] a delete. Reading stops at a zero length
(the preallocated tail). A record whose checksum fails is skipped and counted; if no valid
record follows it, it was the torn last write of a crash and is cut off with one warning.

WAL_VERSION and changing the format: (1) bump WAL_VERSION; (2) keep a reader for the
previous version (in `decode_segment` and records.py) so an old log still replays; (3) the
first compaction after start-up rewrites everything in the new format; (4) note it in the
changelog.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import msgpack

from shardq.storage.packing import pack

WAL_VERSION = 1
HEADER = b"SQWAL" + bytes([WAL_VERSION]) + b"\0\0"
MAGIC = b"\xa5\x5a"
REC_HEAD = struct.Struct("<2sII")  # magic, payload length, crc32


def encode(record: Sequence[Any]) -> bytes:
    """One record framed for a segment (a tuple packs as the same array as a list)."""
    return b"".join(framed(record))


def frames(records: Sequence[Sequence[Any]]) -> list[bytes]:
    """Each record's frame head and payload, in order, to be written as they are."""
    return [part for record in records for part in framed(record)]


def framed(record: Sequence[Any]) -> tuple[bytes, bytes]:
    """A record's frame head and payload, written one after the other (no copy joins them)."""
    payload = pack(record)
    return REC_HEAD.pack(MAGIC, len(payload), zlib.crc32(payload)), payload


def decode_segment(data: bytes) -> tuple[list[list[Any]], int, int, bool]:
    """Records of one segment's bytes -> (records, end offset, damaged count, torn tail)."""
    records: list[list[Any]] = []
    pos, damaged, end = len(HEADER), 0, len(HEADER)
    while pos + REC_HEAD.size <= len(data):
        magic, size, crc = REC_HEAD.unpack_from(data, pos)
        if magic == b"\0\0" and size == 0:
            break  # the preallocated, never written tail
        body = data[pos + REC_HEAD.size : pos + REC_HEAD.size + size]
        if magic == MAGIC and len(body) == size and zlib.crc32(body) == crc:
            try:
                records.append(msgpack.unpackb(body, raw=False))
                pos += REC_HEAD.size + size
                end = pos
                continue
            except ValueError:
                pass
        nxt = data.find(MAGIC, pos + 1)  # resynchronise on the next valid record
        while nxt >= 0 and not _valid_at(data, nxt):
            nxt = data.find(MAGIC, nxt + 1)
        if nxt < 0:
            return records, end, damaged, True
        damaged += 1
        pos = nxt
    return records, end, damaged, False


def _valid_at(data: bytes, pos: int) -> bool:
    if pos + REC_HEAD.size > len(data):
        return False
    magic, size, crc = REC_HEAD.unpack_from(data, pos)
    body = data[pos + REC_HEAD.size : pos + REC_HEAD.size + size]
    return magic == MAGIC and len(body) == size and zlib.crc32(body) == crc
