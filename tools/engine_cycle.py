"""Pure-engine cost of a put/reserve/delete cycle on a tube without a policy (no sockets, no
processes): the engine's own share of the hot path, to see that a change costs nothing there.

    python tools/engine_cycle.py [--cycles N] [--repeat R] [--policed] [--waiting] [--backlog B]

`--policed`: other tubes have policies (the engine's `policed` flag is on), this one has not.
`--waiting`: the reserve comes first and waits; the put serves it.
`--backlog B`: B jobs are ready in the tube before the cycles start, so each reserve takes
the oldest of B + 1 (a queue that holds work, as under a load generator's producers).
Prints the best and the median of R repetitions, in microseconds per cycle.
"""

from __future__ import annotations

import argparse
import statistics
import time

from shardq.engine.engine import Engine
from shardq.engine.policy import Policies


def run(cycles: int, policed: bool, waiting: bool, backlog: int = 0) -> float:
    """Seconds per cycle of put, reserve, delete (one connection, tube "default")."""
    engine = Engine()
    if policed:
        engine.set_policies(Policies({"other*": {"max_reserved": 2, "reserve_rate": 5}}))
    now = 1_000_000_000_000
    put, reserve, delete = engine.put, engine.reserve, engine.delete
    tubes = ("default",)
    for n in range(1, backlog + 1):  # older ids: put before the cycles' jobs
        put(n, n, "default", 0, 0, 60, b"x", now)
    started = time.perf_counter()
    for n in range(backlog + 1, backlog + cycles + 1):
        now += 1000
        if waiting:
            reserve(1, n, tubes, now, None, None)
            put(n, n, "default", 0, 0, 60, b"x", now)
            engine.events.clear()
        else:
            put(n, n, "default", 0, 0, 60, b"x", now)
            if backlog:
                n = reserve(1, n, tubes, now, None, None)[2]  # engine.Reserved: the oldest
            else:
                reserve(1, n, tubes, now, None, None)
        delete(1, n, now)
    return (time.perf_counter() - started) / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--policed", action="store_true")
    parser.add_argument("--waiting", action="store_true")
    parser.add_argument("--backlog", type=int, default=0)
    args = parser.parse_args()
    if args.backlog and args.waiting:
        parser.error("--backlog: a reserve with jobs ready does not wait")
    times = [
        run(args.cycles, args.policed, args.waiting, args.backlog) * 1e6 for _ in range(args.repeat)
    ]
    print(
        f"put/reserve/delete, policed={args.policed}, waiting={args.waiting}, "
        f"backlog={args.backlog}: "
        f"best {min(times):.2f} us, median {statistics.median(times):.2f} us "
        f"({args.repeat} x {args.cycles} cycles)"
    )


if __name__ == "__main__":
    main()
