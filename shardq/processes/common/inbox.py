"""A ZeroMQ socket's messages, taken so that memory running out loses none.

`sock.recv_multipart()` (and `sock.recv()`) take a message out of libzmq and then copy it
into a bytes object; when that copy fails for want of memory (a put's 60 KB body, in a
process capped with `prlimit --as`), libzmq's message is already closed: the request is
gone and its client waits for an answer that never comes. Seen in CI: a shard process out
of memory logged "out of memory in a turn of the loop" from pyzmq's `_copy_zmq_msg_bytes`,
and a put was never answered.

Here each part is received as a `zmq.Frame` (`copy=False`). pyzmq builds the Frame before
it takes the part, so a MemoryError leaves the part in the socket, and the parts taken so
far are kept (`parts`) until the caller says the message is handled (`taken`): a turn that
ran out of memory finds the same message again in the next. The body is read through the
Frame's buffer, never copied. Two Frames cost less than `recv_multipart` did (3.7 against
6 µs a message, measured on this machine with an inproc ROUTER; two plain copying `recv`s
would be 1.3 µs but lose the message).
"""

from __future__ import annotations

import zmq


class Inbox:
    """The messages of one socket, each as (its first part, its last part's buffer)."""

    __slots__ = ("parts", "sock")

    def __init__(self, sock: zmq.Socket[bytes]) -> None:
        self.sock = sock
        #: the parts of the message at hand (kept across a MemoryError)
        self.parts: list[zmq.Frame] = []

    def peek(self) -> tuple[bytes, memoryview]:
        """The message at hand, received now if there is none: (its first part as bytes,
        the last part's buffer); for a one-part message (a DEALER's) the first part is
        b"". It stays at hand until `taken`. Raises zmq.Again when none is waiting."""
        parts = self.parts
        recv = self.sock.recv
        while not parts or parts[-1].more:
            parts.append(recv(zmq.NOBLOCK, copy=False))
        return (parts[0].bytes if len(parts) > 1 else b""), parts[-1].buffer

    def held(self) -> bool:
        """Whether a message is at hand (taken from the socket, not yet handled): its
        socket's fd will not fire for it again, so a loop must not sleep on it."""
        return bool(self.parts)

    def taken(self) -> None:
        """The message at hand is handled (or kept elsewhere): the next `peek` receives."""
        self.parts.clear()
