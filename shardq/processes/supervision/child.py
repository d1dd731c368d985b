"""The supervised processes' entry: `run_and_exit` with a role's arguments, in a process
the supervisor forked (`shardq.processes.supervision.forked`), or by hand as
``python -m shardq.processes.supervision.child ROLE ...``.

The supervisor builds every child's arguments with `child_argv` and the child reads them
back with `parse` (argparse, named options), so the two cannot drift apart::

    coordinator --run-dir=D --state-dir=S --shards=N --segment-bytes=B
    shard INDEX --run-dir=D --shards=N --server-id=X [--events-dir=E]
                [--wal-dir=W --segment-bytes=B --fsync-ms=MS]
    serving process --listen-fd=FD --run-dir=D --shards=N --max-job-size=Z
             [--index=I --serving=N] [--ready-fd=FD] [--draining]
             [--host=INDEX SHARD-OPTIONS]
    metrics --listen-fd=FD --run-dir=D --shards=N --serving=N --roles=R1,R2,...
            [--no-serving-stats]

A shard's options (and a hosted shard's) include ``--metrics`` when the metrics endpoint is
on: the shard then keeps the histograms it serves (engine/timing.py).

Every role also takes ``--verbose=N`` (the config's `-V` count, for `shardq.log.setup`) and
``--tubes=JSON`` (the per-tube policies: shards, and the Kestrel front-end for fanout; a
SIGHUP's live arguments carry them to every child started later).
A child is named after its role label (``/proc/PID/comm``: "sq shard 1"); `role_of_pid`
reads it back (the tests and tools find processes that way).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import logging
import os
import resource
import signal
import sys
from collections.abc import Callable, Sequence

from shardq.cluster.routing import ROUTINGS, SPREAD
from shardq.config.values import DEFAULT_MAX_OUTPUT_BYTES
from shardq.log import FORMATS, LEVEL_NAMES
from shardq.log import setup as setup_logging
from shardq.processes.common import live, memreport
from shardq.processes.common.door import Gate, make_gate
from shardq.processes.common.procname import label_of_comm
from shardq.protocol.replies import YAML_STYLES, set_yaml_style

MODULE = "shardq.processes.supervision.child"
ROLES = ("coordinator", "shard", "serving", "kestrel", "workq", "metrics")
PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)


def die_with_parent() -> None:
    """Linux: get SIGTERM when the supervisor dies, even by SIGKILL, so no child is orphaned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(os.environ.get("SHARDQ_SUPERVISOR_PID", os.getppid())):
        sys.exit(0)  # the supervisor died before prctl took effect


#: Cyclic-GC thresholds of the server processes. Every job is a tracked object, so with
#: Python's default (700, 10, 10) the young collections run every few hundred commands and
#: the middle one re-walks everything recently put; measured with `shardq bench -w put -c 50
#: --pipeline 16 -P 2`: 32-44k ops/s with the default, 62-64k with these (docs/BENCHMARKS.md).
GC_THRESHOLDS = (20_000, 20, 10)


def tune_gc() -> None:
    """Collect less often, and never walk what exists at start-up (modules, config); the
    supervisor forks with collection off (`preload`), so turn it on again."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()
    gc.enable()


# ---------------------------------------------------------------------- the command line


def child_argv(role: str, *positional: object, **options: object) -> list[str]:
    """The arguments of a child: ``ROLE POSITIONAL...`` then ``--name=value`` for each
    option (``_`` becomes ``-``); an option that is None or False is left out, one that is
    True is a bare flag. ``=`` keeps a value that starts
    with ``-`` a value."""
    argv = [role, *map(str, positional)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        argv.append(flag if value is True else f"{flag}={value}")
    return argv


def role_of_pid(pid: int) -> str | None:
    """'coordinator', 'serving' (or 'serving process <i>' with several serving processes) or
    'shard <i>' for a live child of a shardq server; None for any other process."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return label_of_comm(f.read().rstrip("\n"))
    except OSError:
        return None


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", required=True, help="where the ipc sockets live")
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--verbose", type=int, default=0, help="-V count: 0, 1 or 2")
    parser.add_argument("--log-level", default="", choices=(*LEVEL_NAMES, ""), help="'': -V")
    parser.add_argument("--log-format", default="text", choices=FORMATS)
    parser.add_argument("--stats-yaml", default="plain", choices=YAML_STYLES)
    parser.add_argument("--tubes", default="", help="per-tube policies, JSON ('': none)")


def _add_connection_limits(parser: argparse.ArgumentParser) -> None:
    """Who may come in, how much it may leave unread (reloadable: processes/common/live.py): every
    door takes them, and the coordinator (`stats` shows the limit-* keys when one is set)."""
    parser.add_argument("--max-connections", type=int, default=0, help="0: no limit")
    parser.add_argument("--max-output-bytes", type=int, default=DEFAULT_MAX_OUTPUT_BYTES)
    parser.add_argument("--allow", default="", help="networks, comma-separated; '': any")


