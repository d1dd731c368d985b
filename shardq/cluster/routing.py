"""Where data lives: tube name -> shard, job id -> id block -> shard, and which serving
process a connection or request id comes from.

Tubes are spread by a stable hash of their family's name (crc32, the same in every process
and every run; a tube's family is its name up to the first ``+``). Job ids come in fixed,
aligned blocks leased from the coordinator; block b belongs to shard
``(b + shard of default) % shards`` (`block_shard`), so every serving process routes every
id with no table and no round trip. (Logs written before that rule keep their blocks'
owners in the coordinator's table, which each serving process loads at start.) The ids a
shard makes itself, for a fanout's copies, are from blocks of its own by the same rule, far
above any leased one (`copy_id`).

Connection ids and request ids carry the index of the serving process that made them in
their low ORIGIN_BITS bits (`origin_of`): a shard keys waiters and reservations by them,
so they must be unique across serving processes, and a restarted serving process makes
its shards forget exactly its own connections (RESET).
"""

from __future__ import annotations

from zlib import crc32

from shardq.engine.names import family_of

ID_BLOCK = 1024  #: ids per leased block; block b holds ids b*ID_BLOCK+1 .. (b+1)*ID_BLOCK
ORIGIN_BITS = 8  #: low bits of a connection id or rid: the serving process's index
MAX_SERVING = 1 << ORIGIN_BITS
ORIGIN_MASK = MAX_SERVING - 1


def tube_shard(name: str, shards: int, families: bool = True) -> int:
    """The shard of a tube: by its family's name (a fanout's tubes are one family, so one
    shard holds them all: engine/fanout.py); by its whole name (`families` False) for a log
    directory written before families (its layout file says so)."""
    return crc32((family_of(name) if families else name).encode()) % shards


def id_block(job_id: int) -> int:
    return (job_id - 1) // ID_BLOCK


def block_ids(block: int) -> range:
    return range(block * ID_BLOCK + 1, (block + 1) * ID_BLOCK + 1)


def block_shard(block: int, shards: int) -> int:
    """The shard a block is leased to (the coordinator leases no other): block 0 to the
    shard of `default`, then round the shards, so a fresh server's first put into
    `default` gets id 1, as in beanstalkd, whatever the shard count."""
    return (block + tube_shard("default", shards)) % shards


COPY_FIRST_BLOCK = 1 << 30  #: ids from 2**40 on are made by shards (fanout copies)


def copy_id(shard: int, shards: int, k: int) -> int:
    """The `k`-th id (from 0) a shard makes itself (for a fanout's copies), from blocks of
    its own by the block rule and far above any leased one: no lease, no round trip."""
    first = COPY_FIRST_BLOCK + (shard - tube_shard("default", shards) - COPY_FIRST_BLOCK) % shards
    block = first + (k // ID_BLOCK) * shards
    return block * ID_BLOCK + 1 + k % ID_BLOCK


def copy_index(shard: int, shards: int, job_id: int) -> int | None:
    """Which `copy_id` of the shard `job_id` is (None: not one)."""
    block = id_block(job_id)
    if block < COPY_FIRST_BLOCK or block_shard(block, shards) != shard:
        return None
    first = copy_id(shard, shards, 0) // ID_BLOCK
    return (block - first) // shards * ID_BLOCK + (job_id - 1) % ID_BLOCK


def origin_of(conn_or_rid: int) -> int:
    """The index of the serving process that made this connection id or rid."""
    return conn_or_rid & ORIGIN_MASK


def tagged(counter: int, origin: int) -> int:
    """The counter-th id of serving process `origin`."""
    return (counter << ORIGIN_BITS) | origin
