"""The `shardq bench` command group (mounted on the main CLI in shardq/cli.py).

Results go to stdout (a table, or JSON with --json). Progress is logged on stderr as
``shardq[bench] INFO ...`` (which cell runs) and shown by default; `-V` adds DEBUG.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from shardq.bench.workloads import WORKLOADS, Spec
from shardq.log import setup as setup_logging

bench_app = typer.Typer(
    help="Load-test any beanstalk server; `compare` runs the A/B matrix.",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _progress_wanted(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


Verbose = Annotated[
    int,
    typer.Option("-V", count=True, show_default=False, help="More logging; repeatable."),
]


def _setup_logging(verbose: int) -> None:
    """INFO (the progress of `compare`) by default, DEBUG with -V."""
    setup_logging("bench", 1 + verbose)


@bench_app.callback()
def bench(
    ctx: typer.Context,
    workload: Annotated[
        str, typer.Option("-w", "--workload", help=f"One of: {', '.join(WORKLOADS)}.")
    ] = "put",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p")] = 11300,
    connections: Annotated[int, typer.Option("--connections", "-c", min=1)] = 1,
    pipeline: Annotated[
        int, typer.Option("--pipeline", min=1, help="Requests in flight per connection.")
    ] = 1,
    size: Annotated[int, typer.Option("--size", min=0, help="Job body bytes.")] = 100,
    duration: Annotated[
        float | None, typer.Option("--duration", "-d", help="Seconds [5, unless --jobs].")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-n", min=1, help="Puts (put/mixed), jobs (reserve) or cycles."),
    ] = None,
    processes: Annotated[
        int, typer.Option("--processes", "-P", min=1, help="Load processes [1].")
    ] = 1,
    tubes: Annotated[int, typer.Option("--tubes", "-t", min=1, help="multitube: tubes.")] = 16,
    backlog: Annotated[
        int, typer.Option("--backlog", min=1, help="mixed: producers wait above this.")
    ] = 5000,
    prefill: Annotated[
        int, typer.Option("--prefill", min=1, help="reserve with --duration: jobs put first.")
    ] = 200_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    verbose: Verbose = 0,
) -> None:
    """Run one workload against a beanstalk server and print throughput and latency."""
    _setup_logging(verbose)
    if ctx.invoked_subcommand is not None:
        return
    from shardq.bench.runner import format_result, run

    if workload not in WORKLOADS:
        typer.echo(f"shardq bench: unknown workload {workload!r}", err=True)
        raise typer.Exit(2)
    spec = Spec(
        workload=workload,
        host=host,
        port=port,
        connections=connections,
        pipeline=pipeline,
        size=size,
        duration=None if jobs and duration is None else (duration or 5.0),
        jobs=jobs,
        processes=processes,
        tubes=tubes if workload == "multitube" else 1,
        backlog=backlog,
        prefill=prefill,
    )
    try:
        result = run(spec, progress=_progress_wanted(as_json))
    except (OSError, RuntimeError) as e:
        typer.echo(f"shardq bench: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(result, indent=2) if as_json else format_result(result))
    raise typer.Exit(1 if result["errors"] else 0)


@bench_app.command(
    "compare",
    short_help="Run one matrix against servers A and B and the stub (L), row by row.",
)
def compare_cmd(
    a: Annotated[str, typer.Option("--a", help="Server A command; {port} is filled in.")] = (
        "beanstalkd -l 127.0.0.1 -p {port}"
    ),
    b: Annotated[str, typer.Option("--b", help="Server B command.")] = "shardq serve -p {port}",
    l_cmd: Annotated[
        str | None,
        typer.Option("--l", help="Column L's server [the stub, python -m shardq.bench.stub]."),
    ] = None,
    no_stub: Annotated[
        bool, typer.Option("--no-stub", help="No L column (the load tool's ceiling).")
    ] = False,
    rounds: Annotated[int, typer.Option("--rounds", "-r", min=1)] = 3,
    matrix: Annotated[
        str, typer.Option("--matrix", help="standard, quick or memory.")
    ] = "standard",
    duration: Annotated[
        float | None, typer.Option("--duration", "-d", help="Seconds per cell.")
    ] = None,
    processes: Annotated[
        int | None, typer.Option("--processes", "-P", help="Load processes [cores].")
    ] = None,
    scaling: Annotated[
        str | None, typer.Option("--scaling", help="B with --shards N, e.g. 1,2,4.")
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Rewrite this Markdown file's bench section.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    verbose: Verbose = 0,
) -> None:
    """Run the same matrix against server A, server B and the stub (L), alternating row by
    row, and print B/A, CPU, kops per CPU-second and where the load tool was the limit."""
    if verbose:
        _setup_logging(verbose)
    from shardq.bench.compare import compare, format_table
    from shardq.bench.limits import stub_command

    if matrix not in ("standard", "quick", "memory"):
        typer.echo("shardq bench compare: --matrix is standard, quick or memory", err=True)
        raise typer.Exit(2)
    shards = [int(x) for x in scaling.split(",")] if scaling else None
    progress = _progress_wanted(as_json)
    try:
        ceiling = None if no_stub else (l_cmd or stub_command())
        result = compare(a, b, rounds, matrix, duration, processes, shards, progress, ceiling)
    except (OSError, RuntimeError) as e:
        typer.echo(f"shardq bench compare: {e}", err=True)
        raise typer.Exit(1) from None
    result["command"] = "shardq " + " ".join(sys.argv[1:]) if sys.argv else ""
    if report is not None:
        from shardq.bench.report import write_report

        write_report(report, result)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))
    errors = sum(r[s]["errors"] for r in result["rows"] for s in ("a", "b", "l") if s in r)
    raise typer.Exit(1 if errors else 0)


__all__ = ["bench_app"]
