"""Memory and speed of the job engine alone: N ready jobs of 100-byte bodies in one tube.

Puts N jobs with engine.put directly (increasing ids, a wall-clock-ns-like increasing
put stamp, pri 1024, delay 0, ttr 60, a fresh monotonic `now` per put), prints the
bytes each job costs (RSS delta from /proc/self/statm), the put throughput, and the
time to reserve and delete them all. GC thresholds are the server processes' own.

    python tools/engine_memory.py [N]
"""

from __future__ import annotations

import gc
import os
import sys
import time

from shardq.engine.engine import Engine
from shardq.processes.common.collector import GC_THRESHOLDS

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    gc.set_threshold(*GC_THRESHOLDS)
    engine = Engine()
    put = engine.put
    gc.collect()
    before = rss()
    # Bodies as the shard gets them: a distinct bytes object per job (made before the
    # timing starts, but counted: RSS is taken before they exist).
    bodies = [os.urandom(100) for _ in range(n)]
    wall = time.time_ns()
    mono = time.monotonic_ns()
    t0 = time.perf_counter()
    for i in range(n):
        job_id = i + 1
        put(job_id, wall + i * 1000, "default", 1024, 0, 60, bodies[i], mono + i * 1000)
    t_put = time.perf_counter() - t0
    del bodies  # the jobs hold the bodies now; the list itself is not the engine's
    gc.collect()
    after = rss()
    per_job = (after - before) / n
    print(f"jobs:            {n}")
    print(f"bytes/job (RSS): {per_job:.0f}  (includes the 100-byte body)")
    print(f"put:             {n / t_put:,.0f} jobs/s  ({t_put:.2f} s)")

    reserve, delete = engine.reserve, engine.delete
    now = mono + n * 1000
    t0 = time.perf_counter()
    for rid in range(n):
        payload = reserve(1, rid, ("default",), now, None, None)
        delete(1, payload[2], now)
    t_rd = time.perf_counter() - t0
    assert not engine.jobs
    print(f"reserve+delete:  {t_rd:.2f} s  ({n / t_rd:,.0f} jobs/s)")


if __name__ == "__main__":
    main()
