"""The command line's names and statuses, shared by `shardq serve`, `shardqd` and start-up.

Pure data with no imports, so `shardqd` can parse its flags and bind its port before it
imports anything heavy (see `shardq.dropin`).
"""

EXIT_OK = 0  # clean shutdown, or -v / -h
EXIT_FAILURE = 1  # the server failed while running (returned by the supervisor)
EXIT_LISTEN = 1  # the address cannot be listened on (in use, not allowed)
EXIT_CONFIG = 2  # bad config file or flag; typer's own usage errors use 2 as well


#: Config field -> (its flag, the flag's metavar, its help with the default in brackets).
#: `shardq serve` is built from this table (cli.py: one option each, but for -V, --allow
#: and --no-colocate, which are not plain values); errors name the flag the user typed.
OPTIONS: dict[str, tuple[str, str, str]] = {
    "listen": ("-l", "ADDR", "Listen address [127.0.0.1]."),
    "port": ("-p", "PORT", "TCP port, 0 = any free [11300]."),
    "max_job_size": ("-z", "BYTES", "Maximum job size [65535]."),
    "verbose": ("-V", "", "More logging; repeatable."),
    "wal_dir": ("-b", "DIR", "Write-ahead log directory [none]."),
    "fsync_ms": ("-f", "MS", "fsync at most every MS ms; 0 = always [50]."),
    "segment_bytes": ("-s", "BYTES", "WAL segment size [10485760]."),
    "shards": ("--shards", "N", "Shards [one per serving process; a -b log keeps its own]."),
    "serving": (
        "--serving",
        "N",
        "Serving processes: each accepts clients and hosts a shard [2; 1 on one core].",
    ),
    "run_dir": ("--run-dir", "DIR", "Directory for ipc sockets."),
    "events_dir": ("--events", "DIR", "Write job events here [off]."),
    "colocate": ("--no-colocate", "", "Run shard 0 in its own process, not in a serving process."),
    "poll_us": (
        "--poll-us",
        "US",
        "After a busy turn with at most 4 clients, poll this many µs before sleeping; "
        "0 = never [100].",
    ),
    "stats_yaml": (
        "--stats-yaml",
        "STYLE",
        "Stats string values: plain (beanstalkd 1.12's bytes) or quoted (1.13's) [plain].",
    ),
    "user": ("-u", "USER", "Become USER (and its group) once the port is bound."),
    "max_connections": (
        "--max-connections",
        "N",
        "Close connections past N at accept; 0 = no limit [0].",
    ),
    "max_output_bytes": (
        "--max-output-bytes",
        "BYTES",
        "Close a connection with more unwritten replies [4194304].",
    ),
    "max_jobs": (
        "--max-jobs",
        "N",
        "Past N jobs in the server, put answers OUT_OF_MEMORY; 0 = no limit [0].",
    ),
    "max_memory": (
        "--max-memory",
        "SIZE",
        "Past SIZE (512M, 2G) of jobs, put answers OUT_OF_MEMORY; 0 = no limit [0].",
    ),
    "allow": ("--allow", "CIDR", "Accept TCP clients only from this network; repeatable [any]."),
    "tls_cert": ("--tls-cert", "PEM", "TLS certificate (chain) [no TLS]."),
    "tls_key": ("--tls-key", "PEM", "TLS private key."),
    "tls_client_ca": ("--tls-client-ca", "PEM", "Require client certificates it signed."),
    "log_level": ("--log-level", "LEVEL", "debug, info, warning or error [from -V]."),
    "log_format": ("--log-format", "FORMAT", "text or json [text]."),
    "kestrel_listen": ("--kestrel-listen", "ADDR", "Kestrel front-end address [127.0.0.1]."),
    "kestrel_port": (
        "--kestrel-port",
        "PORT",
        "Serve Kestrel's memcache dialect on PORT (Kestrel's: 22133), 0 = any [off].",
    ),
    "workq_listen": ("--workq-listen", "ADDR", "Workq front-end address [127.0.0.1]."),
    "workq_port": (
        "--workq-port",
        "PORT",
        "Serve Workq's text protocol on PORT (Workq's: 9922), 0 = any [off].",
    ),
    "metrics_listen": (
        "--metrics",
        "HOST:PORT",
        "Serve /metrics (Prometheus), /health and a dashboard here; a bare port is on "
        "127.0.0.1 [off].",
    ),
}
#: Config field -> the flag that sets it, so errors name what the user typed.
FLAGS = {name: flag for name, (flag, _metavar, _help) in OPTIONS.items()}
