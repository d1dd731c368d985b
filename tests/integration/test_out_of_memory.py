"""A serving process that runs out of memory goes on serving (issue 14, item 1).

Its address space is capped with `prlimit` a little above what it uses, then a producer
puts 60 KB jobs until memory runs out. Measured before: the serving process died on
MemoryError, every connection reset and the jobs of its hosted shard (no `-b`) were gone.
Now the connection whose input cannot be kept is closed (or its put answered
OUT_OF_MEMORY), and the process, its other connections and every job it had stay.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable
from typing import Any

from helpers import connect, read_replies, send

HEADROOM_KIB = 40 * 1024  #: address space allowed above what the process maps now
BODY = b"x" * 60_000


def vm_size_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize"))


def test_a_serving_process_out_of_memory_keeps_its_clients_and_jobs(
    shardq_server: Callable[..., Any],
) -> None:
    prlimit = shutil.which("prlimit")
    assert prlimit is not None, "prlimit (util-linux) is needed"
    server = shardq_server(shards=1)
    pids = server.wait_all_children()
    keeper = connect(server.port)
    for _ in range(50):
        send(keeper, b"put 0 0 60 5\r\nhello\r\n")
    assert all(r.startswith(b"INSERTED") for r in read_replies(keeper, 50))
    acceptor = pids["acceptor"]
    cap = (vm_size_kib(acceptor) + HEADROOM_KIB) * 1024
    subprocess.run([prlimit, f"--pid={acceptor}", f"--as={cap}:{cap}"], check=True)

    producer = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    outcome = b""
    for _ in range(3000):  # 180 MB of bodies: far past the cap
        try:
            producer.sendall(b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY))
            outcome = producer.recv(100)
        except OSError as e:
            outcome = repr(e).encode()
        if not outcome.startswith(b"INSERTED"):
            break
    producer.close()
    assert not outcome.startswith(b"INSERTED"), "memory never ran out: raise the puts"

    send(keeper, b"peek 1\r\nstats-tube default\r\n")
    replies = read_replies(keeper, 2)
    assert replies[0] == b"FOUND 1 5\r\nhello\r\n"
    assert replies[1].startswith(b"OK ")
    keeper.close()
    assert server.roles() == pids, "a process was restarted"
    assert "out of memory" in server.stderr()
