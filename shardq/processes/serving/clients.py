"""Client connections: accept, read, run buffered commands in order, write, close."""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import time
from selectors import EVENT_READ, EVENT_WRITE
from typing import TYPE_CHECKING

from shardq.cluster.routing import MAX_SERVING, tube_shard
from shardq.processes.common import sockio
from shardq.processes.common.door import NOT_NOW, is_tls, tls_not_now, turned_away
from shardq.processes.serving import handoff, shedding
from shardq.processes.serving.conn import BUSY, CLOSED, CLOSING, IDLE, PIPING, Conn, CrossReserve
from shardq.processes.serving.handlers import HANDLERS, STAT_KEYS
from shardq.processes.serving.home import can_serve_home, serve_home
from shardq.processes.shard import ops
from shardq.processes.shard.ops import RefArgs
from shardq.protocol import commands as c
from shardq.protocol import proto

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

WRITABLE = EVENT_WRITE  #: (compiled: a C integer, clients.pxd; the global made Python ints)
RECV_BYTES = 256 * 1024
ACCEPT_ALL = 1 << 30  #: one serving process: take every waiting connection at once
ACCEPT_SHARE = 2  #: several: at most this many per turn (see accept)
ACCEPT_PAUSE_S = 0.1  #: out of file descriptors: how long accept() is not tried again
FD_RESERVE = 64  #: descriptors never given to clients (links, the log, handoffs)
#: A connection whose unparsed input passes this (or one largest put, if more) is not
#: read from until its commands have consumed it: as beanstalkd, which stops reading.
INPUT_BYTES = 1 << 20
#: the largest job the server's own front-ends may put, whatever -z says (Workq's 1 MiB
#: payload; each front-end checks its own protocol's limit before it puts)
FRONT_MAX_JOB = 1 << 20
#: A peek joins a connection's pipeline only while fewer than this many commands are in
#: flight, so the replies on their way to it (job bodies) are bounded too (at 128, 60 KB
#: jobs: +34 MiB at most, measured; 512: +96 MiB). Other commands' replies are small.
MAX_PIPED = 128
#: Commands one connection may run in one turn of the loop (the rest runs in the next
#: turns, between the other connections' commands). One read is bounded by RECV_BYTES.
PUMP_BUDGET = 256
#: Commands whose replies carry a job body.
BIG_REPLIES = (c.Peek, c.PeekReady, c.PeekDelayed, c.PeekBuried)

log = logging.getLogger(__name__)


class PrivateListener:
    """The selector's mark for the run directory's unix socket (`ServingProcess.private`)."""


PRIVATE = PrivateListener()


def reply(self: ServingProcess, conn: Conn, data: bytes) -> None:
    """Answer the current command and let the connection go on to its next one."""
    conn.step("answer")
    if conn.phase is CLOSED:  # what was under way for it when it went: nobody to tell
        return
    conn.out += data
    if len(conn.out) > self.max_output:
        self.overflow(conn)
        return
    self.dirty.add(conn)
    if not conn.pumping:  # a reply given inside pump(): its loop goes on by itself
        self.pump(conn)


def flush_output(self: ServingProcess) -> None:
    """Write the turn's replies; a connection that moves home now takes its replies along
    (handoff.move_home), so its client sees them only once it is there."""
    moves = self.serving > 1
    for conn in self.dirty.take():
        if conn.phase is CLOSING:
            write(self, conn)
            self.close(conn)
        elif not (moves and conn.away is not False and self.move_home(conn)):
            write(self, conn)  # (away False: known to be at home, should_move)


def finish(self: ServingProcess, conn: Conn) -> None:
    """Close the connection once this turn's output (committed to the log) is written."""
    conn.step("finish")
    self.dirty.add(conn)


def write(self: ServingProcess, conn: Conn) -> None:
    if conn.phase is CLOSED or not conn.out:
        return
    try:
        sent = sockio.send(conn.sock, conn.fd, conn.out)
    except NOT_NOW:
        sent = 0
    except OSError as e:
        if not tls_not_now(e):
            self.close(conn)
            return
        sent = 0
    sockio.drop(conn.out, sent)
    if (len(conn.out) != 0) != (conn.events & WRITABLE != 0):  # epoll_ctl on a change
        self.interest(conn)


def interest(self: ServingProcess, conn: Conn) -> None:
    """Register the connection for what it needs: reading unless paused (`pause_input`),
    at its end of input (`read`) or leaving (handoff.move_home), writing while the kernel
    has not taken all its output. epoll_ctl only on a change."""
    if conn.phase is CLOSED:
        return
    events = (0 if conn.paused or conn.eof or conn.leaving else EVENT_READ) | (
        EVENT_WRITE if conn.out else 0
    )
    if events == conn.events:
        return
    if not conn.events:
        self.sel.register(conn.sock, events, conn)
    elif not events:
        self.sel.unregister(conn.sock)
    else:
        self.sel.modify(conn.sock, events, conn)
    conn.events = events


