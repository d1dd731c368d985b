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
import select
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, http_get, metrics_port, poll_for, tube_on_shard, wal_args
from kestrel_server import Raw, kestrel_server_fixture  # noqa: F401  (the fixture)
from memory_cap import (
    BODY,
    ask,
    cap_above_now,
    cap_address_space,
    put_small,
    put_until_refused,
    ready_jobs,
)
from workq_server import Workq, add, new_id, workq_server_fixture  # noqa: F401  (the fixture)

from shardq.bench.procs import role_pids
from shardq.protocol import kestrel_replies as kr
from shardq.protocol import proto
from shardq.protocol import workq_replies as wr


def started(
    shardq_server: Callable[..., Any], shards: int, serving: int, log_dir: Path | None
) -> tuple[Any, dict[str, int]]:
    """A server (with -b `log_dir` unless None) once every process runs, and their pids."""
    extra: tuple[str, ...] = ("--serving", str(serving))
    if log_dir is not None:
        extra += ("-b", str(log_dir))
    server = shardq_server(shards=shards, extra=extra)
    return server, server.wait_all_children()


def make_tubes(sock: socket.socket, tubes: int) -> None:
    """`tubes` tubes of long names (194 bytes), a job in each."""
    for first in range(0, tubes, 100):
        script = b"".join(
            b"use %s%04d\r\nput 0 0 60 1\r\nx\r\n" % (b"t" * 190, i)
            for i in range(first, first + 100)
        )
        replies = ask(sock, script, 200)
        assert all(r.startswith((b"USING", b"INSERTED")) for r in replies)


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_a_shard_process_out_of_memory_answers_it_and_serves_on(
    durable: bool, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """With 4 shards and 2 serving processes, shards 2 and 3 run in processes of their own
    (children.hosted_shard): shard 2's is capped, and a producer fills one of its tubes."""
    server, pids = started(shardq_server, 4, 2, tmp_path / "wal" if durable else None)
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


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_the_workq_front_end_out_of_memory_answers_it_and_serves_on(
    durable: bool, workq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """The Workq front-end keeps every job's payload (its registry): capped, the add it
    cannot hold is answered Workq's out-of-memory error, and it goes on."""
    server = workq_server(1, wal_args(tmp_path / "wal") if durable else ())
    keeper = Workq(server.workq)
    kept = [new_id() for _ in range(20)]
    for ident in kept:
        assert add(keeper, ident, "small", b"hello") == b"+OK\r\n"
    # answered: the front-end runs, under its name (the port is bound before it starts)
    pids = role_pids(server.proc.pid)
    capped = pids["workq"]
    cap_above_now(capped)

    producer = Workq(server.workq)
    added: list[str] = []
    for _ in range(3000):  # 180 MB of payloads: far past the cap
        ident = new_id()
        outcome = add(producer, ident, "big", BODY)
        if outcome != b"+OK\r\n":
            break
        added.append(ident)
    assert outcome == wr.OUT_OF_MEMORY, outcome
    assert producer.cmd(b"inspect queue small\r\n") == (
        b"+OK 1\r\nsmall 2\r\nready-len 20\r\nscheduled-len 0\r\n"
    )
    for _ in range(5):  # new clients are served, and its jobs
        fresh = Workq(server.workq)
        leased = fresh.cmd(b"lease small 1000\r\n")
        assert leased.startswith(b"+OK 1\r\n"), leased
        ident = leased.split(b"\r\n")[1].split()[0].decode()
        assert fresh.cmd(f"complete {ident} 2\r\nok\r\n".encode()) == b"+OK\r\n"
        fresh.close()
    assert role_pids(server.proc.pid) == pids, "a process was restarted"
    assert "out of memory" in server.stderr_path.read_text()
    if durable:  # memory back, the process killed: its journal holds every job it took
        cap_address_space(capped, "unlimited")
        os.kill(capped, signal.SIGKILL)
        poll_for(lambda: role_pids(server.proc.pid).get("workq") not in (None, capped))
        keeper = Workq(server.workq)
    assert keeper.cmd(b"inspect queue big\r\n") == (
        b"+OK 1\r\nbig 2\r\nready-len %d\r\nscheduled-len 0\r\n" % len(added)
    )
    if durable:  # and each is whole (inspected where memory is plenty again)
        for ident in added[-3:]:
            assert keeper.cmd(f"inspect job {ident}\r\n".encode()).startswith(b"+OK 1\r\n")


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_the_kestrel_front_end_out_of_memory_answers_it_and_serves_on(
    durable: bool, kestrel_server: Callable[..., Any], tmp_path: Path
) -> None:
    """The Kestrel front-end holds what its clients sent until a whole item is there:
    capped, clients that each send most of an item fill it; the one whose input memory is
    short for is answered memcached's out-of-memory error (and closed: its stream cannot
    be followed), the others' items are stored, and it goes on."""
    server = kestrel_server(1, wal_args(tmp_path / "wal") if durable else ())
    keeper = Raw(server.kestrel)
    for _ in range(20):
        assert keeper.ask(b"set kept 0 3600 5\r\nhello\r\n") == b"STORED\r\n"
    # answered: the front-end runs, under its name (the port is bound before it starts)
    pids = role_pids(server.proc.pid)
    capped = pids["kestrel"]
    cap_above_now(capped, 16 * 1024)

    head = b"set big 0 3600 %d\r\n" % len(BODY)
    senders: list[Raw] = []
    refused: list[Raw] = []
    while not refused and len(senders) < 600:  # 36 MB of items: far past the cap
        sender = Raw(server.kestrel)
        sender.send(head + BODY[:-1000])  # most of an item: held until it is whole
        senders.append(sender)
        readable, _, _ = select.select([s.sock for s in senders], [], [], 0.01)
        refused = [s for s in senders if s.sock in readable]
    if not refused:
        readable, _, _ = select.select([s.sock for s in senders], [], [], 5)
        refused = [s for s in senders if s.sock in readable]
    assert refused, "no client was told memory ran out"
    for sender in refused:
        assert sender.read_until(b"\r\n") == kr.OUT_OF_MEMORY
        assert sender.eof()
    stored = 0
    for sender in senders:
        if sender not in refused:
            sender.send(BODY[-1000:] + b"\r\n")  # the item's end: stored, or refused
            answer = sender.read_until(b"\r\n")
            assert answer in (b"STORED\r\n", kr.OUT_OF_MEMORY), answer
            stored += answer == b"STORED\r\n"
        sender.close()
    assert stored, "no item was stored"
    fresh = Raw(server.kestrel)  # new clients are served
    assert fresh.get("kept") == b"VALUE kept 0 5\r\nhello\r\nEND\r\n"
    assert role_pids(server.proc.pid) == pids, "a process was restarted"
    assert "out of memory" in server.stderr_path.read_text()
    if durable:  # memory back, the process killed: its items stay (they are jobs)
        cap_address_space(capped, "unlimited")
        os.kill(capped, signal.SIGKILL)
        poll_for(lambda: role_pids(server.proc.pid).get("kestrel") not in (None, capped))
    bs = connect(server.port)
    assert ready_jobs(bs, "big") == stored
    assert ready_jobs(bs, "kept") == 19


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_the_coordinator_out_of_memory_answers_it_and_serves_on(
    durable: bool, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """The coordinator merges every shard's tubes for list-tubes: capped at what it maps
    now, a list of 2,000 long tube names is more than it can build; the client is answered
    OUT_OF_MEMORY, and the coordinator goes on (stats, id blocks for new puts)."""
    server, pids = started(shardq_server, 2, 1, tmp_path / "wal" if durable else None)
    capped = pids["coordinator"]
    sock = connect(server.port)
    tubes = 2000
    make_tubes(sock, tubes)
    for _ in range(2):  # every thread has run this path once (glibc's lazy thread-local
        ask(sock, b"list-tubes\r\nstats\r\n", 2)  # data aborts a process out of memory)
    cap_above_now(capped, 1024)
    answers = [ask(sock, b"list-tubes\r\n")[0] for _ in range(5)]
    assert proto.OUT_OF_MEMORY in answers, [a[:40] for a in answers]
    [stats] = ask(sock, b"stats\r\n")
    assert b"current-jobs-ready: %d\n" % tubes in stats
    put_small(sock, 50)  # new ids: blocks leased from the coordinator
    assert role_pids(server.pid) == pids, "a process was restarted"
    assert "out of memory" in server.stderr()
    cap_address_space(capped, "unlimited")
    [listed] = ask(sock, b"list-tubes\r\n")
    assert listed.count(b"\n- ") == tubes + 1  # and default


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "b"])
def test_the_metrics_process_out_of_memory_answers_it_and_serves_on(
    durable: bool, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """/metrics renders a series per tube: capped above what it maps now, 2,000 tubes are
    more than the metrics process can render; it answers 503 (HTTP's "cannot now") and
    goes on serving, and /metrics again once memory is back."""
    extra: tuple[str, ...] = ("--serving", "1", "--metrics", "127.0.0.1:0")
    if durable:
        extra += ("-b", str(tmp_path / "wal"))
    server = shardq_server(shards=2, extra=extra)
    server.wait_all_children()
    pids = poll_for(lambda: (r := server.roles()) and "metrics" in r and r)
    capped = pids["metrics"]
    port = metrics_port(server.run_dir)
    sock = connect(server.port)
    make_tubes(sock, 2000)
    for _ in range(2):  # every path run once before the cap
        assert http_get(port, "/metrics")[0] == 200
    cap_above_now(capped, 1024)
    answers = [http_get(port, "/metrics") for _ in range(5)]
    seen = [(s, b[:40]) for s, b in answers]
    assert (503, b"out of memory\n") in answers, (seen, server.stderr()[-6000:])  # with why
    assert http_get(port, "/")[0] == 200  # what needs little memory is served
    assert server.roles() == pids, "a process was restarted"
    assert "out of memory" in server.stderr()
    cap_address_space(capped, "unlimited")
    assert http_get(port, "/health") == (200, b"ok\n")
    status, body = http_get(port, "/metrics")
    assert status == 200 and body.count(b"t" * 190) >= 2000
    assert ready_jobs(sock, "t" * 190 + "1999") == 1
