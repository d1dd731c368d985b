"""Fanout, the per-tube policy, end to end: a put to ``orders`` (policy ``fanout: true``)
is copied to every tube ``orders+NAME`` there is, through every door, with 1 and 4 shards;
the copies are jobs like any other (each command by id reaches them); they survive a
restart with -b and later copies get new ids; the Kestrel door does not copy twice; a log
directory written before tube families keeps its routing (and says what that costs).
"""

from __future__ import annotations

from pathlib import Path

import greenstalk
import pytest
from helpers import tube_on_shard
from kestrel_server import Raw, kestrel_server_fixture  # noqa: F401  (the fixture)
from workq_server import Workq, add, new_id, workq_server_fixture  # noqa: F401

from shardq.bench.procs import terminate

SHARDS = [(1, "1"), (4, "2")]
IDS = ["shards1", "shards4"]


def config(tmp_path: Path, text: str = "tubes:\n  orders: {fanout: true}\n") -> tuple[str, ...]:
    path = tmp_path / "fanout.yaml"
    path.write_text(text)
    return ("--config", str(path))


def client(port: int, **kwargs) -> greenstalk.Client:
    c = greenstalk.Client(("127.0.0.1", port), **kwargs)
    c._sock.settimeout(10)
    return c


@pytest.mark.parametrize(("shards", "serving"), SHARDS, ids=IDS)
def test_every_member_gets_a_copy_and_every_command_reaches_it(
    shardq_server, tmp_path, shards: int, serving: str
) -> None:
    srv = shardq_server(shards, ("--serving", serving, *config(tmp_path)))
    eu = client(srv.port, watch="orders+eu")
    us = client(srv.port, watch="orders+us")
    with client(srv.port, use="orders") as producer:
        parent = producer.put("hello", priority=7, ttr=30)
        assert producer.stats_tube("orders")["total-fanout-copies"] == 2
        copy_eu, copy_us = eu.reserve(timeout=5), us.reserve(timeout=5)
        assert (copy_eu.body, copy_us.body) == ("hello", "hello")
        assert len({parent, copy_eu.id, copy_us.id}) == 3
        stats = eu.stats_job(copy_eu)
        assert (stats["tube"], stats["pri"], stats["ttr"]) == ("orders+eu", 7, 30)
        eu.touch(copy_eu)
        eu.release(copy_eu, delay=0)
        copy_eu = eu.reserve(timeout=5)
        eu.bury(copy_eu)
        assert producer.peek(copy_eu.id).body == "hello"  # any connection, by id
        eu.kick_job(copy_eu)
        eu.delete(eu.reserve(timeout=5))
        us.delete(copy_us)
        assert producer.stats_tube("orders")["current-jobs-ready"] == 1  # its own
        producer.use("orders+eu")
        producer.put("direct")  # a put to a member is not copied anywhere
        assert us.stats_tube("orders+us")["total-jobs"] == 1
    eu.close()
    us.close()


@pytest.mark.parametrize(("shards", "serving"), SHARDS, ids=IDS)
def test_copies_survive_a_restart_and_later_ones_get_new_ids(
    shardq_server, tmp_path, shards: int, serving: str
) -> None:
    flags = ("--serving", serving, "-b", str(tmp_path / "wal"), *config(tmp_path))
    srv = shardq_server(shards, flags)
    with client(srv.port, use="orders", watch="orders+keep") as c:
        c.put("before")
        before = c.peek_ready()
        assert before.body == "before"
        c.use("orders+keep")
        copy = c.peek_ready()
    assert terminate(srv.proc, 10, group=True) == 0
    srv = shardq_server(shards, flags)
    with client(srv.port, use="orders", watch="orders+keep") as c:
        assert c.peek(copy.id).body == "before"  # the copy came back from the log
        c.put("after")
        c.ignore("default")
        ids = [c.reserve(timeout=5).id for _ in range(2)]
        assert ids[0] == copy.id and ids[1] != copy.id  # a new id, not the surviving one's


@pytest.mark.parametrize("shards", [1, 4])
def test_a_workq_add_is_copied_too(workq_server, tmp_path, shards: int) -> None:
    srv = workq_server(shards, config(tmp_path))
    with client(srv.port, watch="orders+audit") as audit:
        w = Workq(srv.workq)
        assert add(w, new_id(), "orders", b"from workq") == b"+OK\r\n"
        assert audit.reserve(timeout=5).body == "from workq"
        w.close()


@pytest.mark.parametrize("shards", [1, 4])
def test_the_kestrel_door_leaves_the_copies_to_the_policy(
    kestrel_server, tmp_path, shards: int
) -> None:
    srv = kestrel_server(shards, config(tmp_path))
    k = Raw(srv.kestrel)
    assert k.get("orders+k") == b"END\r\n"  # a Kestrel child the front-end knows of
    with client(srv.port, watch="orders+k") as watcher:  # and a tube that exists
        assert k.ask(b"set orders 0 0 2\r\nhi\r\n") == b"STORED\r\n"
        assert watcher.stats_tube("orders+k")["total-jobs"] == 1  # one copy, not two
        assert k.get("orders+k") == b"VALUE orders+k 0 2\r\nhi\r\nEND\r\n"
    k.close()


