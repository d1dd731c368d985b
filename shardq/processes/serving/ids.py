"""Job ids: blocks leased from the coordinator ahead of need, and id -> shard routing."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster import wire
from shardq.cluster.routing import ID_BLOCK, block_ids, block_shard, id_block
from shardq.processes.serving.conn import COORDINATOR, Conn

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

SPARE_BLOCKS = 4  #: id blocks leased ahead per shard


def shard_of(self: ServingProcess, tube: str) -> int:
    """The shard of a tube (`tube_shards`, a routing.TubeShards: computed on first use)."""
    return self.tube_shards[tube]


def take_id(self: ServingProcess, shard: int) -> int | None:
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
    if end - job_id < ID_BLOCK // 2:
        self.lease(shard)
    return job_id


def alloc_id(self: ServingProcess, shard: int, then: Callable[[int], None]) -> None:
    """Hand out the next id of the shard's block, leasing blocks from the coordinator."""
    job_id = self.take_id(shard)
    if job_id is None:
        self.lease_waiters.setdefault(shard, []).append(
            functools.partial(self.alloc_id, shard, then)
        )
    else:
        then(job_id)


def lease(self: ServingProcess, shard: int) -> None:
    """Ask for one more block unless SPARE_BLOCKS are held or asked for already: one turn
    under load can take more than a block's worth of puts, and a put that has to wait
    for a lease waits a whole round trip to the coordinator."""
    asked = self.leasing.get(shard, 0)
    if asked + len(self.spare.get(shard, ())) >= SPARE_BLOCKS:
        return
    self.leasing[shard] = asked + 1
    rid = self.request(COORDINATOR, wire.LEASE, None, wire.Lease(shard), None)
    self.pending[rid] = (None, functools.partial(self.leased, shard))


def leased(self: ServingProcess, shard: int, _conn: Conn | None, payload: Sequence[Any]) -> None:
    """The coordinator's answer to a lease: a block of ids for `shard` (`wire.Answer`)."""
    (block,) = payload
    self.on_lease(shard, block)


def on_lease(self: ServingProcess, shard: int, block: int) -> None:
    self.leasing[shard] -= 1
    self.blocks[block] = shard
    self.spare.setdefault(shard, []).append(block_ids(block))  # blocks come in order
    for resume in self.lease_waiters.pop(shard, []):
        try:
            resume()
        except Exception:  # one put that fails must not leave the others waiting forever
            self.internal_error(None, f"a put resumed by the lease of block {block}")


def job_shard(self: ServingProcess, job_id: int) -> int:
    """The shard of an id: its block's, from the table of blocks leased before the rule
    (routing.block_shard) or by this process, else by the rule."""
    block = id_block(job_id)
    shard = self.blocks.get(block)
    return block_shard(block, self.shard_count) if shard is None else shard
