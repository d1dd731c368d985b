"""Server configuration: YAML text plus command-line overrides -> a validated, frozen `Config`.

`load_config` is pure (stdlib and pyyaml only): the caller passes the file's text in, so it
touches neither the filesystem nor the network. `read_config` reads the file, and the
layout file of the log directory it names (storage/layout.py): a log keeps the shard count
it was written with, which replaces the default.

Rules:
- Every problem raises `ConfigError` with ONE line that names the key (or flag) and the
  problem, e.g. ``config: shards: must be an integer between 1 and 64, got 'abc'``.
- Unknown keys, duplicate keys and malformed YAML are errors, never ignored.
- Overrides (from flags) are checked with the same validators as the file and beat it.
  Flag values may arrive as strings ("11300"); file values must already have the right
  YAML type (``port: "11300"`` is an error).
- Like beanstalkd, a max job size above 1 GiB is clamped with a warning (`ConfigWarning`).

YAML layout::

    listen: 127.0.0.1
    port: 11300
    max_job_size: 65535
    shards: 4              # omitted -> the count a -b log was written with, else `serving`
    serving: 2             # serving processes, each accepting clients and hosting a shard
                           # (omitted -> 2 with 2 cores or more; at most `shards`)
    colocate: true         # serving process 0 runs shard 0 in its own process (no hop)
    poll_us: 100           # after a busy turn, poll this long before sleeping (0: never)
    stats_yaml: plain      # plain: beanstalkd 1.12's bytes (name: foo); quoted: 1.13's
    user: null             # -u: become this user after binding the port (needs root)
    verbose: 0
    run_dir: null          # null -> a fresh temporary directory
    server: myhost         # omitted -> hostname
    wal:
      dir: null            # null -> no write-ahead log
      fsync: every 50      # always | never | every <ms> | <ms>
      segment_bytes: 10485760
    events:
      dir: null            # null -> no job event log (see shardq/storage/events.py)
    limits:
      max_connections: 0   # 0 -> no limit; more are closed at accept (a share per serving process)
      max_output_bytes: 4194304  # a connection with more unwritten replies is closed
      max_jobs: 0          # 0 -> no limit; past it, put answers OUT_OF_MEMORY (all shards together)
      max_memory: 0        # 0 -> no limit; e.g. 512M, 2G: job bodies + 512 B a job, all shards
    log:
      level: null          # debug | info | warning | error; null -> from -V (warning, info, debug)
      format: text         # text (one line) | json (one object a line)
    tls:
      cert: null           # PEM certificate (chain); with key: TLS on every client port
      key: null            # PEM private key
      client_ca: null      # PEM CA: clients must show a certificate it signed (mutual TLS)
      handshake_timeout: 5 # seconds a client has to finish its TLS handshake
    allow: []              # TCP clients of every port only from these, e.g. [10.0.0.0/8, ::1]
    metrics:
      listen: null         # HOST:PORT (a bare port: 127.0.0.1) -> /metrics, /health, dashboard
      tls_cert: null       # PEM certificate (chain); with tls_key: the endpoint is HTTPS
      tls_key: null        # PEM private key
    kestrel:
      listen: 127.0.0.1    # the Kestrel (memcache dialect) front-end's address
      port: null           # null -> no Kestrel front-end; Kestrel's own port is 22133; 0 -> any
      admin: false         # true -> flush_all, reload, shutdown served (false: unknown commands)
    workq:
      listen: 127.0.0.1    # the Workq (text protocol) front-end's address
      port: null           # null -> no Workq front-end; Workq's own port is 9922; 0 -> any
    bunqueue:
      listen: 127.0.0.1    # the bunqueue (MessagePack over TCP) front-end's address
      port: null           # null -> no bunqueue front-end; bunqueue's own port is 6789; 0 -> any
      tokens: []           # [] -> no Auth needed; else a client must Auth with one of these
    tubes:                 # per-tube policies (config/tubes.py, engine/policy.py); reloadable
      defaults: {max_jobs: 0, max_bytes: 0, discard_old: false, max_reserves: 0, max_timeouts: 0,
                 max_age: 0, max_reserved: 0, reserve_rate: 0}   # max_age: seconds;
                               # reserve_rate: jobs handed out per second (0.5, 20)
      orders: {max_reserves: 3}          # an exact tube name beats any glob
      "log.*": {max_bytes: 64M, discard_old: true}   # the longest matching glob beats shorter
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardq.config.tubes import tube_policies
from shardq.config.values import (  # noqa: F401  (re-exported)
    DEFAULT_MAX_OUTPUT_BYTES,
    JOB_SIZE_LIMIT_MAX,
    MAX_POLL_US,
    MAX_SHARDS,
    MIN_MEMORY,
    MIN_OUTPUT_BYTES,
    SIZE_UNITS,
    ConfigError,
    ConfigWarning,
    _bool,
    _count,
    _fsync,
    _host_port,
    _log_format,
    _log_level,
    _max_job_size,
    _memory,
    _networks,
    _output_bytes,
    _path,
    _poll_us,
    _port,
    _port_or_null,
    _positive,
    _seconds,
    _shards,
    _stats_yaml,
    _tokens,
    _user,
    _word,
    split_host_port,
)

if TYPE_CHECKING:
    from shardq.storage.layout import Layout


from shardq.config.schema import (  # noqa: F401  (re-exported)
    CONFIG_FIELDS,
    Config,
    _default_serving,
)

Validator = Callable[[str, Any, bool], Any]

#: Config field -> (YAML key path, validator). The YAML path is what error messages name.
FIELDS: dict[str, tuple[str, Validator]] = {
    "listen": ("listen", _word),
    "port": ("port", _port),
    "max_job_size": ("max_job_size", _max_job_size),
    "shards": ("shards", _shards),
    "serving": ("serving", _shards),
    "verbose": ("verbose", _count),
    "run_dir": ("run_dir", _path),
    "server_id": ("server", _word),
    "wal_dir": ("wal.dir", _path),
    "fsync_ms": ("wal.fsync", _fsync),
    "segment_bytes": ("wal.segment_bytes", _positive),
    "events_dir": ("events.dir", _path),
    "colocate": ("colocate", _bool),
    "poll_us": ("poll_us", _poll_us),
    "stats_yaml": ("stats_yaml", _stats_yaml),
    "stats_tube_shard": ("stats_tube_shard", _bool),
    "user": ("user", _user),
    "max_connections": ("limits.max_connections", _count),
    "max_output_bytes": ("limits.max_output_bytes", _output_bytes),
    "max_jobs": ("limits.max_jobs", _count),
    "max_memory": ("limits.max_memory", _memory),
    "allow": ("allow", _networks),
    "tls_cert": ("tls.cert", _path),
    "tls_key": ("tls.key", _path),
    "tls_client_ca": ("tls.client_ca", _path),
    "tls_handshake_timeout": ("tls.handshake_timeout", _seconds),
    "log_level": ("log.level", _log_level),
    "log_format": ("log.format", _log_format),
    "metrics_listen": ("metrics.listen", _host_port),
    "metrics_tls_cert": ("metrics.tls_cert", _path),
    "metrics_tls_key": ("metrics.tls_key", _path),
    "kestrel_listen": ("kestrel.listen", _word),
    "kestrel_port": ("kestrel.port", _port_or_null),
    "kestrel_admin": ("kestrel.admin", _bool),
    "workq_listen": ("workq.listen", _word),
    "workq_port": ("workq.port", _port_or_null),
    "bunqueue_listen": ("bunqueue.listen", _word),
    "bunqueue_port": ("bunqueue.port", _port_or_null),
    "bunqueue_tokens": ("bunqueue.tokens", _tokens),
    "tubes": ("tubes", tube_policies),
}
#: YAML keys that hold a mapping of sub-keys ("wal: {dir: ...}" -> "wal.dir").
SECTIONS = ("wal", "events", "limits", "log", "tls", "kestrel", "workq", "bunqueue", "metrics")
_BY_YAML_KEY = {key: name for name, (key, _) in FIELDS.items()}


def _flatten(data: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """{"wal": {"dir": x}} -> {"wal.dir": x}; unknown keys are errors that name themselves."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ConfigError(origin, f"{key}: must be a mapping, got {value!r}")
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = subvalue
        else:
            flat[str(key)] = value
    for key in flat:
        if key not in _BY_YAML_KEY:
            section, dot, _ = key.partition(".")
            if dot and section in SECTIONS:
                known = [k.split(".", 1)[1] for k in _BY_YAML_KEY if k.startswith(f"{section}.")]
            else:
                known = [k for k in _BY_YAML_KEY if "." not in k] + list(SECTIONS)
            raise ConfigError(origin, f"{key}: unknown key (known: {', '.join(known)})")
    return flat