def overflow(self: ServingProcess, conn: Conn) -> None:
    """Its unwritten replies passed limits.max_output_bytes: a client that does not read
    cannot grow the server. Closed as any connection (its reserved jobs go back)."""
    self.output_closed += 1
    log.debug("connection %d closed: %d bytes of replies unread", conn.id, len(conn.out))
    self.close(conn)


def pause_input(self: ServingProcess, conn: Conn) -> None:
    """Stop reading from a connection whose unparsed input passed the bound (a client
    flooding commands behind a waiting reserve), and read again once its commands have
    consumed it (pump calls this after every run)."""
    if conn.phase is CLOSED:
        return
    paused = conn.parser.buffered > self.max_input
    if paused != conn.paused:
        conn.paused = paused
        self.interest(conn)


def job_limit(self: ServingProcess, private: bool) -> int:
    """The largest put a connection may make: -z, or FRONT_MAX_JOB for a front-end's."""
    return max(self.max_job_size, FRONT_MAX_JOB) if private else self.max_job_size


def is_private(self: ServingProcess, sock: socket.socket) -> bool:
    """Did `sock` come in through the run directory's unix socket (a front-end's)?"""
    private = self.private
    return (
        private is not None
        and sock.family == socket.AF_UNIX
        and sock.getsockname() == private.getsockname()
    )


def accept(self: ServingProcess, private: bool = False) -> None:
    """Take the connections waiting on the shared listening socket. With several serving
    processes at most ACCEPT_SHARE per turn: the others are woken too, and a process
    that is busy comes back for more only after a turn, so new connections go mostly to
    the processes with time for them instead of all to whichever woke first.
    `private`: from the run directory's unix socket (the server's own front-ends, such as
    Kestrel's): neither TLS nor the allow-list applies; the connection limit does."""
    listener = self.private if private and self.private is not None else self.listener
    tls = None if private else self.tls
    for _ in range(ACCEPT_SHARE if self.serving > 1 else ACCEPT_ALL):
        held = handoff.held(self)  # with those handed over and not answered yet
        if held >= self.max_clients:  # keep descriptors for the links and the log
            self.pause_accepting(OSError(errno.EMFILE, "Too many open files (reserve kept)"))
            return
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                self.pause_accepting(e)
                return
            if e.errno == errno.ECONNABORTED:
                continue
            raise
        if turned_away(self, sock, held, private):  # allow, max_connections
            continue
        sock.setblocking(False)
        if sock.family != socket.AF_UNIX:  # `-l unix:PATH`
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            if not self.admit_handshake():
                sock.close()
                continue
            sock = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        conn = Conn(self.next_conn, sock, job_limit(self, private))
        if tls is not None:
            self.start_handshake(conn)
        self.next_conn += MAX_SERVING
        self.total_connections += 1
        self.conns[conn.id] = conn
        self.interest(conn)
        if self.serving > 1 and self.should_move(conn) and self.hand_off(conn, counted=False):
            continue  # its home process takes its tube references
        self.request(
            tube_shard("default", self.shard_count), ops.REF, conn, RefArgs("default", 1, 1), None
        )


def pause_accepting(self: ServingProcess, error: OSError) -> None:
    """Out of file descriptors: stop polling the listening socket for ACCEPT_PAUSE_S (it
    stays readable, and polling it would spin the loop at a full core) and go on serving
    the connections we have; new ones wait in the listen backlog. Logged once per episode."""
    if not self.accept_paused_until:
        log.warning("accept(): %s; new connections wait while we are out of them", error.strerror)
    self.accept_paused_until = time.monotonic() + ACCEPT_PAUSE_S
    for listener in (self.listener, self.private):
        if listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(listener)


def resume_accepting(self: ServingProcess) -> None:
    """Poll the listening socket again once the pause is over (turn calls this)."""
    if self.accept_paused_until and time.monotonic() >= self.accept_paused_until:
        self.accept_paused_until = 0.0
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        if self.private is not None:
            self.sel.register(self.private, selectors.EVENT_READ, PRIVATE)


def read(self: ServingProcess, conn: Conn) -> None:
    """Read what the client sent into the one reused buffer (sock.recv(n) would allocate n
    bytes each call: with a large n, an mmap and munmap per read) and run its commands."""
    if conn.handshaking and not self.handshake(conn):
        return
    try:
        n = sockio.recv_into(conn.sock, conn.fd, self.rbuf)
    except NOT_NOW:
        return
    except OSError as e:
        if not tls_not_now(e):
            self.close(conn)
        return
    if not n:
        if conn.eof:  # seen already (a hang-up while its replies are written reports it)
            return
        # end of input (a close, or a half-close after the last command): as beanstalkd,
        # every command read so far is answered in order, a waiting reserve first (what
        # is ready now, else TIMED_OUT), and the connection closes after the last answer.
        # It is not polled for reading again: epoll would report the end in every turn,
        # and each read would withdraw the waiting reserve once more (a CANCEL, answered,
        # per turn until the first answer came: tens per connection under churn)
        conn.eof = True
        self.interest(conn)
        if conn.waiting is not None:
            self.reserve_at_eof(conn)
        elif conn.phase is IDLE and conn.held is None and conn not in self.backlog:
            self.finish(conn)  # else pump finishes it once its commands have run
        return
    used = 0
    if self.home_ok and can_serve_home(self, conn):  # the fast path (home.py)
        try:
            data = sockio.head(self.rbuf, n)
        except MemoryError:  # out of memory: the general path answers (shedding.py)
            data = b""
        used = serve_home(self, conn, data)
        if used:
            self.dirty.add(conn)
            if len(conn.out) > self.max_output:
                self.overflow(conn)
                return
            if used == n:
                return
    if not shedding.take_input(self, conn, self.rview[used:n]):  # out of memory: closed
        return
    if is_tls(conn.sock):  # TLS may hold decrypted bytes epoll cannot see
        self.read_pending(conn)
    self.pump(conn)


