"""A connection that closes holding jobs of several shards gives them all back in one step,
as beanstalkd does (processes/shard/closing.py).

Each shard hears of the close on its own. Were a shard to hand out its part at once, a
client could get that job and then find another of the closed connection's jobs still
`reserved` on a shard that had not heard of the close yet (the differential suite saw it,
rarely, with 4 shards over 2 serving processes). So a shard holds the jobs' tubes until
every shard has them back. The test stops the far shard's process (SIGSTOP) while the
holder closes: the waiter on the near tube must hear nothing until that shard runs again,
and then every other job of the holder's is `ready`.
"""

from __future__ import annotations

import os
import select
import signal

import pytest
from crash_load import Client
from helpers import poll_for, tube_on_shard

SHARDS = 4
STOPPED = 2  # a shard process (the serving processes host shards 0 and 1)


def state(admin: Client, job_id: bytes) -> str:
    return admin.stats(b"stats-job " + job_id)["state"]


@pytest.mark.parametrize("serving", [1, 2])
def test_a_waiter_gets_its_job_only_when_every_shard_has_the_closed_ones_back(
    shardq_server, serving: int
) -> None:
    srv = shardq_server(SHARDS, ("--serving", str(serving)))
    stopped_pid = srv.wait_all_children()[f"shard {STOPPED}"]
    far = tube_on_shard(STOPPED, SHARDS, "far-").encode()
    near = tube_on_shard(0, SHARDS, "near-").encode()

    holder, waiter, admin = Client(srv.port), Client(srv.port), Client(srv.port)
    ids = {}
    for tube in (near, far):
        assert holder.cmd(b"use " + tube) == b"USING " + tube
        ids[tube] = holder.cmd(b"put 0 0 60 1\r\nx").split()[1]
        assert holder.cmd(b"watch " + tube).startswith(b"WATCHING")
    for _ in range(2):
        assert holder.cmd(b"reserve").startswith(b"RESERVED")
    waiter.send(b"watch %s\r\nignore default\r\nreserve\r\n" % near)
    assert [waiter.line() for _ in range(2)] == [b"WATCHING 2", b"WATCHING 1"]
    poll_for(lambda: admin.stats(b"stats-tube " + near)["current-waiting"] == "1", timeout=10)

    os.kill(stopped_pid, signal.SIGSTOP)
    try:
        holder.close()
        # the far shard has not given its job back: the near one is not handed out yet
        assert select.select([waiter.sock], [], [], 0.5)[0] == []
        assert state(admin, ids[near]) == "ready"  # though seen ready at once
    finally:
        os.kill(stopped_pid, signal.SIGCONT)
    assert waiter.line() == b"RESERVED %s 1" % ids[near]
    assert waiter.line() == b"x"
    assert state(waiter, ids[far]) == "ready"  # asked after RESERVED: never still reserved
    waiter.close()
    admin.close()
