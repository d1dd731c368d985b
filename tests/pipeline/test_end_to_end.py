"""A real shardq run with --events, a small known load, then `shardq analyze` on its logs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import greenstalk
import pytest

from shardq.bench.procs import terminate, wait_listening

from .conftest import JVM_FLAGS, REPO, require_spark, spark_env
from .expect import read_tubes_csv

pytestmark = pytest.mark.spark

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
FILE_NAME = re.compile(r"^.+-shard[01]-\d{10}(\.\d+)?\.jsonl$")


def start_server(events: Path) -> tuple[subprocess.Popen[bytes], int]:
    argv = [sys.executable, "-m", "shardq", "serve", "-p", "0", "--shards", "2"]
    proc = subprocess.Popen(
        [*argv, "--events", str(events)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=events.parent,  # no config/shardq.yaml here: defaults plus flags
    )
    port, _ = wait_listening(proc, START_TIMEOUT)
    if port is None:
        proc.kill()
        proc.wait()
        pytest.fail("shardq did not print its listening line")
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    if terminate(proc, STOP_TIMEOUT) is None:
        pytest.fail("shardq did not stop on SIGTERM")


def drive(port: int) -> None:
    """alpha: 6 puts, a release, a bury and a kick, 4 deletes; beta: 4 puts, 3 deletes, and
    a job held when its connection closes: given back, which the log has as a release."""
    with greenstalk.Client(("127.0.0.1", port), use="alpha", watch="alpha") as c:
        ids = [c.put(f"a{i}") for i in range(6)]
        job = c.reserve(timeout=5)
        assert job.id == ids[0]
        c.release(job)
        job = c.reserve(timeout=5)
        assert job.id == ids[0]
        c.delete(job)
        job = c.reserve(timeout=5)
        c.bury(job)
        assert c.kick(1) == 1
        c.delete(c.reserve(timeout=5))
        for _ in range(2):
            c.delete(c.reserve(timeout=5))  # ids[4] and ids[5] stay ready
        c.use("beta")
        c.watch("beta")
        c.ignore("alpha")
        for i in range(4):
            c.put(f"b{i}")
        for _ in range(3):
            c.delete(c.reserve(timeout=5))
        c.reserve(timeout=5)  # held when the connection closes
    with greenstalk.Client(("127.0.0.1", port), use="beta") as c:
        assert c.stats_tube("beta")["current-jobs-ready"] == 1  # given back


EXPECTED = {
    "alpha": dict(puts=6, reserves=6, releases=1, buries=1, kicks=1, timeouts=0, deletes=4),
    "beta": dict(puts=4, reserves=4, releases=1, buries=0, kicks=0, timeouts=0, deletes=3),
}


def test_analyze_a_real_run(tmp_path):
    require_spark()
    events = tmp_path / "events"
    proc, port = start_server(events)
    try:
        drive(port)
    finally:
        stop(proc)
    names = sorted(p.name for p in events.iterdir())
    assert names and all(FILE_NAME.match(n) for n in names), names

    out = tmp_path / "out"
    env = {**os.environ, **spark_env()}
    env["PYSPARK_SUBMIT_ARGS"] = (
        f"--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
        f"--conf spark.sql.shuffle.partitions=2 "
        f"--conf 'spark.driver.extraJavaOptions={JVM_FLAGS}' pyspark-shell"
    )
    argv = [sys.executable, "-m", "shardq", "analyze", f"{events}/*.jsonl", "--out", str(out)]
    done = subprocess.run(
        [*argv, "--master", "local[2]"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]

    rows = {r["tube"]: r for r in read_tubes_csv(out / "tubes.csv")}
    assert set(rows) == set(EXPECTED)
    for tube, want in EXPECTED.items():
        assert {k: int(rows[tube][k]) for k in want} == want, tube
        for col in ("wait_p50_ms", "wait_p99_ms", "run_p50_ms", "run_p99_ms"):
            assert 0 <= float(rows[tube][col]) < 5000, (tube, col, rows[tube][col])
    assert (out / "tubes.parquet").is_dir() and (out / "minutes.parquet").is_dir()
    assert "<svg" in (out / "report.html").read_text()
