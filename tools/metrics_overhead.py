#!/usr/bin/env python3
"""What `--metrics` costs a shard per job: the engine's put → reserve → delete with its
`timing` off (None: the default) and on (`engine/timing.py`'s histograms), in this process,
CPU time (`time.process_time`), rounds alternating off/on, the median reported.

    .venv/bin/python tools/metrics_overhead.py --jobs 200000 --rounds 7

No sockets: this isolates what a shard's loop does more per job, which the load generator
(docs/BENCHMARKS.md, "Metrics") cannot separate from the noise of a shared machine.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time

from shardq.engine.engine import RESERVED, Engine
from shardq.engine.timing import Timing

log = logging.getLogger("metrics_overhead")
TUBES = ("a", "b", "c", "d")


def one_round(jobs: int, timed: bool) -> float:
    """CPU seconds for `jobs` put + reserve + delete cycles, spread over a few tubes."""
    engine = Engine()
    if timed:
        engine.timing = Timing()
    now = 1_000_000_000
    started = time.process_time()
    for i in range(1, jobs + 1):
        tube = TUBES[i & 3]
        engine.put(i, i, tube, 0, 0, 60, b"x" * 100, now)
        now += 1000
        payload = engine.reserve(7, i, (tube,), now, None, None)
        assert payload is not None and payload[0] == RESERVED
        now += 1000
        engine.delete(7, i, now)
    return time.process_time() - started


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):
        off.append(one_round(args.jobs, False))
        on.append(one_round(args.jobs, True))
    per_off = statistics.median(off) / args.jobs * 1e6
    per_on = statistics.median(on) / args.jobs * 1e6
    log.info("off: %s", " ".join(f"{t:.3f}" for t in off))
    log.info("on:  %s", " ".join(f"{t:.3f}" for t in on))
    log.info(
        "median per job (put + reserve + delete): off %.2f us, on %.2f us, +%.2f us (+%.1f%%)",
        per_off,
        per_on,
        per_on - per_off,
        100 * (per_on / per_off - 1),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
