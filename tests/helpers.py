"""Pure test helpers: a tiny raw beanstalk client with hard deadlines on every read,
polling, tube names per shard, and skip-or-fail for missing tools.

Every client function works on a plain ``socket.socket``. Bytes received but not yet
consumed by :func:`read_replies` are kept in a per-socket buffer, so replies can
be read a few units at a time.

A *reply unit* is one CRLF-terminated line, plus, for ``RESERVED <id> <n>``,
``FOUND <id> <n>`` and ``OK <n>``, the following ``n`` bytes and their CRLF.

Starting, finding and stopping server processes is ``shardq.bench.procs``'s (shared with
the bench and tools/); tools/crash_test.py's blocking ``Client`` serves the durability tests.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, NoReturn, TypeVar
from zlib import crc32

import pytest

#: The repository's root (tests/..): the cwd of every server a test starts.
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Hard upper bound for any single read, in seconds.
READ_DEADLINE = 5.0

_BODY_HEADER = re.compile(rb"^(?:(?:RESERVED|FOUND) \d+ (\d+)|OK (\d+))$")
_buffers: weakref.WeakKeyDictionary[socket.socket, bytearray] = weakref.WeakKeyDictionary()

T = TypeVar("T")


class ProtocolTimeout(AssertionError):
    """No complete reply arrived before the deadline."""

    def __init__(self, message: str, received: bytes) -> None:
        super().__init__(f"{message}; received so far: {received[:300]!r}")
        self.received = received


class UnexpectedEOF(AssertionError):
    """The server closed the connection while a reply was expected."""

    def __init__(self, message: str, received: bytes) -> None:
        super().__init__(f"{message}; received before EOF: {received[:300]!r}")
        self.received = received


class UnexpectedData(AssertionError):
    """Bytes arrived where silence or EOF was expected."""

    def __init__(self, message: str, received: bytes) -> None:
        super().__init__(f"{message}: {received[:300]!r}")
        self.received = received


class Layout(NamedTuple):
    """How a test's shardq server is laid out: shards, and serving processes (each hosts
    one shard and accepts clients). Its str() is the pytest id: ``shards4``,
    ``shards4-serving2``."""

    shards: int
    serving: int = 1

    def __str__(self) -> str:
        return f"shards{self.shards}" + (f"-serving{self.serving}" if self.serving > 1 else "")

    def flags(self) -> list[str]:
        return ["--shards", str(self.shards), "--serving", str(self.serving)]


#: The layouts the differential, concurrency and crash tests run against: one serving
#: process with one and four shards, and two serving processes over four shards (two of
#: them hosted, two in shard processes of their own).
LAYOUTS = (Layout(1), Layout(4), Layout(4, 2))


def layout_of(shards: int | Layout) -> Layout:
    return shards if isinstance(shards, Layout) else Layout(shards)


def selftest_mode() -> bool:
    """True when SHARDQ_DIFF_SELFTEST is set: the "shardq" side is another beanstalkd."""
    return os.environ.get("SHARDQ_DIFF_SELFTEST", "") not in ("", "0")


def skip_or_fail(hint: str) -> NoReturn:
    """Skip locally, but fail under CI (env CI set): `make test` installs everything the
    tests need (beanstalkd, Java, strace), so a skip there would hide a broken setup."""
    if os.environ.get("CI"):
        pytest.fail(hint)
    pytest.skip(hint)


def _mix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser."""
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * factor) & 0xFFFFFFFF
    return h ^ (h >> 16)


def shard_of_tube(name: str, shards: int) -> int:
    """The shard of a tube as the server spreads tubes (routing "spread", docs/ARCHITECTURE.md:
    the family's stem mixed, plus the number of its trailing digits, with ``default`` where
    crc32 puts it); computed here, not with the server's code."""
    family = name.split("+", 1)[0]
    stem = family.rstrip("0123456789")
    number = int(family[len(stem) :] or 0)
    default = crc32(b"default")
    return (_mix32(crc32(stem.encode())) + number + default - _mix32(default)) % shards


def tube_on_shard(
    shard: int, shards: int, prefix: str = "tube", rule: Callable[[str, int], int] = shard_of_tube
) -> str:
    """The first tube name ``<prefix><n>`` the server puts on ``shard`` (by `rule`)."""
    n = 0
    while rule(f"{prefix}{n}", shards) != shard:
        n += 1
    return f"{prefix}{n}"


def wal_args(log_dir: Path) -> tuple[str, ...]:
    """``shardq serve`` flags for a write-ahead log in ``log_dir``, fsync on every write."""
    return ("-b", str(log_dir), "-f", "0")


