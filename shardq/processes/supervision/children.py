"""The supervisor's children: what each is started with, and one incarnation of each.

`Child` is one supervised process (its name, argv and current `Forked` handle); the
`*_argv` functions build a role's command line from the config (`child.child_argv` turns
the options into the flags `child.parse` reads), so the supervisor only decides when to
start, restart and stop them; `preload` imports what the roles that run need, before the
first fork.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import logging
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from shardq.cluster.routing import FAMILIES, NAMES, SPREAD
from shardq.config import Config
from shardq.processes.supervision.child import child_argv, parser, run_and_exit
from shardq.processes.supervision.forked import Forked, fork_child
from shardq.storage import layout

log = logging.getLogger(__name__)

#: children start with these blocked and unblock them once their handlers are in place
CHILD_HELD = {signal.SIGUSR1, signal.SIGHUP}
#: the unix socket in the run directory through which front-ends reach the serving processes
PRIVATE_SOCKET = "beanstalk.sock"


@dataclass
class Child:
    """One supervised process: how to start it and its current incarnation."""

    name: str
    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    proc: Forked | None = None
    started: float = 0.0
    quick_restarts: int = 0
    extra: list[str] = field(default_factory=list)
    live_args: list[str] = field(default_factory=list)  # settings changed by a SIGHUP
    restart_args: list[str] = field(default_factory=list)  # added when started again

    def start(self, again: bool = False) -> None:
        """Fork it; `again`: a restart (its shard settles first: processes/shard/settling.py)."""
        # Children start with SIGUSR1 and SIGHUP blocked and unblock them once their handlers
        # are in place, so a drain or reload during their start-up is delivered, not fatal.
        signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_HELD)
        try:
            argv = self.argv + self.extra + self.live_args
            if again:
                argv += self.restart_args
            self.proc = fork_child(self.name, self.pass_fds, functools.partial(run_and_exit, argv))
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
}


def preload(roles: Iterable[str]) -> None:
    """Import what the `roles` that will run need, and build the command-line parser (≈ 7 ms
    a child spent on it), so a forked child starts with both. A role left out is not
    imported at all: a front-end that is off (Kestrel, Workq: ≈ 20 ms), and the metrics
    process, which imports its own (prometheus-client, http.server: ≈ 25 ms) after the fork
    while the others start: preloaded, they delayed a server's first answer by as much.
    Collection stays off until the children run (each turns it on: `tune_gc`): the imports
    make no garbage worth a pass, and the passes cost ≈ 7 % of them."""
    gc.disable()
    for role in sorted(set(roles)):
        for module in ROLE_MODULES.get(role, ()):
            importlib.import_module(module)
    parser()


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


def common_options(cfg: Config, run_dir: str) -> dict[str, object]:
    """What every child is told: the run directory, the shard count, the -V count."""
    return {
        "run_dir": run_dir,
        "shards": cfg.shards,
        "verbose": cfg.verbose,
        "log_level": cfg.log_level,
        "log_format": cfg.log_format,
        "stats_yaml": cfg.stats_yaml,
        "tubes": json.dumps(cfg.tubes) if cfg.tubes else None,  # per-tube policies
    }


def store(cfg: Config, shard: int) -> dict[str, object]:
    """A shard's options besides its place: event log directory, server id, and its
    write-ahead log (directory, segment size, fsync policy, -1: never) with -b."""
    options: dict[str, object] = {
        "events_dir": cfg.events_dir,
        "server_id": cfg.server_id,
        "metrics": cfg.metrics_listen is not None,  # keep the histograms /metrics serves
    }
    if cfg.wal_dir is not None:
        options["wal_dir"] = os.path.join(cfg.wal_dir, f"shard-{shard}")
        options["segment_bytes"] = cfg.segment_bytes
        options["fsync_ms"] = -1 if cfg.fsync_ms is None else cfg.fsync_ms
    return options


def settle_args(cfg: Config, host: int | None) -> list[str]:
    """What a restarted shard is told: the serving processes whose clients may still hold
    its jobs — all of them, but the one it runs in (that one restarted with it)."""
    others = [str(i) for i in range(cfg.serving) if i != host]
    return [f"--settle-from={','.join(others)}"] if others else []


def coordinator_argv(cfg: Config, run_dir: str, state_dir: str) -> list[str]:
    """The coordinator: where the id blocks are kept, and the connection limits (`stats`
    shows its limit-* keys when a limit is set)."""
    return child_argv(
        "coordinator",
        state_dir=state_dir,
        segment_bytes=cfg.segment_bytes,
        max_connections=cfg.max_connections,
        max_output_bytes=cfg.max_output_bytes,
        allow=",".join(cfg.allow),
        **common_options(cfg, run_dir),
    )


def shard_argv(cfg: Config, run_dir: str, shard: int) -> list[str]:
    return child_argv("shard", shard, **common_options(cfg, run_dir), **store(cfg, shard))


def door_options(cfg: Config) -> dict[str, object]:
    """What every client door is told (the beanstalk port, Kestrel's, Workq's): who may come
    in, how many may be open (`limits.max_connections`), and TLS (`tls.*`)."""
    return {
        "max_connections": cfg.max_connections,
        "max_output_bytes": cfg.max_output_bytes,
        "allow": ",".join(cfg.allow),
        "tls_cert": cfg.tls_cert,
        "tls_key": cfg.tls_key,
        "tls_client_ca": cfg.tls_client_ca,
        "tls_handshake_timeout": cfg.tls_handshake_timeout,
    }


def serving_argv(
    cfg: Config, run_dir: str, index: int, ready_fd: int, listen_fd: int, private_fd: int | None
) -> list[str]:
    """Serving process `index`: the listening socket(s), its limits, TLS, and the shard it
    hosts with that shard's options."""
    hosted = hosted_shard(cfg, index)
    return child_argv(
        "serving",
        index=index,
        serving=cfg.serving,
        listen_fd=listen_fd,
        max_job_size=cfg.max_job_size,
        poll_us=cfg.poll_us,
        **door_options(cfg),  # max_connections: each takes ceil(N / serving)
        ready_fd=ready_fd,
        private_fd=private_fd,
        host=hosted,
        **common_options(cfg, run_dir),
        **(store(cfg, hosted) if hosted is not None else {}),
    )


