"""The Kestrel dialect of the memcache text protocol, sans-IO: bytes in, command objects out.

Kestrel (Twitter's queue) speaks memcache's text protocol with a few extensions: a key is
a queue name, ``set`` appends an item, ``get`` removes one, and options after the name
(``get work/t=500/open``) wait for an item or make the read reliable. The replies are in
`protocol.kestrel_replies`; this module turns a client's byte stream into commands.

`KestrelParser` is fed whatever arrived and hands out one command at a time. Malformed
input becomes an `Invalid` command carrying the memcache error to answer (``ERROR``,
``CLIENT_ERROR ...``, ``SERVER_ERROR ...``); the connection goes on after it, except when
a line passes `MAX_LINE` without an end (memcached closes such a client: it cannot find
the next command). Memory is bounded: a line is at most `MAX_LINE` bytes, an item at most
`max_item_size` (a larger one is answered ``SERVER_ERROR object too large for cache`` and
its bytes are skipped as they arrive, never held).

Command names are case-insensitive (the Kestrel guide writes ``GET work/close/open``);
a line may end with CRLF or a bare LF, as memcached accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardq.protocol.inbuf import InputBuffer, Invalid
from shardq.protocol.kestrel_replies import OUT_OF_MEMORY

#: Longest command line (memcached's key line limit); longer without an end closes.
MAX_LINE = 2048
#: Longest queue name: a queue is a beanstalk tube of the same name (beanstalkd's limit).
MAX_QUEUE_NAME = 200
#: Kestrel's rule for expiry times: below this, seconds from now; from it, a unix time.
#: (memcached's threshold is 30 days, 2,592,000 s; Kestrel's own code and guide use 10^6.)
RELATIVE_EXPIRY_MAX = 1_000_000
U32_MAX = 0xFFFFFFFF
#: Queue names: what is both a beanstalk tube name and allowed by Kestrel (no ``/``, ``~``,
#: ``+`` or ``.``), not starting with ``-`` (beanstalk).
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_;$()][A-Za-z0-9_;$()\-+]*\Z")  # + : fanout
_UINT = re.compile(rb"[0-9]+\Z")
_INT = re.compile(rb"-?[0-9]+\Z")


@dataclass(frozen=True, slots=True)
class Set:
    """``set <queue> <flags> <expiry> <bytes> [noreply]`` and its data: add an item."""

    queue: str
    flags: int
    expiry: int  # as sent: 0 never, < RELATIVE_EXPIRY_MAX seconds from now, else unix time
    data: bytes
    noreply: bool = False


@dataclass(frozen=True, slots=True)
class Get:
    """``get <queue>[/t=<ms>][/open][/close][/abort][/peek]``. `key` is the whole key as
    sent: the ``VALUE`` line names it, since memcache clients match replies to keys."""

    key: str
    queue: str
    timeout_ms: int = 0
    open: bool = False
    close: bool = False
    abort: bool = False
    peek: bool = False

    @property
    def fetches(self) -> bool:
        """Whether an item is taken (or peeked): ``/close`` or ``/abort`` alone only end
        the open read and answer an empty response."""
        return self.peek or self.open or not (self.close or self.abort)


@dataclass(frozen=True, slots=True)
class Delete:
    """``delete <queue> [0] [noreply]``: drop a queue and its items."""

    queue: str
    noreply: bool = False


@dataclass(frozen=True, slots=True)
class Flush:
    """``flush <queue> [noreply]``: discard the queue's items; the queue stays."""

    queue: str
    noreply: bool = False


@dataclass(frozen=True, slots=True)
class FlushAll:
    """``flush_all [delay] [noreply]``: flush every queue (a delay is accepted, not kept)."""

    noreply: bool = False


@dataclass(frozen=True, slots=True)
class Simple:
    """A command without arguments: stats, dump_stats, dump_config, version, reload,
    shutdown, quit (`name` is the lower-case command)."""

    name: str


Command = Set | Get | Delete | Flush | FlushAll | Simple | Invalid

ERROR = b"ERROR\r\n"
BAD_FORMAT = b"CLIENT_ERROR bad command line format\r\n"
BAD_CHUNK = b"CLIENT_ERROR bad data chunk\r\n"
BAD_QUEUE = b"CLIENT_ERROR bad queue name\r\n"
BAD_OPTION = b"CLIENT_ERROR bad get option\r\n"
BAD_PEEK = b"CLIENT_ERROR peek cannot be combined with open, close or abort\r\n"
BAD_ABORT = b"CLIENT_ERROR abort cannot be combined with close\r\n"
ONE_QUEUE = b"CLIENT_ERROR one queue per get\r\n"
LINE_TOO_LONG = b"CLIENT_ERROR line too long\r\n"
TOO_LARGE = b"SERVER_ERROR object too large for cache\r\n"
SIMPLE = ("stats", "dump_stats", "dump_config", "version", "reload", "shutdown", "quit")


def valid_queue(name: str) -> bool:
    return len(name) <= MAX_QUEUE_NAME and _QUEUE_NAME.match(name) is not None


def expiry_ms(expiry: int, now_ms: int) -> int | None:
    """The absolute expiry (unix ms) of an item set with `expiry`, None for never; an
    expiry at or before `now_ms` means the item is dead on arrival (negative: memcache's
    "already expired")."""
    if expiry == 0:
        return None
    if expiry < 0:
        return now_ms
    if expiry < RELATIVE_EXPIRY_MAX:
        return now_ms + expiry * 1000
    return expiry * 1000


