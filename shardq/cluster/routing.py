"""Where data lives: tube name -> shard, job id -> id block -> shard, and which serving
process a connection or request id comes from.

Tubes are spread by a stable hash of their name (crc32, the same in every process and
every run). Job ids come in fixed, aligned blocks leased from the coordinator; block b
belongs to shard ``(b + shard of default) % shards`` (`block_shard`), so every serving
process routes every id with no table and no round trip. (Logs written before that rule
keep their blocks' owners in the coordinator's table, which each serving process loads at
start.)

Connection ids and request ids carry the index of the serving process that made them in
their low ORIGIN_BITS bits (`origin_of`): a shard keys waiters and reservations by them,
so they must be unique across serving processes, and a restarted serving process makes
its shards forget exactly its own connections (RESET).
"""

from __future__ import annotations

from zlib import crc32

ID_BLOCK = 1024  #: ids per leased block; block b holds ids b*ID_BLOCK+1 .. (b+1)*ID_BLOCK
ORIGIN_BITS = 8  #: low bits of a connection id or rid: the serving process's index
MAX_SERVING = 1 << ORIGIN_BITS
ORIGIN_MASK = MAX_SERVING - 1


def tube_shard(name: str, shards: int) -> int:
    return crc32(name.encode()) % shards


def id_block(job_id: int) -> int:
    return (job_id - 1) // ID_BLOCK


def block_ids(block: int) -> range:
    return range(block * ID_BLOCK + 1, (block + 1) * ID_BLOCK + 1)


def block_shard(block: int, shards: int) -> int:
    """The shard a block is leased to (the coordinator leases no other): block 0 to the
    shard of `default`, then round the shards, so a fresh server's first put into
    `default` gets id 1, as in beanstalkd, whatever the shard count."""
    return (block + tube_shard("default", shards)) % shards


def origin_of(conn_or_rid: int) -> int:
    """The index of the serving process that made this connection id or rid."""
    return conn_or_rid & ORIGIN_MASK


def tagged(counter: int, origin: int) -> int:
    """The counter-th id of serving process `origin`."""
    return (counter << ORIGIN_BITS) | origin
