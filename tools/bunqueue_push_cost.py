"""The bunqueue door's own Python work for a pushed job, in one process with no sockets.

A `PUSHB` of 50 jobs of 100-byte string data goes through what the door does with it —
the MessagePack decode, the jobs' checks, the registry entries, their beanstalk `put`
lines, the `INSERTED` replies read and noted, the reply frame — N times into one registry
(as the door's does, it grows), with the door's collection thresholds. Each step is timed
in thread CPU time and logged in µs per job; run it on two checkouts to compare them
(`PYTHONPATH=CHECKOUT python tools/bunqueue_push_cost.py`). The door's loop and sockets,
and the serving process, are not in it (docs/BENCHMARKS.md has the whole).

    python tools/bunqueue_push_cost.py [--batches N]
"""

from __future__ import annotations

import argparse
import gc
import logging
import time

import msgpack

from shardq.processes.common.collector import GC_THRESHOLDS
from shardq.processes.frontends.bunqueue.registry import Registry
from shardq.processes.frontends.bunqueue.tubes import now_ms, put_of
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a
from shardq.protocol.reader import ReplyReader

JOBS = 50
log = logging.getLogger("bunqueue_push_cost")


class Steps:
    """The CPU time spent in each step, summed over the batches."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.since = time.thread_time()

    def start(self) -> None:
        self.since = time.thread_time()

    def done(self, step: str) -> None:
        now = time.thread_time()
        self.spent[step] = self.spent.get(step, 0.0) + now - self.since
        self.since = now


def one_batch(raw: bytes, reg: Registry, steps: Steps) -> None:
    """One PUSHB through the door's steps."""
    steps.start()
    req = b.decode(raw)
    assert isinstance(req, b.Request)
    steps.done("decode")
    specs = a.batch_specs(req.args["jobs"])
    steps.done("checks")
    jobs = [reg.add("q", spec, now_ms()) for spec in specs]
    steps.done("registry")
    b"".join(put_of(j) for j in jobs)
    steps.done("put lines")
    reader = ReplyReader()
    reader.feed(b"".join(b"INSERTED %d\r\n" % (len(reg) + i) for i in range(JOBS)))
    steps.start()
    for j in jobs:
        reply = reader.next_reply()
        assert reply is not None
        reg.queued(j, reply.number())
    steps.done("replies")
    b.ok(7, ids=[j.id for j in jobs])
    steps.done("answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()
    raw = msgpack.packb({"cmd": "PUSHB", "queue": "q", "jobs": [{"data": "x" * 100}] * JOBS})
    reg = Registry()
    steps = Steps()
    for _ in range(args.batches):
        one_batch(raw, reg, steps)
    per_job = 1e6 / (args.batches * JOBS)
    for step, seconds in steps.spent.items():
        log.info("%-10s %6.2f µs a job", step, seconds * per_job)
    log.info("%-10s %6.2f µs a job", "total", sum(steps.spent.values()) * per_job)


if __name__ == "__main__":
    main()
