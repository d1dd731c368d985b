"""Where data lives: tube name -> shard, and job id -> id block -> shard.

Tubes are spread by a stable hash of their name (crc32, the same in every process and
every run). Job ids come in fixed, aligned blocks leased from the coordinator, so the
shard of an id is one dict lookup on its block number and never needs a round trip.
"""

from __future__ import annotations

from zlib import crc32

ID_BLOCK = 1024  #: ids per leased block; block b holds ids b*ID_BLOCK+1 .. (b+1)*ID_BLOCK


def tube_shard(name: str, shards: int) -> int:
    return crc32(name.encode()) % shards


def id_block(job_id: int) -> int:
    return (job_id - 1) // ID_BLOCK


def block_ids(block: int) -> range:
    return range(block * ID_BLOCK + 1, (block + 1) * ID_BLOCK + 1)
