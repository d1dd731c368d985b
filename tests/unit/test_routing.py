"""Unit tests of shardq/routing.py: tube -> shard and job id -> id block."""

from __future__ import annotations

import random

import pytest

from shardq.cluster.routing import ID_BLOCK, block_ids, id_block, tube_shard


@pytest.mark.parametrize(
    ("name", "shards", "shard"),
    [
        # crc32 values are fixed by zlib: every process and every run must agree on them
        ("default", 1, 0),
        ("default", 3, 3814588639 % 3),
        ("default", 4, 3814588639 % 4),
        ("ta", 4, 809500611 % 4),
        ("tb", 4, 2838933113 % 4),
        ("foo", 3, 2356372769 % 3),
    ],
)
def test_tube_shard_is_a_stable_crc32(name: str, shards: int, shard: int) -> None:
    assert tube_shard(name, shards) == shard


def test_tube_shard_is_in_range_and_spreads_names() -> None:
    rng = random.Random(7)
    names = [
        "".join(rng.choices("abcdefghij-+/;.$_()0123", k=rng.randint(1, 20))) for _ in range(2000)
    ]
    for shards in (1, 2, 3, 8):
        hits = [tube_shard(n, shards) for n in names]
        assert set(hits) == set(range(shards))
        assert min(hits.count(s) for s in range(shards)) > len(names) / shards / 2


def test_tube_shard_uses_the_name_bytes_not_pythons_hash() -> None:
    assert tube_shard("default", 7) == tube_shard("default", 7)
    assert tube_shard("x" * 200, 5) == tube_shard("".join(["x"] * 200), 5)


@pytest.mark.parametrize(
    ("job_id", "block"),
    [(1, 0), (ID_BLOCK, 0), (ID_BLOCK + 1, 1), (2 * ID_BLOCK, 1), (2 * ID_BLOCK + 1, 2)],
)
def test_id_block_boundaries(job_id: int, block: int) -> None:
    assert id_block(job_id) == block


def test_block_ids_are_aligned_disjoint_and_cover_every_id() -> None:
    assert block_ids(0) == range(1, ID_BLOCK + 1)
    assert len(block_ids(5)) == ID_BLOCK
    assert block_ids(0)[-1] + 1 == block_ids(1)[0]
    for block in (0, 1, 2, 1000, 2**40):
        ids = block_ids(block)
        assert {id_block(ids[0]), id_block(ids[-1])} == {block}


def test_id_block_round_trips_for_large_ids() -> None:
    rng = random.Random(3)
    for job_id in [rng.randint(1, 2**64 - 1) for _ in range(1000)] + [2**64 - 1]:
        assert job_id in block_ids(id_block(job_id))
