"""The settings themselves: `Config`, its fields in order with their defaults (a default
that depends on the machine is computed when a Config is made: `FACTORIES`). How a
config file and flags become one is shardq/config/__init__.py's (`FIELDS`, `load_config`).
"""

from __future__ import annotations

import os
from typing import Any

from shardq.config.values import DEFAULT_MAX_OUTPUT_BYTES
from shardq.protocol.record import Frozen


def _default_serving() -> int:
    """Two serving processes where there are two cores or more. Measured on 2 cores
    (docs/BENCHMARKS.md): 1.5x one process when clients' tubes spread over the shards
    (each connection moves to its tubes' process), the same when every client uses one
    tube, 0.87x when every consumer watches tubes on every shard. More are not measured
    here: set `serving` up to the core count for tubes that spread."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _default_shards() -> int:
    """One per serving process (each hosts one), whatever the cores: a shard more is a
    process more (≈ 19 MiB of RSS idle, ≈ 4 MiB of PSS) reached through a hop (≈ 175 µs a
    command against 59 µs in the serving process: docs/BENCHMARKS.md), and it adds
    cross-shard reserves; more shards pay only with more serving processes (`serving`),
    which sets them. (A -b log's own count wins over this default: `read_config`.)"""
    return _default_serving()


def _default_server_id() -> str:
    """The host name (what platform.node() gives, without importing platform: ≈ 2 ms of
    regular expressions at every start)."""
    return os.uname().nodename or "localhost"


class Config(Frozen):
    """The settings (immutable: `replace` makes a changed copy). A `Frozen` record, not a
    dataclass: building a dataclass's methods takes time at every start (`record.py`); the
    fields without a default in the body get theirs from `FACTORIES` when a Config is made."""

    listen: str = "127.0.0.1"  # -l ADDR; beanstalkd defaults to 0.0.0.0, we deliberately do not
    port: int = 11300  # -p PORT; 0 = let the OS pick a free port
    max_job_size: int = 65535  # -z BYTES; body bytes, clamped to JOB_SIZE_LIMIT_MAX
    shards: int  # --shards N; 1..MAX_SHARDS
    serving: int  # --serving N; accept + host a shard
    verbose: int = 0  # -V, repeatable; 0 = quiet, higher = more logging
    run_dir: str | None = None  # --run-dir; ipc sockets live here; None = fresh temp dir
    server_id: str  # `server` key; names events
    wal_dir: str | None = None  # -b DIR; None = no write-ahead log
    fsync_ms: int | None = 50  # -f MS; 0 = fsync every write, None (-F) = never fsync
    segment_bytes: int = 10_485_760  # -s BYTES; size of one WAL segment file
    events_dir: str | None = None  # --events DIR; job event log for `shardq analyze`; None = off
    colocate: bool = True  # --no-colocate; serving process 0 hosts shard 0 (docs/ARCHITECTURE.md)
    poll_us: int = 100  # --poll-us; µs to poll after a busy turn with few clients; 0 = never
    stats_yaml: str = "plain"  # --stats-yaml; plain (beanstalkd 1.12) or quoted (1.13)
    stats_tube_shard: bool = False  # stats-tube names the tube's shard (several); no flag
    user: str | None = None  # -u USER; become USER after binding, as beanstalkd; None = stay
    max_connections: int = 0  # --max-connections N; 0 = no limit; more are closed at accept
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES  # --max-output-bytes; unwritten replies
    max_jobs: int = 0  # --max-jobs N; 0 = no limit; past it put answers OUT_OF_MEMORY
    max_memory: int = 0  # --max-memory SIZE (bytes); 0 = no limit; bodies + per-job overhead
    log_level: str | None = None  # --log-level; debug|info|warning|error; None: from -V
    log_format: str = "text"  # --log-format; text (one line) or json (one object a line)
    tls_cert: str | None = None  # --tls-cert PEM; with tls_key: TLS on beanstalk, Kestrel, Workq
    tls_key: str | None = None  # --tls-key PEM
    tls_client_ca: str | None = None  # --tls-client-ca PEM; clients need a cert it signed
    tls_handshake_timeout: float = 5.0  # seconds to finish a TLS handshake (no flag)
    allow: tuple[str, ...] = ()  # --allow CIDR (repeatable); TCP clients from elsewhere closed
    metrics_listen: str | None = None  # --metrics HOST:PORT; /metrics, /health, /; None = off
    metrics_tls_cert: str | None = None  # with metrics_tls_key: HTTPS on the metrics port
    metrics_tls_key: str | None = None  # (no flag: the config file's metrics.tls_*)
    kestrel_listen: str = "127.0.0.1"  # --kestrel-listen ADDR; the Kestrel front-end's address
    kestrel_port: int | None = None  # --kestrel-port PORT; None = no Kestrel front-end; 0 = any
    kestrel_admin: bool = False  # Kestrel's flush_all, reload, shutdown served (no flag)
    workq_listen: str = "127.0.0.1"  # --workq-listen ADDR; the Workq front-end's address
    workq_port: int | None = None  # --workq-port PORT; None = no Workq front-end; 0 = any
    bunqueue_listen: str = "127.0.0.1"  # --bunqueue-listen ADDR; the bunqueue front-end's address
    bunqueue_port: int | None = None  # --bunqueue-port PORT; None = no bunqueue front-end; 0 = any
    bunqueue_tokens: tuple[str, ...] = ()  # Auth's tokens; none: no Auth needed (no flag)
    #: `tubes:` per-tube policies, {"defaults" | tube name | glob: {key: value}} (no flag)
    tubes: dict[str, dict[str, Any]]
    #: Where the settings came from (the config file's path, or how the defaults were chosen);
    #: set by the CLI for the start-up log, not a key of the file.
    source: str = "defaults"

    def as_dict(self) -> dict[str, Any]:
        """Field name -> value, every field (as dataclasses.asdict, for JSON)."""
        return {name: getattr(self, name) for name in CONFIG_FIELDS}


#: The fields of a Config, in order.
CONFIG_FIELDS = Config.__match_args__
#: The fields whose default is computed when a Config is made, not fixed.
Config.FACTORIES = FACTORIES = {
    "shards": _default_shards,
    "serving": _default_serving,
    "server_id": _default_server_id,
    "tubes": dict,
}
