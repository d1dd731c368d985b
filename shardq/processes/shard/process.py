"""A shard process's entry: its core from its settings, its signals, its loop, its exit.

SIGTERM leaves through `sys.exit`, so the `finally` below syncs and closes the logs; a
signal ends the loop's wait at once (`processes/common/wakeup.py`).
"""

from __future__ import annotations

import os
import signal

from shardq.cluster.routing import default_shard
from shardq.engine.policy import Policies
from shardq.processes.common import heads, live, wakeup
from shardq.processes.common.settings import Common, ShardSettings, Store
from shardq.processes.common.sockpath import link_path
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.server import ShardServer
from shardq.storage.copy_ids import CopyIds
from shardq.storage.events import EventLog
from shardq.storage.wal import Wal


def open_core(store: Store, common: Common) -> ShardCore:
    """A shard's core from its settings: its event log and write-ahead log, its place among
    `common.shards`, the shards' `metrics` histograms, and the per-tube policies, taken
    again from live.json on SIGHUP (`ShardCore.take_live`)."""
    index, shards = store.index, common.shards
    events = EventLog(store.events_dir, store.server_id, index) if store.events_dir else None
    wal = None
    if store.wal_dir is not None:
        wal = Wal(store.wal_dir, store.segment_bytes, store.fsync_ms)
    origins = set(store.settle_from)  # restarted: see settling.py
    owns_default = default_shard(shards) == index
    policies = Policies(common.tubes) if common.tubes else None
    core = ShardCore(index, owns_default, events, wal, origins, store.metrics, policies)
    # stats-tube's `shard` key: asked for (it is not beanstalkd's: greenstalk's own suite
    # compares the whole answer), and only with several shards
    core.engine.shard_index = index if shards > 1 and store.stats_tube_shard else None
    if store.wal_dir is not None:
        mark = os.path.join(store.wal_dir, "copy-ids")
    else:
        mark = os.path.join(common.run_dir, f"copy-ids-{index}")
    core.engine.copy_id = CopyIds(index, shards, core.engine.jobs, mark).take  # fanout's copies
    live.on_change(core.take_live)
    if shards > 1:  # a reserve over several shards reads them (serving/cross.py)
        core.publish_to(heads.HeadTable.publisher(heads.path_of(common.run_dir, index)))
    return core


def main(settings: ShardSettings) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    core = open_core(settings.store, settings.common)
    run_dir, index = settings.common.run_dir, settings.store.index
    server = ShardServer(core, link_path(run_dir, f"shard-{index}"))
    server.watch_signals()
    try:
        server.serve_forever()
    finally:
        server.close()
        core.close()
