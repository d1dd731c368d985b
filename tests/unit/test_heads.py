"""The shards' published heads (processes/common/heads.py): a writer and readers of one file."""

from __future__ import annotations

import struct
import time
from pathlib import Path

from shardq.processes.common.heads import (
    SLOTS,
    WANT_NS,
    WANTED_AT,
    HeadTable,
    PeerHeads,
    path_of,
    slot_of,
)
from shardq.processes.shard.core import ShardCore

NOW = 1_000


def colliding(name: str) -> str:
    """Another tube name in the same slot as `name`."""
    n = 0
    while True:
        other = f"other{n}"
        if slot_of(other) == slot_of(name):
            return other
        n += 1


def valid_pair(tmp_path: Path) -> tuple[HeadTable, HeadTable]:
    """A writer's table, valid, and a reader of it."""
    path = str(tmp_path / "heads-1")
    writer = HeadTable.publisher(path)
    writer.set_valid(True)
    reader = HeadTable.reader(path)
    assert reader is not None
    return writer, reader


def test_a_reader_sees_what_the_writer_publishes(tmp_path: Path) -> None:
    path = str(tmp_path / "heads-1")
    assert HeadTable.reader(path) is None  # not made yet
    writer = HeadTable.publisher(path)
    reader = HeadTable.reader(path)
    assert reader is not None
    heads = {"a": (5, 100), "b": None}
    writer.publish(["a", "b"], heads.get)
    assert reader.beats(["a"], 5, 200, NOW), "not valid yet: it cannot say"
    writer.set_valid(True)
    assert reader.beats(["a"], 5, 200, NOW)  # (5, 100) comes before (5, 200)
    assert reader.beats(["a"], 6, 50, NOW)  # a lower priority loses whatever its age
    assert not reader.beats(["a"], 5, 100, NOW)  # a tie: the reader's own comes first
    assert not reader.beats(["a"], 4, 999, NOW)
    assert not reader.beats(["b", "c"], 0, 0, NOW)  # none ready, never published
    heads["a"] = None  # its job reserved
    writer.publish(["a"], heads.get)
    assert not reader.beats(["a"], 9, 9, NOW)


def test_a_slot_two_tubes_share_holds_the_better_of_both(tmp_path: Path) -> None:
    writer, reader = valid_pair(tmp_path)
    other = colliding("a")
    heads = {"a": (5, 100), other: (3, 300)}
    writer.publish(["a", other], heads.get)
    assert reader.beats(["a"], 4, 0, NOW)  # says the shared slot's best: never worse
    heads[other] = None
    writer.publish([other], heads.get)  # its tube emptied: the slot falls back to a's
    assert not reader.beats(["a"], 4, 0, NOW)
    assert reader.beats(["a"], 5, 101, NOW)


def test_a_due_timer_makes_it_unable_to_say(tmp_path: Path) -> None:
    writer, reader = valid_pair(tmp_path)
    writer.set_due(NOW + 10)
    assert not reader.beats(["a"], 0, 0, NOW)
    assert reader.beats(["a"], 0, 0, NOW + 10)  # a delayed job may be ready there now
    writer.set_due(None)
    assert not reader.beats(["a"], 0, 0, NOW + 10**12)


def test_a_restarted_writer_zeroes_what_readers_mapped(tmp_path: Path) -> None:
    path = str(tmp_path / "heads-1")
    writer = HeadTable.publisher(path)
    writer.publish(["a"], {"a": (1, 1)}.get)
    writer.set_valid(True)
    reader = HeadTable.reader(path)
    assert reader is not None and reader.beats(["a"], 2, 2, NOW)
    again = HeadTable.publisher(path)  # the shard restarted: the same file, in place
    assert reader.beats(["a"], 2, 2, NOW), "not valid until it has published again"
    again.set_valid(True)
    assert not reader.beats(["a"], 2, 2, NOW)  # its old head is gone


def test_peer_heads_ask_a_shard_without_a_table(tmp_path: Path) -> None:
    run_dir = str(tmp_path)
    peers = PeerHeads(run_dir)
    assert peers.beaten([(1, ["a"])], 9, 9, NOW)  # no table yet: ask
    writer = HeadTable.publisher(path_of(run_dir, 1))
    writer.set_valid(True)
    assert not peers.beaten([(1, ["a"])], 9, 9, NOW)
    writer.publish(["a"], {"a": (0, 0)}.get)
    assert peers.beaten([(1, ["a"])], 9, 9, NOW)
    assert SLOTS & (SLOTS - 1) == 0


def test_a_reader_looking_makes_the_table_wanted_for_a_while(tmp_path: Path) -> None:
    path = str(tmp_path / "heads-1")
    writer = HeadTable.publisher(path)
    reader = HeadTable.reader(path)
    assert reader is not None
    assert not writer.wanted(NOW), "nobody has looked yet"
    reader.want(NOW)
    assert writer.wanted(NOW) and writer.wanted(NOW + WANT_NS - 1)
    assert not writer.wanted(NOW + WANT_NS), "nobody looked since"
    reader.want(NOW + WANT_NS // 8)  # too soon to write again
    assert not writer.wanted(NOW + WANT_NS)
    reader.want(NOW + WANT_NS // 2)
    assert writer.wanted(NOW + WANT_NS)
    HeadTable.publisher(path)  # the writer restarted: zeroed, the reader's note included
    assert not writer.wanted(NOW)
    reader.wanted_again()  # (PeerHeads.forget, when the reader sees the restart)
    reader.want(NOW + WANT_NS // 2)
    assert writer.wanted(NOW + WANT_NS)


def test_a_shard_publishes_only_while_its_table_is_wanted(tmp_path: Path) -> None:
    path = str(tmp_path / "heads-0")
    core = ShardCore(0, owns_default=True)
    core.publish_to(HeadTable.publisher(path))
    reader = HeadTable.reader(path)
    assert reader is not None
    core.engine.put(1, 1, "a", 5, 0, 60, b"x", time.monotonic_ns())
    core.commit()
    assert core.engine.heads_touched is None, "nobody reads: no changes noted"
    now = time.monotonic_ns()
    reader.want(now)  # as a reserve over both shards does first
    assert reader.beats(["a"], 9, 9, now), "not valid: it cannot say"
    assert reader.beats(["a"], 9, 9, now)  # not published before the shard's next turn
    core.commit()
    assert reader.beats(["a"], 9, 9, now), "a's job (5, 1) published: it comes first"
    assert not reader.beats(["a"], 5, 0, now)
    core.engine.put(2, 2, "b", 1, 0, 60, b"y", time.monotonic_ns())
    core.commit()
    assert reader.beats(["b"], 2, 0, now)  # a put is published in its own turn
    path_table = core.heads
    assert path_table is not None and path_table.valid
    # nobody looks for WANT_NS (as if: the time the readers wrote is past), so the next
    # turn marks it not valid and stops noting changes
    with open(path, "r+b") as f:
        f.seek(WANTED_AT)
        f.write(struct.pack("<q", now - 1))
    core.commit()
    assert not path_table.valid and core.engine.heads_touched is None
    assert reader.beats(["b"], 0, 0, now), "not valid: it cannot say"
