"""`shardq` command line: `serve`, `analyze` (Spark job analytics) and `bench` (load tests,
shardq.bench).

`serve` accepts beanstalkd 1.12's own flags (-l -p -z -V -v -h -b -f -F -s -u, and -c -n,
which beanstalkd 1.12 ignores with a warning, as shardq does) so shardq can replace
beanstalkd in an existing service unit, plus --shards, --config and --run-dir.
Precedence: flags > config file > built-in defaults (shardq.config.Config).

Starting the server (config, checks, locks, binding, the exec into the supervisor) is
shardq.start's, shared with `shardqd` (shardq.dropin). `-v` and usage errors are the
command's own output (typer.echo); the server's processes log through shardq.log.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer

from shardq import __version__
from shardq.config import DEFAULT_CONFIG
from shardq.log import setup as setup_logging
from shardq.processes.supervision.spawn import pin_import_root
from shardq.start import EXIT_FAILURE, EXIT_OK, start_server
from shardq.usage import SuggestingCommand

app = typer.Typer(
    name="shardq",
    help="shardq: a multi-process work-queue server that speaks the beanstalk protocol.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"shardq {__version__}")
        raise typer.Exit(EXIT_OK)


VersionOption = Annotated[
    bool,
    typer.Option(
        "-v",
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
]


@app.callback()
def main(version: VersionOption = False) -> None:
    """shardq: a multi-process work-queue server that speaks the beanstalk protocol."""
    pin_import_root()  # the processes serve and bench start import this same shardq


@app.command(
    cls=SuggestingCommand,
    short_help="Run the server (accepts beanstalkd's flags; flags override the config file).",
)
def serve(
    listen: Annotated[
        str | None, typer.Option("-l", metavar="ADDR", help="Listen address [127.0.0.1].")
    ] = None,
    port: Annotated[
        str | None, typer.Option("-p", metavar="PORT", help="TCP port, 0 = any free [11300].")
    ] = None,
    max_job_size: Annotated[
        str | None, typer.Option("-z", metavar="BYTES", help="Maximum job size [65535].")
    ] = None,
    verbose: Annotated[
        int, typer.Option("-V", count=True, show_default=False, help="More logging; repeatable.")
    ] = 0,
    wal_dir: Annotated[
        str | None, typer.Option("-b", metavar="DIR", help="Write-ahead log directory [none].")
    ] = None,
    fsync_ms: Annotated[
        str | None,
        typer.Option("-f", metavar="MS", help="fsync at most every MS ms; 0 = always [50]."),
    ] = None,
    no_fsync: Annotated[bool, typer.Option("-F", help="Never fsync.")] = False,
    segment_bytes: Annotated[
        str | None, typer.Option("-s", metavar="BYTES", help="WAL segment size [10485760].")
    ] = None,
    shards: Annotated[
        str | None,
        typer.Option(
            "--shards",
            metavar="N",
            help="Shards [one per serving process; a -b log keeps its own].",
        ),
    ] = None,
    serving: Annotated[
        str | None,
        typer.Option(
            "--serving",
            metavar="N",
            help="Serving processes: each accepts clients and hosts a shard [2; 1 on one core].",
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help=f"YAML config file [{DEFAULT_CONFIG} if present]."
        ),
    ] = None,
    run_dir: Annotated[
        str | None, typer.Option("--run-dir", metavar="DIR", help="Directory for ipc sockets.")
    ] = None,
    events_dir: Annotated[
        str | None,
        typer.Option("--events", metavar="DIR", help="Write job events here [off]."),
    ] = None,
    no_colocate: Annotated[
        bool,
        typer.Option(
            "--no-colocate", help="Run shard 0 in its own process, not inside the serving process."
        ),
    ] = False,
    poll_us: Annotated[
        str | None,
        typer.Option(
            "--poll-us",
            metavar="US",
            help="After a busy turn with at most 4 clients, poll this many µs before "
            "sleeping; 0 = never [100].",
        ),
    ] = None,
    stats_yaml: Annotated[
        str | None,
        typer.Option(
            "--stats-yaml",
            metavar="STYLE",
            help="Stats string values: plain (beanstalkd 1.12's bytes) or quoted (1.13's) [plain].",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "-u", metavar="USER", help="Become USER (and its group) once the port is bound."
        ),
    ] = None,
    max_connections: Annotated[
        str | None,
        typer.Option(
            "--max-connections",
            metavar="N",
            help="Close connections past N at accept; 0 = no limit [0].",
        ),
    ] = None,
    max_output_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-output-bytes",
            metavar="BYTES",
            help="Close a connection with more unwritten replies [4194304].",
        ),
    ] = None,
    max_jobs: Annotated[
        str | None,
        typer.Option(
            "--max-jobs",
            metavar="N",
            help="Past N jobs in the server, put answers OUT_OF_MEMORY; 0 = no limit [0].",
        ),
    ] = None,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory",
            metavar="SIZE",
            help="Past SIZE (512M, 2G) of jobs, put answers OUT_OF_MEMORY; 0 = no limit [0].",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level", metavar="LEVEL", help="debug, info, warning or error [from -V]."
        ),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option("--log-format", metavar="FORMAT", help="text or json [text]."),
    ] = None,
    tls_cert: Annotated[
        str | None,
        typer.Option("--tls-cert", metavar="PEM", help="TLS certificate (chain) [no TLS]."),
    ] = None,
    tls_key: Annotated[
        str | None, typer.Option("--tls-key", metavar="PEM", help="TLS private key.")
    ] = None,
    tls_client_ca: Annotated[
        str | None,
        typer.Option(
            "--tls-client-ca", metavar="PEM", help="Require client certificates it signed."
        ),
    ] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            metavar="CIDR",
            help="Accept TCP clients only from this network; repeatable [any].",
        ),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="HOST:PORT",
            help="Serve /metrics (Prometheus), /health and a dashboard here; a bare port "
            "is on 127.0.0.1 [off].",
        ),
    ] = None,
    kestrel_listen: Annotated[
        str | None,
        typer.Option(
            "--kestrel-listen", metavar="ADDR", help="Kestrel front-end address [127.0.0.1]."
        ),
    ] = None,
    kestrel_port: Annotated[
        str | None,
        typer.Option(
            "--kestrel-port",
            metavar="PORT",
            help="Serve Kestrel's memcache dialect on PORT (Kestrel's: 22133), 0 = any [off].",
        ),
    ] = None,
    workq_listen: Annotated[
        str | None,
        typer.Option("--workq-listen", metavar="ADDR", help="Workq front-end address [127.0.0.1]."),
    ] = None,
    workq_port: Annotated[
        str | None,
        typer.Option(
            "--workq-port",
            metavar="PORT",
            help="Serve Workq's text protocol on PORT (Workq's: 9922), 0 = any [off].",
        ),
    ] = None,
    # beanstalkd 1.12 accepts -c and -n and ignores them ("-c flag was removed. binlog is
    # always compacted."); shardq's log is compacted automatically too, so it does the same.
    compact: Annotated[
        bool,
        typer.Option("-c", help="Ignored, as by beanstalkd 1.12: the log is always compacted."),
    ] = False,
    no_compact: Annotated[
        bool,
        typer.Option("-n", help="Ignored, as by beanstalkd 1.12: the log is always compacted."),
    ] = False,
    version: VersionOption = False,
) -> None:
    """Run the server (accepts beanstalkd's flags; flags override the config file)."""
    given = {
        "listen": listen,
        "port": port,
        "max_job_size": max_job_size,
        "wal_dir": wal_dir,
        "fsync_ms": fsync_ms,
        "segment_bytes": segment_bytes,
        "shards": shards,
        "serving": serving,
        "run_dir": run_dir,
        "events_dir": events_dir,
        "poll_us": poll_us,
        "stats_yaml": stats_yaml,
        "user": user,
        "max_connections": max_connections,
        "max_output_bytes": max_output_bytes,
        "max_jobs": max_jobs,
        "max_memory": max_memory,
        "allow": allow or None,
        "tls_cert": tls_cert,
        "tls_key": tls_key,
        "tls_client_ca": tls_client_ca,
        "log_level": log_level,
        "log_format": log_format,
        "metrics_listen": metrics,
        "kestrel_listen": kestrel_listen,
        "kestrel_port": kestrel_port,
        "workq_listen": workq_listen,
        "workq_port": workq_port,
    }
    overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if verbose:
        overrides["verbose"] = verbose
    if no_colocate:
        overrides["colocate"] = False
    ignored = [flag for flag, given_flag in (("-c", compact), ("-n", no_compact)) if given_flag]
    code = start_server(config_file, overrides, no_fsync=no_fsync, ignored=ignored)
    raise typer.Exit(code)  # only on failure: start_server became the supervisor otherwise


@app.command(
    short_help="Job analytics on Spark: tubes.csv, Parquet tables and report.html under --out."
)
def analyze(
    events: Annotated[
        list[str], typer.Argument(metavar="EVENTS", help="Event log files, dirs or globs.")
    ],
    out: Annotated[str, typer.Option("--out", metavar="DIR", help="Output directory.")],
    master: Annotated[
        str | None,
        typer.Option("--master", metavar="URL", help="Spark master [Spark's default]."),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "-V",
            "--verbose",
            count=True,
            show_default=False,
            help="Spark's own log and stage bars, and our timings; -VV: debug.",
        ),
    ] = 0,
) -> None:
    """Job analytics on Spark: tubes.csv, Parquet tables and report.html under --out.

    Exit status 2 when an input path does not exist, cannot be read or holds no valid event,
    or when --out is a file or a place that cannot be written (both checked before Spark).
    """
    setup_logging("analyze", verbose)
    if importlib.util.find_spec("pyspark") is None:
        typer.echo(
            "shardq analyze needs pyspark, which is not installed:"
            " pip install 'shardq[pipeline]' (and Java 17+)",
            err=True,
        )
        raise typer.Exit(EXIT_FAILURE)
    from shardq.pipeline.main import run_job  # lazy: pyspark is the optional extra

    raise typer.Exit(run_job(events, out, master, verbose))


# `shardq bench` and `shardq bench compare`: the load tool lives in shardq.bench.
from shardq.bench.cli import bench_app  # noqa: E402

app.add_typer(
    bench_app,
    name="bench",
    short_help="Load-test any beanstalk server; `compare` runs the A/B matrix.",
)
