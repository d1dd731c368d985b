"""A shard process's entry: its core from its arguments, its signals, its loop, its exit.

SIGTERM leaves through `sys.exit`, so the `finally` below syncs and closes the logs; a
signal ends the loop's wait at once (`processes/common/wakeup.py`).
"""

from __future__ import annotations

import json
import os
import signal

from shardq.cluster.routing import default_shard
from shardq.engine.policy import Policies
from shardq.processes.common import live, wakeup
from shardq.processes.common.sockpath import ipc_endpoint
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.server import ShardServer
from shardq.storage.copy_ids import CopyIds
from shardq.storage.events import EventLog
from shardq.storage.wal import Wal


def open_core(
    index: int,
    shards: int,
    events_dir: str,
    server_id: str,
    wal_args: list[str],
    settle_from: str = "",
    metrics: bool = False,
    tubes: str = "",
    run_dir: str = "",
) -> ShardCore:
    """A shard's core from its command-line arguments (see children.shard_argv);
    `metrics`: keep the histograms of the metrics endpoint; `tubes`: the per-tube policies
    (JSON, '': none), taken again from live.json on SIGHUP (`ShardCore.take_live`)."""
    events = EventLog(events_dir, server_id, index) if events_dir else None
    wal = None
    if wal_args:
        wal_dir, segment_bytes, fsync_ms = wal_args[0], int(wal_args[1]), int(wal_args[2])
        wal = Wal(wal_dir, segment_bytes, None if fsync_ms < 0 else fsync_ms)
    origins = {int(i) for i in settle_from.split(",") if i}  # restarted: see settling.py
    owns_default = default_shard(shards) == index
    policies = Policies(json.loads(tubes)) if tubes else None
    core = ShardCore(index, owns_default, events, wal, origins, metrics, policies)
    core.engine.shard_index = index if shards > 1 else None  # stats-tube's `shard`
    mark = os.path.join(wal_args[0], "copy-ids") if wal_args else None
    if mark is None and run_dir:
        mark = os.path.join(run_dir, f"copy-ids-{index}")
    core.engine.copy_id = CopyIds(index, shards, core.engine.jobs, mark).take  # fanout's copies
    live.on_change(core.take_live)
    return core


def main(
    index: int,
    shards: int,
    run_dir: str,
    events_dir: str,
    server_id: str,
    wal_args: list[str],
    settle_from: str = "",
    metrics: bool = False,
    tubes: str = "",
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    store = (events_dir, server_id, wal_args, settle_from)
    core = open_core(index, shards, *store, metrics, tubes, run_dir)
    server = ShardServer(core, ipc_endpoint(run_dir, f"shard-{index}"))
    server.watch_signals()
    try:
        server.serve_forever()
    finally:
        server.sock.close(0)
        core.close()
