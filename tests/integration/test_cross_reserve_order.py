"""A reserve over tubes on several shards answers only after every shard has let go of it.

A worker watching tubes on two shards waits in both. When one of them serves it, the other
shard still holds its waiter until the serving process's cancel arrives there. beanstalkd
never shows a served worker as waiting, so the reply must wait for that cancel's answer:
a client that sees RESERVED and then asks ``stats-tube`` of the other tube must find no
one waiting. The test stops the other shard's process (SIGSTOP) while the job is put, so
the cancel cannot be answered: the worker must hear nothing until the shard runs again.
"""

from __future__ import annotations

import os
import select
import signal

from crash_load import Client
from helpers import poll_for, tube_on_shard

SHARDS = 4
STOPPED = 2  # a shard process (the serving process hosts shard 0)
SERVING = 0  # the tube the job is put into lives in the serving process


def waiting(admin: Client, tube: bytes) -> str:
    return admin.stats(b"stats-tube " + tube)["current-waiting"]


def test_reserved_comes_after_the_other_shard_dropped_the_waiter(shardq_server) -> None:
    srv = shardq_server(SHARDS)
    stopped_pid = srv.wait_all_children()[f"shard {STOPPED}"]
    far = tube_on_shard(STOPPED, SHARDS, "far-").encode()
    near = tube_on_shard(SERVING, SHARDS, "near-").encode()

    worker, admin = Client(srv.port), Client(srv.port)
    worker.send(b"watch %s\r\nwatch %s\r\nignore default\r\nreserve\r\n" % (far, near))
    assert [worker.line() for _ in range(3)] == [b"WATCHING 2", b"WATCHING 3", b"WATCHING 2"]
    poll_for(lambda: waiting(admin, far) == "1" and waiting(admin, near) == "1", timeout=10)
    assert admin.cmd(b"use " + near) == b"USING " + near

    os.kill(stopped_pid, signal.SIGSTOP)
    try:
        reply = admin.cmd(b"put 0 0 60 1\r\nx")
        assert reply.startswith(b"INSERTED ")
        # the far shard has not dropped the waiter yet: nothing for the worker
        assert select.select([worker.sock], [], [], 0.5)[0] == []
    finally:
        os.kill(stopped_pid, signal.SIGCONT)
    assert worker.line() == b"RESERVED %s 1" % reply.split()[1]
    assert worker.line() == b"x"
    assert waiting(admin, far) == "0"  # asked after RESERVED: never still waiting
    assert waiting(admin, near) == "0"
    worker.close()
    admin.close()
