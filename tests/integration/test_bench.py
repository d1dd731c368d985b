"""`shardq bench` against a live shardq: sane, non-zero figures and no wrong replies.

Performance itself is measured by `make bench` (docs/BENCHMARKS.md), never asserted here.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardq.bench.hist import Histogram, highest_of, index_of, lowest_of


def _bench(port: int, *args: str, timeout: float = 60) -> dict:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def _sane(result: dict, ops: tuple[str, ...]) -> None:
    assert result["errors"] == 0, result["error_samples"]
    assert result["total_ops"] > 0 and result["ops_per_sec"] > 0
    for op in ops:
        o = result["ops"][op]
        assert o["count"] > 0 and o["errors"] == 0
        lat = o["latency_us"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]


@pytest.fixture(scope="module")
def port() -> int:
    """One shardq with 2 shards for every bench run of this module."""
    from shardq.bench.servers import Server

    server = Server("shardq serve -p {port} --shards 2")
    yield server.port
    server.stop()


@pytest.mark.parametrize(
    ("args", "ops"),
    [
        (("-w", "put", "-c", "4", "--pipeline", "8", "-d", "1", "-P", "2"), ("put",)),
        (("-w", "mixed", "-c", "6", "-d", "1.5", "-P", "2"), ("put", "reserve", "delete")),
        (("-w", "multitube", "-c", "8", "-t", "4", "-d", "1.5"), ("put", "reserve", "delete")),
        (("-w", "pingpong", "-d", "1"), ("put", "reserve", "delete")),
    ],
    ids=["put", "mixed", "multitube", "pingpong"],
)
def test_workloads_report_sane_figures(port: int, args: tuple[str, ...], ops: tuple) -> None:
    result = _bench(port, *args)
    _sane(result, ops)
    if "pingpong" in args:
        assert result["cycles"]["count"] > 0


def test_reserve_drains_exactly_the_prefilled_jobs(port: int) -> None:
    result = _bench(port, "-w", "reserve", "-c", "4", "--jobs", "500", "-P", "2")
    _sane(result, ("reserve", "delete"))
    assert result["prefill"]["jobs"] == 500
    assert result["ops"]["reserve"]["count"] == 500
    assert result["ops"]["delete"]["count"] == 500


def test_compare_quick_matrix(tmp_path) -> None:
    """A tiny A/B run (shardq against itself, 0.3 s cells, --no-stub: no L column) writes a
    report with a chart; the stub's column is tests/integration/test_bench_stub.py's.

    Every cell has a rate and a server CPU above 0, however busy the machine: a cell lasts
    until its first answer when it has none at its deadline (test_bench_bounds.py), and
    the server's CPU is read to the nanosecond (it read 0.0 from /proc's 10 ms ticks)."""
    report = tmp_path / "BENCH.md"
    cmd = [
        sys.executable, "-m", "shardq", "bench", "compare", "--matrix", "quick",
        "--rounds", "1", "--duration", "0.3", "--json", "--report", str(report), "--no-stub",
        "--a", "shardq serve -p {port} --shards 1", "--b", "shardq serve -p {port} --shards 2",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["l"] is None
    for row in result["rows"]:
        assert "l" not in row
        assert row["a"]["errors"] == 0 and row["b"]["errors"] == 0, row
        assert row["a"]["value"] > 0 and row["b"]["value"] > 0 and row["ratio"] > 0, row
        if row["kind"] != "memory":
            assert row["a"]["cpu_pct"] > 0 and row["b"]["kops_per_cpu_s"] > 0, row
    text = report.read_text()
    assert "bench:begin" in text and "| put, 50 conns x16 pipelined" in text
    assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")


def test_histogram_buckets_and_merge() -> None:
    for v in (0, 1, 127, 128, 129, 1000, 123_456, 10**9, 10**12):
        assert lowest_of(index_of(v)) <= v <= highest_of(index_of(v))
    a, b = Histogram(), Histogram()
    for v in range(1, 1001):
        (a if v % 2 else b).record(v * 1000)
    a.merge(b)
    assert a.total == 1000 and a.max == 1_000_000
    assert abs(a.percentile(50) - 500_000) / 500_000 < 0.02
    assert abs(a.percentile(99) - 990_000) / 990_000 < 0.02


# ---------------------------------------------------------------------- clean-up and failures


def _server_stats(port: int) -> dict[str, str]:
    """The server-wide `stats` of the server at `port`."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while b"\r\n" not in data or len(data) < data.index(b"\r\n") + 2 + int(data.split()[1]):
            chunk = s.recv(65536)
            assert chunk, "server closed the connection"
            data += chunk
    body = data.split(b"\r\n", 1)[1].decode()
    return dict(
        (k.strip(), v.strip())
        for k, _, v in (line.partition(":") for line in body.splitlines())
        if v
    )