def kestrel_argv(cfg: Config, run_dir: str, listen_fd: int) -> list[str]:
    """The Kestrel front-end: its listening socket, and the run dir's private socket."""
    return child_argv(
        "kestrel",
        listen_fd=listen_fd,
        backend=os.path.join(run_dir, PRIVATE_SOCKET),
        max_job_size=cfg.max_job_size,
        admin=cfg.kestrel_admin,
        max_jobs=cfg.max_jobs,
        max_memory=cfg.max_memory,
        journal=cfg.wal_dir is not None,
        journal_dir=cfg.wal_dir,
        sync_journal=cfg.wal_dir is not None and cfg.fsync_ms == 0,
        **door_options(cfg),
        **common_options(cfg, run_dir),
    )


def workq_argv(cfg: Config, run_dir: str, listen_fd: int) -> list[str]:
    """The Workq front-end: its listening socket, the run dir's private socket, and where
    its journal goes (with -b: the log's directory)."""
    return child_argv(
        "workq",
        listen_fd=listen_fd,
        backend=os.path.join(run_dir, PRIVATE_SOCKET),
        journal_dir=cfg.wal_dir,
        sync_journal=cfg.wal_dir is not None and cfg.fsync_ms == 0,
        max_memory=cfg.max_memory,
        **door_options(cfg),
        **common_options(cfg, run_dir),
    )


#: A protocol front-end's name -> its argv builder.
FRONT_ARGV = {"kestrel": kestrel_argv, "workq": workq_argv}


def metrics_argv(cfg: Config, run_dir: str, listen_fd: int, names: list[str]) -> list[str]:
    """The metrics process: its HTTP socket, and the role labels that must run (/health).
    Without a hosted shard (--no-colocate) the serving processes' counters never reach its
    `stats`: it leaves them out. A door like the others, with a certificate of its own."""
    door = door_options(cfg)
    door.update(tls_cert=cfg.metrics_tls_cert, tls_key=cfg.metrics_tls_key, tls_client_ca=None)
    return child_argv(
        "metrics",
        listen_fd=listen_fd,
        serving=cfg.serving,
        roles=",".join(names),
        no_serving_stats=not cfg.colocate,
        **door,
        **common_options(cfg, run_dir),
    )