def _add_door(parser: argparse.ArgumentParser) -> None:
    """What every listening door takes (common/door.py): who may come in, how many, TLS."""
    _add_connection_limits(parser)
    parser.add_argument("--tls-cert", default=None, help="PEM certificate chain [no TLS]")
    parser.add_argument("--tls-key", default=None, help="PEM private key")
    parser.add_argument("--tls-client-ca", default=None, help="clients must be signed by")
    parser.add_argument("--tls-handshake-timeout", type=float, default=5.0, help="seconds")


def door_gate(args: argparse.Namespace, cap: int = 0) -> Gate:
    """The door's `Gate` from its options (`cap`: the door's own connection bound)."""
    cert, key, ca = args.tls_cert, args.tls_key, args.tls_client_ca
    return make_gate(args.allow, args.max_connections, cert, key, ca, cap)


def _add_shard_store(parser: argparse.ArgumentParser) -> None:
    """What a shard keeps besides its place: event log, server name, write-ahead log."""
    parser.add_argument("--events-dir", default="", help="job event log directory [off]")
    parser.add_argument("--server-id", default="", help="this server's name in event logs")
    parser.add_argument("--wal-dir", default=None, help="write-ahead log directory [none]")
    parser.add_argument("--segment-bytes", type=int, default=0)
    parser.add_argument("--fsync-ms", type=int, default=-1, help="-1: never fsync")
    parser.add_argument("--metrics", action="store_true", help="keep the metrics histograms")
    parser.add_argument(
        "--settle-from", default="", help="restarted: serving processes to wait for"
    )


@functools.cache
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    roles = top.add_subparsers(dest="role", required=True)
    coordinator = roles.add_parser("coordinator")
    _add_common(coordinator)
    coordinator.add_argument("--state-dir", required=True, help="where the id state lives")
    coordinator.add_argument("--segment-bytes", type=int, required=True)
    _add_connection_limits(coordinator)  # stats shows the limit-* keys when one is set
    shard = roles.add_parser("shard")
    shard.add_argument("index", type=int)
    _add_common(shard)
    _add_shard_store(shard)
    serving_proc = roles.add_parser("serving")
    _add_common(serving_proc)
    serving_proc.add_argument("--listen-fd", type=int, required=True)
    serving_proc.add_argument("--max-job-size", type=int, required=True)
    serving_proc.add_argument("--poll-us", type=int, default=100, help="0: never poll")
    _add_door(serving_proc)
    serving_proc.add_argument("--ready-fd", type=int, default=-1, help="-1: nobody waits")
    serving_proc.add_argument("--draining", action="store_true")
    serving_proc.add_argument("--host", type=int, default=None, metavar="INDEX")
    serving_proc.add_argument("--index", type=int, default=0, help="which serving process")
    serving_proc.add_argument("--serving", type=int, default=1, help="how many serving processes")
    serving_proc.add_argument("--private-fd", type=int, default=-1, help="the run dir's listener")
    serving_proc.add_argument("--routing", default=SPREAD, choices=ROUTINGS, help="tube placement")
    _add_shard_store(serving_proc)  # of the hosted shard
    metrics = roles.add_parser("metrics")
    _add_common(metrics)
    metrics.add_argument("--listen-fd", type=int, required=True, help="the HTTP socket")
    metrics.add_argument("--serving", type=int, default=1, help="how many serving processes")
    metrics.add_argument("--roles", required=True, help="role labels that must run, by commas")
    _add_door(metrics)  # --tls-cert, --tls-key: HTTPS [plain HTTP]
    metrics.add_argument(
        "--no-serving-stats",
        action="store_true",
        help="the serving processes host no shard: their counters are not in its stats",
    )
    kestrel = roles.add_parser("kestrel")
    _add_common(kestrel)
    kestrel.add_argument("--listen-fd", type=int, required=True)
    kestrel.add_argument("--backend", required=True, help="the serving processes' unix socket")
    kestrel.add_argument("--max-job-size", type=int, required=True)
    kestrel.add_argument("--admin", action="store_true", help="flush_all, reload, shutdown")
    _add_door(kestrel)
    kestrel.add_argument("--max-jobs", type=int, default=0)
    kestrel.add_argument("--max-memory", type=int, default=0)
    kestrel.add_argument("--journal", action="store_true", help="the server keeps a log (-b)")
    kestrel.add_argument("--journal-dir", help="keep the expiry journal here (the -b directory)")
    kestrel.add_argument("--sync-journal", action="store_true", help="fsync before answering")
    workq = roles.add_parser("workq")
    _add_common(workq)
    workq.add_argument("--listen-fd", type=int, required=True)
    workq.add_argument("--backend", required=True, help="the serving processes' unix socket")
    _add_door(workq)
    workq.add_argument("--journal-dir", help="keep the Workq journal here (the -b directory)")
    workq.add_argument("--sync-journal", action="store_true", help="fsync before answering")
    workq.add_argument("--max-memory", type=int, default=0, help="the registry's bound")
    return top


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return parser().parse_args(list(argv))


