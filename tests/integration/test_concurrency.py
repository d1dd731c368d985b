"""Many producers and consumers over 12 tubes spread across 4 shards, served by one and by
two serving processes.

Producers put ~2,000 jobs, each body a unique token. Consumers watch random tube sets
(spanning shards), reserve with timeouts, and randomly delete, release (some with a
delay of 1 s), bury (a kicker thread kicks them back), hold several jobs at once, drop
the connection abruptly while holding jobs or while a reserve waits. At the end:

- every job put was deleted exactly once (DELETED replies are counted per id), and every
  RESERVED body is the body that was put under that id;
- no job was held by two connections at once (below);
- no reply said NOT_FOUND to a holder (it would mean someone else took its job);
- ``stats`` shows no ready, reserved, delayed or buried job.

Exclusive holding is checked from the client side (how, and why soundly: see
concurrency_run.py); the threads and the checks are ``concurrency_run.Run``.

``SHARDQ_CONCURRENCY_REPEAT=20`` runs the test 20 times (each on a fresh server);
``SHARDQ_CONCURRENCY_SEED`` fixes the random choices (thread timing still varies).
"""

from __future__ import annotations

import os
import random
import time

import pytest
from concurrency_run import CONSUMERS, HARD_DEADLINE, N_JOBS, PRODUCERS, SHARDS, TUBES, Hold, Run
from helpers import Layout, connect, read_replies, send, shard_of_tube

REPEAT = int(os.environ.get("SHARDQ_CONCURRENCY_REPEAT", "1"))


def server_stats(port: int) -> dict[str, str]:
    sock = connect(port)
    try:
        send(sock, b"stats\r\n")
        [reply] = read_replies(sock, 1)
    finally:
        sock.close()
    body = reply.partition(b"\r\n")[2].decode()
    return dict(line.split(": ", 1) for line in body.splitlines() if ": " in line and line != "---")


def test_tubes_span_every_shard():
    assert {shard_of_tube(t, SHARDS) for t in TUBES} == set(range(SHARDS))


@pytest.mark.parametrize("serving", [1, 2], ids=["serving1", "serving2"])
@pytest.mark.parametrize("round_", range(REPEAT))
def test_many_producers_and_consumers(start_shardq, round_, serving):
    seed = int(os.environ.get("SHARDQ_CONCURRENCY_SEED", random.randrange(1 << 30))) + round_
    port = start_shardq(Layout(SHARDS, serving))
    run = Run(port, seed)
    per = N_JOBS // PRODUCERS
    threads = [run.guarded(f"producer-{i}", run.producer, i, per) for i in range(PRODUCERS)]
    threads += [run.guarded(f"consumer-{i}", run.consumer, i) for i in range(CONSUMERS)]
    threads.append(run.guarded("kicker", run.kicker))
    started = time.monotonic()
    for t in threads:
        t.start()

    finished = run.all_deleted.wait(HARD_DEADLINE) or run.all_deleted.is_set()
    run.stop.set()
    for t in threads:
        t.join(timeout=max(0.1, run.deadline + 10 - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    elapsed = time.monotonic() - started

    summary = f"seed {seed}, {elapsed:.1f} s, ops {dict(run.rec.ops)}"
    problems = run.check()
    if hung:
        problems.append(f"threads still running after the deadline: {hung}")
    if not finished and not run.rec.errors:
        problems.append(f"not every job was deleted within {HARD_DEADLINE} s")
    if problems:
        report = run.missing_report() if not finished else ""
        pytest.fail(f"{summary}\n" + "\n".join(problems[:40]) + f"\n{report}")

    stats = server_stats(port)
    counts = {
        key: stats.get(key)
        for key in (
            "current-jobs-urgent",
            "current-jobs-ready",
            "current-jobs-reserved",
            "current-jobs-delayed",
            "current-jobs-buried",
        )
    }
    assert counts == dict.fromkeys(counts, "0"), f"{summary}\nstats: {counts}"
    assert stats["total-jobs"] == str(N_JOBS), stats
    assert stats["cmd-put"] == str(N_JOBS), stats
    print(summary)  # visible with -s or -rA
    # The mix really happened.
    for op in ("released", "buried", "reserved", "timed-out"):
        assert run.rec.ops[op] > 0, summary
    assert run.rec.ops["disconnected-holding"] + run.rec.ops["reset-holding"] > 0, summary


def test_checker_flags_overlap_loss_and_double_delete():
    # The checks above must be able to fail: feed them a history with each kind of bug.
    run = Run(port=0, seed=0)
    rec = run.rec
    rec.put_body = {i: b"body%d" % i for i in range(1, N_JOBS + 1)}
    rec.deleted.update(range(1, N_JOBS + 1))
    assert run.check() == []
    rec.holds[1] = [Hold(1, 10.0, 11.0, "released"), Hold(2, 11.5, 12.0, "deleted")]
    assert run.check() == []
    rec.holds[1][1].start = 10.5  # conn 2 got RESERVED before conn 1 sent its release
    rec.holds[2] = [Hold(3, 1.0)]  # never ended
    rec.deleted[3] += 1
    del rec.deleted[4]
    rec.reserved_bodies[5] = {b"other"}
    problems = "\n".join(run.check())
    for needle in (
        "job 1 held by conn 1",
        "job 2 still held",
        "deleted more than once: {3: 2}",
        "1 jobs never deleted, e.g. [4]",
        "job 5 reserved with bodies",
    ):
        assert needle in problems, problems
