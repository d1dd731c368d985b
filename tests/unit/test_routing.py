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


def test_a_tube_family_lives_with_its_first_name() -> None:
    from zlib import crc32

    for shards in (2, 3, 4, 8):
        for name in ("orders", "a", "x.y"):
            shard = crc32(name.encode()) % shards
            for member in (f"{name}+eu", f"{name}+eu+1", f"{name}+"):
                assert tube_shard(member, shards) == shard
                assert tube_shard(member, shards, families=False) == crc32(member.encode()) % shards


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 7])
def test_the_ids_a_shard_makes_are_its_own_by_the_block_rule(shards: int) -> None:
    from shardq.cluster.routing import COPY_FIRST_BLOCK, block_shard, copy_id, copy_index

    seen: set[int] = set()
    for shard in range(shards):
        ids = [copy_id(shard, shards, k) for k in range(3 * ID_BLOCK + 5)]
        assert ids == sorted(ids) and not seen & set(ids)  # rising, and no other shard's
        seen |= set(ids)
        assert all(block_shard(id_block(i), shards) == shard for i in ids)  # routed by rule
        assert min(ids) > COPY_FIRST_BLOCK * ID_BLOCK  # far above any leased block
        assert [copy_index(shard, shards, i) for i in ids] == list(range(len(ids)))
        assert copy_index(shard, shards, 5) is None  # a leased id is not one
        if shards > 1:
            assert copy_index((shard + 1) % shards, shards, ids[0]) is None


def test_copy_ids_go_on_after_the_highest_a_shard_holds() -> None:
    from shardq.cluster.routing import copy_id
    from shardq.storage.copy_ids import CopyIds

    assert CopyIds(1, 4).take() == copy_id(1, 4, 0)
    held = [7, copy_id(1, 4, 2000), copy_id(1, 4, 15), copy_id(2, 4, 9000)]
    ids = CopyIds(1, 4, held)
    assert [ids.take(), ids.take()] == [copy_id(1, 4, 2001), copy_id(1, 4, 2002)]


def test_a_new_log_directory_routes_by_family_an_old_one_by_name(tmp_path) -> None:
    from shardq.processes.children import LayoutError, check_layout

    assert check_layout(str(tmp_path), 4) is True
    assert (tmp_path / "layout").read_text() == "shards=4\nrouting=families\n"
    assert check_layout(str(tmp_path), 4) is True  # read back
    (tmp_path / "layout").write_text("shards=4\n")  # written before families
    assert check_layout(str(tmp_path), 4) is False
    with pytest.raises(LayoutError, match="holds the log of 4 shards"):
        check_layout(str(tmp_path), 2)


def test_copy_ids_never_go_back_after_a_restart_without_the_jobs(tmp_path) -> None:
    from shardq.cluster.routing import copy_id
    from shardq.storage.copy_ids import CopyIds

    mark = str(tmp_path / "copy-ids")
    ids = CopyIds(0, 2, (), mark)
    first = [ids.take() for _ in range(ID_BLOCK + 1)]  # a second block begun
    assert first[-1] == copy_id(0, 2, ID_BLOCK)
    again = CopyIds(0, 2, (), mark)  # restarted with none of those jobs (no -b)
    assert again.take() == copy_id(0, 2, 2 * ID_BLOCK)  # after every block begun
    assert (tmp_path / "copy-ids").read_text() == "3\n"