def wal_args(args: argparse.Namespace) -> list[str]:
    """[WAL_DIR, SEGMENT_BYTES, FSYNC_MS] as `shard.process.open_core` takes them; [] if no log."""
    if args.wal_dir is None:
        return []
    return [args.wal_dir, str(args.segment_bytes), str(args.fsync_ms)]


def role_label(args: argparse.Namespace) -> str:
    if args.role == "shard" or (args.role == "serving" and args.serving > 1):
        return f"{args.role} {args.index}"
    return str(args.role)


# ---------------------------------------------------------------------- the roles


def run_coordinator(args: argparse.Namespace) -> None:
    from shardq.processes.coordinator import main as coordinator_main

    limited = live.limits_set(args.max_connections, args.max_output_bytes, args.allow)
    coordinator_main(args.run_dir, args.state_dir, args.shards, args.segment_bytes, limited)


def run_shard(args: argparse.Namespace) -> None:
    from shardq.processes.shard.process import main as shard_main

    shard_main(
        args.index,
        args.shards,
        args.run_dir,
        args.events_dir,
        args.server_id,
        wal_args(args),
        args.settle_from,
        args.metrics,
        args.tubes,
    )


def run_serving(args: argparse.Namespace) -> None:
    from shardq.processes.serving import main as serving_main
    from shardq.processes.shard.process import open_core

    tls = door_gate(args).tls
    hosted = None
    if args.host is not None:
        store = (args.events_dir, args.server_id, wal_args(args), args.settle_from)
        hosted = open_core(args.host, args.shards, *store, args.metrics, args.tubes, args.run_dir)
    serving_main(
        args.listen_fd,
        args.run_dir,
        args.shards,
        args.max_job_size,
        args.ready_fd,
        args.draining,
        hosted,
        args.poll_us,
        args.index,
        args.serving,
        args.max_connections,
        args.max_output_bytes,
        tuple(n for n in args.allow.split(",") if n),
        tls,
        args.private_fd,
        args.routing,
        args.tls_handshake_timeout,
    )


def run_kestrel(args: argparse.Namespace) -> None:
    from shardq.processes.frontends.kestrel import main as kestrel_main
    from shardq.processes.frontends.kestrel.policy_config import server_config

    kestrel_main(
        args.listen_fd,
        args.backend,
        args.max_job_size,
        args.max_output_bytes,
        server_config(
            args.max_jobs, args.max_memory, args.max_job_size, args.journal, args.sync_journal
        ),
        os.getppid(),
        args.journal_dir,
        args.sync_journal,
        args.tubes,
        door_gate(args),
        args.admin,
    )


def run_workq(args: argparse.Namespace) -> None:
    from shardq.processes.frontends.workq import main as workq_main

    workq_main(
        args.listen_fd,
        args.backend,
        args.max_output_bytes,
        args.journal_dir,
        args.sync_journal,
        args.max_memory,
        door_gate(args),
    )


def run_metrics(args: argparse.Namespace) -> None:
    from shardq.processes.metrics.http import MAX_OPEN
    from shardq.processes.metrics.process import main as metrics_main

    metrics_main(
        args.listen_fd,
        args.run_dir,
        args.shards,
        args.serving,
        args.roles.split(","),
        not args.no_serving_stats,
        door_gate(args, cap=MAX_OPEN),
    )


RUNNERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "coordinator": run_coordinator,
    "shard": run_shard,
    "serving": run_serving,
    "metrics": run_metrics,
    "kestrel": run_kestrel,
    "workq": run_workq,
}


def raise_fd_limit() -> None:
    """Open-file soft limit up to the hard limit (often 1,024 of 524,288): a serving
    process holds one descriptor per client besides its ZeroMQ sockets, and libzmq aborts
    the process when it cannot get one for its own use."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)


def main(argv: Sequence[str]) -> None:
    die_with_parent()
    args = parse(argv)
    setup_logging(role_label(args), args.verbose, args.log_level or None, args.log_format)
    raise_fd_limit()
    log.info("started (pid %d)", os.getpid())
    log.debug("command line: %s", " ".join(argv))
    tune_gc()
    set_yaml_style(args.stats_yaml)
    live.listen(role_label(args), args.run_dir)
    memreport.listen(role_label(args), args.run_dir)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})  # blocked by the supervisor
    if args.role != "serving":
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    RUNNERS[args.role](args)


def run_and_exit(argv: Sequence[str]) -> None:
    """Run a role, then leave with os._exit: each role has already closed its sockets and
    synced its log in its own `finally`, and interpreter shutdown (ZeroMQ's context
    termination among it) must not be able to keep a stopped process alive."""
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            log.error("%s", e.code)
    except BaseException:
        log.exception("stopped by an unexpected error")
        code = 1
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    run_and_exit(sys.argv[1:])
