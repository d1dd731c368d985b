"""`shardq bench --protocol bunqueue` against shardq's bunqueue door: pushes and
pull+acks, single and batched, counted in jobs, and the run's queue empty afterwards.

Throughput is measured for docs/BENCHMARKS.md, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bunqueue_server import bunqueue_server_fixture  # noqa: F401  (the fixture)
from bunqueue_wire import Raw


def bench(port: int, *args: str) -> dict:
    cmd = [sys.executable, "-m", "shardq", "bench", "--port", str(port), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.mark.parametrize("batch", ["1", "20"])
def test_push_and_pull_loads_through_the_bunqueue_door(bunqueue_server, batch: str) -> None:
    server = bunqueue_server(1)
    for load in ("put", "reserve"):
        args = ["--protocol", "bunqueue", "-w", load, "--batch", batch, "-c", "2"]
        result = bench(server.bunqueue, *args, "--pipeline", "3", "-n", "200", "--prefill", "400")
        assert (result["protocol"], result["workload"], result["batch"]) == (
            "bunqueue",
            load,
            int(batch),
        )
        assert result["jobs"] >= 200 and result["jobs_per_s"] > 0
        counts = Raw(server.bunqueue).call("GetJobCounts", queue=result["queue"])["counts"]
        assert counts["waiting"] == counts["active"] == 0, counts  # drained, all acked
        if load == "reserve":
            assert counts["completed"] == result["jobs"]
