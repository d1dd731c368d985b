"""Unit tests of the write-ahead log's record format (shardq/storage/wal.py).

No files: records are encoded and decoded in memory.
"""

from __future__ import annotations

from wal_helpers import J

from shardq.engine.job import State
from shardq.storage import segment_format as walmod
from shardq.storage.segment_format import HEADER, REC_HEAD, decode_segment, encode


def test_encode_decode_round_trip() -> None:
    records = [J(1, b"hello"), ["S", 1, int(State.BURIED), 5, 0, 0, 1, 0, 0, 1, 0], ["D", 1]]
    records.append(J(2, bytes(range(256)) * 4))  # binary body, every byte value
    data = HEADER + b"".join(encode(r) for r in records)
    got, end, damaged, torn = decode_segment(data)
    assert got == records
    assert end == len(data)
    assert (damaged, torn) == (0, False)
    # the preallocated zero tail stops reading without being "damage"
    assert decode_segment(data + bytes(4096)) == (records, len(data), 0, False)


def test_record_carries_a_crc_of_its_payload() -> None:
    raw = encode(J(7))
    magic, size, crc = REC_HEAD.unpack_from(raw, 0)
    assert magic == walmod.MAGIC
    assert size == len(raw) - REC_HEAD.size
    import zlib

    assert crc == zlib.crc32(raw[REC_HEAD.size :])


def test_header_has_a_version() -> None:
    assert HEADER.startswith(b"SQWAL")
    assert HEADER[5] == walmod.WAL_VERSION