def pump(self: ServingProcess, conn: Conn) -> None:
    """Run the connection's buffered commands until one must wait for a reply, at most
    PUMP_BUDGET of them: the rest waits for the next turn (`backlog`), so a connection
    with a long pipeline cannot stall the others. Replies stay in order: a command joins a
    pipeline only if its answer comes from the same shard; any other waits (held) until
    the pipeline has drained."""
    conn.pumping = True
    budget = PUMP_BUDGET
    try:
        while conn.phase < BUSY:  # IDLE or PIPING
            if not budget:
                self.backlog.add(conn)  # what is left runs next turn (run_backlog)
                return
            budget -= 1
            cmd = conn.held or (
                None
                if conn.leaving and self.leaves_now(conn)
                else shedding.next_command(self, conn)
            )
            if cmd is None:
                if conn.eof and conn.phase is IDLE:
                    self.finish(conn)
                return
            if conn.phase is PIPING and (
                (conn.piped >= MAX_PIPED and isinstance(cmd, BIG_REPLIES))
                or not self.joins_pipe(conn, cmd)
            ):
                conn.held = cmd
                return
            conn.held = None
            self.dispatch(conn, cmd)
    finally:
        conn.pumping = False
        if conn.paused or conn.parser.buffered > self.max_input:
            self.pause_input(conn)


def run_backlog(self: ServingProcess) -> None:
    """Go on with the connections whose commands pump left for this turn."""
    backlog, self.backlog = self.backlog, set()
    for conn in backlog:
        if conn.phase is not CLOSED:
            self.pump(conn)


def close(self: ServingProcess, conn: Conn) -> None:
    if conn.phase is CLOSED:
        return
    conn.step("close")
    self.unlist(conn)
    if conn.handshaking:
        self.handshakes.pop(conn, None)
    conn.close_socket()
    conn.out = bytearray()  # answers still under way may keep `conn` a while: not its output
    if isinstance(conn.waiting, CrossReserve):
        self.finish_cross(conn.waiting, None)
    elif conn.waiting is not None:  # the DISCONNECT below ends it in the shard
        self.pending.pop(conn.waiting, None)
        self.inflight.pop(conn.waiting, None)
        conn.waiting = None
    self.disconnect(conn)
    self.request(self.shard_of(conn.use), ops.REF, conn, RefArgs(conn.use, -1, 0), None)
    for tube in conn.watch:
        self.request(self.shard_of(tube), ops.REF, conn, RefArgs(tube, 0, -1), None)


def unlist(self: ServingProcess, conn: Conn) -> None:
    """No longer served here (closed, or handed over): out of the tables, not polled."""
    self.conns.pop(conn.id, None)
    self.dirty.discard(conn)
    self.backlog.discard(conn)
    if conn.events:  # not read here (another process may be reading it)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
    conn.events = 0


def dispatch(self: ServingProcess, conn: Conn, cmd: c.Command) -> None:
    key = cmd.stat if isinstance(cmd, c.ErrorReply) else STAT_KEYS.get(type(cmd))
    if key is not None:
        self.stats[key] += 1
    handler = HANDLERS.get(type(cmd))
    if handler is None:
        self.reply(conn, cmd.reply if isinstance(cmd, c.ErrorReply) else proto.INTERNAL_ERROR)
        return
    try:
        handler(self, conn, cmd)
    except Exception as e:  # a bug must cost one command, not every connection
        self.internal_error(conn, f"command {cmd!r}", e)


def internal_error(
    self: ServingProcess, conn: Conn | None, what: str, error: Exception | None = None
) -> None:
    """Log an unexpected exception with its traceback and answer INTERNAL_ERROR to the
    connection whose command it was (OUT_OF_MEMORY when memory ran out, as beanstalkd
    answers then); every other connection goes on."""
    log.exception("%s failed", what)
    if conn is not None and conn.phase < CLOSING:
        out_of_memory = isinstance(error, MemoryError)
        self.reply(conn, proto.OUT_OF_MEMORY if out_of_memory else proto.INTERNAL_ERROR)


def out_of_memory(self: ServingProcess) -> None:
    """Memory ran out outside any one command (a turn of the loop raised MemoryError):
    logged at most once a second; what the turn had not done yet, the next one does."""
    now = time.monotonic()
    if now >= self.oom_logged_at + 1.0:
        self.oom_logged_at = now
        log.error("out of memory in a turn of the loop; going on")
