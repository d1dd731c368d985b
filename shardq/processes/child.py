"""Entry point of the supervised processes: `python -m shardq.processes.child ROLE ARGS...`."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import traceback

PR_SET_PDEATHSIG = 1


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
    """Collect less often, and never walk what exists at start-up (modules, config)."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


def main(argv: list[str]) -> None:
    die_with_parent()
    tune_gc()
    role, args = argv[0], argv[1:]
    if role != "acceptor":
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    if role == "shard":
        from shardq.processes.shard import main as run

        run(int(args[0]), int(args[1]), args[2], args[3], args[4], args[5:])
    elif role == "coordinator":
        from shardq.processes.coordinator import main as run

        run(args[0], args[1], int(args[2]), int(args[3]))
    elif role == "acceptor":
        from shardq.processes.acceptor import main as run
        from shardq.processes.shard import open_core

        rest = [a for a in args[5:] if a != "--draining"]
        hosted = None
        if rest[:1] == ["--host"]:  # --host INDEX EVENTS_DIR SERVER_ID [WAL_DIR SEGMENT FSYNC]
            hosted = open_core(int(rest[1]), int(args[2]), rest[2], rest[3], rest[4:])
        run(
            int(args[0]),
            args[1],
            int(args[2]),
            int(args[3]),
            int(args[4]),
            "--draining" in args[5:],
            hosted,
        )
    else:
        raise SystemExit(f"unknown role {role!r}")


def run_and_exit(argv: list[str]) -> None:
    """Run a role, then leave with os._exit: each role has already closed its sockets and
    synced its log in its own `finally`, and interpreter shutdown (ZeroMQ's context
    termination among it) must not be able to keep a stopped process alive."""
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    run_and_exit(sys.argv[1:])
