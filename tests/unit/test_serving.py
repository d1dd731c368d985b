"""Unit tests for what several serving processes rest on: ids that carry their origin,
the id-block lease rule, references counted per origin (RESET, MOVE_REF), the handoff
record and the parser's handover, and the `serving` setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import Q
from shard_helpers import req

from shardq.cluster import wire
from shardq.cluster.routing import MAX_SERVING, block_shard, origin_of, tagged, tube_shard
from shardq.config import ConfigError, load_config
from shardq.processes.coordinator import BlockTable, merge_fields
from shardq.processes.shard import ops
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.holding import forget_origin
from shardq.protocol import commands as c
from shardq.protocol import proto


def test_ids_carry_their_origin() -> None:
    for origin in (0, 1, MAX_SERVING - 1):
        for counter in (1, 2, 10**15):
            assert origin_of(tagged(counter, origin)) == origin
    assert tagged(1, 0) != tagged(1, 1)


def test_blocks_are_leased_by_the_rule_and_never_twice(tmp_path: Path) -> None:
    table = BlockTable(str(tmp_path / "id-blocks"), 3)
    leased = [table.lease(shard) for shard in (0, 1, 2, 2, 2, 0, 1)]
    assert len(set(leased)) == len(leased)
    assert [block_shard(b, 3) for b in leased] == [0, 1, 2, 2, 2, 0, 1]
    default = tube_shard("default", 3)
    assert table.blocks[min(table.blocks)] == default  # block 0: default's, so id 1 is its
    again = BlockTable(str(tmp_path / "id-blocks"), 3)  # a restart: above everything leased
    assert again.blocks == table.blocks
    nxt = again.lease(1)
    assert nxt > max(leased) and block_shard(nxt, 3) == 1


def test_blocks_of_an_older_table_keep_their_shard(tmp_path: Path) -> None:
    path = tmp_path / "id-blocks"
    path.write_text("0 0\n1 0\n")  # leased before the rule
    table = BlockTable(str(path), 2)
    assert table.blocks == {0: 0, 1: 0}
    got = {shard: table.lease(shard) for shard in (0, 1)}
    assert min(got.values()) == 2 and {block_shard(b, 2) for b in got.values()} == {0, 1}


def test_reset_of_one_origin_frees_only_its_connections(q: Q) -> None:
    mine, theirs = tagged(5, 1), tagged(5, 0)
    q.e.ref("t", 1, 1, q.now, origin=1)
    q.e.ref("t", 1, 1, q.now, origin=0)
    a, b = q.put("t"), q.put("t")
    assert q.reserve_id(mine, ("t",)) == a
    assert q.reserve_id(theirs, ("t",)) == b
    forget_origin(q.e, 1, q.now)  # serving process 1 restarted
    st = q.stats_tube("t")
    assert (st["current-jobs-ready"], st["current-jobs-reserved"]) == ("1", "1")
    assert (st["current-using"], st["current-watching"]) == ("1", "1")
    assert q.e.delete(theirs, b, q.now) == proto.DELETED
    forget_origin(q.e, 0, q.now)
    q.e.delete(0, a, q.now)
    assert "t" not in q.tube_names()  # no references and no jobs left


def test_moved_references_are_forgotten_with_their_new_origin(q: Q) -> None:
    q.e.ref("t", 1, 0, q.now, origin=0)
    ops.op_move_ref(q.e, tagged(7, 1), ops.MoveRefArgs("t", 1, 0, 0), q.now)  # moved from 0 to 1
    assert q.stats_tube("t")["current-using"] == "1"
    forget_origin(q.e, 0, q.now)
    assert q.stats_tube("t")["current-using"] == "1"  # not process 0's any more
    forget_origin(q.e, 1, q.now)
    assert "t" not in q.tube_names()


def test_handoff_record_round_trips() -> None:
    state = wire.Handoff(
        "t", ["t", "u"], True, False, b"put 0 0 1 1\r\n", b"OK\r\n", 1, True, 2, 77
    )
    assert wire.unpack_handoff(wire.pack_handoff(state)) == state
    assert wire.unpack_handoff(wire.pack_answer(wire.TAKEN, 77)) == (wire.TAKEN, 77)
    assert wire.unpack_handoff(wire.pack_answer(wire.REFUSED, 77)) == (wire.REFUSED, 77)


def test_handover_gives_the_unparsed_bytes_between_commands() -> None:
    parser = proto.Parser()
    parser.feed(b"use t\r\nput 0 0 60 3\r\nab")
    assert isinstance(parser.next_command(), c.Use)
    assert parser.handover() == b"put 0 0 60 3\r\nab"
    assert parser.next_command() is None  # the put waits for its body now
    assert parser.handover() is None  # mid-body: not movable
    parser.feed(b"c\r\n")
    assert isinstance(parser.next_command(), c.Put)
    assert parser.handover() == b""
    moved = proto.Parser()
    moved.feed(b"put 0 0 60 3\r\nab" + b"c\r\n")
    assert isinstance(moved.next_command(), c.Put)


def test_serving_processes_need_as_many_shards_and_colocation() -> None:
    assert load_config(None, {"serving": 2}).shards >= 2
    assert load_config(None, {"serving": 2, "shards": 4}).serving == 2
    with pytest.raises(ConfigError, match="^serving: must not exceed shards"):
        load_config(None, {"serving": 3, "shards": 2})
    with pytest.raises(ConfigError, match="^colocate"):
        load_config(None, {"serving": 2, "colocate": False})
    with pytest.raises(ConfigError, match="serving"):
        load_config("serving: 0\n", {})


def test_stats_fields_of_several_processes_are_summed() -> None:
    one = {"cmd-put": 2, "current-connections": 1, "draining": False, "max-job-size": 9}
    two = {"cmd-put": 3, "current-connections": 4, "draining": True, "max-job-size": 9}
    merged = merge_fields([{}, one, two])
    assert merged == {
        "cmd-put": 5,
        "current-connections": 5,
        "draining": True,
        "max-job-size": 9,
    }


def test_a_disconnect_forgets_whom_its_waiters_answered_to() -> None:
    core = ShardCore(0, True)
    core.handle(b"peer", req(ops.RESERVE, 5, 77, ["default"], None, None, False), 1)
    core.handle(b"peer", req(ops.RESERVE, 6, 78, ["default"], None, None, False), 1)
    assert set(core.waiting_peer) == {5, 6}
    core.handle(b"peer", req(ops.DISCONNECT, 0, 77, False, False), 2)
    assert set(core.waiting_peer) == {6}  # a closed connection's waiter leaves nothing behind
