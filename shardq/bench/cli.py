"""The `shardq bench` command group (mounted on the main CLI in shardq/cli.py).

Results go to stdout (a table, or JSON with --json). Progress is logged on stderr as
``shardq[bench] INFO ...`` (which cell runs, what was removed) and shown by default; `-V`
adds DEBUG. On a terminal a progress line with the time left is redrawn on stderr.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from shardq.bench.workloads import MATRIX_HELP, WORKLOAD_HELP, WORKLOADS, Spec, split_problem
from shardq.log import setup as setup_logging

log = logging.getLogger(__name__)


def _choices(title: str, helps: dict[str, str]) -> str:
    """A help paragraph listing choices, kept as written (click's \\b: no rewrapping)."""
    lines = [
        textwrap.fill(v, 79, initial_indent=f"  {k:<10} ", subsequent_indent=" " * 13)
        for k, v in helps.items()
    ]
    return "\b\n" + title + "\n" + "\n".join(lines)


BENCH_HELP = (
    "Run one workload against a beanstalk server and print throughput (ops/s) and latency"
    " (µs). The run uses tubes of its own (bench-XXXXXX) and removes the jobs it put when it"
    " ends, unless --keep.\n\n" + _choices("Workloads (-w):", WORKLOAD_HELP)
)
COMPARE_HELP = (
    "Run the same matrix against server A, server B and the stub (L), alternating row by row,"
    " each run on a fresh server, and print B/A, server CPU, kops per CPU-second and where"
    " the load tool was the limit.\n\n" + _choices("Matrices (--matrix):", MATRIX_HELP)
)

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


Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="c: the compiled load core (built with gcc on first use; one process keeps a fast"
        " server busy), python: the Python load loop.",
    ),
]
ENGINES = ("c", "python")


def _check_engine(engine: str, command: str) -> None:
    if engine not in ENGINES:
        typer.echo(f"{command}: --engine is one of {', '.join(ENGINES)}", err=True)
        raise typer.Exit(2)


Verbose = Annotated[
    int,
    typer.Option("-V", count=True, show_default=False, help="More logging; repeatable."),
]


def _setup_logging(verbose: int) -> None:
    """INFO (the progress of `compare`) by default, DEBUG with -V."""
    setup_logging("bench", 1 + verbose)


@bench_app.callback(help=BENCH_HELP)
def bench(
    ctx: typer.Context,
    workload: Annotated[
        str,
        typer.Option("-w", "--workload", help=f"One of: {', '.join(WORKLOADS)} (see below)."),
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
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the jobs the run put in the server.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol",
            help="beanstalk, or kestrel / workq / bunqueue: -w put or reserve through shardq's "
            "Kestrel, Workq or bunqueue port (--port; bunqueue: a real bunqueue's too).",
        ),
    ] = "beanstalk",
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            min=1,
            max=1000,
            help="--protocol bunqueue: jobs a request (1: PUSH, PULL+ACK; N: PUSHB, PULLB+ACKB).",
        ),
    ] = 1,
    engine: Engine = "c",
    verbose: Verbose = 0,
) -> None:
    _setup_logging(verbose)
    if ctx.invoked_subcommand is not None:
        return
    from shardq.bench.loadgen import check_reachable
    from shardq.bench.runner import format_result, run

    if workload not in WORKLOADS:
        typer.echo(
            f"shardq bench: unknown workload {workload!r}; one of {', '.join(WORKLOADS)}"
            " (shardq bench --help says what each does)",
            err=True,
        )
        raise typer.Exit(2)
    _check_engine(engine, "shardq bench")
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
        prefix=f"bench-{secrets.token_hex(3)}",  # tubes of this run only: cleanup is exact
        engine=engine,
    )
    problem = split_problem(spec) if protocol == "beanstalk" else None
    if problem:
        typer.echo(f"shardq bench: {problem}", err=True)
        raise typer.Exit(2)
    try:
        check_reachable(host, port)
    except OSError as e:
        typer.echo(f"shardq bench: {e}", err=True)
        raise typer.Exit(1) from None
    if protocol == "bunqueue":
        _bunqueue_door(spec, batch, as_json)
    if protocol != "beanstalk":
        _other_door(spec, protocol, as_json)
    try:
        result = run(spec, progress=_progress_wanted(as_json))
    except (OSError, RuntimeError) as e:
        typer.echo(f"shardq bench: {e}", err=True)
        _clean_up(spec, keep)
        raise typer.Exit(1) from None
    result["cleanup"] = _clean_up(spec, keep)
    typer.echo(json.dumps(result, indent=2) if as_json else format_result(result))
    raise typer.Exit(1 if result["errors"] else 0)


