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
import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from shardq import __version__
from shardq.config import DEFAULT_CONFIG
from shardq.flags import OPTIONS
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


#: Config fields whose flags are not plain values: stated in `serve`'s own signature.
SPECIAL = ("verbose", "colocate", "allow")


def serve(
    options: dict[str, Any],
    verbose: Annotated[
        int, typer.Option("-V", count=True, show_default=False, help=OPTIONS["verbose"][2])
    ] = 0,
    no_fsync: Annotated[bool, typer.Option("-F", help="Never fsync.")] = False,
    no_colocate: Annotated[
        bool, typer.Option("--no-colocate", help=OPTIONS["colocate"][2])
    ] = False,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", metavar=OPTIONS["allow"][1], help=OPTIONS["allow"][2]),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help=f"YAML config file [{DEFAULT_CONFIG} if present]."
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
    overrides: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if allow:
        overrides["allow"] = allow
    if verbose:
        overrides["verbose"] = verbose
    if no_colocate:
        overrides["colocate"] = False
    ignored = [flag for flag, given_flag in (("-c", compact), ("-n", no_compact)) if given_flag]
    code = start_server(config_file, overrides, no_fsync=no_fsync, ignored=ignored)
    raise typer.Exit(code)  # only on failure: start_server became the supervisor otherwise


def serve_command(**given: Any) -> None:
    """Run the server (accepts beanstalkd's flags; flags override the config file)."""
    plain = {
        name: given.pop(name) for name in list(given) if name in OPTIONS and name not in SPECIAL
    }
    serve(plain, **given)


def _plain_option(name: str) -> inspect.Parameter:
    """The `serve` option of a Config field from its row in `flags.OPTIONS`: a string (the
    config's validator reads it, as it reads the file's values), None when not given."""
    flag, metavar, text = OPTIONS[name]
    info = typer.Option(flag, metavar=metavar, help=text)
    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(name, kind, default=None, annotation=Annotated[str | None, info])


def _serve_signature() -> inspect.Signature:
    """`serve`'s options: one per row of `flags.OPTIONS`, then its own."""
    plain = [_plain_option(name) for name in OPTIONS if name not in SPECIAL]
    own = list(inspect.signature(serve, eval_str=True).parameters.values())[1:]
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    return inspect.Signature([*plain, *own])


serve_command.__signature__ = _serve_signature()  # type: ignore[attr-defined]
serve_command.__annotations__ = {
    p.name: p.annotation for p in _serve_signature().parameters.values()
}
app.command(
    "serve",
    cls=SuggestingCommand,
    short_help="Run the server (accepts beanstalkd's flags; flags override the config file).",
)(serve_command)


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
    class_cache: Annotated[
        bool,
        typer.Option(
            "--class-cache/--no-class-cache",
            help="Map Spark's classes from an archive kept in ~/.cache/shardq"
            " ($SHARDQ_CACHE_DIR): a small run ≈ 3.5 s sooner.",
        ),
    ] = True,
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

    raise typer.Exit(run_job(events, out, master, verbose, class_cache))


# `shardq bench` and `shardq bench compare`: the load tool lives in shardq.bench.
from shardq.bench.cli import bench_app  # noqa: E402

app.add_typer(
    bench_app,
    name="bench",
    short_help="Load-test any beanstalk server; `compare` runs the A/B matrix.",
)
