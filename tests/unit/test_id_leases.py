"""serving.ids.IdLeases on its own: ids taken from leased blocks in order, leases asked ahead
and bounded, puts that wait for a lease resumed by it, and the shard of any id."""

from __future__ import annotations

from shardq.cluster.routing import ID_BLOCK, block_ids, block_shard
from shardq.processes.serving.ids import SPARE_BLOCKS, IdLeases


class Coordinator:
    """Records what the leases ask for; leases blocks for a shard as the coordinator does
    (in order, each block's owner by the rule)."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self.asked: list[int] = []
        self.errors: list[str] = []
        self.next_block = 0

    def block_for(self, shard: int) -> int:
        while block_shard(self.next_block, self.shards) != shard:
            self.next_block += 1
        block = self.next_block
        self.next_block += 1
        return block


def leases(shards: int = 2) -> tuple[IdLeases, Coordinator]:
    coordinator = Coordinator(shards)
    return IdLeases(shards, coordinator.asked.append, coordinator.errors.append), coordinator


def test_no_id_before_a_lease_and_the_lease_asked_once_per_block_needed() -> None:
    ids, coordinator = leases()
    assert ids.take(0) is None
    assert coordinator.asked == [0]  # one lease asked for, not one a try
    assert not ids.has_id(0)


def test_ids_come_in_order_from_the_leased_block_and_the_next_is_asked_past_half() -> None:
    ids, coordinator = leases()
    ids.take(0)
    block = coordinator.block_for(0)
    ids.on_lease(0, block)
    first = block_ids(block)
    taken = [ids.take(0) for _ in range(ID_BLOCK // 2 + 1)]
    assert taken == list(first[: ID_BLOCK // 2 + 1])
    assert coordinator.asked == [0]  # half the block or more left: nothing asked yet
    assert ids.take(0) == first[ID_BLOCK // 2 + 1]
    assert coordinator.asked == [0, 0]  # less than half left: the next block asked ahead
    assert ids.has_id(0)


def test_leases_asked_ahead_are_bounded() -> None:
    ids, coordinator = leases()
    for _ in range(10 * SPARE_BLOCKS):
        ids.lease(1)
    assert coordinator.asked == [1] * SPARE_BLOCKS


def test_a_put_waiting_for_a_lease_gets_the_block_s_first_id() -> None:
    ids, coordinator = leases()
    got: list[int] = []
    ids.alloc(1, got.append)
    ids.alloc(1, got.append)
    assert got == []  # both wait for the lease
    block = coordinator.block_for(1)
    ids.on_lease(1, block)
    assert got == list(block_ids(block)[:2])


def test_a_resumed_put_that_raises_does_not_keep_the_others_waiting() -> None:
    ids, coordinator = leases()
    got: list[int] = []

    def fails(_job_id: int) -> None:
        raise RuntimeError("a put that fails")

    ids.alloc(0, fails)
    ids.alloc(0, got.append)
    ids.on_lease(0, coordinator.block_for(0))
    assert len(got) == 1
    assert len(coordinator.errors) == 1


def test_the_shard_of_an_id_by_the_rule_by_its_lease_and_by_the_loaded_table() -> None:
    ids, coordinator = leases(shards=2)
    assert ids.job_shard(1) == block_shard(0, 2)  # no table: the rule
    ids.load([[5, 1]])  # an old log's table: block 5 leased to shard 1
    assert ids.loaded
    assert ids.job_shard(5 * ID_BLOCK + 1) == 1
    ids.take(0)
    block = coordinator.block_for(0)
    ids.on_lease(0, block)
    assert ids.job_shard(block_ids(block)[0]) == 0


def test_a_block_answered_by_the_rule_then_loaded_or_leased_elsewhere_is_answered_anew() -> None:
    """`job_shard` remembers the block it answered last; a table that says otherwise for
    that block (loaded, or a lease) is what it answers next."""
    rule = block_shard(5, 2)
    ids, coordinator = leases(shards=2)
    assert ids.job_shard(5 * ID_BLOCK + 1) == rule
    assert ids.job_shard(5 * ID_BLOCK + 2) == rule  # the same block again
    ids.load([[5, 1 - rule]])
    assert ids.job_shard(5 * ID_BLOCK + 3) == 1 - rule
    other = block_shard(7, 2)
    assert ids.job_shard(7 * ID_BLOCK + 1) == other
    ids.leasing[1 - other] = 1
    ids.on_lease(1 - other, 7)
    assert ids.job_shard(7 * ID_BLOCK + 2) == 1 - other
    assert ids.job_shard(5 * ID_BLOCK + 4) == 1 - rule and ids.job_shard(1) == block_shard(0, 2)


def test_given_ids_need_no_lease() -> None:
    ids, coordinator = leases()
    ids.give(0, range(1, 4))
    assert [ids.take(0), ids.take(0), ids.take(0)] == [1, 2, 3]
    assert not ids.has_id(0)
    # the given range is short, so each take asked for a block ahead (up to SPARE_BLOCKS)
    assert coordinator.asked == [0, 0, 0]
