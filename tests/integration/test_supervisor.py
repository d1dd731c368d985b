"""The supervisor as an operator sees it: signals, crashed children, a busy port.

Every wait polls with a deadline; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT, connect, poll_for, read_replies, send, tube_on_shard

from shardq.bench.procs import kill_group

#: Seconds a stopping server may take (the issue's limit).
STOP_LIMIT = 5.0


def wait_exit(server, limit: float = STOP_LIMIT) -> float:
    """Wait for the supervisor to exit; return how long it took (fail past ``limit``)."""
    start = time.monotonic()
    try:
        server.proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"shardq still running {limit} s after the signal; children {server.roles()}"
            f"\nstderr:\n{server.stderr()[-3000:]}"
        )
    return time.monotonic() - start


def assert_nothing_left(server, children: dict[str, int]) -> None:
    """No child process and no socket file (in the run dir or under TMPDIR) survives."""

    def gone() -> bool:
        return not any(server.is_alive(pid) for pid in children.values()) and not server.leftovers()

    # The supervisor has exited already; give the kernel a moment to reap the orphans.
    deadline = time.monotonic() + 1.0
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.01)
    alive = {role: pid for role, pid in children.items() if server.is_alive(pid)}
    assert alive == {}, f"children still alive after the supervisor exited: {alive}"
    assert server.leftovers() == [], "processes of its session are still alive"
    assert server.socket_files() == [], "socket files left behind"


def put_and_reserve(port: int, tube: str = "default", timeout: float = 2.0) -> bool:
    """One fresh connection: use, put, watch, reserve, delete. True if all answered OK."""
    try:
        sock = connect(port)
    except OSError:
        return False
    try:
        send(sock, f"use {tube}\r\nput 0 0 60 2\r\nhi\r\n".encode())
        using, inserted = read_replies(sock, 2, timeout)
        if using != f"USING {tube}\r\n".encode() or not inserted.startswith(b"INSERTED "):
            return False
        job_id = int(inserted.split()[1])
        send(sock, f"watch {tube}\r\nreserve-job {job_id}\r\ndelete {job_id}\r\n".encode())
        replies = read_replies(sock, 3, timeout)
        return replies[1:] == [f"RESERVED {job_id} 2\r\nhi\r\n".encode(), b"DELETED\r\n"]
    except (AssertionError, OSError):
        return False
    finally:
        sock.close()


def busy_connections(port: int) -> list[socket.socket]:
    """A few clients in various states, to make sure they do not hold up a stop."""
    waiting = connect(port)
    send(waiting, b"watch idle\r\nignore default\r\nreserve\r\n")
    assert read_replies(waiting, 2) == [b"WATCHING 2\r\n", b"WATCHING 1\r\n"]
    holder = connect(port)
    send(holder, b"put 0 0 60 1\r\nx\r\nreserve\r\n")
    assert read_replies(holder, 2)[1].startswith(b"RESERVED ")
    half = connect(port)
    send(half, b"put 0 0 60 10\r\nabc")  # a body that never completes
    return [waiting, holder, half]


@pytest.mark.parametrize("shards", [1, 4])
def test_listening_line_means_ready(shardq_server, shards):
    # The line is the readiness signal: a command sent right after it is answered at once,
    # not after the children finished starting (which takes seconds on a loaded machine).
    server = shardq_server(shards)
    sock = connect(server.port)
    start = time.monotonic()
    send(sock, b"list-tube-used\r\nreserve-with-timeout 0\r\n")
    assert read_replies(sock, 2) == [b"USING default\r\n", b"TIMED_OUT\r\n"]
    elapsed = time.monotonic() - start
    sock.close()
    assert elapsed < 0.5, f"first replies took {elapsed:.2f} s after the listening line"


@pytest.mark.parametrize(("extra", "processes"), [((), 2), (("--no-colocate",), 3)])
def test_colocate_decides_where_shard_0_runs(shardq_server, extra, processes):
    """By default the serving process hosts shard 0 (no `shard 0` process); --no-colocate gives it
    its own. Both serve, and `stats` counts the server's one connection either way."""
    server = shardq_server(1, extra)
    roles = server.wait_all_children()
    assert ("shard 0" in roles) == bool(extra), roles
    assert len(roles) == processes, roles
    assert put_and_reserve(server.port)
    sock = connect(server.port)
    send(sock, b"stats\r\n")
    stats = read_replies(sock, 1)[0]
    sock.close()
    assert b"\ncurrent-connections: 1\n" in stats, stats


