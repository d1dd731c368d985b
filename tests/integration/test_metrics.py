"""The metrics endpoint (--metrics HOST:PORT): /metrics in Prometheus text whose numbers
are the ones `stats` and `stats-tube` give, histograms that count what happened, /health
that turns 503 when a process stops answering and 200 again when it answers; a bad address
refused at start; the key refused by a SIGHUP reload (it needs a restart)."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    REPO_ROOT,
    connect,
    http_get,
    make_cert,
    metrics_port,
    poll_for,
    read_replies,
    send,
    tube_on_shard,
    wal_args,
)
from prometheus_client.parser import text_string_to_metric_families

from shardq.bench.procs import metrics_port as printed_metrics_port
from shardq.bench.procs import read_line, read_lines, terminate
from shardq.protocol.stats_keys import CMD_KEYS, JOB_COUNT_KEYS

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
LAYOUTS = [("1", "1"), ("4", "1"), ("4", "2")]
LAYOUT_IDS = ["shards1", "shards4", "shards4-serving2"]


def scrape(port: int) -> Samples:
    status, body = http_get(port, "/metrics")
    assert status == 200, body
    found: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def yaml_of(reply: bytes) -> dict[str, str]:
    body = reply.split(b"\r\n", 1)[1].decode()
    return dict(line.split(": ", 1) for line in body.splitlines()[1:] if ": " in line)


def ask(sock: socket.socket, line: str) -> bytes:
    send(sock, line.encode() + b"\r\n")
    return read_replies(sock, 1)[0]


def put(sock: socket.socket, tube: str, n: int, delay: int = 0) -> None:
    send(sock, f"use {tube}\r\n".encode())
    read_replies(sock, 1)
    for _ in range(n):
        send(sock, f"put 0 {delay} 60 3\r\njob\r\n".encode())
        assert read_replies(sock, 1)[0].startswith(b"INSERTED")


def reserve(sock: socket.socket, tube: str) -> int:
    send(sock, f"watch {tube}\r\n".encode())
    read_replies(sock, 1)
    reply = ask(sock, "reserve-with-timeout 0")
    assert reply.startswith(b"RESERVED"), reply
    send(sock, f"ignore {tube}\r\n".encode())
    read_replies(sock, 1)
    return int(reply.split()[1])


def workload(port: int, shards: int) -> tuple[socket.socket, dict[str, dict[str, int]]]:
    """Two tubes on different shards (when there are several); returns the connection that
    holds a reservation, and per tube how many jobs were first reserved and deleted."""
    a, b = tube_on_shard(0, shards, "alpha"), tube_on_shard(shards - 1, shards, "beta")
    sock = connect(port)
    put(sock, a, 6)
    put(sock, b, 3)
    put(sock, b, 1, delay=100)
    ids_a = [reserve(sock, a) for _ in range(5)]
    for job in ids_a[:3]:
        assert ask(sock, f"delete {job}") == b"DELETED\r\n"
    assert ask(sock, f"bury {ids_a[3]} 0") == b"BURIED\r\n"  # ids_a[4] stays reserved
    for _ in range(2):
        assert ask(sock, f"delete {reserve(sock, b)}") == b"DELETED\r\n"
    return sock, {a: {"reserved": 5, "deleted": 3}, b: {"reserved": 2, "deleted": 2}}


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_metrics_equal_stats_and_stats_tube(
    shards: str, serving: str, shardq_server: Callable[..., Any]
) -> None:
    server = shardq_server(
        shards=int(shards), extra=("--serving", serving, "--metrics", "127.0.0.1:0")
    )
    port = metrics_port(server.run_dir)
    sock, expected = workload(server.port, int(shards))
    stats = yaml_of(ask(sock, "stats"))  # before the scrape: it counts this `stats` too
    got = scrape(port)
    for key in JOB_COUNT_KEYS:
        state = key.removeprefix("current-jobs-")
        assert got[("shardq_current_jobs", (("state", state),))] == int(stats[key]), key
    for key in CMD_KEYS:
        command = (("command", key.removeprefix("cmd-")),)
        assert got[("shardq_commands_total", command)] == int(stats[key]), key
    assert got[("shardq_jobs_total", ())] == int(stats["total-jobs"]) == 10
    assert got[("shardq_current_connections", (("kind", "current"),))] == int(
        stats["current-connections"]
    )
    for key in ("limit-connections-refused", "limit-output-closed", "limit-puts-refused"):
        assert key not in stats  # no limit set: a client's stats has beanstalkd's keys only
        assert got[("shardq_limit_hits_total", (("limit", key[6:]),))] == 0
    for tube, did in expected.items():
        fields = yaml_of(ask(sock, f"stats-tube {tube}"))
        label = (("tube", tube),)
        for key in JOB_COUNT_KEYS:
            state = (("state", key.removeprefix("current-jobs-")), ("tube", tube))
            assert got[("shardq_tube_current_jobs", state)] == int(fields[key]), (tube, key)
        assert got[("shardq_tube_jobs_total", label)] == int(fields["total-jobs"])
        assert got[("shardq_tube_deletes_total", label)] == int(fields["cmd-delete"])
        # every job put and not ready or delayed now was reserved once; every delete was
        # of a reserved job
        never = int(fields["current-jobs-ready"]) + int(fields["current-jobs-delayed"])
        assert got[("shardq_job_wait_seconds_count", label)] == did["reserved"]
        assert did["reserved"] == int(fields["total-jobs"]) - never
        assert got[("shardq_job_run_seconds_count", label)] == int(fields["cmd-delete"])
        assert got[("shardq_job_run_seconds_count", label)] == did["deleted"]
        inf = (("le", "+Inf"), ("tube", tube))
        assert got[("shardq_job_wait_seconds_bucket", inf)] == did["reserved"]
        assert got[("shardq_job_run_seconds_sum", label)] >= 0
    roles = {labels[0][1] for name, labels in got if name == "shardq_process_cpu_seconds_total"}
    assert roles == server.expected_roles() | {"supervisor", "metrics"}
    rss = [v for (name, _), v in got.items() if name == "shardq_process_resident_memory_bytes"]
    assert len(rss) == len(roles) and min(rss) > 1 << 20
    assert got[("shardq_healthy", ())] == 1
    assert http_get(port, "/health") == (200, b"ok\n")
    head = urllib.request.Request(f"http://127.0.0.1:{port}/health", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as answer:
        assert (answer.status, answer.read()) == (200, b"")
    # scrapes are invisible to clients: no connection, no command counted
    http_get(port, "/api/summary")
    after = yaml_of(ask(sock, "stats"))
    assert int(after["cmd-stats"]) == int(stats["cmd-stats"]) + 1  # this one only
    assert int(after["cmd-list-tubes"]) == int(stats["cmd-list-tubes"]) == 0
    assert after["total-connections"] == stats["total-connections"]
    sock.close()


@pytest.mark.parametrize("shards", ["1", "4"], ids=["shards1", "shards4"])
def test_health_is_503_while_a_shard_is_stopped(
    shards: str, shardq_server: Callable[..., Any]
) -> None:
    server = shardq_server(shards=int(shards), extra=("--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    roles = server.wait_all_children()
    assert http_get(port, "/health") == (200, b"ok\n")
    # with one shard, the serving process hosts it: stop that process
    role = "shard 3" if shards == "4" else "serving"
    pid = roles[role]
    os.kill(pid, signal.SIGSTOP)
    try:
        status, body = http_get(port, "/health")
        assert status == 503
        assert f"{role} (pid {pid}): stopped".encode() in body
        shard = "shard 3" if shards == "4" else "shard 0"
        assert f"{shard}: not answered in time".encode() in body
        assert scrape(port)[("shardq_healthy", ())] == 0
    finally:
        os.kill(pid, signal.SIGCONT)
    poll_for(lambda: http_get(port, "/health") == (200, b"ok\n"), timeout=15)


def test_no_colocate_leaves_out_what_it_cannot_know(shardq_server: Callable[..., Any]) -> None:
    """Without a hosted shard the serving process's counters reach `stats` only with a
    client's own `stats`: the metrics leave them out (never 0), and the coordinator does
    not trip over a question that brings none."""
    server = shardq_server(shards=2, extra=("--no-colocate", "--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    sock, expected = workload(server.port, 2)
    got = scrape(port)
    assert not any(name == "shardq_commands_total" for name, _ in got)
    assert not any(name == "shardq_current_connections" for name, _ in got)
    stats = yaml_of(ask(sock, "stats"))
    assert got[("shardq_current_jobs", (("state", "ready"),))] == int(stats["current-jobs-ready"])
    for tube in expected:
        fields = yaml_of(ask(sock, f"stats-tube {tube}"))
        label = (("tube", tube),)
        assert got[("shardq_tube_jobs_total", label)] == int(fields["total-jobs"])
    assert http_get(port, "/health") == (200, b"ok\n")
    assert server.roles()["coordinator"] == server.wait_all_children()["coordinator"]
    assert "Traceback" not in server.stderr()
    sock.close()


def test_a_killed_metrics_process_comes_back_on_the_same_port(
    shardq_server: Callable[..., Any],
) -> None:
    server = shardq_server(shards=1, extra=("--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    old = poll_for(lambda: server.roles().get("metrics"), timeout=10)
    os.kill(old, signal.SIGKILL)
    poll_for(lambda: server.roles().get("metrics") not in (None, old), timeout=15)
    poll_for(lambda: http_get(port, "/health") == (200, b"ok\n"), timeout=15)


def test_wal_bytes_and_fsync_latency(shardq_server: Callable[..., Any], tmp_path: Path) -> None:
    server = shardq_server(
        shards=2, extra=("--metrics", "127.0.0.1:0", *wal_args(tmp_path / "wal"))
    )
    port = metrics_port(server.run_dir)
    sock = connect(server.port)
    for shard in range(2):
        put(sock, tube_on_shard(shard, 2), 3)
    got = scrape(port)
    for shard in ("0", "1"):
        label = (("shard", shard),)
        assert got[("shardq_wal_bytes_written_total", label)] > 3 * 3
        assert got[("shardq_wal_disk_bytes", label)] > 0
        assert got[("shardq_wal_fsync_seconds_count", label)] >= 3  # -f 0: one per put turn
        assert got[("shardq_wal_fsync_seconds_sum", label)] > 0
    assert got[("shardq_binlog_records_written_total", ())] == 6
    sock.close()


def test_without_metrics_there_is_no_port_and_no_histogram(
    shardq_server: Callable[..., Any],
) -> None:
    server = shardq_server(shards=1)
    roles = server.wait_all_children()
    assert "metrics" not in roles
    assert not (server.run_dir / "metrics-address").exists()


def test_metrics_over_https(shardq_server: Callable[..., Any], shardq_launch, tmp_path) -> None:
    """metrics.tls_cert and metrics.tls_key: the endpoint speaks HTTPS only; a half-given
    pair stops the start with one line naming the key."""
    cert, key = make_cert(tmp_path, "metrics", "127.0.0.1")
    conf = tmp_path / "https.yaml"
    conf.write_text(f"metrics:\n  listen: 127.0.0.1:0\n  tls_cert: {cert}\n  tls_key: {key}\n")
    server = shardq_server(shards=1, extra=("--config", str(conf)))
    port = metrics_port(server.run_dir)
    context = ssl.create_default_context(cafile=str(cert))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/health", context=context) as answer:
        assert (answer.status, answer.read()) == (200, b"ok\n")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        http_get(port, "/health")  # plain HTTP gets no answer
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/health", context=context) as answer:
        assert answer.status == 200  # and the endpoint goes on
    conf.write_text(f"metrics:\n  listen: 127.0.0.1:0\n  tls_cert: {cert}\n")
    proc, _run, _tmp, stderr_path = shardq_launch(1, ("--config", str(conf)))
    assert proc.wait(20) == 2
    assert stderr_path.read_text().strip() == (
        f"shardq: {conf}: metrics.tls_cert: needs metrics.tls_key as well"
    )


def test_a_bad_or_busy_address_is_refused_with_one_line(shardq_launch) -> None:
    proc, _run, _tmp, stderr_path = shardq_launch(1, ("--metrics", "nowhere"))
    assert proc.wait(20) == 2
    err = stderr_path.read_text().strip()
    assert err.startswith("shardq: flag --metrics (metrics.listen): must be HOST:PORT")
    assert "\n" not in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        proc, _run, _tmp, stderr_path = shardq_launch(1, ("--metrics", f"127.0.0.1:{taken}"))
        assert proc.wait(20) == 1
    err = stderr_path.read_text().strip()
    assert err == (
        f"shardq: flag --metrics (metrics.listen): cannot listen on 127.0.0.1:{taken}: "
        "Address already in use"
    )


def test_shardqd_takes_the_long_flag(tmp_path: Path) -> None:
    """`shardqd --metrics=HOST:PORT`, as `shardq serve --metrics` (beanstalkd's command line
    plus shardq's long flags)."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "shardq.dropin", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--run-dir", str(run_dir), "--shards=1", "--serving=1", "--metrics=127.0.0.1:0"]
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert b"listening" in read_line(proc, 20)
        port = metrics_port(run_dir)
        assert http_get(port, "/health") == (200, b"ok\n")
        assert scrape(port)[("shardq_shards_answered", ())] == 1
    finally:
        assert terminate(proc, 10, group=True) == 0
        assert proc.stdout is not None
        proc.stdout.close()


def test_sighup_refuses_a_new_metrics_address(shardq_launch, tmp_path: Path) -> None:
    conf = tmp_path / "shardq.yaml"
    conf.write_text("metrics:\n  listen: 127.0.0.1:0\n")
    proc, run_dir, _tmp, stderr_path = shardq_launch(1, ("--config", str(conf)))
    try:
        lines = read_lines(proc, 2, 20)  # the beanstalk port's line, then the metrics port's
        port = metrics_port(run_dir)
        assert printed_metrics_port(lines) == port
        conf.write_text("metrics:\n  listen: 127.0.0.1:1\n")
        proc.send_signal(signal.SIGHUP)
        refused = (
            "SIGHUP: metrics.listen needs a restart to change "
            "('127.0.0.1:0' -> '127.0.0.1:1'); kept"
        )
        poll_for(lambda: refused in stderr_path.read_text(), timeout=10)
        assert http_get(port, "/health") == (200, b"ok\n")  # still served where it was
    finally:
        assert terminate(proc, 10, group=True) == 0