def _bunqueue_door(spec: Spec, batch: int, as_json: bool) -> None:
    """A push or pull+ack load through a bunqueue door (bench/bunqueue_load.py)."""
    from shardq.bench.bunqueue_load import format_bunqueue_result, run_bunqueue

    def load() -> dict[str, object]:
        return run_bunqueue(spec, batch)

    _door_result(load, format_bunqueue_result, as_json)


def _door_result(
    load: Callable[[], dict[str, object]],
    fmt: Callable[[dict[str, object]], str],
    as_json: bool,
) -> None:
    """Run a door's load and print its result (exit 1 on a failure, else 0)."""
    try:
        result = load()
    except (OSError, RuntimeError) as e:
        typer.echo(f"shardq bench: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(result, indent=2) if as_json else fmt(result))
    raise typer.Exit(0)


def _other_door(spec: Spec, protocol: str, as_json: bool) -> None:
    """A put or reserve load through the Kestrel or Workq door (bench/protocols.py)."""
    from shardq.bench.protocols import LOADS, PROTOCOLS, format_protocol_result, run_protocol

    if protocol not in PROTOCOLS or spec.workload not in LOADS:
        typer.echo(
            f"shardq bench: --protocol is one of {', '.join(PROTOCOLS)}; kestrel and workq run"
            f" -w {' or -w '.join(LOADS)}",
            err=True,
        )
        raise typer.Exit(2)

    def load() -> dict[str, object]:
        return run_protocol(spec, protocol)

    _door_result(load, format_protocol_result, as_json)


def _jobs(n: int) -> str:
    return f"{n:,} job" if n == 1 else f"{n:,} jobs"


def _clean_up(spec: Spec, keep: bool) -> dict[str, object]:
    """Remove the jobs the run put (or count them, with `keep`) and say so in a log line."""
    from shardq.bench.cleanup import count_jobs, drain, tubes_of

    tubes = tubes_of(spec)
    where = f"tube {tubes[0]}" if len(tubes) == 1 else f"{len(tubes)} tubes {spec.prefix}*"
    out: dict[str, object] = {"tubes": tubes, "kept": keep, "removed": 0, "left": 0}
    try:
        out["left"] = left = sum(count_jobs(spec.host, spec.port, tubes).values())
        if keep:
            log.info("kept %s the run left in %s (--keep)", _jobs(left), where)
            return out
        log.info("removing %s the run left in %s (--keep keeps them)", _jobs(left), where)
        started = time.monotonic()
        removed, left = drain(spec.host, spec.port, tubes)
    except OSError as e:
        log.warning("could not remove the run's jobs from %s: %s", where, e)
        out["error"] = str(e)
        return out
    out.update(removed=removed, left=left)
    log.debug("removed %s in %.1f s", _jobs(removed), time.monotonic() - started)
    if left:
        log.warning("%s the run left could not be removed from %s", _jobs(left), where)
    return out


@bench_app.command(
    "compare",
    help=COMPARE_HELP,
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
        str, typer.Option("--matrix", help=f"{', '.join(MATRIX_HELP)} (see below).")
    ] = "standard",
    duration: Annotated[
        float | None, typer.Option("--duration", "-d", help="Seconds per cell.")
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option("--processes", "-P", help="Load processes [1 with --engine c, else cores]."),
    ] = None,
    scaling: Annotated[
        str | None,
        typer.Option(
            "--scaling", help="B with N serving processes (--shards N --serving N), e.g. 1,2,4."
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Rewrite this Markdown file's bench section.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    engine: Engine = "c",
    verbose: Verbose = 0,
) -> None:
    if verbose:
        _setup_logging(verbose)
    _check_engine(engine, "shardq bench compare")
    from shardq.bench.compare import compare, format_table
    from shardq.bench.limits import stub_command

    if matrix not in MATRIX_HELP:
        typer.echo(
            f"shardq bench compare: --matrix is one of {', '.join(MATRIX_HELP)}"
            " (shardq bench compare --help says what each runs)",
            err=True,
        )
        raise typer.Exit(2)
    shards = [int(x) for x in scaling.split(",")] if scaling else None
    progress = _progress_wanted(as_json)
    try:
        ceiling = None if no_stub else (l_cmd or stub_command())
        result = compare(
            a, b, rounds, matrix, duration, processes, shards, progress, ceiling, engine
        )
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
