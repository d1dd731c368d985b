"""A client's end of input is read once (issue 22, item 5).

Measured before: a connection that ended while its reserve waited on a shard of another
process was read again in every turn of the serving process until that shard answered
the reserve's withdrawal, each read withdrawing it once more (one more CANCEL, answered);
under connection churn tens per connection, and the replies, batched by the tens of
thousands, grew the serving processes' heaps (tests/integration/test_churn.py). With that
shard stopped the serving process read the ended connection at full speed for ever.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helpers import connect, poll_for, read_replies, send, skip_or_fail, tube_on_shard

from shardq.bench.procs import tracer_pid


@contextlib.contextmanager
def traced(pid: int, calls: str, out: Path) -> Iterator[None]:
    """strace attached to `pid`'s main thread, writing `calls` to `out` while the body runs."""
    strace = shutil.which("strace")
    if strace is None:
        skip_or_fail("needs strace: apt-get install -y strace")
    tracer = subprocess.Popen([strace, "-qq", "-p", str(pid), "-e", f"trace={calls}", "-o", out])
    try:
        poll_for(lambda: tracer_pid(pid) == tracer.pid, timeout=10)
        yield
    finally:
        tracer.send_signal(signal.SIGINT)  # detaches, the file written
        tracer.wait(timeout=10)


def ask(sock: Any, data: bytes, n: int = 1) -> list[bytes]:
    send(sock, data)
    return read_replies(sock, n)


def test_an_ended_connection_is_read_once_while_its_reserve_is_withdrawn(
    shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    server = shardq_server(shards=2, extra=("--serving", "1"))  # shard 1: its own process
    roles = server.wait_all_children()
    tube = tube_on_shard(1, 2, prefix="eof-").encode()
    waiter, other = connect(server.port), connect(server.port)
    assert ask(waiter, b"watch %s\r\nignore default\r\n" % tube, 2) == [
        b"WATCHING 2\r\n",
        b"WATCHING 1\r\n",
    ]
    send(waiter, b"reserve\r\n")
    poll_for(lambda: b"current-waiting: 1\n" in ask(other, b"stats\r\n")[0])
    os.kill(roles["shard 1"], signal.SIGSTOP)  # the withdrawal is not answered meanwhile
    trace = tmp_path / "reads.txt"
    try:  # a client is read by recvfrom (socket methods) or read (compiled: sockio.py)
        with traced(roles["serving"], "recvfrom,read", trace):
            waiter.close()
            for _ in range(5):  # five turns of the serving process at least, all after the end
                assert ask(other, b"list-tube-used\r\n") == [b"USING default\r\n"]
    finally:
        os.kill(roles["shard 1"], signal.SIGCONT)
    ends = re.findall(r'^(?:recvfrom|read)\(\d+, "", .*\) += 0$', trace.read_text(), re.MULTILINE)
    assert len(ends) == 1, f"the end of input was read {len(ends)} times"
    # served on: the withdrawal answered, the close done, and the tube nothing refers to
    # any more gone (as in beanstalkd)
    poll_for(lambda: b"current-waiting: 0\n" in ask(other, b"stats\r\n")[0])
    poll_for(lambda: ask(other, b"stats-tube %s\r\n" % tube) == [b"NOT_FOUND\r\n"])
    other.close()
