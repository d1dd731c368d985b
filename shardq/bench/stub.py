"""A beanstalk-protocol stub that answers every command at once and stores nothing.

It measures the load tool, not a server: whatever `shardq bench` reaches against it is the
ceiling of this machine + loopback + the tool (the "L" column of `shardq bench compare`),
less what the stub itself costs (below).
It answers exactly as the C stub of the independent load generator (``nullsrv.c``) does:

    put <pri> <delay> <ttr> <n>\\r\\n<body>\\r\\n  -> INSERTED <id>
    use <tube>                                  -> USING <tube>
    watch <tube> / ignore <tube>                -> WATCHING <n> (counts; assumes new names)
    reserve / reserve-with-timeout <s>          -> RESERVED <id> <size>\\r\\n<size bytes>
    delete <id>                                 -> DELETED
    anything else                               -> UNKNOWN_COMMAND

One thread, one epoll loop, non-blocking sockets; each read goes into one preallocated
buffer, is parsed as a whole (every complete command in it; a read of exactly one command
takes a short path) and answered with one send(), after every readable connection of the
wake-up has been read. Binds 127.0.0.1 only.

Cost, against the C load generator (bload -w mixed -c 50, quiet machine): 190-197k ops/s at
about 5 µs of CPU per operation (1.2-1.4 user + 3.6-4.0 system), where nullsrv does 234-246k
at 4.0 µs (0.2 + 3.8) and beanstalkd 172k at 5.7 µs (0.7 + 5.0): the system calls (one recv
and one send per read) cost both stubs the same, Python's share is the rest. So in rows
without pipelining the stub is a little cheaper than beanstalkd but not free; see
docs/BENCHMARKS.md, "Is the load tool the limit?".

    python -m shardq.bench.stub -p PORT [-s RESERVED_BODY_SIZE]
"""

from __future__ import annotations

import argparse
import logging
import select
import signal
import socket
import sys
from types import FrameType

from shardq.bench.workloads import body_of  # nullsrv.c's pattern, 'a' + i % 26
from shardq.log import setup as setup_logging

log = logging.getLogger("shardq.bench.stub")

HOST = "127.0.0.1"
RECV = 1 << 18
EV_IN = select.EPOLLIN
EV_OUT = select.EPOLLOUT
EV_READ = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP  # read to see the error


class Client:
    """One connection: its socket's bound methods, unparsed input, unsent output, and its
    watch count."""

    __slots__ = ("sock", "recv_into", "send", "rbuf", "wbuf", "watching")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.recv_into = sock.recv_into
        self.send = sock.send
        self.rbuf = b""
        self.wbuf = b""  # output the socket did not take yet (EPOLLOUT is on while non-empty)
        self.watching = 1


def body_length(buf: bytes | bytearray, start: int, nl: int) -> int:
    """The last field of the put line buf[start:nl] (nullsrv: its trailing digits, else 0)."""
    cl = nl - 1 if nl > start and buf[nl - 1] == 13 else nl
    digits = buf[buf.rfind(b" ", start, cl) + 1 : cl]
    return int(digits) if digits.isdigit() else 0


