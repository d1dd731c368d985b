"""A process of the server drops messages that do not come from its own server.

Every link of a server names itself with a token only that server's processes hold
(`processes/common/links.py`); a shard or the coordinator drops a message from any other socket
that reached its unix socket. Here a socket of the test's own (same user, same run directory
path) sends a well-formed put straight to a shard process and to the coordinator: nothing
of it is applied, the server logs it once, and it goes on serving.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import connect, read_replies, send, tube_on_shard

from shardq.cluster import wire
from shardq.processes.common import links
from shardq.processes.shard import ops

SETTLE_S = 0.5  #: how long a dropped message is given to (not) show up


def test_a_shard_and_the_coordinator_drop_messages_from_another_servers_socket(
    shardq_server: Callable[..., Any],
) -> None:
    server = shardq_server(shards=2, extra=("--serving", "1"))  # shard 1: a process of its own
    server.wait_all_children()
    tube = tube_on_shard(1, 2)
    for target in ("shard-1", "coordinator"):
        # a name without the token: what any other process would have
        sock = links.Dealer(f"{server.run_dir}/{target}", b"s" * 24)
        try:
            sock.connect()
            assert sock.take_changes() == [links.UP]
            args = ops.PutArgs(999_999, 1, tube, 0, 0, 60, b"injected")
            put = wire.Request(ops.PUT, 1, 1 << 8, args)
            # the link may be dropped already (at its name), before the put is written
            with contextlib.suppress(links.Again):
                sock.send(wire.pack([put]))
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:  # dropped: no answer, the link closed
                select.select([sock.fd], [], [], SETTLE_S)
                with pytest.raises(links.Again):
                    sock.peek()
                if sock.changes:
                    break
            assert sock.take_changes() == [links.DOWN], f"{target} kept a stranger's link"
        finally:
            sock.close()
    client = connect(server.port)
    send(client, f"stats-tube {tube}\r\npeek 999999\r\nput 0 0 60 2\r\nok\r\n".encode())
    replies = read_replies(client, 3)
    assert replies[:2] == [b"NOT_FOUND\r\n", b"NOT_FOUND\r\n"]  # nothing was applied
    assert replies[2].startswith(b"INSERTED")  # and the server serves as before
    client.close()
    deadline = time.monotonic() + 5
    while server.stderr().count("dropped a message from a socket of another server") < 2:
        assert time.monotonic() < deadline, server.stderr()[-2000:]
        time.sleep(0.05)