@pytest.mark.parametrize("shards", [1, 3])
def test_sigterm_stops_everything(shardq_server, shards):
    server = shardq_server(shards)
    children = server.wait_all_children()
    assert put_and_reserve(server.port)
    assert server.socket_files(), "expected ipc socket files in the run dir while running"
    clients = busy_connections(server.port)

    server.proc.send_signal(signal.SIGTERM)
    wait_exit(server)
    assert server.proc.returncode == 0, server.stderr()
    assert_nothing_left(server, children)
    for sock in clients:
        sock.close()


def test_ctrl_c_stops_everything(shardq_server):
    # Ctrl-C in a terminal sends SIGINT to the whole foreground process group.
    server = shardq_server(2)
    children = server.wait_all_children()
    assert put_and_reserve(server.port)
    clients = busy_connections(server.port)

    os.killpg(server.pid, signal.SIGINT)
    wait_exit(server)
    assert_nothing_left(server, children)
    for sock in clients:
        sock.close()


def test_sigint_to_the_supervisor_alone_stops_everything(shardq_server):
    server = shardq_server(2)
    children = server.wait_all_children()
    server.proc.send_signal(signal.SIGINT)
    wait_exit(server)
    assert_nothing_left(server, children)


def test_ctrl_c_prints_no_traceback(shardq_server):
    server = shardq_server(2)
    server.wait_all_children()
    assert put_and_reserve(server.port)
    os.killpg(server.pid, signal.SIGINT)
    wait_exit(server)
    assert "Traceback" not in server.stderr(), server.stderr()[-3000:]


def test_sigterm_without_run_dir_leaves_no_temp_dir(tmp_path):
    # Without --run-dir the supervisor makes its own under TMPDIR; it must remove it.
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0", "--shards", "2"]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmp_dir)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(b"shardq listening on 127.0.0.1:"), line
        assert list(tmp_dir.iterdir()), "expected the server's run dir under TMPDIR"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STOP_LIMIT)
        assert list(tmp_dir.iterdir()) == []
    finally:
        if proc.poll() is None:
            kill_group(proc)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("role", ["shard 0", "shard 1", "coordinator"])
def test_killed_child_is_restarted(shardq_server, role):
    shards = 2
    server = shardq_server(shards, ("--no-colocate",))  # shard 0 in a process of its own
    before = server.wait_all_children()
    tubes = [tube_on_shard(i, shards) for i in range(shards)]
    for tube in tubes:
        assert put_and_reserve(server.port, tube)

    os.kill(before[role], signal.SIGKILL)

    def restarted() -> bool:
        pid = server.roles().get(role)
        return pid is not None and pid != before[role]

    poll_for(restarted, timeout=10)
    for tube in tubes:
        poll_for(lambda t=tube: put_and_reserve(server.port, t), timeout=15, interval=0.05)
    after = server.wait_all_children()
    assert after[role] != before[role]
    # Only the killed child was replaced.
    assert {r: p for r, p in after.items() if r != role} == {
        r: p for r, p in before.items() if r != role
    }
    assert role in server.stderr(), "the supervisor should log which child died"
    # A cross-shard reserve still works (coordinator path).
    sock = connect(server.port)
    send(sock, f"use {tubes[1]}\r\nput 5 0 60 1\r\nz\r\n".encode())
    assert read_replies(sock, 2)[1].startswith(b"INSERTED ")
    send(sock, f"watch {tubes[0]}\r\nwatch {tubes[1]}\r\nreserve-with-timeout 2\r\n".encode())
    assert read_replies(sock, 3)[2].startswith(b"RESERVED ")
    sock.close()


def test_killed_serving_is_restarted_on_the_same_port(shardq_server):
    server = shardq_server(2)
    before = server.wait_all_children()
    assert put_and_reserve(server.port)
    old = connect(server.port)
    send(old, b"list-tube-used\r\n")
    assert read_replies(old, 1) == [b"USING default\r\n"]  # accepted by the old serving process

    os.kill(before["serving"], signal.SIGKILL)

    poll_for(lambda: server.roles().get("serving") not in (None, before["serving"]), timeout=10)
    poll_for(lambda: put_and_reserve(server.port), timeout=15, interval=0.05)
    assert "serving" in server.stderr()
    # The old connection died with its serving process: the server closed it.
    old.settimeout(5)
    with contextlib.suppress(ConnectionResetError):
        assert old.recv(100) == b""
    old.close()


