"""Where data lives: tube name -> shard, job id -> id block -> shard, and which serving
process a connection or request id comes from.

Tubes are spread by their family's name (a tube's family is its name up to the first ``+``),
the same in every process and every run, by one of three rules a log directory records in
its layout file (storage/layout.py): `SPREAD` (new directories, and no directory), a mixing
hash of the family's name without its trailing digits, plus the number those digits make,
so ``q0 q1 q2 q3`` land on consecutive shards; `FAMILIES` (directories written before it),
``crc32(family) % shards``, which is linear and piled numbered names onto one shard; `NAMES`
(written before families), ``crc32(name) % shards``. Under each, the tube ``default`` is on
shard ``crc32("default") % shards`` (`default_shard`), where the id blocks start: which
shard owns which ids does not depend on the rule. Job ids come in fixed,
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

SPREAD = "spread"  #: mixing hash of the family's stem, plus its number (new log directories)
FAMILIES = "families"  #: crc32 of the family's name (log directories written before SPREAD)
NAMES = "names"  #: crc32 of the whole name (log directories written before families)
ROUTINGS = (SPREAD, FAMILIES, NAMES)
MAX_CACHED_TUBES = 10_000  #: a `TubeShards` map's bound (clients may invent any number of names)
_DIGITS = "0123456789"
_MASK32 = 0xFFFFFFFF


def mix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser: every input bit changes each output bit with
    probability about 1/2, so names whose crc32 differ by a constant (crc32 is linear: names
    that differ in their last bytes) no longer land on shards in step."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    return h ^ (h >> 16)


_DEFAULT_CRC = crc32(b"default")
_DEFAULT_MIX = mix32(_DEFAULT_CRC)


def _spread_key(family: str) -> int:
    """The `SPREAD` key of a family: mix32(crc32(stem)) + number, where the number is what
    the trailing digits make (0 without), moved so that ``default`` keeps the shard it has
    under every rule. Consecutive numbers are consecutive keys: over N shards, any N
    consecutively numbered families of one stem take each shard once."""
    stem = family.rstrip(_DIGITS)
    key = mix32(crc32(stem.encode())) + _DEFAULT_CRC - _DEFAULT_MIX
    return key + int(family[len(stem) :]) if len(stem) < len(family) else key


def tube_shard(name: str, shards: int, routing: str = SPREAD) -> int:
    """The shard of a tube under `routing`: by its family (a fanout's tubes are one family,
    so one shard holds them all: engine/fanout.py), or by its whole name (`NAMES`)."""
    if routing == SPREAD:
        return _spread_key(family_of(name)) % shards
    return crc32((name if routing == NAMES else family_of(name)).encode()) % shards


def default_shard(shards: int) -> int:
    """The shard of the tube ``default``, the same under every routing."""
    return _DEFAULT_CRC % shards


class TubeShards(dict[str, int]):
    """tube -> shard under one routing, computed at a tube's first lookup and kept (cleared
    when it holds MAX_CACHED_TUBES: clients may invent any number of names)."""

    def __init__(self, shards: int, routing: str = SPREAD) -> None:
        super().__init__()
        self.shards = shards
        self.routing = routing

    def __missing__(self, tube: str) -> int:
        if len(self) >= MAX_CACHED_TUBES:
            self.clear()
        shard = self[tube] = tube_shard(tube, self.shards, self.routing)
        return shard


def id_block(job_id: int) -> int:
    return (job_id - 1) // ID_BLOCK


def block_ids(block: int) -> range:
    return range(block * ID_BLOCK + 1, (block + 1) * ID_BLOCK + 1)


def block_shard(block: int, shards: int) -> int:
    """The shard a block is leased to (the coordinator leases no other): block 0 to the
    shard of `default`, then round the shards, so a fresh server's first put into
    `default` gets id 1, as in beanstalkd, whatever the shard count."""
    return (block + default_shard(shards)) % shards


COPY_FIRST_BLOCK = 1 << 30  #: ids from 2**40 on are made by shards (fanout copies)


def copy_id(shard: int, shards: int, k: int) -> int:
    """The `k`-th id (from 0) a shard makes itself (for a fanout's copies), from blocks of
    its own by the block rule and far above any leased one: no lease, no round trip."""
    first = COPY_FIRST_BLOCK + (shard - default_shard(shards) - COPY_FIRST_BLOCK) % shards
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
