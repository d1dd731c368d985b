"""Out of memory in every role but the serving process's (that one: test_out_of_memory.py):
a shard process of its own, the coordinator, the Kestrel and Workq front-ends and the
metrics process (issue 22, item 2).

Each process's address space is capped with `prlimit` above what it maps now, then what
makes that process hold memory is sent until it runs out: the request that cannot be
served gets its protocol's out-of-memory answer, the process goes on serving everything
else (it is not restarted: its pid stays), and every acknowledged job stays.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, poll_for, tube_on_shard
from memory_cap import (
    ask,
    cap_above_now,
    cap_address_space,
    put_small,
    put_until_refused,
    ready_jobs,
)


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_a_shard_process_out_of_memory_answers_it_and_serves_on(
    durable: bool, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """With 4 shards and 2 serving processes, shards 2 and 3 run in processes of their own
    (children.hosted_shard): shard 2's is capped, and a producer fills one of its tubes."""
    extra: tuple[str, ...] = ("--serving", "2")
    if durable:
        extra += ("-b", str(tmp_path / "wal"))
    server = shardq_server(shards=4, extra=extra)
    pids = server.wait_all_children()
    capped = pids["shard 2"]
    tube = tube_on_shard(2, 4)
    use = f"use {tube}\r\n".encode()
    keeper = connect(server.port)
    assert ask(keeper, use) == [f"USING {tube}\r\n".encode()]
    put_small(keeper)
    cap_above_now(capped)

    producer = connect(server.port)
    ask(producer, use)
    inserted = put_until_refused(producer)
    assert ready_jobs(producer, tube) == 50 + inserted  # the shard still answers
    for _ in range(5):  # its jobs are served
        fresh = connect(server.port)
        ask(fresh, f"watch {tube}\r\n".encode())
        [reserved] = ask(fresh, b"reserve-with-timeout 0\r\n")
        assert reserved.startswith(b"RESERVED"), reserved
        job = reserved.split()[1]
        assert ask(fresh, b"release %s 0 0\r\n" % job) == [b"RELEASED\r\n"]
        fresh.close()
    assert ready_jobs(keeper, tube) == 50 + inserted
    assert server.roles() == pids, "a process was restarted"
    assert "out of memory" in server.stderr()

    if durable:  # memory back: every acknowledged job is in the log
        cap_address_space(capped, "unlimited")
        poll_for(lambda: "its log is written again" in server.stderr(), timeout=15)
        os.kill(capped, signal.SIGKILL)
        poll_for(lambda: server.roles().get("shard 2") not in (None, capped), timeout=15)
        poll_for(lambda: ready_jobs(keeper, tube) == 50 + inserted, timeout=15)
    producer.close()
    keeper.close()
