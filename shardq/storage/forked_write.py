"""A file written whole by a forked child while the process goes on: compaction without a
stall.

Compacting a shard's log or rewriting a front-end's journal writes every live record. Done
in the process, that stalled every one of its clients for the whole write: 6.2 s for
1,000,000 jobs on this project's 2-core machine, the bunqueue door's journal of 100,000
jobs 1.3 s (docs/BENCHMARKS.md, "Compaction in a forked child"). Instead the
process forks: the child holds the memory as it was at the fork (copy-on-write), makes the
records from it, writes them to a temporary file, syncs it and exits; the parent goes on
serving, and looks at each turn whether the child is done (`poll`), and then puts the file
in place itself (a rename, which only the parent does, so that a child left running by a
parent that died renames nothing).

The child is a bare worker: it runs nothing of the process's own (its signal handlers go
back to the defaults before a signal can reach it, its descriptors but the file are
closed at once, so a peer of a parent that dies sees the parent's sockets close then and
not when the child ends), is killed when its parent dies (PR_SET_PDEATHSIG), is named
``sq compaction`` in ``ps``, runs at a lower priority than the serving processes
(`NICENESS`), and always leaves through ``os._exit``. Cost: the fork (the page tables:
≈ 8 ms for a process of 215 MiB), and the pages the parent changes while the child
writes are copied (at most the parent's size again, for as long as the write takes).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Callable, Iterable

#: the signals whose handlers a child must not run (the parent's Python handlers)
CHILD_DEFAULTS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
NICENESS = 10  #: the child yields the cores to the serving processes
OUT_FD = 3  #: the child's file, after every other descriptor is closed
NAME = "sq compaction"  #: the child's name (/proc/PID/comm)
PR_SET_PDEATHSIG = 1  #: prctl option: the signal a process gets when its parent dies


def _child(path: str, chunks: Callable[[], Iterable[list[bytes]]], parent: int) -> int:
    """In the child: write the file and sync it; its exit status."""
    for signum in CHILD_DEFAULTS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_DEFAULTS)
    import ctypes  # here: only a child needs it (every start would pay for it)

    with contextlib.suppress(OSError, AttributeError):  # Linux: dies with its parent
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        return 1  # the parent died before prctl took effect
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write(NAME)  # what ps and top show for it
    gc.disable()  # nothing of the parent's is collected (or finalized) here
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a file of that name another child may still write: not this one
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    if fd != OUT_FD:
        os.dup2(fd, OUT_FD)
        os.close(fd)
    os.closerange(OUT_FD + 1, os.sysconf("SC_OPEN_MAX"))
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    offset = 0
    for parts in chunks():
        size = sum(map(len, parts))
        done = os.pwritev(OUT_FD, parts, offset)
        if done < size:  # a short write (a signal, a huge batch): the rest one at a time
            rest = memoryview(b"".join(parts))[done:]
            while rest:
                n = os.pwrite(OUT_FD, rest, offset + done)
                if n == 0:
                    return 1
                rest, done = rest[n:], done + n
        offset += size
    os.fsync(OUT_FD)
    return 0


class ForkedWrite:
    """A file being written by a forked child: `poll` until it says how it went."""

    __slots__ = ("path", "pid", "result")

    def __init__(self, path: str, chunks: Callable[[], Iterable[list[bytes]]]) -> None:
        """Fork a child that writes the file at `path` (made anew) with what `chunks`
        gives it, called in the child: lists of buffers, each at most IOV_MAX long.
        OSError: the fork failed (no memory, too many processes)."""
        self.path = path
        self.result: bool | None = None
        signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_DEFAULTS)  # until the child's reset
        try:
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    status = _child(path, chunks, parent)
                except BaseException as e:  # said on the process's stderr, as its log is
                    with contextlib.suppress(OSError):
                        os.write(2, f"shardq: writing {path} in a child: {e!r}\n".encode())
                finally:
                    os._exit(status)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_DEFAULTS)
        self.pid = pid

    def poll(self, block: bool = False) -> bool | None:
        """None while the child writes; then True (the file is whole and synced) or False
        (it failed, and the file is gone). `block`: wait for the child to end."""
        if self.result is None:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            if pid == 0:
                return None
            self.result = os.waitstatus_to_exitcode(status) == 0
            if not self.result:
                self._remove()
        return self.result

    def abandon(self) -> None:
        """Stop the child (if it still runs) and remove the file."""
        if self.result is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.result = False
        self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
