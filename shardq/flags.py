"""The command line's names and statuses, shared by `shardq serve`, `shardqd` and start-up.

Pure data with no imports, so `shardqd` can parse its flags and bind its port before it
imports anything heavy (see `shardq.dropin`).
"""

EXIT_OK = 0  # clean shutdown, or -v / -h
EXIT_FAILURE = 1  # the server failed while running (returned by the supervisor)
EXIT_LISTEN = 1  # the address cannot be listened on (in use, not allowed)
EXIT_CONFIG = 2  # bad config file or flag; typer's own usage errors use 2 as well


#: Config field -> the flag that sets it, so errors name what the user typed.
FLAGS = {
    "listen": "-l",
    "port": "-p",
    "max_job_size": "-z",
    "verbose": "-V",
    "wal_dir": "-b",
    "fsync_ms": "-f",
    "segment_bytes": "-s",
    "shards": "--shards",
    "serving": "--serving",
    "run_dir": "--run-dir",
    "events_dir": "--events",
    "colocate": "--no-colocate",
    "poll_us": "--poll-us",
    "stats_yaml": "--stats-yaml",
    "user": "-u",
    "max_connections": "--max-connections",
    "max_output_bytes": "--max-output-bytes",
    "max_jobs": "--max-jobs",
    "max_memory": "--max-memory",
    "allow": "--allow",
    "tls_cert": "--tls-cert",
    "tls_key": "--tls-key",
    "tls_client_ca": "--tls-client-ca",
    "log_level": "--log-level",
    "log_format": "--log-format",
    "kestrel_listen": "--kestrel-listen",
    "kestrel_port": "--kestrel-port",
    "workq_listen": "--workq-listen",
    "workq_port": "--workq-port",
    "bunqueue_listen": "--bunqueue-listen",
    "bunqueue_port": "--bunqueue-port",
    "metrics_listen": "--metrics",
}
