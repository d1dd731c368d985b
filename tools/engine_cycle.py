"""Pure-engine cost of a put/reserve/delete cycle on a tube without a policy (no sockets, no
processes): the engine's own share of the hot path, to see that a change costs nothing there.

    python tools/engine_cycle.py [--cycles N] [--repeat R] [--policed] [--waiting]

`--policed`: other tubes have policies (the engine's `policed` flag is on), this one has not.
`--waiting`: the reserve comes first and waits; the put serves it.
Prints the best and the median of R repetitions, in microseconds per cycle.
"""

from __future__ import annotations

import argparse
import statistics
import time

from shardq.engine.engine import Engine
from shardq.engine.policy import Policies


def run(cycles: int, policed: bool, waiting: bool) -> float:
    """Seconds per cycle of put, reserve, delete (one connection, tube "default")."""
    engine = Engine()
    if policed:
        engine.set_policies(Policies({"other*": {"max_reserved": 2, "reserve_rate": 5}}))
    now = 1_000_000_000_000
    put, reserve, delete = engine.put, engine.reserve, engine.delete
    tubes = ("default",)
    started = time.perf_counter()
    for n in range(1, cycles + 1):
        now += 1000
        if waiting:
            reserve(1, n, tubes, now, None, None)
            put(n, n, "default", 0, 0, 60, b"x", now)
            engine.events.clear()
        else:
            put(n, n, "default", 0, 0, 60, b"x", now)
            reserve(1, n, tubes, now, None, None)
        delete(1, n, now)
    return (time.perf_counter() - started) / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--policed", action="store_true")
    parser.add_argument("--waiting", action="store_true")
    args = parser.parse_args()
    times = [run(args.cycles, args.policed, args.waiting) * 1e6 for _ in range(args.repeat)]
    print(
        f"put/reserve/delete, policed={args.policed}, waiting={args.waiting}: "
        f"best {min(times):.2f} us, median {statistics.median(times):.2f} us "
        f"({args.repeat} x {args.cycles} cycles)"
    )


if __name__ == "__main__":
    main()
