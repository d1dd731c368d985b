"""The replies of the Kestrel (memcache text) protocol as bytes.

Pure functions and constants, no I/O, as `protocol.replies` is for beanstalk. A ``get``
answers ``VALUE <key> 0 <bytes>``, the data and ``END``, or ``END`` alone when there is
nothing; the key is echoed as the client sent it, options included (memcache clients
match each ``VALUE`` to a key they asked for). Flags are not kept: Kestrel ignores them
and answers 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

STORED = b"STORED\r\n"
NOT_STORED = b"NOT_STORED\r\n"
END = b"END\r\n"
DELETED = b"DELETED\r\n"
FLUSHED_ALL = b"Flushed all queues.\r\n"
RELOADED = b"Reloaded config.\r\n"
SHUTDOWN_REFUSED = (
    b"SERVER_ERROR shutdown refused: this server is shared with beanstalk clients, "
    b"stop it with SIGTERM\r\n"
)
ALREADY_OPEN = b"CLIENT_ERROR an item is already open on this queue\r\n"
UNAVAILABLE = b"SERVER_ERROR queue server unavailable\r\n"
#: memcached's answer when it cannot allocate for a command (then the next goes on)
OUT_OF_MEMORY = b"SERVER_ERROR out of memory storing object\r\n"
#: What a beanstalk error during a command becomes (the beanstalk reply follows it).
SERVER_ERROR = b"SERVER_ERROR "

Stat = tuple[str, object]


def value(key: str, data: bytes) -> bytes:
    """One item: the VALUE line, its data, and the END of the response."""
    return b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key.encode(), len(data), data)


def version(text: str) -> bytes:
    return f"VERSION {text}\r\n".encode()


def server_error(text: str) -> bytes:
    return SERVER_ERROR + text.encode(errors="replace") + b"\r\n"


def stats(server: Sequence[Stat], queues: Iterable[tuple[str, Sequence[Stat]]]) -> bytes:
    """memcache-style ``STAT name value`` lines: the server's, then each queue's as
    ``queue_<name>_<stat>``, then ``END``."""
    lines = [f"STAT {name} {v}" for name, v in server]
    for queue, values in queues:
        lines += [f"STAT queue_{queue}_{name} {v}" for name, v in values]
    return ("\r\n".join([*lines, "END"]) + "\r\n").encode()


def blocks(queues: Iterable[tuple[str, Sequence[Stat]]]) -> bytes:
    """``dump_stats`` and ``dump_config``: one block per queue, then ``END``::

    queue 'work' {
      items=3
    }
    """
    lines = []
    for queue, values in queues:
        lines.append(f"queue '{queue}' {{")
        lines += [f"  {name}={v}" for name, v in values]
        lines.append("}")
    return ("\r\n".join([*lines, "END"]) + "\r\n").encode()
