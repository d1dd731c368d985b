"""Paths of the unix sockets in the run directory, whatever its length.

A unix socket's address holds at most 107 bytes, and a run directory may be deeper than
that leaves room for (`--run-dir` under a long home, a test's temporary directory). Such a
socket is bound and reached through ``/proc/self/fd/N/NAME``, N being a descriptor this
process holds on the run directory: the kernel resolves it to the same file, and the
address stays short. Each process opens its own descriptor (a forked child closes what it
was not handed), once.
"""

from __future__ import annotations

import os

MAX_ADDRESS = 107  # sizeof(sun_path) - 1 on Linux

_dir_fds: dict[tuple[int, str], int] = {}


def socket_path(path: str) -> str:
    """The address to bind or connect the unix socket at `path` by."""
    if len(os.fsencode(path)) <= MAX_ADDRESS or not os.path.isdir("/proc/self/fd"):
        return path
    directory, name = os.path.split(path)
    return f"/proc/self/fd/{dir_fd(directory)}/{name}"


def link_path(run_dir: str, name: str) -> str:
    """The address of the socket `name` of `run_dir` that the processes' links use
    (common/links.py: "shard-N", "coordinator")."""
    return socket_path(os.path.join(run_dir, name))


def dir_fd(run_dir: str) -> int:
    """This process's descriptor on `run_dir` (opened on first use; closed on exec)."""
    key = (os.getpid(), os.path.abspath(run_dir))
    fd = _dir_fds.get(key)
    if fd is None:
        fd = _dir_fds[key] = os.open(key[1], os.O_PATH | os.O_DIRECTORY)
    return fd
