"""Unit tests of shardq/cluster/routing.py: tube -> shard and job id -> id block, and of the
layout file that records a log directory's routing (storage/layout.py)."""

from __future__ import annotations

import random

import pytest

from shardq.cluster.routing import (
    FAMILIES,
    ID_BLOCK,
    NAMES,
    ROUTINGS,
    SPREAD,
    TubeShards,
    block_ids,
    default_shard,
    id_block,
    tube_shard,
)


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
def test_the_families_routing_is_a_stable_crc32(name: str, shards: int, shard: int) -> None:
    assert tube_shard(name, shards, FAMILIES) == shard
    assert tube_shard(name, shards, NAMES) == shard


@pytest.mark.parametrize(
    ("name", "shards", "shard"),
    [
        # mix32(crc32(stem)) + crc32("default") - mix32(crc32("default")) + number: fixed by
        # zlib and the finaliser's constants, so every process and every run agree on them
        ("default", 3, 3814588639 % 3),
        ("default", 4, 3814588639 % 4),
        ("orders", 8, 5),
        ("q0", 4, 3),
        ("q1", 4, 0),
        ("q1+eu", 4, 0),
        ("q17", 5, 0),
    ],
)
def test_the_spread_routing_is_stable(name: str, shards: int, shard: int) -> None:
    assert tube_shard(name, shards) == tube_shard(name, shards, SPREAD) == shard


#: numbered families as clients name them (the bench's tubes are ``bench-<6 hex>-<n>``)
NUMBERED = [
    [f"{stem}{n}" for n in range(4)]
    for stem in ("q", "queue-", "bench-3f9a0c-", "bench-77c1e2-", "t", "jobs_", "x.y/")
]


@pytest.mark.parametrize("shards", [2, 4])
@pytest.mark.parametrize("family", NUMBERED, ids=lambda names: names[0])
def test_numbered_families_take_every_shard_in_turn(family: list[str], shards: int) -> None:
    """Four numbered tubes over 2 shards: two each; over 4: one each. (crc32 is linear:
    under FAMILIES, names that differ in their last digit all went to one shard with 2,
    and paired up with 4.)"""
    hits = [tube_shard(name, shards) for name in family]
    assert sorted(hits) == sorted(list(range(shards)) * (4 // shards)), hits


def test_the_families_routing_piled_numbered_families_up() -> None:
    """What SPREAD mends: every NUMBERED family on one shard of 2 (so the test above
    fails with the old rule)."""
    for family in NUMBERED:
        assert len({tube_shard(name, 2, FAMILIES) for name in family}) == 1, family


def test_default_is_on_the_same_shard_under_every_routing() -> None:
    """The id blocks start at the shard of `default`: a log written under one routing keeps
    its blocks' owners whatever the routing."""
    for shards in range(1, 65):
        for routing in ROUTINGS:
            assert tube_shard("default", shards, routing) == default_shard(shards)


def test_the_router_map_computes_once_and_stays_bounded(monkeypatch) -> None:
    from shardq.cluster import routing

    monkeypatch.setattr(routing, "MAX_CACHED_TUBES", 3)
    shards = TubeShards(4, FAMILIES)
    assert [shards[n] for n in ("ta", "tb", "ta")] == [809500611 % 4, 2838933113 % 4, 809500611 % 4]
    assert dict(shards) == {"ta": 809500611 % 4, "tb": 2838933113 % 4}
    for n in ("a", "b", "c", "d"):
        assert shards[n] == tube_shard(n, 4, FAMILIES)
        assert len(shards) <= 3


@pytest.mark.parametrize("routing", ROUTINGS)
def test_tube_shard_is_in_range_and_spreads_names(routing: str) -> None:
    rng = random.Random(7)
    names = [
        "".join(rng.choices("abcdefghij-+/;.$_()0123", k=rng.randint(1, 20))) for _ in range(2000)
    ]
    for shards in (1, 2, 3, 8):
        hits = [tube_shard(n, shards, routing) for n in names]
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
        for name in ("orders", "a", "x.y", "q7"):
            for routing in (SPREAD, FAMILIES):
                shard = tube_shard(name, shards, routing)
                for member in (f"{name}+eu", f"{name}+eu+1", f"{name}+"):
                    assert tube_shard(member, shards, routing) == shard
            assert tube_shard(name, shards, FAMILIES) == crc32(name.encode()) % shards
            for member in (f"{name}+eu", f"{name}+eu+1"):
                assert tube_shard(member, shards, NAMES) == crc32(member.encode()) % shards


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


def test_a_new_log_directory_spreads_an_old_one_keeps_its_routing(tmp_path) -> None:
    from shardq.processes.supervision.children import LayoutError, check_layout

    assert check_layout(str(tmp_path), 4) == SPREAD
    assert (tmp_path / "layout").read_text() == "shards=4\nrouting=spread\n"
    assert check_layout(str(tmp_path), 4) == SPREAD  # read back
    (tmp_path / "layout").write_text("shards=4\nrouting=families\n")  # before SPREAD
    assert check_layout(str(tmp_path), 4) == FAMILIES
    (tmp_path / "layout").write_text("shards=4\n")  # written before families
    assert check_layout(str(tmp_path), 4) == NAMES
    with pytest.raises(LayoutError, match="holds the log of 4 shards"):
        check_layout(str(tmp_path), 2)
    (tmp_path / "layout").write_text("shards=4\nrouting=zigzag\n")  # a later shardq's
    with pytest.raises(LayoutError, match="not a layout this shardq knows"):
        check_layout(str(tmp_path), 4)
    (tmp_path / "layout").write_text("rubbish")
    with pytest.raises(LayoutError, match="not a layout file"):
        check_layout(str(tmp_path), 4)


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
