"""Per-tube policies from the config file (`tubes:`), end to end: a real server with 1 and
with 4 shards (tubes on every shard), put past max_jobs, discard_old, release past
max_reserves, max_reserved and reserve_rate (reserves on one tube and across shards); a
restart from the write-ahead log keeps what they did; SIGHUP changes a limit without a
restart (in shard processes and in shards hosted by serving processes), and a raised
max_reserved serves a waiting reserve; a bad `tubes:` entry stops the start with one line
naming the key (exit 2). Timings are checked only as outcomes (a reserve-with-timeout
gets a job or TIMED_OUT), with generous margins."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    REPO_ROOT,
    connect,
    expect_silence,
    poll_for,
    read_replies,
    send,
    tube_on_shard,
    wal_args,
)
from kestrel_server import Raw, kestrel_server_fixture  # noqa: F401  (the fixture)

from shardq.bench.procs import terminate
from shardq.start import EXIT_CONFIG

LAYOUTS = [(1, "1"), (4, "1")]
LAYOUT_IDS = ["shards1", "shards4"]


def config_text(cap: int = 3, solo: int = 1) -> str:
    return (
        "tubes:\n"
        f'  "cap*": {{max_jobs: {cap}}}\n'
        '  "ring*": {max_jobs: 3, discard_old: true}\n'
        '  "poison*": {max_reserves: 2}\n'
        '  "old*": {max_age: 1}\n'
        '  "busy*": {max_reserved: 2}\n'
        f'  "solo*": {{max_reserved: {solo}}}\n'
        '  "slow*": {reserve_rate: 2}\n'
        '  "trickle*": {reserve_rate: 0.5}\n'
    )


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "shardq.yaml"
    path.write_text(text)
    return path


def put(sock: socket.socket, tube: str, body: bytes = b"job", pri: int = 0) -> bytes:
    send(sock, f"use {tube}\r\nput {pri} 0 60 {len(body)}\r\n".encode() + body + b"\r\n")
    return read_replies(sock, 2)[1]


def job_id(reply: bytes) -> int:
    assert reply.startswith(b"INSERTED "), reply
    return int(reply.split()[1])


def yaml_of(reply: bytes) -> dict[str, str]:
    assert reply.startswith(b"OK "), reply
    lines = reply.split(b"\r\n", 1)[1].decode().splitlines()[1:]
    return dict(line.split(": ", 1) for line in lines if ": " in line)


def stats_tube(sock: socket.socket, tube: str) -> dict[str, str]:
    send(sock, f"stats-tube {tube}\r\n".encode())
    return yaml_of(read_replies(sock, 1)[0])


def command(sock: socket.socket, line: str) -> bytes:
    send(sock, line.encode() + b"\r\n")
    return read_replies(sock, 1)[0]


def reserve_from(sock: socket.socket, tube: str) -> int:
    send(sock, f"watch {tube}\r\nreserve-with-timeout 0\r\nignore {tube}\r\n".encode())
    _, reserved, _ = read_replies(sock, 3)
    assert reserved.startswith(b"RESERVED "), reserved
    return int(reserved.split()[1])


def reserved_id(reply: bytes) -> int:
    assert reply.startswith(b"RESERVED "), reply
    return int(reply.split()[1])


def worker(port: int, *tubes: str) -> socket.socket:
    """A connection watching `tubes` only."""
    sock = connect(port)
    send(sock, "".join(f"watch {t}\r\n" for t in tubes).encode() + b"ignore default\r\n")
    assert read_replies(sock, len(tubes) + 1)[-1] == b"WATCHING %d\r\n" % len(tubes)
    return sock


def tubes_of(prefix: str, shards: int) -> list[str]:
    """A tube named `prefix`... on every shard."""
    return [tube_on_shard(i, shards, prefix) for i in range(shards)]


def exercise(sock: socket.socket, shards: int) -> dict[str, Any]:
    """Drive every policy on every shard; what a restart must keep."""
    kept: dict[str, Any] = {"buried": [], "dropped": [], "ring": []}
    for tube in tubes_of("cap", shards):
        for _ in range(3):
            job_id(put(sock, tube))
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"
    for tube in tubes_of("ring", shards):
        ids = [job_id(put(sock, tube, b"%d" % n)) for n in range(4)]  # the 4th drops the 1st
        assert command(sock, f"peek {ids[0]}") == b"NOT_FOUND\r\n"
        stats = stats_tube(sock, tube)
        assert (stats["current-jobs-ready"], stats["total-discarded"]) == ("3", "1")
        kept["dropped"].append(ids[0])
        kept["ring"].append(ids[1:])
    for tube in tubes_of("poison", shards):
        job = job_id(put(sock, tube))
        assert reserve_from(sock, tube) == job
        assert command(sock, f"release {job} 0 0") == b"RELEASED\r\n"
        assert reserve_from(sock, tube) == job
        assert command(sock, f"release {job} 0 0") == b"BURIED\r\n"  # reserved twice
        stats = stats_tube(sock, tube)
        assert (stats["current-jobs-buried"], stats["total-policy-buried"]) == ("1", "1")
        kept["buried"].append(job)
    return kept


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_policies_hold_on_every_shard(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text())
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    sock = connect(server.port)
    exercise(sock, shards)
    stats = stats_tube(sock, tube_on_shard(0, shards, "cap"))
    assert stats["policy-max-jobs"] == "3"
    assert stats["current-bytes"] == "9"
    assert list(stats)[-16:] == [
        "policy-max-jobs",
        "policy-max-bytes",
        "policy-discard-old",
        "policy-max-reserves",
        "policy-max-timeouts",
        "policy-max-age",
        "policy-max-reserved",
        "policy-reserve-rate",
        "policy-fanout",
        "policy-expired-to",
        "current-bytes",
        "total-discarded",
        "total-policy-buried",
        "total-expired",
        "total-fanout-copies",
        "total-expired-moved",
    ]
    job_id(put(sock, "free"))  # no policy: beanstalkd's keys only (and the tube's shard)
    assert list(stats_tube(sock, "free"))[-1] == "pause-time-left"  # beanstalkd's keys
    sock.close()


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_a_restart_from_the_log_keeps_what_the_policies_did(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text())
    extra = ("--serving", serving, "--config", str(conf), *wal_args(tmp_path / "wal"))
    server = shardq_server(shards=shards, extra=extra)
    sock = connect(server.port)
    kept = exercise(sock, shards)
    sock.close()
    assert terminate(server.proc, 10, group=True) == 0

    server = shardq_server(shards=shards, extra=extra)
    sock = connect(server.port)
    for tube in tubes_of("cap", shards):
        assert stats_tube(sock, tube)["current-jobs-ready"] == "3"
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"  # still full
    for job in kept["buried"]:
        stats = yaml_of(command(sock, f"stats-job {job}"))
        assert (stats["state"], stats["reserves"], stats["buries"]) == ("buried", "2", "1")
    for job in kept["dropped"]:
        assert command(sock, f"peek {job}") == b"NOT_FOUND\r\n"
    for tube, ids in zip(tubes_of("ring", shards), kept["ring"], strict=True):
        stats = stats_tube(sock, tube)
        assert (stats["current-jobs-ready"], stats["current-bytes"]) == ("3", "3")
        job_id(put(sock, tube, b"x"))  # drops the oldest left: the 2nd put before
        assert command(sock, f"peek {ids[0]}") == b"NOT_FOUND\r\n"
        assert command(sock, f"peek {ids[1]}").startswith(b"FOUND")
    sock.close()


@pytest.mark.parametrize(("shards", "serving"), [(1, "1"), (4, "2")], ids=["shards1", "shards4-2"])
def test_sighup_changes_a_limit_without_a_restart(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text(cap=2))
    extra = ("--serving", serving, "--config", str(conf), "-V")  # -V: a reload's changes
    server = shardq_server(shards=shards, extra=extra)
    sock = connect(server.port)
    caps = tubes_of("cap", shards)
    for tube in caps:
        job_id(put(sock, tube))
        job_id(put(sock, tube))
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"

    conf.write_text(config_text(cap=3))
    server.proc.send_signal(signal.SIGHUP)
    for tube in caps:  # shard processes and hosted shards alike
        poll_for(lambda t=tube: stats_tube(sock, t)["policy-max-jobs"] == "3", timeout=10)
        job_id(put(sock, tube))
        assert put(sock, tube) == b"OUT_OF_MEMORY\r\n"
    assert "SIGHUP: tubes " in server.stderr()

    conf.write_text("tubes:\n  cap0: {max_jobs: -1}\n")  # refused: nothing changes
    server.proc.send_signal(signal.SIGHUP)
    poll_for(lambda: "tubes.cap0.max_jobs: must be a whole number >= 0" in server.stderr(), 10)
    assert stats_tube(sock, caps[0])["policy-max-jobs"] == "3"

    conf.write_text("port: 0\n")  # no policies: the tubes read as beanstalkd's again
    server.proc.send_signal(signal.SIGHUP)
    for tube in caps:
        poll_for(lambda t=tube: "policy-max-jobs" not in stats_tube(sock, t), timeout=10)
        job_id(put(sock, tube))
    sock.close()


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_jobs_past_max_age_are_deleted(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text())
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    sock = connect(server.port)
    olds = tubes_of("old", shards)
    ids = [job_id(put(sock, tube)) for tube in olds]  # the connection keeps using the last
    for job in ids:
        poll_for(lambda j=job: command(sock, f"peek {j}") == b"NOT_FOUND\r\n", timeout=5)
    stats = stats_tube(sock, olds[-1])  # still used, so still there
    assert (stats["total-expired"], stats["current-jobs-ready"]) == ("1", "0")
    sock.close()


def test_a_bad_policy_stops_the_start_with_one_line_naming_the_key(tmp_path: Path) -> None:
    conf = write_config(tmp_path, "tubes:\n  orders:\n    max_jobs: lots\n")
    result = subprocess.run(
        [sys.executable, "-m", "shardq", "serve", "-p", "0", "--config", str(conf)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == EXIT_CONFIG
    assert result.stderr.splitlines() == [
        f"shardq: {conf}: tubes.orders.max_jobs: must be a whole number >= 0, got 'lots'"
    ]


def test_kestrel_sets_meet_the_policies_of_their_queues(kestrel_server, tmp_path: Path) -> None:
    """A Kestrel queue is a tube: a full one answers NOT_STORED, discard_old drops its oldest
    item, and `stats` shows the queue's bytes and discards."""
    conf = write_config(tmp_path, config_text())
    server = kestrel_server(4, ("--config", str(conf)))
    k = Raw(server.kestrel)
    for n in range(3):
        assert k.ask(b"set cap0 0 0 2\r\nc%d\r\n" % n) == b"STORED\r\n"
    assert k.ask(b"set cap0 0 0 2\r\nc3\r\n") == b"NOT_STORED\r\n"
    for n in range(4):
        assert k.ask(b"set ring0 0 0 2\r\nr%d\r\n" % n) == b"STORED\r\n"
    assert k.get("ring0") == b"VALUE ring0 0 2\r\nr1\r\nEND\r\n"  # r0 was dropped
    stats = k.ask(b"stats\r\n", b"END\r\n").decode()
    assert "STAT queue_ring0_discarded 1\r\n" in stats
    assert "STAT queue_ring0_bytes 4\r\n" in stats
    assert "STAT queue_cap0_bytes 6\r\n" in stats
    config = k.ask(b"dump_config\r\n", b"END\r\n").decode()
    ring = config[config.index("queue 'ring0' {") :].split("}", 1)[0]
    assert "  max_items=3\r\n" in ring
    assert "  discard_old_when_full=true\r\n" in ring
    free = config[config.index("queue 'default' {") :].split("}", 1)[0]
    assert "  max_items=2147483647\r\n" in free  # no policy: the server's (none)
    assert "  discard_old_when_full=false\r\n" in free
    k.close()


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_max_reserved_holds_back_a_tubes_jobs_until_one_is_let_go(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text())
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    producer = connect(server.port)
    for tube in tubes_of("busy", shards):
        ids = [job_id(put(producer, tube)) for _ in range(3)]
        w1, w2, w3 = (worker(server.port, tube) for _ in range(3))
        first = reserved_id(command(w1, "reserve-with-timeout 0"))
        reserved_id(command(w2, "reserve-with-timeout 0"))
        assert command(w3, "reserve-with-timeout 1") == b"TIMED_OUT\r\n"  # at max_reserved
        stats = stats_tube(producer, tube)
        assert (stats["current-jobs-reserved"], stats["current-jobs-ready"]) == ("2", "1")
        assert (stats["policy-max-reserved"], stats["policy-reserve-rate"]) == ("2", "0")
        send(w3, b"reserve-with-timeout 20\r\n")
        expect_silence(w3, 0.3)
        assert command(w1, f"delete {first}") == b"DELETED\r\n"
        assert reserved_id(read_replies(w3, 1)[0]) == ids[2]
        for sock in (w1, w2, w3):
            sock.close()
    producer.close()


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_a_reserve_on_several_tubes_passes_over_a_tube_at_max_reserved(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """With 4 shards the two tubes are on different shards: the reserve is served by offers,
    and the tube at its limit must offer none of its jobs."""
    conf = write_config(tmp_path, config_text(solo=1))
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    solo, spare = tube_on_shard(0, shards, "solo"), tube_on_shard(shards - 1, shards, "spare")
    producer = connect(server.port)
    held = job_id(put(producer, solo))
    waiting = job_id(put(producer, solo))
    worse = job_id(put(producer, spare, pri=100))
    w1, w2 = worker(server.port, solo), worker(server.port, solo, spare)
    assert reserved_id(command(w1, "reserve-with-timeout 0")) == held
    assert reserved_id(command(w2, "reserve-with-timeout 0")) == worse  # not solo's better job
    assert command(w2, "reserve-with-timeout 0") == b"TIMED_OUT\r\n"
    assert command(w2, "reserve-with-timeout 1") == b"TIMED_OUT\r\n"
    stats = stats_tube(producer, solo)
    assert (stats["current-jobs-reserved"], stats["current-jobs-ready"]) == ("1", "1")
    send(w2, b"reserve-with-timeout 20\r\n")
    expect_silence(w2, 0.3)
    assert command(w1, f"release {held} 500 0") == b"RELEASED\r\n"  # the other is better
    assert reserved_id(read_replies(w2, 1)[0]) == waiting
    for sock in (producer, w1, w2):
        sock.close()


@pytest.mark.parametrize("spread", [False, True], ids=["one-tube", "two-tubes"])
@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_reserve_rate_hands_out_a_burst_then_spaces_the_jobs(
    shards: int, serving: str, spread: bool, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    """reserve_rate 2: a bucket of 2 tokens, one back every half second. `spread`: the
    worker watches an empty tube too (on another shard with 4 shards: offers)."""
    conf = write_config(tmp_path, config_text())
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    producer = connect(server.port)
    for shard, tube in enumerate(tubes_of("slow", shards)):
        ids = [job_id(put(producer, tube)) for _ in range(3)]
        extra = (tube_on_shard((shard + 1) % shards, shards, "empty"),) if spread else ()
        w = worker(server.port, tube, *extra)
        send(w, b"reserve-with-timeout 0\r\n" * 3)  # in one go: no token comes back between
        replies = read_replies(w, 3)
        assert [reserved_id(r) for r in replies[:2]] == ids[:2]
        assert replies[2] == b"TIMED_OUT\r\n"
        assert reserved_id(command(w, "reserve-with-timeout 2")) == ids[2]  # within 0.5 s
        assert stats_tube(producer, tube)["policy-reserve-rate"] == "2"
        w.close()
    producer.close()


@pytest.mark.parametrize(("shards", "serving"), LAYOUTS, ids=LAYOUT_IDS)
def test_a_fractional_rate_gives_one_job_then_waits(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text())
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    producer = connect(server.port)
    tube = tube_on_shard(shards - 1, shards, "trickle")
    ids = [job_id(put(producer, tube)) for _ in range(2)]
    w = worker(server.port, tube)
    send(w, b"reserve-with-timeout 0\r\nreserve-with-timeout 0\r\n")
    first, second = read_replies(w, 2)
    assert (reserved_id(first), second) == (ids[0], b"TIMED_OUT\r\n")
    assert reserved_id(command(w, "reserve-with-timeout 4")) == ids[1]  # within 2 s
    assert stats_tube(producer, tube)["policy-reserve-rate"] == "0.5"
    for sock in (producer, w):
        sock.close()


@pytest.mark.parametrize(("shards", "serving"), [(1, "1"), (4, "2")], ids=["shards1", "shards4-2"])
def test_sighup_raising_max_reserved_serves_a_waiting_reserve(
    shards: int, serving: str, shardq_server: Callable[..., Any], tmp_path: Path
) -> None:
    conf = write_config(tmp_path, config_text(solo=1))
    server = shardq_server(shards=shards, extra=("--serving", serving, "--config", str(conf)))
    producer = connect(server.port)
    waiters = []
    for tube in tubes_of("solo", shards):
        job_id(put(producer, tube))
        second = job_id(put(producer, tube))
        holder, waiter = worker(server.port, tube), worker(server.port, tube)
        reserved_id(command(holder, "reserve-with-timeout 0"))
        send(waiter, b"reserve\r\n")
        waiters.append((holder, waiter, second))
    for _, waiter, _ in waiters:
        expect_silence(waiter, 0.2)
    conf.write_text(config_text(solo=2))
    server.proc.send_signal(signal.SIGHUP)
    for holder, waiter, second in waiters:  # shard processes and hosted shards alike
        assert reserved_id(read_replies(waiter, 1)[0]) == second
        holder.close()
        waiter.close()
    producer.close()