def parse_get(key: str) -> Get | Invalid:
    """A get key: the queue name, then options separated by ``/``."""
    queue, *options = key.split("/")
    if not valid_queue(queue):
        return Invalid(BAD_QUEUE)
    timeout, flags = 0, set()
    for option in options:
        option = option.lower()
        if option.startswith("t="):
            value = option[2:].encode()
            if not _UINT.match(value):
                return Invalid(BAD_OPTION)
            timeout = min(int(value), U32_MAX * 1000)
        elif option in ("open", "close", "abort", "peek"):
            flags.add(option)
        else:
            return Invalid(BAD_OPTION)
    if "peek" in flags and flags & {"open", "close", "abort"}:
        return Invalid(BAD_PEEK)
    if "abort" in flags and "close" in flags:
        return Invalid(BAD_ABORT)
    return Get(
        key, queue, timeout, "open" in flags, "close" in flags, "abort" in flags, "peek" in flags
    )


def _noreply(args: list[bytes], most: int) -> tuple[list[bytes], bool] | None:
    """Split a trailing ``noreply`` off; None if more than `most` arguments remain."""
    noreply = bool(args) and args[-1] == b"noreply"
    if noreply:
        args = args[:-1]
    return (args, noreply) if len(args) <= most else None


def _queue_arg(args: list[bytes]) -> str | Invalid:
    try:
        name = args[0].decode("ascii")
    except UnicodeDecodeError:
        return Invalid(BAD_QUEUE)
    return name if valid_queue(name) else Invalid(BAD_QUEUE)


class SetHeader:
    """A parsed set line, waiting for its data block."""

    __slots__ = ("queue", "flags", "expiry", "size", "noreply")

    def __init__(self, queue: str, flags: int, expiry: int, size: int, noreply: bool) -> None:
        self.queue, self.flags, self.expiry = queue, flags, expiry
        self.size, self.noreply = size, noreply


def parse_set(args: list[bytes]) -> SetHeader | Invalid:
    split = _noreply(args, 4)
    if split is None or len(split[0]) != 4:
        return Invalid(BAD_FORMAT)
    (key, flags, expiry, size), noreply = split
    if not (_UINT.match(flags) and _INT.match(expiry) and _UINT.match(size)):
        return Invalid(BAD_FORMAT)
    if int(flags) > U32_MAX:
        return Invalid(BAD_FORMAT)
    queue = _queue_arg([key])
    if isinstance(queue, Invalid):
        return SetHeader("", 0, 0, int(size), noreply)  # its data is skipped, then refused
    return SetHeader(queue, int(flags), int(expiry), int(size), noreply)


def parse_line(line: bytes) -> Command | SetHeader:
    """One command line (without its line end)."""
    words = line.split()
    if not words:
        return Invalid(ERROR)
    name, args = words[0].lower(), words[1:]
    if name == b"set":
        return parse_set(args)
    if name == b"get":
        if not args:
            return Invalid(ERROR)
        if len(args) > 1:
            return Invalid(ONE_QUEUE)
        try:
            return parse_get(args[0].decode("ascii"))
        except UnicodeDecodeError:
            return Invalid(BAD_QUEUE)
    if name in (b"delete", b"flush"):
        split = _noreply(args, 2 if name == b"delete" else 1)
        if split is None or not split[0] or (len(split[0]) == 2 and split[0][1] != b"0"):
            return Invalid(BAD_FORMAT)
        queue = _queue_arg(split[0])
        if isinstance(queue, Invalid):
            return queue
        return Delete(queue, split[1]) if name == b"delete" else Flush(queue, split[1])
    if name == b"flush_all":
        split = _noreply(args, 1)
        if split is None or (split[0] and not _UINT.match(split[0][0])):
            return Invalid(BAD_FORMAT)
        return FlushAll(split[1])
    text = name.decode("ascii", "replace")
    if text in SIMPLE:
        return Simple(text) if not args else Invalid(BAD_FORMAT)
    return Invalid(ERROR)


class KestrelParser(InputBuffer):
    """Bytes in (`feed`), commands out (`next_command`), one at a time, in order."""

    def __init__(self, max_item_size: int) -> None:
        super().__init__()
        self.max_item_size = max_item_size
        self.header: SetHeader | None = None  # a set line whose data has not all arrived

    def next_command(self) -> Command | None:
        if self.dead or self.skip:
            return None
        if self.header is not None:
            return self._data(self.header)
        end = self.buf.find(b"\n")
        if end < 0:
            if len(self.buf) > MAX_LINE:
                self.dead = True
                self.buf.clear()
                return Invalid(LINE_TOO_LONG, close=True)
            return None
        if end > MAX_LINE:
            self.dead = True
            self.buf.clear()
            return Invalid(LINE_TOO_LONG, close=True)
        line = bytes(self.buf[: end - 1 if end and self.buf[end - 1] == 13 else end])
        del self.buf[: end + 1]
        parsed = parse_line(line)
        if not isinstance(parsed, SetHeader):
            return parsed
        if parsed.size > self.max_item_size:
            self._discard(parsed.size + 2)
            return Invalid(TOO_LARGE)
        self.header = parsed
        return self._data(parsed)

    def _discard(self, n: int) -> None:
        taken = min(n, len(self.buf))
        del self.buf[:taken]
        self.skip = n - taken

    def _data(self, header: SetHeader) -> Command | None:
        size = header.size
        if len(self.buf) < size + 2:
            return None
        self.header = None
        try:
            data, end = bytes(self.buf[:size]), bytes(self.buf[size : size + 2])
        except MemoryError:  # not held: dropped (as a too large one) and answered so
            self._discard(size + 2)
            return Invalid(OUT_OF_MEMORY, shed=True)
        del self.buf[: size + 2]
        if end != b"\r\n":
            return Invalid(BAD_CHUNK)
        if not header.queue:
            return Invalid(BAD_QUEUE)
        return Set(header.queue, header.flags, header.expiry, data, header.noreply)