def _bench_run(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def fresh_port() -> int:
    """A shardq of its own, so its job counts are this test's alone."""
    from shardq.bench.servers import Server

    server = Server("shardq serve -p {port} --shards 2")
    yield server.port
    server.stop()


def test_bench_removes_the_jobs_it_put(fresh_port: int) -> None:
    done = _bench_run(fresh_port, "-w", "put", "-c", "4", "--pipeline", "16", "-d", "0.5")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["total_ops"] > 0
    assert result["cleanup"]["removed"] >= result["total_ops"] and result["cleanup"]["left"] == 0
    assert "removing" in done.stderr and "--keep keeps them" in done.stderr
    stats = _server_stats(fresh_port)
    assert int(stats["total-jobs"]) >= result["total_ops"]
    for state in ("ready", "reserved", "delayed", "buried"):
        assert stats[f"current-jobs-{state}"] == "0", stats


def test_bench_keep_leaves_the_jobs_and_says_so(fresh_port: int) -> None:
    done = _bench_run(fresh_port, "-w", "multitube", "-c", "4", "-t", "3", "-d", "0.5", "--keep")
    assert done.returncode == 0, done.stderr
    cleanup = json.loads(done.stdout)["cleanup"]
    assert cleanup["kept"] and cleanup["removed"] == 0 and cleanup["left"] > 0
    assert len(cleanup["tubes"]) == 4  # the three tubes and the prefix (unused here)
    assert f"kept {cleanup['left']:,} jobs" in done.stderr
    stats = _server_stats(fresh_port)
    held = sum(int(stats[f"current-jobs-{s}"]) for s in ("ready", "reserved", "delayed", "buried"))
    assert held == cleanup["left"]


def test_bench_names_the_address_it_cannot_reach() -> None:
    # a port bound and never listened on: connections are refused, and no other test's
    # server can take it meanwhile (a port merely found free could be: it was, once in CI)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        started = time.monotonic()
        done = _bench_run(port, "-d", "1")
    assert done.returncode == 1
    assert done.stderr.strip() == f"shardq bench: cannot reach 127.0.0.1:{port}: connection refused"
    assert time.monotonic() - started < 10


def _compare_failing(a: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "shardq", "bench", "compare", "--matrix", "quick", "--rounds", "1",
        "--duration", "0.3", "--no-stub", "--a", a, "--b", "shardq serve -p {port}",
    ]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # where the servers' output files go
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_compare_shows_the_error_of_a_server_that_does_not_start(tmp_path: Path) -> None:
    script = "import sys; print('disk on fire', file=sys.stderr); sys.exit(3)"
    done = _compare_failing(
        f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {{port}}", tmp_path
    )
    assert done.returncode == 1
    assert "server A did not start" in done.stderr and "exited with status 3" in done.stderr
    assert "  disk on fire" in done.stderr  # its own words, read before the file was removed
    assert "No such file" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # its output file is gone afterwards


def test_compare_shows_shardqs_own_start_up_error(tmp_path: Path) -> None:
    done = _compare_failing("shardq serve -p {port} --shards 0", tmp_path)
    assert done.returncode == 1
    assert "server A did not start" in done.stderr and "--shards" in done.stderr, done.stderr


def test_compare_names_a_command_that_does_not_exist(tmp_path: Path) -> None:
    done = _compare_failing("no-such-server-program -p {port}", tmp_path)
    assert done.returncode == 1
    assert "server A: cannot run no-such-server-program" in done.stderr, done.stderr


def test_help_explains_every_workload_and_matrix() -> None:
    from shardq.bench.workloads import MATRIX_HELP, WORKLOADS

    def help_of(*args: str) -> str:
        cmd = [sys.executable, "-m", "shardq", "bench", *args, "--help"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return " ".join(done.stdout.split())

    bench, compare = help_of(), help_of("compare")
    for name in WORKLOADS:
        assert f" {name} " in bench.split("Workloads (-w):")[1], name
    for name in MATRIX_HELP:
        assert f" {name} " in compare.split("Matrices (--matrix):")[1], name


def test_time_left() -> None:
    from shardq.bench.compare import time_left as runs_left
    from shardq.bench.runner import time_left

    assert time_left(5.0, 0.5).strip() == "5 s left"
    assert time_left(60.0, 0.25).strip() == "3 min left"
    assert runs_left(30.0, 3, 9) == ", about 60 s left"
    assert runs_left(30.0, 0, 9) == ""


def test_busy_neighbours_run_during_the_block_only() -> None:
    """`Busy(n)`: n processes running inside the block, every one of them reaped after it."""
    from shardq.bench.busy import Busy

    with Busy(2) as busy:
        pids = [p.pid for p in busy.procs]
        assert len(set(pids)) == 2
        assert all(p.poll() is None for p in busy.procs)
        procs = list(busy.procs)
    assert all(p.returncode is not None for p in procs)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


def test_compare_loaded_matrix(tmp_path) -> None:
    """`--matrix loaded`: put (1 conn) and pingpong, each with one neighbour busy, marked as
    such in the result and named so in the report."""
    from shardq.bench.limits import stub_command

    report = tmp_path / "BENCH.md"
    cmd = [
        sys.executable, "-m", "shardq", "bench", "compare", "--matrix", "loaded",
        "--rounds", "1", "--duration", "0.3", "--json", "--report", str(report), "--no-stub",
        "--a", stub_command(), "--b", stub_command(),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["engine"] == "c" and result["processes"] == 1
    assert [r["key"] for r in result["rows"]] == ["put-1-busy", "pingpong-1-busy"]
    for row in result["rows"]:
        assert row["busy"] == 1 and row["label"].endswith(", one core busy")
        assert row["a"]["errors"] == 0 and row["b"]["errors"] == 0 and row["b"]["value"] > 0
    text = report.read_text()
    assert "| put, 1 conn, one core busy (ops/s) |" in text
    assert sys.executable not in text  # the report names no path of this machine
