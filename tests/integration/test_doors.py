"""Every door of a server (the beanstalk port, Kestrel's, Workq's, the metrics endpoint) lets
in the clients its settings allow and no others, by one mechanism (processes/common/door.py):
``allow`` (a client from elsewhere is closed at accept, nothing answered),
``limits.max_connections`` (past it, closed at accept), TLS (``tls.*``: the Kestrel and
Workq ports speak it as the beanstalk port does; the metrics endpoint's own pair is
tested in test_metrics.py), and a SIGHUP's new allow-list reaches every door.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
from helpers import REPO_ROOT, make_cert, poll_for

from shardq.bench.procs import (
    bunqueue_port,
    kestrel_port,
    kill_group,
    kill_pids,
    listening_port,
    metrics_port,
    read_lines,
    session_members,
    terminate,
    workq_port,
)

ELSEWHERE = "127.0.0.1"  # outside the allow-lists below
ALLOWED = "127.0.0.2"  # loopback has all of 127/8: a client can pick its source
ALLOW = ("--allow", "10.0.0.0/8", "--allow", f"{ALLOWED}/32")
DOORS = {
    "kestrel": "--kestrel-port",
    "workq": "--workq-port",
    "bunqueue": "--bunqueue-port",
    "metrics": "--metrics",
}
PORT_OF = {
    "kestrel": kestrel_port,
    "workq": workq_port,
    "bunqueue": bunqueue_port,
    "metrics": metrics_port,
}


def frame(msg: dict[str, object]) -> bytes:
    body = msgpack.packb(msg)
    return struct.pack(">I", len(body)) + body


#: a bunqueue PUSH, and how its answer starts ({ok: true, id: <a 36-character UUID>, ...})
BUNQUEUE_PUSH = frame({"cmd": "PUSH", "queue": "q", "data": {}, "reqId": "d"})
BUNQUEUE_PUSHED = frame({"ok": True, "id": "u" * 36, "reqId": "d"})[:9]


def hello(door: str) -> tuple[bytes, bytes]:
    """A first request on a door, and how its answer starts."""
    return {
        "beanstalk": (b"put 0 0 60 1\r\nx\r\n", b"INSERTED"),
        "kestrel": (b"version\r\n", b"VERSION"),
        "workq": (f"add {uuid.uuid4()} q 1000 60000 1\r\nx\r\n".encode(), b"+OK"),
        "bunqueue": (BUNQUEUE_PUSH, BUNQUEUE_PUSHED),
        "metrics": (b"GET /health HTTP/1.0\r\n\r\n", b"HTTP/1.0 200"),
    }[door]


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]  # door -> port
    run_dir: Path
    stderr_path: Path


@pytest.fixture
def doors(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``doors(names, extra=())``: a server with the doors `names` besides the beanstalk
    port (kestrel, workq, metrics), every one on a free port; stopped at the end."""
    started: list[Server] = []

    def start(names: tuple[str, ...], extra: tuple[str, ...] = ()) -> Server:
        base = tmp_path / f"d{time.monotonic_ns()}"
        base.mkdir()
        run_dir, stderr_path = base / "run", base / "stderr.log"
        cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
        cmd += ["--shards", "1", "--serving", "1", "--run-dir", str(run_dir), *extra]
        for name in names:
            cmd += [DOORS[name], "127.0.0.1:0" if name == "metrics" else "0"]
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, start_new_session=True
            )
        server = Server(proc, {}, run_dir, stderr_path)
        started.append(server)
        data = read_lines(proc, 1 + len(names), 20)
        ports = {"beanstalk": listening_port(data.partition(b"\n")[0] + b"\n")}
        ports |= {name: PORT_OF[name](data) for name in names}
        if None in ports.values():
            pytest.fail(f"no listening lines: {data!r}\n{stderr_path.read_text()[-3000:]}")
        server.ports = {name: port for name, port in ports.items() if port is not None}
        return server

    yield start
    for server in started:
        terminate(server.proc, 10, group=True)
        if server.proc.poll() is None:
            kill_group(server.proc)
        kill_pids(session_members(server.proc.pid))
        assert server.proc.stdout is not None
        server.proc.stdout.close()


def connect_from(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), 10, (source, 0))


