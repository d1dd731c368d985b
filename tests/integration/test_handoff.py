"""Several serving processes: a connection moves to the process that hosts its tubes
(handoff), and a restarted serving process forgets only its own connections.

Each test starts ``shardq serve --shards 2 --serving 2``: serving process i hosts shard i.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable

from helpers import connect, poll_for, read_replies, send, tube_on_shard, waiting_to_be_accepted

SERVING = ("--serving", "2")
N_PUTS = 30_000  #: a pipeline of puts longer than a move takes


def ask(sock, data: bytes, n: int = 1) -> list[bytes]:
    send(sock, data)
    return read_replies(sock, n)


def tube_stats(port: int, tube: str) -> dict[str, str]:
    sock = connect(port)
    try:
        [reply] = ask(sock, b"stats-tube %s\r\n" % tube.encode())
    finally:
        sock.close()
    if not reply.startswith(b"OK"):
        return {}
    body = reply.partition(b"\r\n")[2].decode()
    return dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)


def test_pipelined_commands_around_the_move_are_answered_in_order(
    shardq_server: Callable[..., object],
) -> None:
    """`use` a tube hosted by the other process with 50 puts behind it in the same write and
    a put split across writes: whichever process answers, every command is answered once
    and in order."""
    srv = shardq_server(2, SERVING)
    for shard in (0, 1):
        tube = tube_on_shard(shard, 2, prefix=f"move{shard}-")
        sock = connect(srv.port)
        blob = b"use %s\r\n" % tube.encode() + b"put 0 0 60 3\r\nabc\r\n" * 50
        send(sock, blob + b"put 0 0 60 5\r\nhe")
        time.sleep(0.05)
        send(sock, b"llo\r\nput 0 0 60 1\r\nz\r\n")
        replies = read_replies(sock, 53)
        assert replies[0] == b"USING %s\r\n" % tube.encode()
        assert all(r.startswith(b"INSERTED ") for r in replies[1:]), replies
        ids = [int(r.split()[1]) for r in replies[1:]]
        assert len(set(ids)) == 52
        [peek] = ask(sock, b"peek %d\r\n" % ids[-2])
        assert peek.endswith(b"\r\nhello\r\n"), peek
        assert tube_stats(srv.port, tube)["current-jobs-ready"] == "52"
        assert tube_stats(srv.port, tube)["current-using"] == "1"
        sock.close()
        poll_for(lambda t=tube: tube_stats(srv.port, t)["current-using"] == "0")


def test_tube_references_stay_exact_over_moves(shardq_server: Callable[..., object]) -> None:
    """Connections that move between the processes (use, then watch and reserve elsewhere)
    keep exact `current-using` / `current-watching` counts, and their tubes vanish when the
    last of them closes, as in beanstalkd."""
    srv = shardq_server(2, SERVING)
    t0, t1 = tube_on_shard(0, 2, prefix="refs-"), tube_on_shard(1, 2, prefix="refs-")
    socks = []
    for i in range(6):
        sock = connect(srv.port)
        use, watch = (t0, t1) if i % 2 else (t1, t0)
        assert ask(sock, b"use %s\r\n" % use.encode()) == [b"USING %s\r\n" % use.encode()]
        assert ask(sock, b"watch %s\r\n" % watch.encode()) == [b"WATCHING 2\r\n"]
        assert ask(sock, b"ignore default\r\n") == [b"WATCHING 1\r\n"]
        # a worker's home is its watched tube's shard: it moves again
        assert ask(sock, b"reserve-with-timeout 0\r\n") == [b"TIMED_OUT\r\n"]
        socks.append(sock)
    for tube in (t0, t1):
        st = poll_for(lambda t=tube: tube_stats(srv.port, t))
        assert (st["current-using"], st["current-watching"]) == ("3", "3"), st
    # only the connection that asks watches default now (the close of the previous asker
    # may reach default's shard from another serving process a moment later)
    poll_for(lambda: tube_stats(srv.port, "default")["current-watching"] == "1")
    for sock in socks:
        sock.close()
    for tube in (t0, t1):
        poll_for(lambda t=tube: tube_stats(srv.port, t) == {})  # gone: nothing refers to it


def test_a_restarted_serving_process_forgets_only_its_own_connections(
    shardq_server: Callable[..., object],
) -> None:
    """SIGKILL serving process 1: the job its client held is ready again at once; the job a
    client of process 0 holds on the same shard stays reserved by that client."""
    srv = shardq_server(2, SERVING)
    tube = tube_on_shard(0, 2, prefix="reset-")
    producer = connect(srv.port)
    ask(producer, b"use %s\r\n" % tube.encode())
    for _ in range(2):
        assert ask(producer, b"put 0 0 120 1\r\nx\r\n")[0].startswith(b"INSERTED")
    # `keeper` uses and watches the tube only: it lives in process 0, the tube's host.
    # `victim` uses default and watches both, and default is on shard 1 (crc32("default")
    # % 2 == 1): it lives in process 1, and holds its job from shard 0 over the hop.
    keeper, victim = connect(srv.port), connect(srv.port)
    t = tube.encode()
    ask(keeper, b"use %s\r\nwatch %s\r\nignore default\r\n" % (t, t), 3)
    [held] = ask(keeper, b"reserve-with-timeout 0\r\n")
    assert held.startswith(b"RESERVED"), held
    roles = srv.roles()
    ask(victim, b"watch %s\r\n" % tube.encode())
    [taken] = ask(victim, b"reserve-with-timeout 0\r\n")
    assert taken.startswith(b"RESERVED"), taken
    assert tube_stats(srv.port, tube)["current-jobs-reserved"] == "2"
    os.kill(roles["serving 1"], signal.SIGKILL)
    poll_for(lambda: srv.roles().get("serving 1") not in (None, roles["serving 1"]), 15)
    poll_for(lambda: tube_stats(srv.port, tube).get("current-jobs-ready") == "1", 15)
    st = tube_stats(srv.port, tube)
    assert st["current-jobs-reserved"] == "1", st  # the keeper's, not forgotten
    job = int(held.split()[1])
    assert ask(keeper, b"delete %d\r\n" % job) == [b"DELETED\r\n"]


def test_a_connection_handed_to_a_process_that_dies_is_served_by_its_sender(
    shardq_server: Callable[..., object],
) -> None:
    """A handover is answered before the sender lets the connection go: when the process
    it was handed to dies first, the sender serves it (before: the descriptor queued in
    the dead process's socket was closed with it, and the client with it)."""
    srv = shardq_server(2, SERVING)
    roles = srv.wait_all_children()
    home = roles["serving 1"]  # hosts shard 1, default's (crc32("default") % 2 == 1)
    os.kill(home, signal.SIGSTOP)
    try:
        sock = connect(srv.port)  # accepted by process 0, handed to process 1
        poll_for(lambda: waiting_to_be_accepted(srv.port) == 0)
    finally:
        os.kill(home, signal.SIGKILL)
    assert ask(sock, b"list-tube-used\r\n") == [b"USING default\r\n"]
    assert ask(sock, b"put 0 0 60 2\r\nhi\r\n")[0].startswith(b"INSERTED ")
    sock.close()


def holders(pids: dict[str, int], sock: socket.socket) -> set[str]:
    """The roles of the processes whose descriptors hold the server's end of `sock` (its
    entry in /proc/net/tcp, found by the two ports, names a socket inode)."""
    local, remote = sock.getpeername()[1], sock.getsockname()[1]
    inode = ""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == f"0100007F:{local:04X}" and fields[2] == f"0100007F:{remote:04X}":
                inode = fields[9]
    assert inode, "the connection is not in /proc/net/tcp"
    link = f"socket:[{inode}]"
    found = set()
    for role, pid in pids.items():
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == link:
                    found.add(role)
    return found


def test_a_connection_whose_pipeline_never_empties_still_moves_home(
    shardq_server: Callable[..., object],
) -> None:
    """A client that keeps puts in flight all the time is never at rest by itself; it moves
    to its tube's process anyway (its pipeline drains, then it moves), and every put is
    answered once and in order. A reserve that waits ends the pipeline: with nothing
    reserved yet, the connection would never be at rest after it (before: it stayed)."""
    srv = shardq_server(2, SERVING)
    pids = srv.wait_all_children()
    tube, idle = (tube_on_shard(0, 2, prefix=p) for p in ("busy-", "idle-"))
    sock = connect(srv.port)  # its home is default's: serving 1 (crc32("default") % 2 == 1)
    assert ask(sock, b"list-tube-used\r\n") == [b"USING default\r\n"]
    poll_for(lambda: holders(pids, sock) == {"serving 1"})
    puts = [b"put 0 0 60 5\r\n%05d\r\n" % i for i in range(N_PUTS)]
    head = b"watch %s\r\nignore default\r\nuse %s\r\n" % (idle.encode(), tube.encode())
    writer = threading.Thread(  # as fast as the server reads: its input never runs dry
        target=sock.sendall, args=(head + b"".join(puts) + b"reserve-with-timeout 60\r\n",)
    )
    writer.start()
    assert read_replies(sock, 3)[2] == b"USING %s\r\n" % tube.encode()
    ids = [int(r.split()[1]) for r in read_replies(sock, N_PUTS)]
    writer.join()
    poll_for(lambda: holders(pids, sock) == {"serving 0"})
    assert len(set(ids)) == N_PUTS
    other = connect(srv.port)
    for i in range(0, N_PUTS, 397):  # each answer is its own put's, in order
        [peek] = ask(other, b"peek %d\r\n" % ids[i])
        assert peek.endswith(b"\r\n%05d\r\n" % i), (i, peek)
    assert tube_stats(srv.port, tube)["current-jobs-ready"] == str(N_PUTS)
    assert ask(other, b"use %s\r\nput 0 0 60 2\r\nok\r\n" % idle.encode(), 2)[1].startswith(
        b"INSERTED"
    )
    [reserved] = read_replies(sock, 1)  # the waiting reserve, answered where it lives now
    assert reserved.endswith(b"\r\nok\r\n"), reserved
    sock.close()
    other.close()


def test_workers_whose_tubes_span_shards_spread_over_the_serving_processes(
    shardq_server: Callable[..., object],
) -> None:
    """A worker watching tubes on both shards has no one home; it used to stay where it
    landed, and every new connection lands at the home of ``default``, so all such workers
    shared one process while the other idled. Each now moves to the process its port picks
    (`handoff.spread_home`), the same whichever process accepted it, and is served there."""
    from shardq.cluster.routing import mix32

    srv = shardq_server(2, SERVING)
    pids = srv.wait_all_children()
    tubes = [tube_on_shard(s, 2, prefix="span-") for s in (0, 1)]
    head = b"".join(b"watch %s\r\n" % t.encode() for t in tubes) + b"ignore default\r\n"
    workers: dict[str, list[socket.socket]] = {"serving 0": [], "serving 1": []}
    while min(len(w) for w in workers.values()) < 3:  # until both processes are picked
        sock = connect(srv.port)
        assert ask(sock, head + b"reserve-with-timeout 0\r\n", 4)[3] == b"TIMED_OUT\r\n"
        workers[f"serving {mix32(sock.getsockname()[1]) % 2}"].append(sock)
    for role, socks in workers.items():
        for sock in socks:
            poll_for(lambda sock=sock, role=role: holders(pids, sock) == {role})
    producer = connect(srv.port)
    for i, sock in enumerate(s for socks in workers.values() for s in socks):
        tube = tubes[i % 2].encode()
        assert ask(producer, b"use %s\r\nput 0 0 60 3\r\n%03d\r\n" % (tube, i), 2)[1].startswith(
            b"INSERTED "
        )
        [reserved] = ask(sock, b"reserve-with-timeout 5\r\n")
        assert reserved.startswith(b"RESERVED ") and reserved.endswith(b"\r\n%03d\r\n" % i)
        job_id = reserved.split()[1]
        assert ask(sock, b"delete %s\r\n" % job_id) == [b"DELETED\r\n"]
    for sock in (producer, *(s for socks in workers.values() for s in socks)):
        sock.close()
