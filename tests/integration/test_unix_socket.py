"""``-l unix:PATH``: shardq listens on a unix socket as beanstalkd 1.12 does.

A real client (greenstalk, which takes a path as its address) works over it with one and
several shards and serving processes; a stale socket file left by a killed server is
replaced; a socket another server still listens on, or a file that is no socket, is
refused with one line and left alone; a clean stop removes the socket file.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest
from helpers import LAYOUTS, Layout

from shardq.bench.procs import read_line, read_lines, terminate

START_TIMEOUT = 20.0


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory: a unix socket path has at most 107 bytes, pytest's tmp_path may
    not fit."""
    path = Path(tempfile.mkdtemp(prefix="sq-unix-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def listen_args(path: Path, layout: Layout) -> tuple[str, ...]:
    return ("-l", f"unix:{path}", "--serving", str(layout.serving))


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_a_client_works_over_the_unix_socket(shardq_launch, sock_dir, layout) -> None:
    path = sock_dir / "beanstalkd.sock"
    proc, *_ = shardq_launch(layout.shards, listen_args(path, layout))
    try:
        line = read_line(proc, START_TIMEOUT)
        assert line == f"shardq listening on unix:{path}\n".encode(), line
        assert path.is_socket()
        with greenstalk.Client(str(path), use="u1", watch=["u1", "u2"]) as c:
            with greenstalk.Client(str(path), use="u2") as producer:
                ids = [c.put("one"), producer.put("two", priority=1)]
            got = [c.reserve(timeout=5), c.reserve(timeout=5)]
            assert [j.body for j in got] == ["two", "one"]  # the more urgent first
            assert sorted(j.id for j in got) == sorted(ids)
            for job in got:
                c.delete(job)
            assert c.stats()["current-connections"] == 1
            assert c.stats_tube("u1")["total-jobs"] == 1
    finally:
        assert terminate(proc, 10) == 0
    assert not path.exists(), "a clean stop removes the socket file"


def test_a_stale_socket_file_is_replaced(shardq_launch, sock_dir) -> None:
    path = sock_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, never listening: what a killed server leaves
    assert path.is_socket()
    proc, *_ = shardq_launch(1, ("-l", f"unix:{path}"))
    try:
        assert read_line(proc, START_TIMEOUT).startswith(b"shardq listening on unix:")
        with greenstalk.Client(str(path)) as c:
            assert c.put("x") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_a_socket_in_use_or_a_file_is_refused_with_one_line(shardq_launch, sock_dir) -> None:
    live = sock_dir / "live.sock"
    plain = sock_dir / "plain"
    plain.write_text("not a socket\n")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(live))
        other.listen(1)
        for path, reason in ((live, "address already in use"), (plain, "address already in use")):
            proc, _run, _tmp, stderr_path = shardq_launch(1, ("-l", f"unix:{path}"))
            out, _ = proc.communicate(timeout=20)
            lines = stderr_path.read_text().splitlines()
            assert (proc.returncode, out) == (1, b"")
            assert lines == [f"shardq: cannot listen on unix:{path}: {reason.capitalize()}"]
        assert live.is_socket()  # the other server's socket is still there
        assert plain.read_text() == "not a socket\n"


def test_a_path_too_long_for_a_socket_is_refused_with_one_line(shardq_launch, sock_dir) -> None:
    path = sock_dir / ("d" * 60) / ("s" * 60)
    path.parent.mkdir()
    proc, _run, _tmp, stderr_path = shardq_launch(1, ("-l", f"unix:{path}"))
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (1, b"")
    lines = stderr_path.read_text().splitlines()
    assert lines == [f"shardq: cannot listen on unix:{path}: AF_UNIX path too long"]


def test_a_run_dir_deeper_than_a_socket_address_holds(tmp_path: Path) -> None:
    """Every process's unix sockets live in the run dir (shards, coordinator, handoffs, the
    front-ends' private socket): a run dir too deep for a socket address still serves."""
    run_dir = tmp_path / ("r" * 60) / ("u" * 60) / "run"
    assert len(str(run_dir / "beanstalk.sock")) > 107
    stderr_path = tmp_path / "stderr.log"
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", "2", "--serving", "2", "--run-dir", str(run_dir), "--workq-port", "0"]
    cmd += ["--metrics", "127.0.0.1:0"]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    try:
        lines = read_lines(proc, 3, START_TIMEOUT).decode().splitlines()
        ports = {line.rsplit(" ", 1)[0]: int(line.rsplit(":", 1)[1]) for line in lines}
        port, workq = ports["shardq listening on"], ports["shardq workq listening on"]
        with greenstalk.Client(("127.0.0.1", port), watch=["a", "d"]) as c:
            for tube in ("a", "d"):  # one tube on each shard
                c.use(tube)
                c.put(tube)
            assert sorted(c.reserve(timeout=5).body for _ in range(2)) == ["a", "d"]
        with socket.create_connection(("127.0.0.1", workq), timeout=10) as w:
            w.sendall(b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1000 60000 2\r\nhi\r\n")
            assert w.recv(100) == b"+OK\r\n"  # through the run dir's private socket
        with greenstalk.Client(("127.0.0.1", port), watch="q") as c:
            assert c.reserve(timeout=5).body == "hi"
        metrics = (run_dir / "metrics-address").read_text().strip()
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()  # gathered from the shards' ipc sockets
        assert "\nshardq_jobs_total 3.0\n" in text, text
    finally:
        assert terminate(proc, 10) == 0, stderr_path.read_text()
    assert "ERROR" not in stderr_path.read_text()
