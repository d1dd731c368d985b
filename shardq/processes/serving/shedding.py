"""Out of memory while reading a client: give up a put, not the connection.

A put's body is the one large thing a client sends, and what a serving process holds of
it is what runs out first when memory does. So when the input cannot be kept, or a body
cannot be taken out of it, the put is given up (`Parser.shed`): its body is dropped as it
arrives, as a too big one's, and it is answered OUT_OF_MEMORY, as beanstalkd answers a
put it cannot allocate; the connection and its next commands go on. Only when no put can
be given up (a put pipelined behind a command in flight, or no put at all) is the
connection closed, as before.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from shardq.processes.serving.conn import CLOSED, Conn
from shardq.protocol import commands as c
from shardq.protocol import proto

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

log = logging.getLogger(__name__)


def take_input(self: ServingProcess, conn: Conn, data: memoryview) -> bool:
    """Feed what the client sent to its parser. Out of memory, the put being read is shed,
    or the first put whose line is in `data`, once the commands before it have run. False
    if nothing could be shed: the connection is closed."""
    parser = conn.parser
    while True:
        try:
            parser.feed(data)
            return True
        except MemoryError:
            pass
        if parser.shed():
            shed(self, conn)
            continue  # what follows its body is kept: a few lines at most
        end = bytes(data[: proto.MAX_LINE]).find(b"\r\n")
        if end < 0:
            break
        try:
            parser.feed(data[: end + 2])  # one line more: a command to run, or a put's line
        except MemoryError:
            break
        data = data[end + 2 :]
        self.pump(conn)
        if conn.phase is CLOSED:
            return False
    log.error("out of memory reading connection %d; closed", conn.id)
    self.close(conn)
    return False


def next_command(self: ServingProcess, conn: Conn) -> c.Command | None:
    """The connection's next command; a put whose body cannot be taken out of the input
    (out of memory) comes as a put answered OUT_OF_MEMORY instead."""
    try:
        return conn.parser.next_command()
    except MemoryError:
        if not conn.parser.shed():
            raise
        shed(self, conn)
        return conn.parser.next_command()


def shed(self: ServingProcess, conn: Conn) -> None:
    """Log that a put was given up: at most once a second, as a turn out of memory is."""
    now = time.monotonic()
    if now >= self.oom_logged_at + 1.0:
        self.oom_logged_at = now
        log.error("out of memory: a put of connection %d is answered OUT_OF_MEMORY", conn.id)
