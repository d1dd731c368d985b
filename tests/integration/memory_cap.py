"""Capping one process's address space (`prlimit --as`) for the out-of-memory tests, and
the raw beanstalk exchanges they share."""

from __future__ import annotations

import shutil
import socket
import subprocess

from helpers import read_replies, send

HEADROOM_KIB = 40 * 1024  #: address space allowed above what the process maps now
BODY = b"x" * 60_000  #: a put's body that fills memory


def vm_size_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize"))


def cap_address_space(pid: int, kib: int | str) -> None:
    """The soft limit (the one enforced; raising it back needs no privilege)."""
    prlimit = shutil.which("prlimit")
    assert prlimit is not None, "prlimit (util-linux) is needed"
    cap = kib if isinstance(kib, str) else kib * 1024
    subprocess.run([prlimit, f"--pid={pid}", f"--as={cap}:"], check=True)


def cap_above_now(pid: int, headroom_kib: int = HEADROOM_KIB) -> None:
    """Cap `pid` at what it maps now plus `headroom_kib`."""
    cap_address_space(pid, vm_size_kib(pid) + headroom_kib)


def ask(sock: socket.socket, data: bytes, n: int = 1) -> list[bytes]:
    send(sock, data)
    return read_replies(sock, n)


def ready_jobs(sock: socket.socket, tube: str = "default") -> int:
    [reply] = ask(sock, f"stats-tube {tube}\r\n".encode())
    return int(reply.split(b"current-jobs-ready: ")[1].split(b"\n")[0])


def put_small(sock: socket.socket, n: int = 50) -> None:
    """`n` puts of 5 bytes into the used tube, every one inserted."""
    replies = ask(sock, b"put 0 0 60 5\r\nhello\r\n" * n, n)
    assert all(r.startswith(b"INSERTED") for r in replies), replies


def put_until_refused(sock: socket.socket, body: bytes = BODY) -> int:
    """Puts of `body` into the used tube until one is refused (at most 180 MB of 60 KB
    bodies: far past any cap here), which must be OUT_OF_MEMORY; how many were inserted."""
    inserted = 0
    for _ in range(3000):
        [outcome] = ask(sock, b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
        if not outcome.startswith(b"INSERTED"):
            break
        inserted += 1
    assert outcome == b"OUT_OF_MEMORY\r\n", outcome
    return inserted
