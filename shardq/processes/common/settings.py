"""Each process role's settings: one frozen object per role (`record.Frozen`: plain slotted
classes, read as frozen keyword-only dataclasses, which they were: building those took
≈ 15 ms of every start), built from the `Config` in one
function (`supervision/children.py`) and handed whole to the forked child, which passes it
whole to its role's `main`. Nothing is re-parsed and no default is restated here: every
value comes from the `Config` (or from what the supervisor decided: descriptors, indexes).

A role's settings hold the parts every role shares — `Common` (where the sockets are, the
shard count, logging, the per-tube policies) and, for a role that accepts clients, `Door`
(the allow-list, connection bounds, TLS) — and its own fields. A SIGHUP's live settings
(`common/live.py`) reach a child started later through `with_live`; a restart adds what a
restarted shard must wait for through `restarted`.

Adding a setting: a field in `Config` with its key (config/__init__.py, `FIELDS`) and its
flag (cli.py), a field here in the role's settings (or `Common`/`Door`), set in the role's
builder in supervision/children.py — and its use.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shardq.processes.common.live import Live
from shardq.protocol.record import Frozen


class Common(Frozen):
    """What every child is told."""

    run_dir: str  #: where the ipc sockets live
    shards: int
    verbose: int  #: the -V count
    log_level: str | None  #: None: from `verbose`
    log_format: str
    stats_yaml: str
    tubes: dict[str, dict[str, Any]]  #: per-tube policies

    def with_live(self, live: Live) -> Common:
        return self.replace(
            verbose=live.verbose,
            log_level=live.log_level,
            log_format=live.log_format,
            tubes=live.tubes,
        )


class Door(Frozen):
    """What a port that accepts clients does with them (common/door.py)."""

    max_connections: int  #: 0: no bound
    max_output_bytes: int  #: a client's unread replies past this close it
    allow: tuple[str, ...]  #: networks; (): anyone
    tls_cert: str | None
    tls_key: str | None
    tls_client_ca: str | None
    tls_handshake_timeout: float  #: seconds

    def with_live(self, live: Live) -> Door:
        return self.replace(
            max_connections=live.max_connections,
            max_output_bytes=live.max_output_bytes,
            allow=live.allow,
        )


class Store(Frozen):
    """A shard's place and what it keeps: its event log, its write-ahead log."""

    index: int
    events_dir: str | None
    server_id: str  #: this server's name in event logs
    wal_dir: str | None  #: None: no log
    segment_bytes: int
    fsync_ms: int | None  #: None: never fsync
    metrics: bool  #: keep the histograms the metrics endpoint serves (engine/timing.py)
    stats_tube_shard: bool  #: stats-tube says which shard holds the tube (several shards)
    settle_from: tuple[int, ...] = ()  #: restarted: the serving processes to wait for


class RoleSettings(Frozen):
    """A child's settings: its role and what every role has."""

    ROLE: ClassVar[str] = ""
    common: Common

    @property
    def label(self) -> str:
        """The role label: logs, the process name, /health ('shard 3', 'serving 1')."""
        return self.ROLE

    def with_live(self, live: Live) -> RoleSettings:
        """These settings with a SIGHUP's live ones (for a child started from now on)."""
        return self.replace(common=self.common.with_live(live))

    def restarted(self, settle_from: tuple[int, ...]) -> RoleSettings:
        """The settings of a restart: a shard waits for the serving processes in
        `settle_from` (processes/shard/settling.py); other roles start as before."""
        return self


class DoorSettings(RoleSettings):
    """A role that accepts clients (or, for the coordinator, shows the door's limits)."""

    door: Door

    def with_live(self, live: Live) -> RoleSettings:
        common = self.common.with_live(live)
        return self.replace(common=common, door=self.door.with_live(live))


class CoordinatorSettings(DoorSettings):
    ROLE = "coordinator"
    state_dir: str  #: where the id-block table lives
    segment_bytes: int  #: the log's segment size (`stats`: binlog-max-size)


class ShardSettings(RoleSettings):
    ROLE = "shard"
    store: Store

    @property
    def label(self) -> str:
        return f"shard {self.store.index}"

    def restarted(self, settle_from: tuple[int, ...]) -> RoleSettings:
        return self.replace(store=self.store.replace(settle_from=settle_from))


class ServingSettings(DoorSettings):
    ROLE = "serving"
    index: int  #: which serving process (the origin of its ids)
    serving: int  #: how many there are
    listen_fd: int
    private_fd: int  #: the run directory's socket for the front-ends; -1: none
    ready_fd: int  #: the start-up pipe; -1: nobody waits
    max_job_size: int
    poll_us: int  #: poll this long after a busy turn; 0: never
    routing: str  #: tube placement (cluster/routing.py)
    draining: bool = False
    hosted: Store | None = None  #: the shard it runs in its own process

    @property
    def label(self) -> str:
        return self.ROLE if self.serving == 1 else f"{self.ROLE} {self.index}"

    def started(self) -> ServingSettings:
        """Once started: a restart has no start-up pipe to write to."""
        return self.replace(ready_fd=-1)

    def drained(self) -> ServingSettings:
        """SIGUSR1: a serving process started from now on accepts no client."""
        return self.replace(draining=True)

    def restarted(self, settle_from: tuple[int, ...]) -> RoleSettings:
        if self.hosted is None:
            return self
        return self.replace(hosted=self.hosted.replace(settle_from=settle_from))


class KestrelSettings(DoorSettings):
    ROLE = "kestrel"
    listen_fd: int
    backend: str  #: the serving processes' unix socket in the run directory
    max_job_size: int
    kestrel_admin: bool  #: serve flush_all, reload, shutdown
    max_jobs: int
    max_memory: int
    journal_dir: str | None  #: the expiry journal's directory (the -b directory)
    sync_journal: bool  #: fsync before answering

    @property
    def journal(self) -> bool:
        """The server keeps a log (-b)."""
        return self.journal_dir is not None


class RegisteredSettings(DoorSettings):
    """A front-end with a registry of its own jobs (Workq, bunqueue)."""

    listen_fd: int
    backend: str  #: the serving processes' unix socket in the run directory
    journal_dir: str | None  #: its journal's directory (the -b directory)
    sync_journal: bool  #: fsync before answering
    max_memory: int  #: the registry's bound


class WorkqSettings(RegisteredSettings):
    ROLE = "workq"


class BunqueueSettings(RegisteredSettings):
    ROLE = "bunqueue"
    bunqueue_tokens: tuple[str, ...]  #: what Auth accepts; (): no Auth needed


class MetricsSettings(DoorSettings):
    ROLE = "metrics"
    listen_fd: int  #: the HTTP socket
    serving: int  #: how many serving processes
    roles: tuple[str, ...]  #: the role labels that must run (/health)
    serving_stats: bool  #: the serving processes host a shard: their counters are in `stats`