# --- entry point --------------------------------------------------------------------------


def load_config(
    text: str | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    origin: str = "config",
    flag_names: Mapping[str, str] | None = None,
    written: tuple[int, str] | None = None,
) -> Config:
    """Build a `Config` from YAML `text` (None = no file) and `overrides` (which win).

    `overrides` maps Config field names to values; only keys present override, so a value
    of None means None (e.g. ``fsync_ms=None`` is "never fsync"), not "unset".
    `origin` names the file in errors; `flag_names` maps a field to the flag that set it
    (e.g. ``{"port": "-p"}``), so errors about overrides name the flag the user typed.
    `written`: (shards, directory) of the log the server is to start on (`wal.dir`): its
    shard count replaces the default, and a `shards` set to another count is an error.

    Raises ConfigError with a one-line message naming the key and the problem.
    """
    values: dict[str, Any] = {}
    wheres: dict[str, str] = {}  # field -> how an error names the setting that set it
    if text is not None:
        for key, raw in _flatten(parse_yaml(text, origin), origin).items():
            name = _BY_YAML_KEY[key]
            wheres[name] = f"{origin}: {key}"
            values[name] = FIELDS[name][1](wheres[name], raw, False)
    flag_names = flag_names or {}
    for name, raw in (overrides or {}).items():
        if name not in FIELDS:
            raise ConfigError(f"override {name}", "unknown setting")
        flag = flag_names.get(name)
        wheres[name] = f"flag {flag} ({FIELDS[name][0]})" if flag else f"override {name}"
        values[name] = FIELDS[name][1](wheres[name], raw, True)
    if written is not None:
        values["shards"] = _written_shards(values, wheres, *written)
    config = Config(**values)
    if "shards" not in values and "serving" in values:  # one shard a serving process
        config = config.replace(shards=config.serving)
    if "serving" not in values:  # the default, within the shards and colocation given
        serving = min(config.serving, config.shards) if config.colocate else 1
        config = config.replace(serving=serving)
    if config.serving > config.shards:
        if "shards" in values:
            of_log = f", the count the log in {written[1]} was written with" if written else ""
            raise ConfigError(
                "serving",
                f"must not exceed shards ({config.shards}{of_log}): each hosts one shard",
            )
        config = config.replace(shards=config.serving)
    if config.serving > 1 and not config.colocate:
        raise ConfigError("colocate", "must be true with several serving processes")
    return config


