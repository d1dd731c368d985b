"""Process names, as postgres and nginx give them. The supervisor is ``shardq`` (or
``shardqd``) in ``/proc/PID/comm``, so ``pidof shardq``, ``pgrep shardq`` and ``top`` find it
as they find beanstalkd, and its command line reads ``shardq: supervisor 127.0.0.1:11300``;
each child is named after its role, ``sq shard 3`` in comm (so ``pgrep shardq`` finds only
the supervisor, and the tests and tools read a child's role back from it) and
``shardq: shard 3`` as its command line (setproctitle: the supervisor's own arguments, 2 KB
of JSON across its exec, are not what a user should read in ``ps``)."""

from __future__ import annotations

import contextlib
import ctypes

PR_SET_NAME = 15  #: prctl option: the thread's name, /proc/PID/comm (15 bytes and a NUL)
NAME_PREFIX = "sq "  #: comm of a child: "sq coordinator", "sq serving 1", "sq shard 3"
COMM_BYTES = 15


def comm_name(label: str) -> str:
    """The name a child with role `label` ('shard 3') gets, cut to what the kernel keeps."""
    return (NAME_PREFIX + label)[:COMM_BYTES]


def label_of_comm(comm: str) -> str | None:
    """The role label back from a process name; None for a process that is not a child."""
    return comm[len(NAME_PREFIX) :] if comm.startswith(NAME_PREFIX) else None


def set_name(name: str) -> None:
    """Name this process (Linux; elsewhere nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:COMM_BYTES]), 0, 0, 0)


def set_title(title: str) -> None:
    """This process's command line as ``ps`` and /proc/PID/cmdline show it; its name (comm)
    stays as it was (setproctitle sets both)."""
    try:
        import setproctitle
    except ImportError:  # a dependency; without it the command line stays as it was
        return
    try:
        with open("/proc/self/comm") as f:
            name: str | None = f.read().rstrip("\n")
    except OSError:  # not Linux
        name = None
    setproctitle.setproctitle(title)
    if name is not None:
        set_name(name)
