"""The fast path: a connection at home, from its read to the hosted engine and back.

Most connections use and watch tubes of the shard their serving process hosts (handoff
moves them there). For them the common commands (put, reserve, reserve-with-timeout,
delete) need nothing of the general path: no command object, no request to a peer, no
phase step, no reply callback. `serve_home` takes one read of such a connection, serves
every such command at its start straight from the bytes — the hosted shard's engine
applies it, the reply bytes go onto the connection's output — and stops at the first
command it does not serve: anything else, anything not in its plain form (`put 0 0 10 5`,
one space between fields, digits only), a command whose tube or job is not at home, an
incomplete command, a reserve that has to wait. What follows goes to the connection's
parser and the general path (clients.pump), so replies stay in order and every quirk of
the protocol is the parser's alone: the fast path serves only lines whose meaning the
parser would give the same way.

The turn that served them commits the hosted shard's log before any output leaves
(loop.run_hosted, then flush_output), exactly as for the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from shardq.cluster.routing import TubeShards
from shardq.engine.job import NS
from shardq.engine.reserve import Reserved
from shardq.processes.common.clock import monotonic
from shardq.processes.common.sockio import add
from shardq.processes.serving.conn import IDLE, Conn
from shardq.protocol.parser import INT_MAX, MAX_LINE, U32_MAX

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

CRLF = b"\r\n"
P, R, D = 112, 114, 100  #: first bytes of put, reserve*, delete
TIMEOUT_AT = len(b"reserve-with-timeout ")
RESERVED_FIELDS = len(Reserved._fields)  #: a reserve answered with a job (else engine.Final)
#: the most digits a number of the fast path has (the parser takes longer ones: below 2**63)
DIGITS_MAX = 18
SPACE = 32
#: the parser's bounds, as the fast path compares them (compiled: C integers, home.pxd)
FIELD_MAX = U32_MAX  #: pri, delay and ttr at most
TIMEOUT_MAX = INT_MAX  #: a reserve-with-timeout's seconds at most
LINE_MAX = MAX_LINE  #: a command line's bytes at most


def can_serve_home(self: ServingProcess, conn: Conn) -> bool:
    """May this connection's next read take the fast path? Nothing of it may be under way
    (no command in flight or held, its parser between commands, nothing queued for the
    hosted shard that a command of this read would have to follow)."""
    return (
        conn.phase is IDLE
        and conn.held is None
        and conn.parser.at_rest()
        and not (self.outq and self.outq.get(self.hosted_index))  # (mostly empty: no look-up)
    )


def serve_home(self: ServingProcess, conn: Conn, data: bytes) -> int:
    """Serve the commands at the start of `data` that the fast path serves; the number of
    bytes they took (0: none). The caller feeds the rest to the parser."""
    core = self.hosted_core
    assert core is not None
    home = self.hosted_index
    out = conn.out
    line = PUT_LINE  # a put line's numbers (one object for every put: none made per put)
    end = len(data)
    now = monotonic()
    max_output = self.max_output
    tube_shards = self.tube_shards
    ids = self.ids  # IdLeases: its methods called through it (no bound method made per read)
    pos = 0
    try:  # out of memory, the command at `pos` is left to the general path (which
        # answers a put it cannot hold OUT_OF_MEMORY: shedding.py)
        while pos < end:
            nl = line_end(data, pos, pos + LINE_MAX)
            if nl < 0:
                break
            first = data[pos]
            if first == P:
                if not has(data, pos, b"put ") or not put_numbers(data, pos + 4, nl, line):
                    break
                size = line.size
                if size > conn.max_job_size:
                    break  # too big: the parser answers it
                start = nl + 2
                stop = start + size
                if stop + 2 > end or not has(data, stop, CRLF):
                    break  # incomplete (the parser waits for the rest), or no CRLF
                tube = conn.use
                if self.draining or tube_shards[tube] != home:
                    break
                job_id = ids.take(home)
                if job_id is None:
                    break  # a block is being leased: the general path waits for it
                reply = core.put_local(
                    job_id,
                    self.put_stamp(),
                    tube,
                    line.pri,
                    line.delay,
                    line.ttr,
                    data[start:stop],
                    now,
                )
                self.home_puts += 1
                conn.producer = True
                pos = stop + 2  # past it before its reply is written (out of memory: see try)
                add(out, reply)
            elif first == R:
                if nl == pos + 7 and has(data, pos, b"reserve"):
                    timeout = -1
                elif has(data, pos, b"reserve-with-timeout "):
                    timeout = number(data, pos + TIMEOUT_AT, nl)
                    if timeout < 0 or timeout > TIMEOUT_MAX:
                        break
                else:
                    break
                if not all_home(tube_shards, conn.watch, home):
                    break
                if timeout < 0:
                    self.home_reserves += 1
                else:
                    self.home_timed_reserves += 1
                if not conn.worker:
                    conn.worker = True
                    conn.away = None  # a worker's home is where its watched tubes are
                conn.shards.add(home)
                soon_at = conn.soon_at(now) if conn.reserved else None
                rid = self.new_rid()
                timeout_at = None if timeout < 0 else now + timeout * NS
                payload = core.reserve_local(
                    conn.id, rid, tuple(conn.watch), now, timeout_at, soon_at, out
                )
                pos = nl + 2
                if payload is None:  # it waits: the engine answers it later (loop.run_hosted)
                    conn.step("call")
                    self.pending[rid] = (conn, self.on_reserved)
                    conn.waiting = rid
                    break
                if isinstance(payload, tuple):  # reserved, its reply on `out` already
                    job_id, deadline = payload
                    conn.hold(job_id, deadline)
                elif len(payload) == RESERVED_FIELDS:  # (a shard that settles or holds)
                    _kind, reply, job_id, deadline = cast(list[Any], payload)  # engine.Reserved
                    conn.hold(job_id, deadline)
                    add(out, reply)
                else:
                    _kind, reply = cast(list[Any], payload)  # engine.Final
                    add(out, reply)
            elif first == D:
                if not has(data, pos, b"delete "):
                    break
                job_id = number(data, pos + 7, nl)
                if job_id < 0 or ids.job_shard(job_id) != home:
                    break
                self.home_deletes += 1
                add(out, core.delete_local(conn.id, job_id, now))
                if conn.reserved:
                    conn.let_go(job_id)
                pos = nl + 2
            else:
                break
            if len(out) > max_output:
                break  # the caller closes it (clients.overflow)
    except MemoryError:
        pass
    return pos


def all_home(tube_shards: TubeShards, tubes: list[str], home: int) -> bool:
    """Do all these tubes live on the hosted shard?"""
    for tube in tubes:  # noqa: SIM110 - a C loop compiled (`all()`: a generator, a closure)
        if tube_shards[tube] != home:
            return False
    return True


@cython.boundscheck(False)  # its indices stay within `data` (its own checks, its callers')
@cython.wraparound(False)
def line_end(data: bytes, start: int, stop: int) -> int:
    """Where the first CRLF of `data[start:stop]` starts; -1: none (as `bytes.find`, whose
    argument parsing costs more than the search of a command's line)."""
    if not cython.compiled:
        return data.find(CRLF, start, stop)
    if stop > len(data):
        stop = len(data)
    for i in range(start, stop - 1):
        if data[i] == 13 and data[i + 1] == 10:
            return i
    return -1


@cython.boundscheck(False)  # its indices stay within `data` (its own checks, its callers')
@cython.wraparound(False)
def number(data: bytes, start: int, stop: int) -> int:
    """The value of `data[start:stop]` if it is 1 to DIGITS_MAX ASCII digits, else -1 (a
    number the fast path leaves to the parser)."""
    if not cython.compiled:
        field = data[start:stop]
        return int(field) if field.isdigit() and len(field) <= DIGITS_MAX else -1
    if stop <= start or stop - start > DIGITS_MAX:
        return -1
    value = 0
    for i in range(start, stop):
        c = data[i]
        if c < 48 or c > 57:  # not 0-9
            return -1
        value = value * 10 + (c - 48)
    return value


class PutLine:
    """The numbers of a put line, as `put_numbers` leaves them (compiled: C fields)."""

    __slots__ = ("pri", "delay", "ttr", "size")

    def __init__(self) -> None:
        self.pri = self.delay = self.ttr = self.size = 0


PUT_LINE = PutLine()  #: the one `serve_home` fills


@cython.boundscheck(False)  # its indices stay within `data` (its own checks, its callers')
@cython.wraparound(False)
def has(data: bytes, pos: int, word: bytes) -> bool:
    """Does `data` hold `word` at `pos`? (`bytes.startswith`, without its call.)"""
    if not cython.compiled:
        return data.startswith(word, pos)
    n = len(word)
    if pos < 0 or pos + n > len(data):
        return False
    for i in range(n):  # noqa: SIM110 - a C loop compiled; `all()` would make a generator
        if data[pos + i] != word[i]:
            return False
    return True


@cython.boundscheck(False)  # its indices stay within `data` (its own checks, its callers')
@cython.wraparound(False)
def put_numbers(data: bytes, start: int, stop: int, line: PutLine) -> bool:
    """pri, delay, ttr and size from a put line's `data[start:stop]` ("0 0 60 5") into
    `line`: four numbers as `number` takes them, one space apart, pri, delay and ttr below
    2**32; False for anything else (the parser's: it answers what the fast path leaves)."""
    if not cython.compiled:
        fields = data[start:stop].split(b" ")
        if len(fields) != 4:
            return False
        pri, delay, ttr, size = [number(field, 0, len(field)) for field in fields]
        if min(pri, delay, ttr, size) < 0 or max(pri, delay, ttr) > FIELD_MAX:
            return False
        line.pri, line.delay, line.ttr, line.size = pri, delay, ttr, size
        return True
    pri = delay = ttr = 0
    value = 0
    digits = 0
    n = 0  # the numbers ended by a space so far
    for i in range(start, stop):
        c = data[i]
        if c == SPACE:
            if digits == 0 or n == 3 or value > FIELD_MAX:
                return False
            if n == 0:
                pri = value
            elif n == 1:
                delay = value
            else:
                ttr = value
            n += 1
            value = 0
            digits = 0
        elif 48 <= c <= 57 and digits < DIGITS_MAX:
            value = value * 10 + (c - 48)
            digits += 1
        else:
            return False
    if digits == 0 or n != 3:
        return False
    line.pri = pri
    line.delay = delay
    line.ttr = ttr
    line.size = value
    return True