def test_sigusr1_drain_mode(shardq_server):
    server = shardq_server(2)
    sock = connect(server.port)
    send(sock, b"put 0 0 60 1\r\na\r\n")
    assert read_replies(sock, 1)[0].startswith(b"INSERTED ")

    server.proc.send_signal(signal.SIGUSR1)

    def draining() -> bool:
        send(sock, b"put 0 0 60 5\r\nhello\r\n")
        reply = read_replies(sock, 1)[0]
        assert reply == b"DRAINING\r\n" or reply.startswith(b"INSERTED "), reply
        return reply == b"DRAINING\r\n"

    poll_for(draining, timeout=5)
    # The body was swallowed: the next command is understood.
    send(sock, b"stats\r\n")
    [stats] = read_replies(sock, 1)
    assert b"\ndraining: true\n" in stats, stats
    # A put split over several packets is refused the same way, after its body.
    send(sock, b"put 0 0 60 3\r\n")
    send(sock, b"xyz")
    send(sock, b"\r\nlist-tube-used\r\n")
    assert read_replies(sock, 2) == [b"DRAINING\r\n", b"USING default\r\n"]
    # Other commands still work: the queue can be emptied.
    send(sock, b"reserve-with-timeout 0\r\n")
    reply = read_replies(sock, 1)[0]
    assert reply.startswith(b"RESERVED "), reply
    job_id = int(reply.split()[1])
    send(sock, f"delete {job_id}\r\n".encode())
    assert read_replies(sock, 1) == [b"DELETED\r\n"]
    # A new connection sees drain mode too.
    other = connect(server.port)
    send(other, b"put 0 0 60 1\r\nb\r\n")
    assert read_replies(other, 1) == [b"DRAINING\r\n"]
    other.close()
    sock.close()


def stats_draining(port: int) -> bool:
    """A fresh connection's `stats` says ``draining: true``."""
    try:
        sock = connect(port)
    except OSError:
        return False
    try:
        send(sock, b"stats\r\n")
        return b"\ndraining: true\n" in read_replies(sock, 1, timeout=1)[0]
    except (AssertionError, OSError):
        return False
    finally:
        sock.close()


def test_sigusr1_right_after_start_kills_no_child(shardq_server):
    # An operator (or a service manager) may signal as soon as the port is announced.
    server = shardq_server(2)
    server.proc.send_signal(signal.SIGUSR1)
    poll_for(lambda: stats_draining(server.port), timeout=10, interval=0.05)
    assert "exited with status" not in server.stderr(), server.stderr()[-3000:]


def test_drain_mode_survives_an_serving_restart(shardq_server):
    server = shardq_server(1)
    server.wait_all_children()
    assert put_and_reserve(server.port)  # every child is up and has its signal handlers
    server.proc.send_signal(signal.SIGUSR1)
    poll_for(lambda: stats_draining(server.port), timeout=5)
    before = server.wait_all_children()

    os.kill(before["serving"], signal.SIGKILL)
    poll_for(lambda: server.roles().get("serving") not in (None, before["serving"]), timeout=10)

    def put_answer() -> bytes | None:
        try:
            sock = connect(server.port)
        except OSError:
            return None
        try:
            send(sock, b"put 0 0 60 1\r\nb\r\n")
            return read_replies(sock, 1, timeout=1)[0]
        except (AssertionError, OSError):
            return None
        finally:
            sock.close()

    assert poll_for(put_answer, timeout=15, interval=0.05) == b"DRAINING\r\n"


def test_port_in_use_is_one_clear_error(shardq_launch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc, run_dir, tmp_dir, stderr_path = shardq_launch(2, port=port)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"shardq kept running although port {port} is in use")
    err = stderr_path.read_text()
    assert proc.returncode != 0
    assert out == b""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert str(port) in lines[0] and "in use" in lines[0].lower(), lines[0]
    # Nothing was started, so nothing may be left behind.
    assert list(tmp_dir.iterdir()) == [], "temporary files left under TMPDIR"
    assert not any(p.is_socket() for p in run_dir.rglob("*")) if run_dir.exists() else True


def test_port_in_use_without_run_dir_leaves_no_temp_dir(tmp_path):
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", str(port)]
        result = subprocess.run(
            cmd,
            cwd=REPO_ROOT,
            env=dict(os.environ, TMPDIR=str(tmp_dir)),
            capture_output=True,
            timeout=20,
        )
    assert result.returncode != 0
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert list(tmp_dir.iterdir()) == [], "the supervisor's temporary run dir was left behind"
