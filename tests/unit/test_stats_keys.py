"""The stats key lists (shardq/protocol/stats_keys.py) and the replies built from them."""

from __future__ import annotations

import pytest

from shardq.engine.engine import Engine
from shardq.engine.job import NS
from shardq.protocol import parser, proto, replies
from shardq.protocol.stats_keys import (
    BINLOG_DAMAGED_KEY,
    BINLOG_KEYS,
    CMD_KEYS,
    JOB_COUNT_KEYS,
    POLICY_TUBE_KEYS,
    SHARD_COUNT_KEYS,
    SHARD_TUBE_KEY,
    STATS_JOB_KEYS,
    STATS_KEYS,
    STATS_TUBE_KEYS,
)
from shardq.storage.wal import Wal

T0 = 1_000 * NS


def yaml_keys(reply: bytes) -> list[str]:
    assert reply.startswith(b"OK "), reply
    lines = reply.split(b"\r\n")[1].decode().splitlines()[1:]
    return [line.split(":", 1)[0] for line in lines]


def test_every_list_is_free_of_repeats() -> None:
    for keys in (
        STATS_KEYS,
        STATS_TUBE_KEYS + POLICY_TUBE_KEYS,
        STATS_JOB_KEYS,
        CMD_KEYS,
        SHARD_COUNT_KEYS,
    ):
        assert len(set(keys)) == len(keys)


def test_stats_opens_with_the_job_counts_then_the_commands() -> None:
    n = len(JOB_COUNT_KEYS)
    assert STATS_KEYS[:n] == JOB_COUNT_KEYS
    assert STATS_KEYS[n : n + len(CMD_KEYS)] == CMD_KEYS
    assert all(key.startswith("cmd-") for key in CMD_KEYS)
    assert set(SHARD_COUNT_KEYS) <= set(STATS_KEYS)
    at = STATS_KEYS.index(BINLOG_KEYS[0])
    assert STATS_KEYS[at : at + len(BINLOG_KEYS)] == BINLOG_KEYS
    assert BINLOG_DAMAGED_KEY not in STATS_KEYS  # shown only after damage


def test_engine_replies_follow_the_lists() -> None:
    e = Engine()
    e.put(1, 1, "default", 0, 0, 60, b"x", T0)
    assert yaml_keys(e.stats_job(1, T0)) == list(STATS_JOB_KEYS)
    assert yaml_keys(e.stats_tube("default", T0)) == list(STATS_TUBE_KEYS)
    assert list(e.counts()) == list(SHARD_COUNT_KEYS)


def test_wal_stats_are_the_binlog_keys(tmp_path) -> None:
    w = Wal(str(tmp_path), 1 << 20, None)
    list(w.replay())
    assert list(w.stats()) == list(BINLOG_KEYS)
    w.damaged = 2
    assert list(w.stats()) == [*BINLOG_KEYS, BINLOG_DAMAGED_KEY]


def test_proto_is_the_parser_and_the_replies() -> None:
    """`proto` only re-exports: each name is the very object of its module."""
    for name in proto.__all__:
        home = parser if hasattr(parser, name) else replies
        assert getattr(proto, name) is getattr(home, name), name


def test_stats_tube_names_the_shard_only_with_several() -> None:
    e = Engine()
    e.put(1, 1, "default", 0, 0, 60, b"x", T0)
    assert SHARD_TUBE_KEY not in yaml_keys(e.stats_tube("default", T0))  # one shard
    e.shard_index = 3  # as shard.process.open_core sets it with several shards, if asked
    reply = e.stats_tube("default", T0)
    assert yaml_keys(reply) == [*STATS_TUBE_KEYS, SHARD_TUBE_KEY]
    assert reply.endswith(b"\npause-time-left: 0\nshard: 3\n\r\n")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("", False),
        ("limits:\n  max_output_bytes: 4194304\n", False),  # the default, written out
        ("allow: [10.0.0.0/8]\n", True),
        ("limits:\n  max_connections: 5\n", True),
        ("limits:\n  max_output_bytes: 65536\n", True),
    ],
)
def test_the_coordinator_knows_whether_a_connection_limit_is_set(text: str, shown: bool) -> None:
    """It prints the limit-* keys then; a coordinator started after a SIGHUP is told the
    limits in force (its settings with the live ones: `with_live`)."""
    from shardq.config import load_config
    from shardq.processes.common import live
    from shardq.processes.common.settings import RoleSettings
    from shardq.processes.supervision import children

    def told(settings: RoleSettings) -> bool:
        assert isinstance(settings, children.CoordinatorSettings)
        door = settings.door
        return live.limits_set(door.max_connections, door.max_output_bytes, door.allow)

    config = load_config(text, {})
    assert told(children.coordinator_settings(config, "/run", "/state")) is shown
    first = children.coordinator_settings(load_config("", {}), "/run", "/state")
    assert told(first.with_live(live.of(config))) is shown
