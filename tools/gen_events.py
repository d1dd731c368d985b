"""Fake shardq event logs with known answers, for the pipeline's tests and benchmarks.

    python tools/gen_events.py DIR --events 1000000 [--seed 1] [--servers 3] [--tubes 6]

Simulates job lifecycles (put, reserve, touch, release, bury, kick, timeout, delete,
unfinished) on several servers, one of which restarts and reuses job ids, and writes them
as DIR/<server>-shard<N>-<YYYYmmddHH>.jsonl in the format of shardq/events.py. Lines come
out of time order (job by job), ties in ts are frequent (as in one shard turn), and
`Truth` records the expected per-tube counts, per-minute counts, waits and runs, computed
from the simulation itself rather than by re-reading the files.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

START = 1_767_225_600.0  #: 2026-01-01 00:00 UTC
SHARDS = 2


def _counters() -> defaultdict[Any, Counter[str]]:
    return defaultdict(Counter)


def _lists() -> defaultdict[str, list[float]]:
    return defaultdict(list)


@dataclass
class Truth:
    """Answers of one generated log: what the pipeline must find."""

    counts: dict[str, Counter[str]] = field(default_factory=_counters)
    minutes: dict[tuple[str, int], Counter[str]] = field(default_factory=_counters)
    waits: dict[str, list[float]] = field(default_factory=_lists)
    runs: dict[str, list[float]] = field(default_factory=_lists)


@dataclass
class Job:
    server: str
    id: int
    tube: str
    rows: list[tuple[float, str]] = field(default_factory=list)


class Simulator:
    """Makes job lifecycles; `jobs()` yields them with their (ts, event) rows in order."""

    def __init__(self, rng: random.Random, tubes: list[str], span: float) -> None:
        self.rng = rng
        self.tubes = tubes
        self.span = span
        self.wait_mean = {t: 0.05 * (i + 1) for i, t in enumerate(tubes)}
        self.run_mean = {t: 0.2 * (i + 1) for i, t in enumerate(tubes)}

    def job(self, server: str, job_id: int, start: float) -> tuple[Job, int, float]:
        rng = self.rng
        tube = rng.choice(self.tubes)
        job = Job(server, job_id, tube)
        delay = rng.choice((0,) * 8 + (1, 5))
        t = _ts(start + rng.random() * self.span)
        job.rows.append((t, "put"))
        t = _ts(t + delay)
        for _ in range(4):  # at most four reserves, so every life is short
            if rng.random() < 0.2:  # handed straight to a waiting worker: same ts
                t = _ts(t)
            else:
                t = _ts(t + min(rng.expovariate(1 / self.wait_mean[tube]), 30))
            if rng.random() < 0.04:
                return job, delay, t  # still ready when the log ends
            job.rows.append((t, "reserve"))
            t = _ts(t + min(rng.expovariate(1 / self.run_mean[tube]), 30))
            if rng.random() < 0.1:
                job.rows.append((t, "touch"))
                t = _ts(t + rng.random())
            roll = rng.random()
            if roll < 0.62:
                job.rows.append((t, "delete"))
                return job, delay, t
            if roll < 0.74:
                job.rows.append((t, "release"))
            elif roll < 0.82:
                job.rows.append((t, "bury"))
                t = _ts(t + rng.random() * 5)
                job.rows.append((t, "kick"))
            elif roll < 0.92:
                t = _ts(t + 2)
                job.rows.append((t, "timeout"))
            elif roll < 0.96:
                return job, delay, t  # a worker still holds it
            else:
                job.rows.append((t, "release"))
                t = _ts(t + rng.random())
                job.rows.append((t, "delete"))  # deleted while ready: no run time
                return job, delay, t
        return job, delay, t


def _ts(x: float) -> float:
    return round(x, 6)


def record(truth: Truth, job: Job, delay: int) -> None:
    """Add one job's answers: counts, minutes, wait (first reserve), run (reserve->delete)."""
    tube, rows = job.tube, job.rows
    for ts, event in rows:
        if event != "touch":
            truth.counts[tube][event] += 1
        truth.minutes[(tube, int(ts // 60) * 60)][event] += 1
    reserves = [ts for ts, e in rows if e == "reserve"]
    if reserves:
        truth.waits[tube].append((reserves[0] - (rows[0][0] + delay)) * 1000)
    lifecycle = [(ts, e) for ts, e in rows if e != "touch"]
    if len(lifecycle) > 1 and lifecycle[-1][1] == "delete" and lifecycle[-2][1] == "reserve":
        truth.runs[tube].append((lifecycle[-1][0] - lifecycle[-2][0]) * 1000)


def lines(job: Job, delay: int) -> Iterator[tuple[int, float, str]]:
    """(shard, ts, json line) for each row of a job."""
    shard = zlib.crc32(job.tube.encode()) % SHARDS
    for ts, event in job.rows:
        yield (
            shard,
            ts,
            (
                f'{{"ts":{ts:.6f},"server":"{job.server}","shard":{shard},"tube":"{job.tube}",'
                f'"job":{job.id},"event":"{event}","pri":1024,"delay":{delay},"ttr":2,"bytes":100}}'
            ),
        )


def generate(
    directory: str,
    events: int,
    seed: int = 1,
    servers: int = 3,
    tubes: int = 6,
    span: float = 3600.0,
    truth: Truth | None = None,
    shuffle: bool = False,
) -> int:
    """Write about `events` rows under `directory`; returns the exact number written.

    The last server restarts after `span` + 10 minutes and numbers its jobs from 1 again.
    """
    rng = random.Random(seed)
    sim = Simulator(rng, [f"tube-{i}" for i in range(tubes)], span)
    names = [f"srv{i}" for i in range(servers)]
    os.makedirs(directory, exist_ok=True)
    buffers: dict[str, list[str]] = defaultdict(list)
    next_id = dict.fromkeys(names, 1)
    written = 0
    while written < events:
        server = rng.choice(names)
        start = START
        if server == names[-1] and written >= events // 2:
            if next_id[server] > 0:  # the restart: ids begin again at 1
                next_id[server] = -1
            start = START + span + 600
        job_id = abs(next_id[server])
        next_id[server] = next_id[server] + (1 if next_id[server] > 0 else -1)
        job, delay, _ = sim.job(server, job_id, start)
        if truth is not None:
            record(truth, job, delay)
        for shard, ts, line in lines(job, delay):
            hour = time.strftime("%Y%m%d%H", time.gmtime(ts))
            buffers[f"{server}-shard{shard}-{hour}.jsonl"].append(line)
            written += 1
        if sum(map(len, buffers.values())) > 200_000:
            _flush(directory, buffers, rng, shuffle)
    _flush(directory, buffers, rng, shuffle)
    return written


def _flush(directory: str, buffers: dict[str, list[str]], rng: random.Random, shuffle: bool):
    for name, rows in buffers.items():
        if shuffle:
            rng.shuffle(rows)
        with open(os.path.join(directory, name), "a", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    buffers.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--tubes", type=int, default=6)
    parser.add_argument("--span", type=float, default=3600.0, help="seconds of puts")
    args = parser.parse_args()
    n = generate(args.dir, args.events, args.seed, args.servers, args.tubes, args.span)
    print(f"{n} events -> {args.dir}")


if __name__ == "__main__":
    main()
