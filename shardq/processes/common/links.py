"""Messages between the processes of one server over plain unix stream sockets: the hop of
ZeroMQ's ROUTER and DEALER without their I/O threads.

Measured (docs/BENCHMARKS.md, "A hop without ZeroMQ's threads"): a ZeroMQ round trip between
two processes cost 69–74 µs of CPU and 6–8 context switches here, this 42 µs and 2, because
every ZeroMQ send wakes the sender's own I/O thread, which wakes the receiver's, which
wakes the receiving thread. Here a message is one `send` on the sender's side and one
`recv_into` on the receiver's, in the process's own loop.

A message on the wire is a 4-byte big-endian length and that many bytes. A `Dealer`
connects to a `Router`'s path and sends, as its first message, its name (this server's
`TOKEN` and 8 random bytes, `name()`): the `Router` drops, at that first message, a
connection whose name is not one of its server's (logged), and hands every later message
over with the name, as a ZeroMQ ROUTER does, so replies go back by name.

The token: 16 random bytes drawn when the supervisor imports this module, before it forks
anything, so every process of one server, restarted ones included, holds the same token in
memory and no other process has it (it is in no file and no command line). The run
directory is already private (0700); this also holds against its own user and root.

Each end owns an epoll of its own, and its `fd` is that epoll's: readable while any of its
sockets is, so a loop registers one descriptor per end and it stays the same across
reconnects (level-triggered: an end that still holds input stays readable). A message
stays in the end's buffer until `taken`, and a read lands in room made before it: memory
running out (MemoryError) loses no byte, which stays in the socket. A `Dealer` whose peer
went away tries again after 1 ms, then 2 and 4 ms while it stays away (`retry_at`, which
the loop adds to its sleep, and `retry_due`); it reports each change as `UP` or `DOWN` in
`changes`, in order, and its `fd` is readable meanwhile. While down it takes nothing to
send (ZMQ_IMMEDIATE's rule: no queue for a peer that is not there), unless made with
`keep` (ZeroMQ's default: what is sent meanwhile goes once the peer is there); a peer that
reads too slowly leaves at most `MAX_QUEUED` bytes queued here.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable

LENGTH_BYTES = 4
MAX_MESSAGE = 1 << 30  #: a length beyond this is not a message of this server's: drop the link
MAX_HELLO = 64  #: the first message, a name: a longer one is not from this server
MAX_QUEUED = 64 << 20  #: bytes queued for a slow peer before `send` refuses (Again)
READ_BYTES = 256 << 10  #: a stream's input buffer, and the room it keeps for a read
READ_MIN = 64 << 10  #: less room than this after the input held: make more before reading
#: a buffer grown past this for a large message goes back to READ_BYTES once it is taken;
#: one up to this stays, so the next message as large needs no memory to be read (a process
#: short of memory still takes in its usual answers: the metrics' per-tube pages)
KEEP_BYTES = 4 << 20
RETRY_FIRST_S = 0.001  #: first reconnect after this
RETRY_MAX_S = 0.004  #: the interval doubles up to this
UP, DOWN = "up", "down"
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
#: a peer not there: no socket file yet (ENOENT), nobody listening (ECONNREFUSED), its
#: backlog full (EAGAIN), or gone between the connect and the first write (EPIPE,
#: ECONNRESET: killed with this connection still in its backlog)
_GONE = (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN, errno.EPIPE, errno.ECONNRESET)
#: a connect that fails for want of descriptors or memory here: tried again, as a gone peer
_SHORT = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_LENGTH = struct.Struct(">I")

#: this server's token (see above): the same in every process forked from the supervisor
TOKEN = os.urandom(16)  # what secrets.token_bytes returns, without importing hmac and hashlib
NAME_SUFFIX_BYTES = 8
STRANGERS_LOGGED = 20  #: strangers logged one by one; after that, one line in a thousand

log = logging.getLogger(__name__)


def name() -> bytes:
    """A Dealer's name: this server's token and 8 random bytes (unique per Dealer)."""
    return TOKEN + os.urandom(NAME_SUFFIX_BYTES)


class Again(Exception):
    """The end takes nothing now: its peer is not connected, or reads too slowly."""


def frame(data: bytes | bytearray | memoryview) -> bytes:
    return len(data).to_bytes(LENGTH_BYTES, "big") + data  # bytes, whatever `data` is


class Stream:
    """One connected socket's two directions: whole messages in, bytes queued out.

    Input is read into `buf`, which the stream owns: bytes `start` to `filled` are held and
    not taken yet, the rest is room for the next read."""

    __slots__ = ("sock", "buf", "start", "end", "filled", "outbuf", "view")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.buf = bytearray(READ_BYTES)
        self.start = 0  # where the first message not taken begins in buf
        self.end = 0  # where it ends, once `message` has found it whole
        self.filled = 0  # where the input held ends
        self.outbuf = bytearray()
        self.view: memoryview | None = None  # the message lent out: released before buf moves

    def release(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None

    def room(self) -> None:
        """Room for the rest of a message whose length is known, else READ_MIN bytes of room
        after the input held: made before a read, so a MemoryError changes nothing and
        loses nothing. A buffer grows in steps of READ_MIN (answers of about one size do
        not grow it again and again)."""
        buf, start, filled = self.buf, self.start, self.filled
        held = filled - start
        need = held + READ_MIN
        if held >= LENGTH_BYTES:
            size = LENGTH_BYTES + _LENGTH.unpack_from(buf, start)[0]
            if held < size:
                need = size
        if len(buf) - start >= need:
            return
        self.release()
        if start:  # what is held moves to the front
            buf[:held] = buf[start:filled]  # the same length: buf does not resize
            self.start, self.end, self.filled = 0, max(0, self.end - start), held
        if len(buf) < need:
            buf += bytes(-(-need // READ_MIN) * READ_MIN - len(buf))

    def fill(self) -> bool:
        """Read what the socket holds (one read); False once the peer has closed."""
        self.room()
        try:
            n = self.sock.recv_into(memoryview(self.buf)[self.filled :])
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not n:
            return False
        self.filled += n
        return True

    def message(self, limit: int = MAX_MESSAGE) -> memoryview | None:
        """The first whole message not taken yet, or None (ValueError: a length beyond
        `limit`)."""
        buf, start = self.buf, self.start
        if self.filled - start < LENGTH_BYTES:
            return None
        size = _LENGTH.unpack_from(buf, start)[0]
        if size > limit:
            raise ValueError(f"a message of {size} bytes")
        end = start + LENGTH_BYTES + size
        if self.filled < end:
            return None
        self.release()
        self.end = end
        self.view = view = memoryview(buf)[start + LENGTH_BYTES : end]
        return view

    def take(self) -> None:
        """The message `message` found is handled: drop it (its view is no longer valid)."""
        self.release()
        self.start = self.end
        if self.start == self.filled:
            self.start = self.end = self.filled = 0
            if len(self.buf) > KEEP_BYTES:  # after a very large message: give its room back
                del self.buf[READ_BYTES:]

    def write(self, data: bytes) -> None:
        """Send `data` now if nothing waits before it; queue what the socket did not take
        (OSError: the peer is gone, or memory was short to queue the rest of a message
        already partly sent, which ends the link). A MemoryError sent nothing of it."""
        if not self.outbuf:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent == len(data):
                return
            if sent:
                try:
                    self.outbuf += memoryview(data)[sent:]
                except MemoryError:
                    raise ConnectionError(errno.ENOMEM, "a message cut short") from None
                return
        self.outbuf += data

    def queue(self, poll: select.epoll, data: bytes) -> None:
        """Send one message, or queue it and have `poll` report when the socket takes more
        (OSError: the peer is gone)."""
        had = bool(self.outbuf)
        self.write(frame(data))
        if self.outbuf and not had:
            poll.modify(self.sock.fileno(), _IN | _OUT)

    def writable(self, poll: select.epoll) -> bool:
        """The socket takes more: send what is queued (and stop asking once it is all
        gone); False if the peer is gone."""
        try:
            self.flush()
        except OSError:
            return False
        if not self.outbuf:
            poll.modify(self.sock.fileno(), _IN)
        return True

    def flush(self) -> None:
        """Send what is queued, as far as the socket takes it (OSError: the peer is gone)."""
        while self.outbuf:
            try:
                sent = self.sock.send(self.outbuf)
            except (BlockingIOError, InterruptedError):
                return
            del self.outbuf[:sent]


def retry_due(dealers: Iterable[Dealer], now: float) -> float | None:
    """Connect again each of `dealers` that is down and due at `now` (monotonic s); the
    earliest time one still down is due (None: all are up)."""
    due = None
    for dealer in dealers:
        if dealer.stream is None:
            dealer.retry(now)
            if dealer.stream is None and (due is None or dealer.retry_at < due):
                due = dealer.retry_at
    return due


class Router:
    """The listening end: any number of Dealers of this server, each known by its name."""

    def __init__(self, path: str, token: bytes) -> None:
        self.token = token
        self.poll = select.epoll()
        self.fd = self.poll.fileno()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a socket file a previous life of this process left
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.poll.register(self.listener.fileno(), _IN)
        self.streams: dict[int, Stream] = {}  # fd -> its stream
        self.names: dict[int, bytes] = {}  # fd -> the peer's name, once it said it
        self.by_name: dict[bytes, Stream] = {}
        self.ready: deque[int] = deque()  # fds that may hold a whole message
        self.closing: set[int] = set()  # peers that closed: dropped once their input is read
        self.strangers = 0  # connections dropped at their first message

    def peek(self) -> tuple[bytes, memoryview]:
        """The next message (the peer's name, its bytes); it stays until `taken`. Raises
        Again when none is waiting."""
        while True:
            while self.ready:
                fd = self.ready[0]
                stream = self.streams.get(fd)
                message = None
                if stream is not None:
                    name = self.names.get(fd)
                    try:
                        message = stream.message(MAX_MESSAGE if name else MAX_HELLO)
                    except ValueError:
                        self.drop(fd)
                        continue
                if message is None:
                    self.ready.popleft()
                    if fd in self.closing and fd not in self.ready:
                        self.drop(fd)
                    continue
                if name is None:  # its first message: who it is
                    self.hello(fd, bytes(message))
                    continue
                return name, message
            if not self.collect():
                raise Again

    def taken(self) -> None:
        """The message `peek` returned is handled."""
        self.streams[self.ready[0]].take()

    def held(self) -> bool:
        """A whole message may be at hand (read from the socket, not taken)."""
        return bool(self.ready)

    def send(self, name: bytes, data: bytes) -> None:
        """Queue `data` for the peer `name`; dropped if it has gone (as a ROUTER does). A
        peer that has left more than MAX_QUEUED bytes unread loses its link instead (logged):
        it reconnects and sends again what was not answered, as after a restart, and this
        end holds no more for it than that."""
        stream = self.by_name.get(name)
        if stream is None:
            return
        if len(stream.outbuf) > MAX_QUEUED:
            log.warning("dropped the link of a peer that read nothing of %d bytes", MAX_QUEUED)
            self.drop(stream.sock.fileno())
            return
        try:
            stream.queue(self.poll, data)
        except OSError:  # it closed before its end was read here: as gone
            self.drop(stream.sock.fileno())

    def collect(self) -> bool:
        """Take in what the sockets hold now (no wait); True if any may hold a message, or
        a peer was let in (whose first bytes the next call reads)."""
        accepted = False
        for fd, mask in self.poll.poll(0):
            if fd == self.listener.fileno():
                accepted = self.accept()
                continue
            stream = self.streams.get(fd)
            if stream is None:
                continue
            if mask & _OUT and not stream.writable(self.poll):
                self.drop(fd)
                continue
            if mask & ~_OUT:
                self.ready.append(fd)  # what it sent before it closed is still read
                if not stream.fill():
                    self.gone(fd)
        return bool(self.ready) or accepted

    def accept(self) -> bool:
        """Let in every peer waiting; whether any came."""
        accepted = False
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return accepted
            except OSError:  # out of descriptors: the peer tries again
                return accepted
            self.streams[sock.fileno()] = Stream(sock)
            self.poll.register(sock.fileno(), _IN)
            accepted = True

    def hello(self, fd: int, name: bytes) -> None:
        stream = self.streams[fd]
        stream.take()
        if not name.startswith(self.token):
            self.strangers += 1
            if self.strangers <= STRANGERS_LOGGED or not self.strangers % 1000:
                log.warning(
                    "dropped a message from a socket of another server (%s; %d so far)",
                    name[:32].hex(),
                    self.strangers,
                )
            self.drop(fd)
            return
        self.names[fd] = name
        self.by_name[name] = stream

    def gone(self, fd: int) -> None:
        """The peer closed: stop watching its socket (its last messages may still be read)."""
        stream = self.streams.get(fd)
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self.poll.unregister(fd)
            name = self.names.get(fd)
            if name is not None and self.by_name.get(name) is stream:
                del self.by_name[name]
            self.closing.add(fd)

    def drop(self, fd: int) -> None:
        self.gone(fd)
        self.closing.discard(fd)
        stream = self.streams.pop(fd, None)
        self.names.pop(fd, None)
        if stream is not None:
            stream.sock.close()

    def close(self) -> None:
        for fd in list(self.streams):
            self.drop(fd)
        self.listener.close()
        self.poll.close()


class Dealer:
    """The connecting end: one peer, reached again whenever it comes back."""

    def __init__(self, path: str, name: bytes, keep: bool = False) -> None:
        """`keep`: what is sent while the peer is away waits for it (up to MAX_QUEUED
        bytes), instead of raising Again."""
        self.path = path
        self.name = name
        self.keep = keep
        self.waiting = bytearray()  # messages sent while down (keep)
        self.poll = select.epoll()
        self.fd = self.poll.fileno()
        self.signal_r, self.signal_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.poll.register(self.signal_r, _IN)  # readable while `changes` holds any
        self.stream: Stream | None = None
        #: the stream of a peer that went, while whole messages it sent before it went are
        #: still to be read: DOWN is told once they are, and no reconnect comes before
        self.last: Stream | None = None
        self.changes: deque[str] = deque()
        self.retry_at = 0.0  # monotonic s of the next connect while down (0: up)
        self.retry_s = RETRY_FIRST_S

    def connect(self) -> None:
        """Try to reach the peer now; while it is away, `retry_at` says when to try again."""
        if self.stream is not None:
            return
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as e:
            if e.errno not in _SHORT:
                raise
            self.later()
            return
        try:
            sock.connect(self.path)  # a unix socket connects or fails at once
            stream = Stream(sock)
            stream.write(frame(self.name) + self.waiting)
        except OSError as e:
            sock.close()
            if e.errno not in _GONE and e.errno not in _SHORT:
                raise
            self.later()
            return
        self.stream = stream
        self.waiting.clear()
        self.poll.register(sock.fileno(), _IN | (_OUT if stream.outbuf else 0))
        self.retry_at = 0.0
        self.retry_s = RETRY_FIRST_S
        self.change(UP)

    def later(self) -> None:
        self.retry_at = time.monotonic() + self.retry_s
        self.retry_s = min(2 * self.retry_s, RETRY_MAX_S)

    def retry(self, now: float) -> None:
        """Connect again if it is time to (the loop calls it when `retry_at` has passed)."""
        if self.stream is None and self.last is None and now >= self.retry_at:
            self.connect()

    def send(self, data: bytes) -> None:
        """Queue one message; Again while the peer is away or `MAX_QUEUED` bytes wait."""
        stream = self.stream
        if stream is None:
            if not self.keep or len(self.waiting) > MAX_QUEUED:
                raise Again
            self.waiting += frame(data)
            return
        if len(stream.outbuf) > MAX_QUEUED:
            raise Again
        try:
            stream.queue(self.poll, data)
        except OSError:  # the peer went before its end was read here
            self.lost()
            raise Again from None

    def peek(self) -> memoryview:
        """The next message; it stays until `taken`. Raises Again when none is waiting."""
        for read_first in (False, True):
            if read_first:
                self.collect()
            last = self.last
            if last is not None:  # what a peer that went had sent: before its DOWN
                message = self.message(last)
                if message is not None:
                    return message
                self.last = None
                self.change(DOWN)
                raise Again
            stream = self.stream
            message = None if stream is None else self.message(stream)
            if message is not None:
                return message
        raise Again

    def next_message(self, on_change: Callable[[str], None] | None = None) -> memoryview | None:
        """The next message (it stays until `taken`), or None when none is waiting; each
        change (UP, DOWN) that came before it goes to `on_change` first (dropped without
        one): a loop reads an end that fired with this until None."""
        while True:
            if self.changes:
                for change in self.take_changes():
                    if on_change is not None:
                        on_change(change)
            try:
                return self.peek()
            except Again:
                if not self.changes:  # none lost while reading
                    return None

    def taken(self) -> None:
        stream = self.last if self.last is not None else self.stream
        assert stream is not None
        stream.take()

    def held(self) -> bool:
        """A whole message or a change is at hand."""
        stream = self.last if self.last is not None else self.stream
        return bool(self.changes) or (stream is not None and self.message(stream) is not None)

    def message(self, stream: Stream) -> memoryview | None:
        try:
            return stream.message()
        except ValueError:  # not a message of this server's: start again
            if stream is self.last:
                self.last = None
                self.change(DOWN)
            else:
                self.lost(keep=False)
            return None

    def collect(self) -> None:
        """Take in what the socket holds now, and send what waits to be sent (no wait)."""
        stream = self.stream
        if stream is None:
            return
        for fd, mask in self.poll.poll(0):
            if fd != stream.sock.fileno():
                continue
            if (mask & _OUT and not stream.writable(self.poll)) or (
                mask & ~_OUT and not stream.fill()
            ):
                self.lost()
                return

    def take_changes(self) -> list[str]:
        """UP and DOWN, in the order they happened, since the last call."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.signal_r, 512)
        changes = list(self.changes)
        self.changes.clear()
        return changes

    def change(self, what: str) -> None:
        self.changes.append(what)
        with contextlib.suppress(BlockingIOError):
            os.write(self.signal_w, b"!")

    def lost(self, keep: bool = True) -> None:
        """The peer went away: what it did not take is dropped (its requests are sent again
        by whoever tracks them), and it is tried again soon. The whole messages it sent
        before it went are still read, and DOWN comes after them (`keep`; not for a
        stream that broke the framing)."""
        stream = self.stream
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.poll.unregister(stream.sock.fileno())
        stream.sock.close()
        self.stream = None
        self.retry_at = time.monotonic() + self.retry_s
        if keep and stream.filled > stream.start:
            self.last = stream  # peek tells DOWN once its messages are read
            with contextlib.suppress(BlockingIOError):
                os.write(self.signal_w, b"!")  # readable meanwhile: a loop comes to read them
        else:
            self.change(DOWN)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.sock.close()
            self.stream = None
        os.close(self.signal_r)
        os.close(self.signal_w)
        self.poll.close()
