"""Entry point of the supervised processes: `python -m shardq.child ROLE ARGS...`."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

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


def main(argv: list[str]) -> None:
    die_with_parent()
    role, args = argv[0], argv[1:]
    if role != "acceptor":
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    if role == "shard":
        from shardq.shard import main as run

        run(int(args[0]), int(args[1]), args[2], args[3], args[4], args[5:])
    elif role == "coordinator":
        from shardq.coordinator import main as run

        run(args[0], args[1], int(args[2]), int(args[3]))
    elif role == "acceptor":
        from shardq.acceptor import main as run

        run(
            int(args[0]),
            args[1],
            int(args[2]),
            int(args[3]),
            int(args[4]),
            "--draining" in args[5:],
        )
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
