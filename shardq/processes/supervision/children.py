"""The supervisor's children: what each is started with, and one incarnation of each.

`Child` is one supervised process (its settings and current `Forked` handle); the
`*_settings` functions build each role's settings (common/settings.py) from the config, in
one place, and the forked child is handed them whole, so the supervisor only decides when
to start, restart and stop them; `preload` imports what the roles that run need, before
the first fork.
"""

from __future__ import annotations

import functools
import gc
import importlib
import logging
import os
import signal
import time
from collections.abc import Iterable
from typing import Any, TypeVar

from shardq.cluster.routing import FAMILIES, NAMES, SPREAD
from shardq.config import FIELDS, Config
from shardq.processes.common.settings import (
    BunqueueSettings,
    Common,
    CoordinatorSettings,
    Door,
    KestrelSettings,
    MetricsSettings,
    RoleSettings,
    ServingSettings,
    ShardSettings,
    Store,
    WorkqSettings,
)
from shardq.processes.supervision.child import run_and_exit
from shardq.processes.supervision.forked import Forked, fork_child
from shardq.protocol.record import Frozen
from shardq.storage import layout

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Frozen)
FrontKind = type[KestrelSettings] | type[WorkqSettings] | type[BunqueueSettings]
#: the names settings take from the config (`from_config`)
CONFIG_FIELDS = frozenset(FIELDS)

#: children start with these blocked and unblock them once their handlers are in place
CHILD_HELD = {signal.SIGUSR1, signal.SIGHUP}
#: the unix socket in the run directory through which front-ends reach the serving processes
PRIVATE_SOCKET = "beanstalk.sock"


class Child:
    """One supervised process: its settings (a SIGHUP's live ones and a drain are applied to
    them for a later start) and its current incarnation."""

    def __init__(
        self,
        settings: RoleSettings,
        pass_fds: tuple[int, ...] = (),
        settle_from: tuple[int, ...] = (),
    ) -> None:
        self.settings = settings
        self.pass_fds = pass_fds
        self.proc: Forked | None = None
        self.started = 0.0
        self.quick_restarts = 0
        self.settle_from = settle_from  # what its shard waits for when started again

    @property
    def name(self) -> str:
        return self.settings.label

    def start(self, again: bool = False) -> None:
        """Fork it; `again`: a restart (its shard settles first: processes/shard/settling.py)."""
        # Children start with SIGUSR1 and SIGHUP blocked and unblock them once their handlers
        # are in place, so a drain or reload during their start-up is delivered, not fatal.
        signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_HELD)
        try:
            settings = self.settings.restarted(self.settle_from) if again else self.settings
            run = functools.partial(run_and_exit, settings)
            self.proc = fork_child(self.name, self.pass_fds, run)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_HELD)
        self.started = time.monotonic()


#: what each role runs (`preload`); the metrics process imports its own after the fork
ROLE_MODULES = {
    "coordinator": ("shardq.processes.coordinator",),
    "shard": ("shardq.processes.shard.process",),
    "serving": ("shardq.processes.serving", "shardq.processes.shard.process"),
    "kestrel": ("shardq.processes.frontends.kestrel",),
    "workq": ("shardq.processes.frontends.workq",),
    "bunqueue": ("shardq.processes.frontends.bunqueue",),
}


def preload(roles: Iterable[str]) -> None:
    """Import what the `roles` that will run need, so a forked child starts with them. A
    role left out is not
    imported at all: a front-end that is off (Kestrel, Workq: ≈ 20 ms), and the metrics
    process, which imports its own (prometheus-client, http.server: ≈ 25 ms) after the fork
    while the others start: preloaded, they delayed a server's first answer by as much.
    Collection stays off until the children run (each turns it on: `collector.tune`): the imports
    make no garbage worth a pass, and the passes cost ≈ 7 % of them. The links' module comes
    first, whatever the roles: it draws the server's token (links.TOKEN), which every
    child, a role imported after its fork or restarted later included, must share."""
    gc.disable()
    importlib.import_module("shardq.processes.common.links")
    for role in sorted(set(roles)):
        for module in ROLE_MODULES.get(role, ()):
            importlib.import_module(module)


class LayoutError(Exception):
    """The log directory was written with another number of shards, or its layout file
    cannot be read."""


def check_layout(wal_dir: str, shards: int) -> str:
    """The tube routing of the log in `wal_dir` (cluster/routing.py): the one its layout
    file records (storage/layout.py), or, for a new directory, `SPREAD`, recorded now. A log
    written with N shards needs N shards (the config takes N from it: config.read_config)."""
    try:
        written = layout.read(wal_dir)
    except layout.LayoutFileError as e:
        raise LayoutError(str(e)) from None
    if written is None:
        layout.write(wal_dir, layout.Layout(shards, SPREAD))
        return SPREAD
    if written.shards != shards:
        raise LayoutError(
            f"{wal_dir} holds the log of {written.shards} shards: start with --shards "
            f"{written.shards}, or drain the jobs into a new server (re-partitioning a log is "
            "not supported yet)"
        )
    return written.routing


def log_routing(cfg: Config) -> str:
    """The routing of the log in `cfg.wal_dir` (`check_layout`), with what it costs said in
    the log; LayoutError when the config needs tube families the log does not have."""
    assert cfg.wal_dir is not None
    routing = check_layout(cfg.wal_dir, cfg.shards)
    if routing == NAMES:
        moving = families_needed(cfg.tubes)
        if moving:
            raise LayoutError(
                f"tubes.{moving}.expired_to: {cfg.wal_dir} was written before tube "
                "families, so a tube's family may be on another shard; drain its jobs "
                "into a new log directory to move expired jobs"
            )
        log.warning(
            "%s was written before tube families: tubes stay spread by whole name, "
            "so a fanout or expired_to reaches only the tubes of the same shard",
            cfg.wal_dir,
        )
    elif routing == FAMILIES:
        log.info(
            "%s keeps the tube routing it was written with (crc32 of the family: "
            "numbered tube names may share a shard; a new log directory spreads them)",
            cfg.wal_dir,
        )
    return routing


