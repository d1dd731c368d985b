"""The engine's table of jobs by id (engine/jobtable.py): a mapping as a dict is, in blocks."""

from __future__ import annotations

import random

import pytest

from shardq.cluster.routing import ID_BLOCK, block_ids, id_block
from shardq.engine.job import Job, new_job
from shardq.engine.jobtable import JobTable


def job(job_id: int) -> Job:
    return new_job(job_id, job_id, "default", 0, 0, 60, b"x", 0)


def test_a_mapping_of_id_to_job() -> None:
    table = JobTable()
    a, b = job(1), job(5000)
    table.add(1, a)
    table[5000] = b
    assert len(table) == 2
    assert table.get(1) is a and table[5000] is b
    assert 1 in table and 5000 in table
    assert table.get(2) is None and 2 not in table
    assert table.get(0) is None and 0 not in table
    for other in (-1, 1 << 64, "1", None, 1.0):
        assert other not in table
    with pytest.raises(KeyError):
        table[2]
    with pytest.raises(KeyError):
        del table[2]
    assert table.pop(1) is a and table.pop(1) is None
    del table[5000]
    assert len(table) == 0 and list(table) == []


def test_a_job_put_again_under_its_id_is_counted_once() -> None:
    table = JobTable()
    table.add(7, job(7))
    again = job(7)
    table.add(7, again)
    assert len(table) == 1 and table[7] is again


def test_iterates_in_order_of_id_and_gives_back_empty_blocks() -> None:
    table = JobTable()
    ids = [3 * ID_BLOCK + 1, 2, ID_BLOCK, ID_BLOCK + 1, (1 << 40) + 5, (1 << 64) - 1]
    for job_id in ids:
        table.add(job_id, job(job_id))
    assert list(table) == sorted(ids)
    assert [j for j, _ in table.items()] == sorted(ids)
    assert [j.id for j in table.values()] == sorted(ids)
    assert list(table.keys()) == sorted(ids)
    assert len(table.blocks) == 5  # 2 and ID_BLOCK share the first
    for job_id in ids:
        assert table.pop(job_id) is not None
    assert len(table) == 0 and list(table) == []
    # the block looked up last is not used up: it waits, empty, until another is looked up
    assert [b.live for b in table.blocks.values()] == [0]
    table.add(1, job(1))
    assert list(table.blocks) == [0]


def test_a_queue_emptied_by_every_delete_keeps_its_block() -> None:
    """One client putting and taking one job at a time: the block of slots is made once,
    not for every put."""
    table = JobTable()
    ids = iter(block_ids(0))
    table.add(job_id := next(ids), job(job_id))
    first = table.blocks[0]
    for _ in range(100):
        assert table.pop(job_id) is not None and len(table) == 0
        table.add(job_id := next(ids), job(job_id))
        assert table.blocks[0] is first
    assert table.pop(job_id) is not None
    other = ID_BLOCK * 7 + 1
    table.add(other, job(other))  # another block looked up: the empty one goes
    assert list(table.blocks) == [7]


def test_a_used_up_block_goes_with_its_last_job() -> None:
    table = JobTable()
    for job_id in block_ids(2):
        table.add(job_id, job(job_id))
    for job_id in block_ids(2):
        table.pop(job_id)
    assert table.blocks == {} and table.sparse == {} and len(table) == 0


def test_one_leased_block_of_ids_is_one_block_of_the_table() -> None:
    """The table's blocks are the id blocks a serving process leases (cluster/routing.py):
    a shard's ids fill whole blocks, so a job costs its slot and no more."""
    table = JobTable()
    block = 12
    for job_id in block_ids(block):
        assert id_block(job_id) == block
        table.add(job_id, job(job_id))
    assert len(table.blocks) == 1 and len(table) == ID_BLOCK


def test_against_a_dict() -> None:
    rng = random.Random(7)
    table, model = JobTable(), {}
    pool = list(range(1, 4 * ID_BLOCK + 1)) + [(1 << 40) + 3, (1 << 64) - 1]
    went_sparse = False
    for step in range(60_000):
        job_id = rng.choice(pool)
        # full blocks, then fewer jobs, then stragglers (some blocks go sparse), then full
        if rng.random() < (0.7, 0.3, 0.01, 0.6)[step // 15_000]:
            j = job(job_id)
            table.add(job_id, j)
            model[job_id] = j
        else:
            assert table.pop(job_id) is model.pop(job_id, None)
        assert table.get(job_id) is model.get(job_id)
        assert len(table) == len(model)
        went_sparse = went_sparse or bool(table.sparse_blocks)
    assert sorted(table.items()) == sorted(model.items())
    held = sum(b.live for b in table.blocks.values()) + sum(table.sparse_blocks.values())
    assert held == len(table.sparse) + sum(b.live for b in table.blocks.values()) == len(model)
    assert not set(table.blocks) & set(table.sparse_blocks)
    assert went_sparse


def test_a_used_up_block_with_few_jobs_left_goes_sparse() -> None:
    """The stragglers of a block whose ids are all used (a buried job among thousands
    deleted) move to a dict by id: a block is not kept for a few jobs."""
    table = JobTable()
    ids = list(block_ids(3))
    for job_id in ids:
        table.add(job_id, job(job_id))
    keep = ids[::64]  # 16 of them stay
    for job_id in ids:
        if job_id not in keep:
            assert table.pop(job_id) is not None
    assert table.blocks == {} and table.sparse_blocks == {3: len(keep)}
    assert sorted(table.sparse) == keep and len(table) == len(keep)
    assert all(table.get(job_id) is not None for job_id in keep)
    assert table.get(keep[0] + 1) is None and keep[0] + 1 not in table
    again = job(keep[0] + 1)  # an id of that block made again (a restore): sparse too
    table.add(keep[0] + 1, again)
    assert table.blocks == {} and table.get(keep[0] + 1) is again and len(table) == 17
    assert table.pop(keep[0] + 1) is again
    for job_id in keep:
        assert table.pop(job_id) is not None
    assert table.sparse == {} and table.sparse_blocks == {} and len(table) == 0


def test_a_block_still_being_filled_keeps_its_slots() -> None:
    """Jobs deleted as fast as they are put leave few in a block that is still handing
    out ids: it stays a block (no move to `sparse` and back for every put)."""
    table = JobTable()
    ids = list(block_ids(0))[:-1]  # its last id not used yet
    for job_id in ids:
        table.add(job_id, job(job_id))
        if job_id > 2:
            table.pop(job_id - 2)
    assert list(table.blocks) == [0] and table.sparse == {} and len(table) == 2
