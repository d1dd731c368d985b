"""A reserve over tubes on two shards, settled by the shards' published heads.

The serving process hosts shard 0; shard 1 runs in a process of its own, which the tests
stop (SIGSTOP) so that it cannot answer. When the hosted shard's job comes first by what
shard 1 has published (processes/common/heads.py), the reserve is answered without it; when
shard 1's job comes first, or a timer of shard 1 is due (a delayed job may have become
ready there), the reserve waits for shard 1 and gets its job.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crash_load import Client
from helpers import poll_for, tube_on_shard

from shardq.processes.common.heads import HeadTable, path_of

SHARDS = 2
FAR = 1  # a shard process
NEAR = 0  # hosted by the serving process
ANSWER_WITHIN_S = 10.0  # far more than an answer takes; without the heads: none comes


def put(c: Client, tube: bytes, pri: int, body: bytes, delay: int = 0) -> int:
    assert c.cmd(b"use " + tube) == b"USING " + tube
    reply = c.cmd(b"put %d %d 60 %d\r\n%s" % (pri, delay, len(body), body))
    assert reply.startswith(b"INSERTED "), reply
    return int(reply.split()[1])


def worker_of(port: int, far: bytes, near: bytes) -> Client:
    worker = Client(port)
    worker.send(b"watch %s\r\nwatch %s\r\nignore default\r\n" % (far, near))
    assert [worker.line() for _ in range(3)] == [b"WATCHING 2", b"WATCHING 3", b"WATCHING 2"]
    return worker


def published(run_dir: Path, producer: Client, worker: Client, near: bytes) -> None:
    """Make shard FAR publish its table, as one reserve over both shards does: a shard
    publishes only while a serving process reads its table (processes/common/heads.py).
    The reserve takes a near job put for it (the best there is), and is deleted. (No
    connection closes here: a close makes the serving process doubt shard FAR's table
    until FAR has answered its DISCONNECT, and FAR is about to be stopped.)"""
    warm = put(producer, near, 0, b"warm")
    # the reserve marks shard 1's table wanted before it asks shard 1 (whichever way it is
    # settled), and shard 1 publishes in the turn that answers it, before the answer leaves
    assert worker.cmd(b"reserve-with-timeout 5") == b"RESERVED %d 4" % warm
    assert worker.cmd(b"delete %d" % warm) == b"DELETED"
    table = HeadTable.reader(path_of(str(run_dir), FAR))
    assert table is not None
    assert table.marked_valid(), "shard 1 did not publish: the tests below need it to"


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def layout(shardq_server) -> tuple[int, int, bytes, bytes, Path]:
    srv = shardq_server(SHARDS)
    far_pid = srv.wait_all_children()[f"shard {FAR}"]
    far = tube_on_shard(FAR, SHARDS, "far-").encode()
    near = tube_on_shard(NEAR, SHARDS, "near-").encode()
    return srv.port, far_pid, far, near, srv.run_dir


def test_the_hosted_job_first_is_reserved_without_the_other_shard(shardq_server) -> None:
    port, far_pid, far, near, run_dir = layout(shardq_server)
    producer = Client(port)
    near_job = put(producer, near, 10, b"near")
    put(producer, far, 20, b"far")  # after, and less urgent: the near job comes first
    worker = worker_of(port, far, near)
    published(run_dir, producer, worker, near)
    with stopped(far_pid):
        worker.send(b"reserve-with-timeout 5\r\n")
        answered = select.select([worker.sock], [], [], ANSWER_WITHIN_S)[0]
        assert answered, "the reserve waited for the stopped shard"
        assert worker.line() == b"RESERVED %d 4" % near_job
        assert worker.line() == b"near"
    worker.close()
    producer.close()


def test_the_other_shards_job_first_is_waited_for(shardq_server) -> None:
    port, far_pid, far, near, run_dir = layout(shardq_server)
    producer = Client(port)
    put(producer, near, 10, b"near")
    far_job = put(producer, far, 0, b"far")  # put later, but more urgent: it comes first
    worker = worker_of(port, far, near)
    with stopped(far_pid):
        worker.send(b"reserve-with-timeout 5\r\n")
        # (the stopped shard cannot answer: the reserve is answered after SIGCONT)
    assert worker.line() == b"RESERVED %d 3" % far_job
    assert worker.line() == b"far"
    worker.close()
    producer.close()


def test_a_timer_due_on_the_other_shard_makes_it_asked(shardq_server) -> None:
    """A delayed job of shard 1 comes first once its delay is over, before shard 1 has
    made it ready (it is stopped): its published next timer makes the reserve ask it."""
    port, far_pid, far, near, run_dir = layout(shardq_server)
    producer = Client(port)
    far_job = put(producer, far, 0, b"far", delay=1)
    put(producer, near, 10, b"near")
    worker = worker_of(port, far, near)
    published(run_dir, producer, worker, near)
    with stopped(far_pid):
        due = time.monotonic() + 1.05
        while time.monotonic() < due:  # the delay itself: what the test is about
            time.sleep(due - time.monotonic())
        worker.send(b"reserve-with-timeout 5\r\n")
    assert worker.line() == b"RESERVED %d 3" % far_job
    assert worker.line() == b"far"
    worker.close()
    producer.close()


def test_jobs_given_back_to_the_other_shard_are_waited_for(shardq_server) -> None:
    """A client that held the better job of shard 1 goes: until shard 1 has taken the
    DISCONNECT, its table does not show the job given back, so a reserve asks it."""
    port, far_pid, far, near, run_dir = layout(shardq_server)
    producer, admin = Client(port), Client(port)
    far_job = put(producer, far, 0, b"far")
    put(producer, near, 10, b"near")
    holder = worker_of(port, far, near)
    assert holder.cmd(b"reserve-with-timeout 5") == b"RESERVED %d 3" % far_job
    assert holder.last_body == b"far"
    worker = worker_of(port, far, near)  # (a watch waits for the tube's shard)
    with stopped(far_pid):
        holder.close()  # gives the far job back: shard 1 cannot take it in yet
        # the close is done here once the near tube counts the worker alone
        poll_for(lambda: admin.stats(b"stats-tube " + near)["current-watching"] == "1", 10)
        worker.send(b"reserve-with-timeout 5\r\n")
    assert worker.line() == b"RESERVED %d 3" % far_job
    assert worker.line() == b"far"
    worker.close()
    admin.close()
    producer.close()
