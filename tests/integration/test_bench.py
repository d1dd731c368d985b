"""`shardq bench` against a live shardq: sane, non-zero figures and no wrong replies.

Performance itself is measured by `make bench` (docs/BENCHMARKS.md), never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
    report with a chart; the stub's column is tests/integration/test_bench_stub.py's."""
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
        assert row["a"]["errors"] == 0 and row["b"]["errors"] == 0
        assert row["a"]["value"] > 0 and row["b"]["value"] > 0 and row["ratio"] > 0
        if row["kind"] != "memory":
            assert row["a"]["cpu_pct"] > 0 and row["b"]["kops_per_cpu_s"] > 0
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
