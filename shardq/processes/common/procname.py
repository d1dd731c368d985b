"""Process names: each child is named after its role in ``/proc/PID/comm`` (what ``ps -o
comm``, ``top`` and ``pgrep`` show), and a role is read back from such a name."""

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