def connect(port: int, host: str = "127.0.0.1") -> socket.socket:
    """Open a TCP connection to the server (5 s connect deadline)."""
    sock = socket.create_connection((host, port), timeout=READ_DEADLINE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _buffers[sock] = bytearray()
    return sock


def send(sock: socket.socket, data: bytes) -> None:
    """Send all of ``data``."""
    sock.sendall(data)


def _buffer(sock: socket.socket) -> bytearray:
    buf = _buffers.get(sock)
    if buf is None:
        buf = _buffers[sock] = bytearray()
    return buf


def _recv_some(sock: socket.socket, deadline: float) -> bytes | None:
    """Wait until ``deadline`` for data. Returns b"" on EOF, None on timeout."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    readable, _, _ = select.select([sock], [], [], remaining)
    if not readable:
        return None
    try:
        return sock.recv(1 << 16)
    except ConnectionResetError:
        return b""


def _split_unit(buf: bytearray) -> int:
    """Length of the first complete reply unit in ``buf``, or 0 if incomplete."""
    end = buf.find(b"\r\n")
    if end < 0:
        return 0
    match = _BODY_HEADER.match(bytes(buf[:end]))
    if match is None:
        return end + 2
    size = int(match.group(1) or match.group(2))
    total = end + 2 + size + 2
    return total if len(buf) >= total else 0


def read_replies(sock: socket.socket, n: int, timeout: float = READ_DEADLINE) -> list[bytes]:
    """Read exactly ``n`` reply units; raise if they do not all arrive in ``timeout`` s."""
    timeout = min(timeout, READ_DEADLINE)
    deadline = time.monotonic() + timeout
    buf = _buffer(sock)
    units: list[bytes] = []
    while len(units) < n:
        size = _split_unit(buf)
        if size:
            units.append(bytes(buf[:size]))
            del buf[:size]
            continue
        chunk = _recv_some(sock, deadline)
        if chunk is None:
            got = b"".join(units) + bytes(buf)
            raise ProtocolTimeout(f"expected {n} reply unit(s) within {timeout} s", got)
        if chunk == b"":
            raise UnexpectedEOF(f"expected {n} reply unit(s)", b"".join(units) + bytes(buf))
        buf += chunk
    return units


def expect_silence(sock: socket.socket, seconds: float) -> None:
    """Assert that nothing (no byte, no EOF) arrives for ``seconds``."""
    buf = _buffer(sock)
    if buf:
        raise UnexpectedData("expected silence but unread bytes are pending", bytes(buf))
    chunk = _recv_some(sock, time.monotonic() + seconds)
    if chunk is None:
        return
    if chunk == b"":
        raise UnexpectedEOF("expected silence", b"")
    buf += chunk
    raise UnexpectedData("expected silence", bytes(buf))


def expect_eof(sock: socket.socket, timeout: float = READ_DEADLINE) -> None:
    """Assert that the server closes the connection without sending anything more."""
    buf = _buffer(sock)
    if buf:
        raise UnexpectedData("expected EOF but unread bytes are pending", bytes(buf))
    chunk = _recv_some(sock, time.monotonic() + min(timeout, READ_DEADLINE))
    if chunk is None:
        raise ProtocolTimeout(f"expected EOF within {timeout} s", b"")
    if chunk:
        buf += chunk
        raise UnexpectedData("expected EOF", bytes(buf))


def waiting_to_be_accepted(port: int) -> int:
    """Connections in the listen backlog of 127.0.0.1:`port` (/proc/net/tcp: a listening
    socket's rx_queue)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":  # LISTEN
                return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def put_body(sock: socket.socket, body: bytes) -> bytes:
    """``put 0 0 60`` of `body`; its reply line."""
    send(sock, b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    return read_replies(sock, 1)[0]


def ready_ids(port: int, tube: str = "default") -> set[int]:
    """The ids of every ready job of `tube`: each reserved, then given back by the close
    (the set stays as it was)."""
    sock = connect(port)
    send(sock, f"watch {tube}\r\n".encode())
    read_replies(sock, 1)
    if tube != "default":
        send(sock, b"ignore default\r\n")
        read_replies(sock, 1)
    found: set[int] = set()
    while True:
        send(sock, b"reserve-with-timeout 0\r\n")
        (reply,) = read_replies(sock, 1)
        if not reply.startswith(b"RESERVED"):
            break
        found.add(int(reply.split()[1]))
    sock.close()
    return found


def poll_for(fn: Callable[[], T], timeout: float = READ_DEADLINE, interval: float = 0.01) -> T:
    """Call ``fn`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition {fn!r} not met within {timeout} s")
        time.sleep(interval)


STRACE_HINT = "needs strace to kill a process at its fsync: apt-get install -y strace"


def killed_at_fsync(pid: int) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """strace attached to `pid`, killing it (SIGKILL) at its next fsync or fdatasync: the
    body sends what makes it sync; on leaving, the process was killed (or 10 s passed)."""
    return killed_at_syscall(pid, "fsync,fdatasync")


@contextlib.contextmanager
def killed_at_syscall(pid: int, calls: str, nth: int = 1) -> Iterator[subprocess.Popen[bytes]]:
    """strace attached to `pid`, killing it (SIGKILL) as it enters the `nth` of its next
    syscalls named in `calls` (comma-separated), before that syscall runs: the body sends
    what makes it call them; on leaving, the process was killed (or 10 s passed)."""
    from shardq.bench.procs import tracer_pid

    strace = shutil.which("strace")
    if strace is None:
        skip_or_fail(STRACE_HINT)
    tracer = subprocess.Popen(
        [strace, "-qq", "-p", str(pid), "-e", f"trace={calls}"]
        + ["-e", f"inject={calls}:signal=KILL:when={nth}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while tracer_pid(pid) != tracer.pid:
            assert time.monotonic() < deadline, "strace did not attach"
            time.sleep(0.01)
        yield tracer
        tracer.wait(timeout=10)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()


def make_cert(directory: Path, name: str, cn: str) -> tuple[Path, Path]:
    """A self-signed certificate (it is its own CA) with an EC key; (cert, key)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-days", "2", "-subj", f"/CN={cn}", "-keyout", str(key), "-out", str(cert)]
        + ["-addext", f"subjectAltName=IP:{cn}"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


def shard_key_config(directory: Path) -> Path:
    """A config file that asks for stats-tube's `shard` key (`stats_tube_shard`), which a
    test reads to see where a tube is."""
    path = directory / "shard-key.yaml"
    path.write_text("stats_tube_shard: true\n")
    return path


def metrics_port(run_dir: Path) -> int:
    """The port the server wrote to RUN_DIR/metrics-address (with --metrics HOST:0)."""
    text = poll_for(lambda: _read(run_dir / "metrics-address"), timeout=10)
    return int(text.strip().rsplit(":", 1)[1])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def http_get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