def answer(sock: socket.socket, data: bytes) -> bytes:
    """What the door answers `data` with: b"" if it closed the connection unanswered."""
    try:
        sock.sendall(data)
        return sock.recv(100)
    except ConnectionResetError:
        return b""


def served(server: Server, door: str, source: str) -> bool:
    """Whether `door` answers a client from `source` (False: closed it, nothing said)."""
    request, expected = hello(door)
    with connect_from(server.ports[door], source) as sock:
        got = answer(sock, request)
    assert got == b"" or got.startswith(expected), got
    return got != b""


def test_every_door_closes_clients_from_elsewhere(doors) -> None:
    server = doors(("kestrel", "workq", "bunqueue", "metrics"), ALLOW)
    for door in ("beanstalk", "kestrel", "workq", "bunqueue", "metrics"):
        assert not served(server, door, ELSEWHERE), door
        assert served(server, door, ALLOWED), door


def test_a_sighup_takes_a_new_allow_list_to_every_door(doors, tmp_path: Path) -> None:
    conf = tmp_path / "shardq.yaml"
    conf.write_text("allow: []\n")
    server = doors(("kestrel", "workq", "metrics"), ("--config", str(conf), "-V"))
    everyone = ("beanstalk", "kestrel", "workq", "metrics")
    assert all(served(server, door, ELSEWHERE) for door in everyone)
    conf.write_text(f"allow: [10.0.0.0/8, {ALLOWED}/32]\n")
    server.proc.send_signal(signal.SIGHUP)
    poll_for(lambda: "SIGHUP: allow" in server.stderr_path.read_text(), timeout=10)
    for door in everyone:  # each child applies it at its loop's next turn
        poll_for(lambda door=door: not served(server, door, ELSEWHERE), timeout=10)
        assert served(server, door, ALLOWED), door


@pytest.mark.parametrize("door", ["kestrel", "workq", "bunqueue"])
def test_a_front_end_door_closes_clients_past_max_connections(doors, door: str) -> None:
    """Before, the third was let in, and told the server was unavailable when it asked."""
    server = doors((door,), ("--max-connections", "2"))
    kept = [connect_from(server.ports[door], ALLOWED) for _ in range(2)]
    for sock in kept:
        request, expected = hello(door)
        assert answer(sock, request).startswith(expected)
    with connect_from(server.ports[door], ALLOWED) as third:
        assert answer(third, hello(door)[0]) == b""  # closed at accept, nothing answered
    for sock in kept:
        sock.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("certs"), "server", "127.0.0.1")


def tls_answer(port: int, cert: Path, data: bytes) -> bytes:
    context = ssl.create_default_context(cafile=str(cert))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(data)
        return sock.recv(100)


def test_tls_covers_the_kestrel_and_workq_doors(doors, certs) -> None:
    """Their clients speak TLS, as the beanstalk port's do; plain text gets no answer.
    (Commands the front-ends answer themselves: see the next test for the others.)"""
    cert, key = certs
    server = doors(("kestrel", "workq"), ("--tls-cert", str(cert), "--tls-key", str(key)))
    unknown = b"-CLIENT-ERROR Unknown command"
    for door, request, expected in [
        ("beanstalk", *hello("beanstalk")),
        ("kestrel", *hello("kestrel")),
        ("workq", b"bogus\r\n", unknown),
    ]:
        assert tls_answer(server.ports[door], cert, request).startswith(expected), door
        with connect_from(server.ports[door], ALLOWED) as plain, contextlib.suppress(OSError):
            assert not answer(plain, request).startswith(expected), door


def test_commands_through_tls_front_end_doors_reach_the_server(doors, certs) -> None:
    """With tls.* set, the front-ends' own plain connections to the serving process (through
    the run directory) are served as plain ones: Kestrel and Workq commands work."""
    cert, key = certs
    server = doors(
        ("kestrel", "workq", "bunqueue"), ("--tls-cert", str(cert), "--tls-key", str(key))
    )
    request, expected = hello("bunqueue")
    assert tls_answer(server.ports["bunqueue"], cert, request).startswith(expected)
    kestrel = tls_answer(server.ports["kestrel"], cert, b"set t 0 0 2\r\nhi\r\n")
    assert kestrel == b"STORED\r\n"
    request, expected = hello("workq")
    assert tls_answer(server.ports["workq"], cert, request).startswith(expected)
