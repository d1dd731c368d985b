"""A serving process that runs out of memory answers OUT_OF_MEMORY and goes on serving
(issue 14, item 1; issue 22, item 2).

Its address space is capped with `prlimit` a little above what it uses, then a producer
puts 60 KB jobs until memory runs out. The put that cannot be held is answered
OUT_OF_MEMORY (as beanstalkd answers it), the producer's connection goes on, new clients
are served (with two serving processes each is handed to the capped one, which hosts
`default`), and every acknowledged job stays: in memory, and with `-b` in the log too
(the capped process is killed once its log is written again, and replays it).

Measured before: without -b the put that met the limit was never answered (its body's
copy failed after the parser had consumed it), or the connection was closed; handed-over
clients got no answer (socket.recv_fds allocated a 1 MiB buffer for every handover and
raised MemoryError in every turn); with -b every turn failed packing the log's records
(msgpack.packb's 256 KiB buffer per record) and nothing was answered at all.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, poll_for
from memory_cap import (
    HEADROOM_KIB,
    ask,
    cap_address_space,
    put_small,
    put_until_refused,
    ready_jobs,
    vm_size_kib,
)

LAYOUTS = {
    "1serving": (1, ("--serving", "1"), False),
    "2serving": (2, ("--serving", "2"), False),
    "2serving-b": (2, ("--serving", "2"), True),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_serving_process_out_of_memory_answers_it_and_serves_on(
    layout: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    shards, extra, durable = LAYOUTS[layout]
    if durable:
        extra += ("-b", str(tmp_path / "wal"))  # -f as by default: see logfault.py for -f 0
    server = shardq_server(shards=shards, extra=extra)
    pids = server.wait_all_children()
    capped = pids["serving" if shards == 1 else "serving 1"]  # hosts default's shard
    keeper = connect(server.port)
    put_small(keeper)
    cap_address_space(capped, vm_size_kib(capped) + HEADROOM_KIB)

    producer = connect(server.port)
    inserted = put_until_refused(producer)
    assert ask(producer, b"list-tube-used\r\n") == [b"USING default\r\n"]  # it goes on
    for _ in range(5):  # new clients: handed to the capped process with two
        fresh = connect(server.port)
        assert ask(fresh, b"list-tube-used\r\npeek 1\r\n", 2) == [
            b"USING default\r\n",
            b"FOUND 1 5\r\nhello\r\n",
        ]
        fresh.close()
    assert ready_jobs(keeper) == 50 + inserted
    assert server.roles() == pids, "a process was restarted"
    assert "out of memory" in server.stderr()

    if durable:  # memory back: the log is written again, and holds every job acknowledged
        cap_address_space(capped, "unlimited")
        poll_for(lambda: "its log is written again" in server.stderr(), timeout=15)
        os.kill(capped, signal.SIGKILL)
        poll_for(lambda: server.roles().get("serving 1") not in (None, capped), timeout=15)
        keeper = connect(server.port)
        poll_for(lambda: ready_jobs(keeper) == 50 + inserted, timeout=15)
    producer.close()
    keeper.close()
