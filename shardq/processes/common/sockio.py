"""A client socket's reads and writes, as system calls of their own in the compiled build.

`sock.recv_into(buf)` and `sock.send(data)` are method calls that look the method up on
the socket's class, parse their arguments into a buffer, release and take the GIL around
the system call and, for a read, leave the bytes in a buffer that the fast path copies
twice (a slice, then `bytes`): together more instructions than the command they carry
(docs/BENCHMARKS.md, "A client's system calls as C calls"). Compiled, a plain TCP or unix
socket is read and written by its descriptor with the C library's `read` and `write`
(non-blocking sockets: the call never waits, so the GIL is kept), and a read's bytes are
copied once. The pure build, and any socket without a plain descriptor (TLS: `fd` -1),
take the socket's own methods. Errors are the socket methods' own: an `OSError` of the
errno (`BlockingIOError` when the kernel has nothing to give or no room), raised the same
way by both paths.

`fd` is the caller's record of the socket's descriptor (`plain_fd`); it must be -1 once the
socket is closed, or a read could reach whichever socket took the number next
(`Conn.close_socket` does both).
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

# The compiled build's C names (c_read, c_write, errno) come from sockio.pxd, which
# only Cython reads: the pure build never reaches the branches that use them.


def plain_fd(sock: socket.socket) -> int:
    """The descriptor to read and write `sock` by, or -1 where only its methods will do
    (a TLS socket holds bytes of its own between the descriptor and the caller)."""
    return sock.fileno() if type(sock) is socket.socket else -1


def recv_into(sock: socket.socket, fd: int, buf: bytearray) -> int:
    """`sock.recv_into(buf)`: how many bytes arrived (0: end of input)."""
    if not cython.compiled or fd < 0:
        return sock.recv_into(buf)
    return checked(c_read(fd, cython.cast(cython.p_char, buf), len(buf)))  # type: ignore[name-defined]  # noqa: F821


def send(sock: socket.socket, fd: int, data: bytearray) -> int:
    """`sock.send(data)`: how many bytes the kernel took."""
    if not cython.compiled or fd < 0:
        return sock.send(data)
    return checked(c_write(fd, cython.cast(cython.p_char, data), len(data)))  # type: ignore[name-defined]  # noqa: F821


def head(buf: bytearray, n: int) -> bytes:
    """The first `n` bytes of `buf`, copied once."""
    if not cython.compiled:
        return bytes(memoryview(buf)[:n])
    return cython.cast(cython.p_char, buf)[:n]


def checked(n: int) -> int:
    """A system call's result, or its error (-1) raised as the socket methods raise it. An
    interrupted call (a signal) is InterruptedError, which callers take as "not now": the
    socket is still ready, and the next turn reads or writes it again, after the signal is
    handled."""
    if n < 0:
        code = errno  # type: ignore[name-defined]  # noqa: F821
        raise OSError(code, os.strerror(code))
    return n


def drop(out: bytearray, n: int) -> None:
    """`del out[:n]` (compiled: all of it, the common case, as a C resize, without the
    slice object and the generic item deletion)."""
    if cython.compiled and n == len(out):
        PyByteArray_Resize(out, 0)  # type: ignore[name-defined]  # noqa: F821
        return
    del out[:n]


def add(out: bytearray, data: bytes) -> None:
    """`out += data` (compiled: the buffer resized and the bytes copied in C, without the
    generic in-place add)."""
    if not cython.compiled:
        out += data
        return
    n = len(out)
    size = len(data)
    PyByteArray_Resize(out, n + size)  # type: ignore[name-defined]  # noqa: F821
    memcpy(PyByteArray_AS_STRING(out) + n, cython.cast(cython.p_char, data), size)  # type: ignore[name-defined]  # noqa: F821
