"""Job ids: blocks leased from the coordinator ahead of need, and id -> shard routing.

`IdLeases` owns the id blocks of a serving process: the block table (block -> shard, the
coordinator's and its own), each shard's current block and the blocks leased ahead, the
leases asked for and the puts waiting for one. It asks for a lease through the callback it
is given (`ask_lease`: a request to the coordinator, answered by `leased`), so it knows
nothing of the process's peers; the process holds one (`ids`) and calls its methods.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster import wire
from shardq.cluster.routing import ID_BLOCK, block_ids, block_shard, id_block
from shardq.processes.serving.conn import COORDINATOR, Conn

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

SPARE_BLOCKS = 4  #: id blocks leased ahead per shard
HALF_BLOCK = ID_BLOCK // 2  #: a block half used: the next one is leased ahead


class IdLeases:
    """The id blocks of one serving process, and the shard of any id."""

    def __init__(
        self, shards: int, ask: Callable[[int], None], on_error: Callable[[str], None]
    ) -> None:
        """`ask(shard)`: send a lease request for one block of `shard` (answered by
        `on_lease`); `on_error(what)`: a put resumed by a lease raised (logged there)."""
        self.shard_count = shards
        self.ask = ask
        self.on_error = on_error
        self.blocks: dict[int, int] = {}  # id block -> shard
        self.next_id: dict[int, int] = {}  # shard -> the next id of its current block
        self.end_id: dict[int, int] = {}  # shard -> the first id past its current block
        self.spare: dict[int, list[range]] = {}  # shard -> the next blocks, leased ahead
        self.leasing: dict[int, int] = {}  # shard -> leases asked for and not answered
        self.waiters: dict[int, list[Callable[[], None]]] = {}  # shard -> puts waiting
        self.loaded = False  # the coordinator's table of blocks is in (`load`)
        #: the block `job_shard` answered last and its shard (-1: none): a serving process's
        #: deletes are mostly of its own latest block's ids; cleared when `blocks` changes
        self.last_block = -1
        self.last_shard = 0

    @cython.locals(job_id=cython.longlong, end=cython.longlong)
    def take(self, shard: int) -> int | None:
        """The next id of the shard's block (leasing the next block ahead when half of this
        one is used), or None while a block has to be leased first."""
        job_id = self.next_id.get(shard, 0)
        end = self.end_id.get(shard, 0)
        if job_id >= end:
            spare = self.spare.get(shard)
            if not spare:
                self.lease(shard)
                return None
            ids = spare.pop(0)
            job_id, end = ids.start, ids.stop
            self.end_id[shard] = end
        self.next_id[shard] = job_id + 1
        if end - job_id < HALF_BLOCK:
            self.lease(shard)
        return job_id

    def has_id(self, shard: int) -> bool:
        """Is an id of the shard's current block at hand (no lease to wait for)?"""
        return self.next_id.get(shard, 0) < self.end_id.get(shard, 0)

    def alloc(self, shard: int, then: Callable[[int], None]) -> None:
        """Hand the next id of the shard to `then`, now or once a block is leased."""
        job_id = self.take(shard)
        if job_id is None:
            self.waiters.setdefault(shard, []).append(functools.partial(self.alloc, shard, then))
        else:
            then(job_id)

    def lease(self, shard: int) -> None:
        """Ask for one more block unless SPARE_BLOCKS are held or asked for already: one turn
        under load can take more than a block's worth of puts, and a put that has to wait
        for a lease waits a whole round trip to the coordinator."""
        asked = self.leasing.get(shard, 0)
        if asked + len(self.spare.get(shard, ())) >= SPARE_BLOCKS:
            return
        self.leasing[shard] = asked + 1
        self.ask(shard)

    def on_lease(self, shard: int, block: int) -> None:
        """A block leased to `shard`: held ahead, and the puts waiting for it resumed."""
        self.leasing[shard] -= 1
        self.blocks[block] = shard
        self.last_block = -1  # (it may have answered this block by the rule)
        self.spare.setdefault(shard, []).append(block_ids(block))  # blocks come in order
        for resume in self.waiters.pop(shard, []):
            try:
                resume()
            except Exception:  # one put that fails must not leave the others waiting forever
                self.on_error(f"a put resumed by the lease of block {block}")

    def give(self, shard: int, ids: range) -> None:
        """Ids for `shard` with no lease (a process with no coordinator: tests, tools)."""
        self.spare.setdefault(shard, []).append(ids)

    def load(self, table: Iterable[Sequence[int]]) -> None:
        """The blocks leased before this process started ([block, shard] pairs)."""
        for block, shard in table:
            self.blocks[block] = shard
        self.last_block = -1
        self.loaded = True

    def job_shard(self, job_id: int) -> int:
        """The shard of an id: its block's, from the table of blocks leased before the rule
        (routing.block_shard) or by this process, else by the rule."""
        block = id_block(job_id)  # (compiled: C calls, routing.pxd)
        if block == self.last_block:
            return self.last_shard
        shard = self.blocks.get(block)
        if shard is None:
            shard = block_shard(block, self.shard_count)
        self.last_block, self.last_shard = block, shard
        return shard


def shard_of(self: ServingProcess, tube: str) -> int:
    """The shard of a tube (`tube_shards`, a routing.TubeShards: computed on first use)."""
    return self.tube_shards[tube]


def ask_lease(self: ServingProcess, shard: int) -> None:
    """Ask the coordinator for a block of ids for `shard` (`IdLeases.ask`)."""
    rid = self.request(COORDINATOR, wire.LEASE, None, wire.Lease(shard), None)
    self.pending[rid] = (None, functools.partial(self.leased, shard))


def leased(self: ServingProcess, shard: int, _conn: Conn | None, payload: Sequence[Any]) -> None:
    """The coordinator's answer to a lease: a block of ids for `shard` (`wire.Answer`)."""
    (block,) = payload
    self.ids.on_lease(shard, block)