class Stub:
    """The listening socket, the epoll loop and the parser; `next_id` numbers every job."""

    def __init__(self, port: int, size: int = 100) -> None:
        self.size = size
        self.reserved_tail = b" %d\r\n%s\r\n" % (size, body_of(size))
        self.next_id = 1
        self.clients: dict[int, Client] = {}
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((HOST, port))
        self.listener.listen(1024)
        self.listener.setblocking(False)
        self.port = int(self.listener.getsockname()[1])
        self.ep = select.epoll()
        self.ep.register(self.listener.fileno(), EV_IN)
        # recv_into one buffer: recv(256 KiB) would mmap, mremap and munmap on every read.
        self.inbuf = bytearray(RECV)
        self.inview = memoryview(self.inbuf)

    # -- parsing --------------------------------------------------------------------------

    def answer(self, c: Client, buf: bytes | bytearray) -> tuple[int, bytes]:
        """Answer every complete command in `buf`; returns (bytes consumed, the replies).

        A read of exactly one command (most reads without pipelining) takes a short path.
        Prefixes are matched without bounding them to the line: none contains CR or LF, so
        a match always lies inside the line, as nullsrv's bounded match does."""
        nl = buf.find(b"\n")
        if nl < 0:
            return 0, b""
        end = len(buf)
        first = buf[0]
        if nl == end - 1:
            if first == 114 and buf.startswith(b"reserve"):  # r
                self.next_id += 1
                return end, b"RESERVED %d%s" % (self.next_id - 1, self.reserved_tail)
            if first == 100 and buf.startswith(b"delete "):  # d
                return end, b"DELETED\r\n"
        elif first == 112 and buf.startswith(b"put ") and nl + body_length(buf, 0, nl) + 3 == end:
            self.next_id += 1
            return end, b"INSERTED %d\r\n" % (self.next_id - 1)
        return self.answer_all(c, buf)

    def answer_all(self, c: Client, buf: bytes | bytearray) -> tuple[int, bytes]:
        """`answer` for any number of commands, the last possibly incomplete."""
        out: list[bytes] = []
        add = out.append
        find = buf.find
        starts = buf.startswith
        end = len(buf)
        nid = self.next_id
        tail = self.reserved_tail
        pos = 0
        while pos < end:
            nl = find(b"\n", pos)
            if nl < 0:
                break
            first = buf[pos]
            if first == 112 and starts(b"put ", pos):  # p
                stop = nl + body_length(buf, pos, nl) + 3
                if stop > end:
                    break  # body not complete yet
                add(b"INSERTED %d\r\n" % nid)
                nid += 1
                pos = stop
                continue
            if first == 114 and starts(b"reserve", pos):  # r
                add(b"RESERVED %d%s" % (nid, tail))
                nid += 1
            elif first == 100 and starts(b"delete ", pos):  # d
                add(b"DELETED\r\n")
            elif first == 117 and starts(b"use ", pos):  # u
                cl = nl - 1 if buf[nl - 1] == 13 else nl
                add(b"USING " + buf[pos + 4 : cl] + b"\r\n")
            elif starts(b"watch ", pos):
                c.watching += 1
                add(b"WATCHING %d\r\n" % c.watching)
            elif starts(b"ignore ", pos):
                if c.watching > 1:
                    c.watching -= 1
                add(b"WATCHING %d\r\n" % c.watching)
            else:
                add(b"UNKNOWN_COMMAND\r\n")
            pos = nl + 1
        self.next_id = nid
        return pos, b"".join(out)

    # -- sockets --------------------------------------------------------------------------

    def accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. out of file descriptors: keep serving the others
                log.warning("accept failed: %s", e)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            fd = sock.fileno()
            self.clients[fd] = Client(sock)
            self.ep.register(fd, EV_IN)

    def drop(self, fd: int, c: Client) -> None:
        if self.clients.pop(fd, None) is not None:
            self.ep.unregister(fd)
            c.sock.close()

    def flush(self, fd: int, c: Client, data: bytes) -> bool:
        """Send `data` after any output still pending; False if the connection broke."""
        had = bool(c.wbuf)
        if had:
            data = c.wbuf + data
        try:
            n = c.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return False
        c.wbuf = data[n:] if n < len(data) else b""
        if bool(c.wbuf) != had:
            self.ep.modify(fd, EV_IN | EV_OUT if c.wbuf else EV_IN)
        return True

    def serve_forever(self) -> None:
        """Read every readable connection of a wake-up first, then send all the replies: the
        load generator then finds several answers per wake-up instead of one. The common
        case (nothing left unsent) is inlined; it is the whole cost of the stub."""
        lfd = self.listener.fileno()
        clients = self.clients
        poll = self.ep.poll
        inbuf = self.inbuf
        view = self.inview
        answer = self.answer
        while True:
            replies: list[tuple[int, Client, bytes]] = []
            add = replies.append
            for fd, ev in poll(-1, 512):
                c = clients.get(fd)
                if c is None:
                    if fd == lfd:
                        self.accept()
                    continue
                if ev & EV_OUT and c.wbuf and not self.flush(fd, c, b""):
                    self.drop(fd, c)
                    continue
                if not ev & EV_READ:
                    continue
                try:
                    n = c.recv_into(inbuf)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    n = 0
                if not n:
                    self.drop(fd, c)
                    continue
                buf = c.rbuf + view[:n] if c.rbuf else inbuf[:n]
                used, out = answer(c, buf)
                c.rbuf = bytes(buf[used:]) if used < len(buf) else b""
                if out:
                    add((fd, c, out))
            for fd, c, out in replies:
                if c.wbuf:
                    if not self.flush(fd, c, out):
                        self.drop(fd, c)
                    continue
                try:
                    k = c.send(out)
                except (BlockingIOError, InterruptedError):
                    k = 0
                except OSError:
                    self.drop(fd, c)
                    continue
                if k < len(out):
                    c.wbuf = out[k:]
                    self.ep.modify(fd, EV_IN | EV_OUT)

    def close(self) -> None:
        for c in list(self.clients.values()):
            c.sock.close()
        self.clients.clear()
        self.ep.close()
        self.listener.close()


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shardq.bench.stub",
        description="A beanstalk stub: answers every command at once, stores nothing.",
    )
    parser.add_argument("-p", "--port", type=int, default=11300, help="TCP port (0: any free)")
    parser.add_argument("-s", "--size", type=int, default=100, help="reserved body bytes")
    parser.add_argument("-l", "--listen", default=HOST, help="ignored: always 127.0.0.1")
    args = parser.parse_args(argv)
    setup_logging("stub", 1)
    if args.listen not in (HOST, "localhost"):
        log.warning("-l %s ignored: the stub binds %s only", args.listen, HOST)
    signal.signal(signal.SIGTERM, _stop)
    stub = Stub(args.port, args.size)
    log.info("listening on %s:%d", HOST, stub.port)
    try:
        stub.serve_forever()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        stub.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