def families_needed(tubes: dict[str, dict[str, object]]) -> str | None:
    """The first `tubes:` entry with an expired_to (it needs tube families), or None."""
    return next((entry for entry, policy in tubes.items() if policy.get("expired_to")), None)


def hosted_shard(cfg: Config, index: int) -> int | None:
    """The shard serving process `index` runs in its own process (`colocate`): shard
    `index`, or none."""
    return index if cfg.colocate else None


def from_config(kind: type[S], cfg: Config, **given: Any) -> S:
    """Settings of `kind` (common/settings.py) from the config: each of its fields named as
    a `Config` field takes that field's value; `given` sets the others (and overrides)."""
    names = set(kind.__match_args__) & CONFIG_FIELDS
    taken = {name: getattr(cfg, name) for name in names - given.keys()}
    return kind(**taken, **given)


def common(cfg: Config, run_dir: str) -> Common:
    """What every child is told: the run directory, the shard count, logging, policies."""
    return from_config(Common, cfg, run_dir=run_dir)


def store(cfg: Config, shard: int) -> Store:
    """A shard's place and what it keeps: event log directory, server id, and its
    write-ahead log (its own directory under -b, segment size, fsync policy)."""
    wal_dir = None if cfg.wal_dir is None else os.path.join(cfg.wal_dir, f"shard-{shard}")
    metrics = cfg.metrics_listen is not None  # keep the histograms /metrics serves
    return from_config(Store, cfg, index=shard, wal_dir=wal_dir, metrics=metrics)


def settle_from(cfg: Config, host: int | None) -> tuple[int, ...]:
    """What a restarted shard waits for: the serving processes whose clients may still hold
    its jobs — all of them, but the one it runs in (that one restarted with it)."""
    return tuple(i for i in range(cfg.serving) if i != host)


def door(cfg: Config) -> Door:
    """What every client door is told (the beanstalk port, Kestrel's, Workq's, bunqueue's):
    who may come in, how many may be open (`limits.max_connections`), and TLS (`tls.*`)."""
    return from_config(Door, cfg)


def coordinator_settings(cfg: Config, run_dir: str, state_dir: str) -> CoordinatorSettings:
    """The coordinator: where the id blocks are kept, and the connection limits (`stats`
    shows its limit-* keys when a limit is set)."""
    parts = {"common": common(cfg, run_dir), "door": door(cfg)}
    return from_config(CoordinatorSettings, cfg, state_dir=state_dir, **parts)


def shard_settings(cfg: Config, run_dir: str, shard: int) -> ShardSettings:
    return from_config(ShardSettings, cfg, common=common(cfg, run_dir), store=store(cfg, shard))


def serving_settings(
    cfg: Config,
    run_dir: str,
    index: int,
    fds: tuple[int, int, int],
    routing: str = SPREAD,
) -> ServingSettings:
    """Serving process `index`: `fds` (the listening socket, the run dir's private one or
    -1, the start-up pipe or -1), its limits, TLS, and the shard it hosts."""
    listen_fd, private_fd, ready_fd = fds
    hosted = hosted_shard(cfg, index)
    return from_config(
        ServingSettings,
        cfg,
        common=common(cfg, run_dir),
        door=door(cfg),  # max_connections: each takes ceil(N / serving)
        index=index,
        listen_fd=listen_fd,
        private_fd=private_fd,
        ready_fd=ready_fd,
        routing=routing,
        hosted=None if hosted is None else store(cfg, hosted),
    )


def front_settings(kind: FrontKind, cfg: Config, run_dir: str, listen_fd: int) -> RoleSettings:
    """A protocol front-end (Kestrel, Workq, bunqueue): its listening socket, the run dir's private
    socket it reaches the serving processes through, and its journal's place and fsync
    policy (with -b: the log's directory, synced before answering with -f 0)."""
    return from_config(
        kind,
        cfg,
        common=common(cfg, run_dir),
        door=door(cfg),
        listen_fd=listen_fd,
        backend=os.path.join(run_dir, PRIVATE_SOCKET),
        journal_dir=cfg.wal_dir,
        sync_journal=cfg.wal_dir is not None and cfg.fsync_ms == 0,
    )


#: A protocol front-end's name -> its settings.
FRONT_SETTINGS: dict[str, FrontKind] = {
    "kestrel": KestrelSettings,
    "workq": WorkqSettings,
    "bunqueue": BunqueueSettings,
}


def metrics_settings(
    cfg: Config, run_dir: str, listen_fd: int, names: list[str]
) -> MetricsSettings:
    """The metrics process: its HTTP socket, and the role labels that must run (/health).
    Without a hosted shard (--no-colocate) the serving processes' counters never reach its
    `stats`: it leaves them out. A door like the others, with a certificate of its own."""
    tls = (cfg.metrics_tls_cert, cfg.metrics_tls_key)
    return from_config(
        MetricsSettings,
        cfg,
        common=common(cfg, run_dir),
        door=door(cfg).replace(tls_cert=tls[0], tls_key=tls[1], tls_client_ca=None),
        listen_fd=listen_fd,
        roles=tuple(names),
        serving_stats=cfg.colocate,
    )