def test_a_log_written_before_tube_families_keeps_its_routing(shardq_server, tmp_path) -> None:
    wal = tmp_path / "old"
    wal.mkdir()
    (wal / "layout").write_text("shards=4\n")  # as an older shardq wrote it
    shard = by_name("orders", 4)
    near = tube_on_shard(shard, 4, "orders+", by_name)  # the same shard by name
    far = tube_on_shard((shard + 1) % 4, 4, "orders+", by_name)
    srv = shardq_server(4, ("--serving", "2", "-b", str(wal), *config(tmp_path)))
    assert "written before tube families" in srv.stderr()
    with client(srv.port, use="orders", watch=[near, far]) as c:
        c.put("x")
        c.ignore("default")
        assert c.reserve(timeout=5).body == "x"
        assert c.stats_tube(near)["total-jobs"] == 1  # on the parent's shard: copied
        assert c.stats_tube(far)["total-jobs"] == 0  # by whole name elsewhere: not
    assert (wal / "layout").read_text() == "shards=4\n"  # left as it was


def by_name(name: str, shards: int) -> int:
    """The shard of a tube in a log directory written before tube families."""
    from zlib import crc32

    return crc32(name.encode()) % shards


# ------------------------------------------------------------------- expired_to

EXPIRING = (
    "tubes:\n"
    "  orders: {fanout: true}\n"
    '  "jobs*": {max_age: 1, expired_to: +late}\n'
    "  jobs+late: {max_jobs: 100}\n"
)


@pytest.mark.parametrize(("shards", "serving"), SHARDS, ids=IDS)
def test_an_expired_job_moves_to_its_expired_to_tube_and_stays_there_after_a_restart(
    shardq_server, tmp_path, shards: int, serving: str
) -> None:
    flags = ("--serving", serving, "-b", str(tmp_path / "wal"), *config(tmp_path, EXPIRING))
    srv = shardq_server(shards, flags)
    with client(srv.port, use="jobs", watch="jobs+late") as c:
        c.ignore("default")
        job = c.put("stale", priority=9)
        moved = c.reserve(timeout=5)  # a worker of the target gets it within a second
        assert (moved.id, moved.body) == (job, "stale")
        stats = c.stats_job(moved)
        assert (stats["tube"], stats["pri"]) == ("jobs+late", 9)
        assert c.stats_tube("jobs")["total-expired-moved"] == 1
        assert c.stats_tube("jobs")["policy-expired-to"] == "jobs+late"
        c.release(moved)
    assert terminate(srv.proc, 10, group=True) == 0
    srv = shardq_server(shards, flags)
    with client(srv.port, watch="jobs+late") as c:
        c.ignore("default")
        assert c.reserve(timeout=5).id == job  # moved, in the log too
        assert c.stats_tube("jobs+late")["policy-expired-to"] == ""  # its own entry: none


def test_kestrel_dump_config_shows_move_expired_to(kestrel_server, tmp_path) -> None:
    srv = kestrel_server(4, config(tmp_path, EXPIRING))
    k = Raw(srv.kestrel)
    assert k.ask(b"set jobs 0 0 1\r\nx\r\n") == b"STORED\r\n"
    config_text = k.ask(b"dump_config\r\n", b"END\r\n").decode()
    jobs = config_text[config_text.index("queue 'jobs' {") :].split("}", 1)[0]
    assert "  move_expired_to=jobs+late\r\n" in jobs
    assert "  max_age=1\r\n" in jobs
    k.close()


def test_expired_to_needs_a_log_written_with_tube_families(shardq_launch, tmp_path) -> None:
    wal = tmp_path / "old"
    wal.mkdir()
    (wal / "layout").write_text("shards=2\n")
    proc, _run, _tmp, stderr_path = shardq_launch(2, ("-b", str(wal), *config(tmp_path, EXPIRING)))
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (2, b"")
    (line,) = stderr_path.read_text().splitlines()  # one line, naming the key
    assert line.endswith(
        f"tubes.jobs*.expired_to: {wal} was written before tube families, so a tube's family "
        "may be on another shard; drain its jobs into a new log directory to move expired jobs"
    )


def test_a_restarted_shard_without_a_log_never_reuses_a_copys_id(shardq_server, tmp_path) -> None:
    """Without -b a shard that crashes comes back empty, but a client may still hold a copy's
    id (a later `delete` of it must not hit another job): the ids go on."""
    import os
    import signal

    from helpers import poll_for

    family = tube_on_shard(2, 4, "fam")  # shard 2 runs in a process of its own
    srv = shardq_server(
        4, ("--serving", "2", *config(tmp_path, f"tubes:\n  {family}: {{fanout: true}}\n"))
    )
    pid = srv.wait_all_children()["shard 2"]
    with client(srv.port, use=family, watch=f"{family}+m") as c:
        c.put("one")
        c.use(f"{family}+m")
        first = c.peek_ready().id
        os.kill(pid, signal.SIGKILL)
        poll_for(lambda: srv.roles().get("shard 2") not in (None, pid), timeout=10)
        c.use(family)
        c.put("two")  # waits for the restarted shard
        c.use(f"{family}+m")
        second = c.peek_ready().id
        assert second > first  # not the id the lost copy had


@pytest.mark.parametrize(("shards", "serving"), SHARDS, ids=IDS)
def test_a_put_and_its_copies_are_admitted_together(
    shardq_server, tmp_path, shards: int, serving: str
) -> None:
    """limits.max_jobs counts the copies a put would make: a put whose copies would pass it
    is refused whole (OUT_OF_MEMORY), as a put that would pass it alone is."""
    srv = shardq_server(shards, ("--serving", serving, "--max-jobs", "4", *config(tmp_path)))
    with client(srv.port, use="orders", watch=["orders+a", "orders+b"]) as c:
        c.put("one")  # and its two copies: 3 jobs
        with pytest.raises(greenstalk.OutOfMemoryError):
            c.put("two")  # 3 more would make 6
        assert c.stats()["current-jobs-ready"] == 3
        c.use("plain")
        c.put("fits")  # a put with no copies still fits: 4
