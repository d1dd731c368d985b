"""The epoll loop of a protocol front-end process: its clients in, beanstalk out.

One loop owns the front-end's listening socket, every client and, for each, a private
beanstalk connection to the server itself over the serving processes' private unix socket
(``RUN_DIR/beanstalk.sock``: no TLS, no allow-list, since only this server's user can open
the run directory). Each client's commands run one at a time as tasks (session.py, run by
tasks.py's methods); a task's beanstalk lines go out as one write, and its replies come
back in order. Its clients
pass the door's `Gate` (processes/common/door.py) as the beanstalk port's do: the allow-list,
``limits.max_connections`` and TLS (``tls.*``).

A front-end (Kestrel, Workq) subclasses `FrontendLoop` and says (hooks.py): how a session
is made (`new_session`), how its next command becomes a task (`next_task`), what a client
is told when the server is gone (`UNAVAILABLE`), a command failed (`internal_error`) or
memory was short for it (`OUT_OF_MEMORY`), and its own timers (`housekeeping`,
`next_due`).

Memory is bounded per client: unparsed input stops being read past `max_input`, and a
client that does not read its replies is closed past `max_output_bytes`, as on the
beanstalk side. Out of memory (processes/common/outofmemory.py), a command that memory was short
for is answered `OUT_OF_MEMORY` and the next goes on (a block the parser could not keep is
dropped as it arrives, as a too large one); input that could not be kept at all ends the
connection after that answer, its stream out of step; every other client goes on.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import time
from collections import Counter

from shardq.processes.common import lifeline, live, wakeup
from shardq.processes.common.door import Gate, accept_next, receive, send_some
from shardq.processes.common.sockpath import socket_path
from shardq.processes.frontends import tasks
from shardq.processes.frontends.hooks import Hooks
from shardq.processes.frontends.session import CLOSED, CLOSING, Session
from shardq.protocol.reader import ReplyError

RECV_BYTES = 256 * 1024
CLIENT, BACKEND = 1, 2  #: what a registered socket is to its session

log = logging.getLogger(__name__)


class FrontendLoop(Hooks):
    # running the sessions' commands (tasks.py), as methods
    pump = tasks.pump
    start = tasks.start
    advance = tasks.advance
    out_of_memory = tasks.out_of_memory
    answer = tasks.answer
    wake = tasks.wake

    def __init__(
        self, listen_fd: int, backend_path: str, max_input: int, max_output_bytes: int
    ) -> None:
        self.listener = socket.socket(fileno=listen_fd)
        self.listener.setblocking(False)
        self.backend_path = backend_path
        self.max_input = max_input
        self.max_output = max_output_bytes
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.sessions: dict[int, Session] = {}
        self.ids = itertools.count(1)
        self.sleepers: list[tuple[float, int, Session]] = []
        self.counters: Counter[str] = Counter()
        self.internal = 0  # sessions of the front-end's own (no client)
        #: sessions whose answers wait for this turn's journal fsync (group commit)
        self.held: set[Session] = set()
        self.rbuf = bytearray(RECV_BYTES)
        self.gate = Gate()  # who may come in (allow, max_connections, TLS): main() sets it
        live.on_change(self.take_live)

    def take_live(self, settings: live.Live) -> None:
        """SIGHUP: the door's allow-list and limit, and the bound on unread replies."""
        self.gate.take_live(settings)
        self.max_output = settings.max_output_bytes

    # ------------------------------------------------------------------ sessions

    def connect_backend(self) -> socket.socket:
        backend = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            backend.connect(socket_path(self.backend_path))
        except OSError:
            backend.close()
            raise
        backend.setblocking(False)
        return backend

    def accept(self) -> None:
        while (waiting := accept_next(self.listener)) is not None:
            sock = self.gate.admit(waiting, self.clients())
            if sock is None:
                continue
            try:
                backend = self.connect_backend()
            except OSError as e:
                log.warning("cannot reach the server at %s: %s", self.backend_path, e)
                with contextlib.suppress(OSError):
                    sock.send(self.UNAVAILABLE)
                sock.close()
                continue
            s = self.new_session(next(self.ids), sock, backend)
            self.sessions[s.id] = s
            self.counters["total_connections"] += 1
            self.interest(s)

    def internal_session(self) -> Session | None:
        """A session of the front-end's own, for work no client asked for (None: the server
        cannot be reached now)."""
        try:
            backend = self.connect_backend()
        except OSError:
            return None
        s = self.new_session(next(self.ids), None, backend)
        self.sessions[s.id] = s
        self.internal += 1
        self.interest(s)
        return s

    def clients(self) -> int:
        """Clients connected now (the front-end's own sessions are none)."""
        return len(self.sessions) - self.internal

    def interest(self, s: Session) -> None:
        """Register what each of the session's sockets waits for (epoll_ctl on a change):
        the client readable unless its unparsed input is past the bound, writable while
        replies wait; the backend always readable, writable while lines wait."""
        if s.phase is CLOSED:
            return
        if s.sock is not None:
            full = s.input_lost or s.parser.buffered > self.max_input
            want = (0 if full else selectors.EVENT_READ) | (selectors.EVENT_WRITE if s.out else 0)
            s.events = self.set_events(s.sock, s.events, want, (CLIENT, s))
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if s.bout else 0)
        s.bevents = self.set_events(s.backend, s.bevents, want, (BACKEND, s))

    def set_events(self, sock: socket.socket, had: int, want: int, data: object) -> int:
        if want == had:
            return had
        if not had:
            self.sel.register(sock, want, data)
        elif not want:
            self.sel.unregister(sock)
        else:
            self.sel.modify(sock, want, data)
        return want

    def close(self, s: Session) -> None:
        """Close both sockets: the server releases the jobs this session held reserved."""
        if s.phase is CLOSED:
            return
        s.step("close")
        self.sessions.pop(s.id, None)
        if s.sock is None:
            self.internal -= 1
        for sock, events in ((s.sock, s.events), (s.backend, s.bevents)):
            if sock is None:
                continue
            if events:
                self.sel.unregister(sock)
            sock.close()
        s.task = None
        self.closed(s)

    # ------------------------------------------------------------------ socket events

    def read_client(self, s: Session) -> None:
        assert s.sock is not None  # an internal session has no client to read
        try:  # with TLS, the first reads go on with its handshake (SSL_read does it)
            n = receive(s.sock, self.rbuf, s.parser.feed)
        except OSError:
            self.close(s)
            return
        except MemoryError:
            s.lose_input()
            self.pump(s)
            return
        if n is None:
            return
        if not n:
            s.eof = True  # what it sent before is still answered, then it is closed
        self.counters["bytes_read"] += n
        self.pump(s)

    def read_backend(self, s: Session) -> None:
        try:
            n = s.backend.recv_into(self.rbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0
        if not n:
            self.backend_lost(s)
            return
        s.reader.feed(memoryview(self.rbuf)[:n])
        try:
            while s.expect and (reply := s.reader.next_reply()) is not None:
                s.got.append(reply)
                if len(s.got) == s.expect:
                    replies, s.got, s.expect = s.got, [], 0
                    s.step("replied")
                    self.advance(s, replies)
        except ReplyError as e:
            log.error("session %d: %s", s.id, e)
            self.backend_lost(s)
            return
        self.pump(s)

    def backend_lost(self, s: Session) -> None:
        """The server closed our connection (a serving process restarted, a connection
        limit): what this client held reserved went back to its tubes, so the client is
        told and closed."""
        if s.task is not None and s.sock is not None:
            self.answer(s, self.UNAVAILABLE)
        s.task = None
        if s.phase is not CLOSED:
            s.step("finish")
            self.flush(s)

    def write_backend(self, s: Session) -> None:
        if s.phase is CLOSED:
            return
        if not send_some(s.backend, s.bout):
            self.backend_lost(s)
            return
        self.interest(s)

    def flush(self, s: Session) -> None:
        """Write what the client may have; close a finished session once it is written."""
        if s.phase is CLOSED:
            return
        if s.out and self.unsynced():  # after this turn's fsync
            self.held.add(s)
            return
        if s.out and s.sock is not None and not send_some(s.sock, s.out):
            self.close(s)
            return
        if s.phase is CLOSING and not s.out:
            self.close(s)
            return
        self.interest(s)

    # ------------------------------------------------------------------ timers

    def wake_sleepers(self) -> None:
        now = time.monotonic()
        while self.sleepers and self.sleepers[0][0] <= now:
            at, _id, s = heapq.heappop(self.sleepers)
            if s.phase is CLOSED or s.task is None or at != s.wake_at:
                continue  # gone, or woken early (`wake`): a stale entry
            s.step("woken")
            self.advance(s, [])
            self.pump(s)

    def timeout(self) -> float:
        timeout = lifeline.CHECK_EVERY_S
        if self.sleepers:
            timeout = min(timeout, max(0.0, self.sleepers[0][0] - time.monotonic()))
        due = self.next_due()
        if due is not None:
            timeout = min(timeout, max(0.0, due))
        return timeout

    # ------------------------------------------------------------------ the loop

    def turn(self) -> None:
        for key, mask in self.sel.select(self.timeout()):
            if key.data is None:
                self.accept()
                continue
            if key.data is wakeup.SIGNALLED:
                wakeup.drain(key.fd)
                continue
            kind, s = key.data
            if s.phase is CLOSED:
                continue
            if kind == CLIENT:
                if mask & selectors.EVENT_WRITE:
                    self.flush(s)
                if mask & selectors.EVENT_READ and s.phase is not CLOSED:
                    self.read_client(s)
            else:
                if mask & selectors.EVENT_WRITE:
                    self.write_backend(s)
                if mask & selectors.EVENT_READ and s.phase is not CLOSED:
                    self.read_backend(s)
        self.wake_sleepers()
        self.housekeeping()
        if self.unsynced():
            self.sync()
        held, self.held = self.held, set()
        for s in held:
            self.flush(s)

    def serve_forever(self) -> None:
        try:
            lifeline.run(self.sel, self.turn)
        finally:
            for s in list(self.sessions.values()):
                self.close(s)
            self.listener.close()