def _written_shards(values: dict[str, Any], wheres: dict[str, str], shards: int, log: str) -> int:
    """The shard count a log was written with, which the server must keep (tubes are in
    the log of the shard the routing gave them): it wins over the default; a `shards` set
    to another count is refused, naming the flag or key."""
    given = values.get("shards")
    if given is not None and given != shards:
        raise ConfigError(
            wheres["shards"],
            f"{log} holds the log of {shards} shards, not {given}: start with --shards {shards} "
            "or with shards unset (the log's count is the default then), or drain its jobs "
            "into a new server (re-partitioning a log is not supported yet)",
        )
    return shards


# --- reading it ---------------------------------------------------------------------------

#: Used when --config is not given and this file exists in the current directory.
DEFAULT_CONFIG = Path("config/shardq.yaml")


def read_config_text(path: Path | None) -> tuple[str | None, str]:
    """Return (text, origin); text is None when no file is given and the default is absent."""
    if path is None:
        if not DEFAULT_CONFIG.is_file():
            return None, "config"
        path = DEFAULT_CONFIG
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(f"--config {path}", f"cannot read the file: {reason}") from None


def read_config(
    config_file: Path | None, overrides: Mapping[str, Any], flag_names: Mapping[str, str]
) -> Config:
    """The config file (`config_file`, else DEFAULT_CONFIG if it exists) with `overrides` (the
    flags' values, which win). At start-up and again on SIGHUP. The Config's `source` names
    the file, or says that the defaults were used."""
    text, origin = read_config_text(config_file)
    config = load_config(text, overrides, origin=origin, flag_names=flag_names)
    if config.wal_dir is not None:  # a log written before: its shard count is the default
        written = written_layout(config, overrides, origin, flag_names)
        if written is not None:
            written_at = (written.shards, config.wal_dir)
            config = load_config(
                text, overrides, origin=origin, flag_names=flag_names, written=written_at
            )
    if text is None:
        origin = f"defaults (no --config, no {DEFAULT_CONFIG} in {Path.cwd()})"
    return config.replace(source=origin)


def written_layout(
    config: Config, overrides: Mapping[str, Any], origin: str, flag_names: Mapping[str, str]
) -> Layout | None:
    """The layout the log in `config.wal_dir` was written with (storage/layout.py), or None
    for a directory without one; a layout file that cannot be read is a ConfigError naming
    `wal.dir` (as the flag that set it, if one did)."""
    from shardq.storage import layout  # only with -b (shardqd imports this module early)

    assert config.wal_dir is not None
    try:
        return layout.read(config.wal_dir)
    except layout.LayoutFileError as e:
        flag = flag_names.get("wal_dir")
        where = (
            f"flag {flag} (wal.dir)" if "wal_dir" in overrides and flag else f"{origin}: wal.dir"
        )
        raise ConfigError(where, str(e)) from None


def parse_yaml(text: str, origin: str) -> dict[str, Any]:
    """The config file's YAML (pyyaml is imported only when there is a file: `shardqd`
    with flags alone starts ≈ 0.02 s sooner)."""
    from shardq.config.yaml_text import parse

    return parse(text, origin)
