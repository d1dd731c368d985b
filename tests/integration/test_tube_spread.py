"""Tubes spread over the shards (cluster/routing.py): numbered families take every shard in
turn, `stats-tube` names each tube's shard when there are several, a new log directory
records the routing, and one written with the older crc32 routing keeps it (issue 22,
item 8)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zlib import crc32

import greenstalk
import pytest
from helpers import shard_key_config, shard_of_tube, wal_args

from shardq.bench.procs import terminate

#: numbered families as clients name them (the bench's: ``bench-<6 hex>-<n>``)
FAMILIES = [
    [f"{stem}{n}" for n in range(4)] for stem in ("q", "queue-", "bench-3f9a0c-", "bench-c04e11-")
]


def client(port: int) -> greenstalk.Client:
    c = greenstalk.Client(("127.0.0.1", port))
    c._sock.settimeout(10)  # a hung server fails the test instead of hanging it
    return c


@pytest.fixture
def shown(tmp_path: Path) -> tuple[str, str]:
    """The flags that make stats-tube name a tube's shard."""
    return ("--config", str(shard_key_config(tmp_path)))


def shards_of(port: int, tubes: list[str]) -> dict[str, int]:
    """Each tube's shard, as its `stats-tube` names it (a job is put there first)."""
    with client(port) as c:
        for tube in tubes:
            c.use(tube)
            c.put(tube)
        return {tube: int(c.stats_tube(tube)["shard"]) for tube in tubes}


@pytest.mark.parametrize(("shards", "serving"), [(2, "2"), (4, "2")], ids=["2", "4"])
def test_numbered_families_take_every_shard_in_turn(
    shardq_server: Callable[..., Any], shards: int, serving: str, shown: tuple[str, str]
) -> None:
    srv = shardq_server(shards, ("--serving", serving, *shown))
    for family in FAMILIES:
        got = shards_of(srv.port, family)
        assert Counter(got.values()) == dict.fromkeys(range(shards), 4 // shards), got
        assert got == {tube: shard_of_tube(tube, shards) for tube in family}


def test_a_new_log_directory_records_the_routing_and_an_old_one_keeps_its_own(
    shardq_server: Callable[..., Any], tmp_path: Path, shown: tuple[str, str]
) -> None:
    fresh, old = tmp_path / "fresh", tmp_path / "old"
    srv = shardq_server(2, ("--serving", "2", *wal_args(fresh), *shown))
    assert (fresh / "layout").read_text() == "shards=2\nrouting=spread\n"
    assert set(shards_of(srv.port, FAMILIES[0]).values()) == {0, 1}
    old.mkdir()
    (old / "layout").write_text("shards=2\nrouting=families\n")  # as shardq wrote it before
    flags = ("--serving", "2", *wal_args(old), *shown)
    srv = shardq_server(2, flags)
    by_crc32 = {tube: crc32(tube.encode()) % 2 for tube in FAMILIES[0]}
    assert shards_of(srv.port, FAMILIES[0]) == by_crc32  # where its log has their jobs
    assert terminate(srv.proc, 10, group=True) == 0
    srv = shardq_server(2, flags)
    assert (old / "layout").read_text() == "shards=2\nrouting=families\n"  # left as it was
    with client(srv.port) as c:
        for tube in FAMILIES[0]:
            c.watch(tube)
            assert c.stats_tube(tube)["shard"] == by_crc32[tube]
            assert c.stats_tube(tube)["current-jobs-ready"] == 1  # replayed from its log
