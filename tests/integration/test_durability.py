"""Durability (issue 3): the write-ahead log across restarts, crashes and shard deaths.

Every server runs with ``-b DIR -f 0`` on a directory under tmp_path. "SIGKILL of the
whole server" kills every process of the server's process group at once (a real crash:
nothing gets to sync); killing only the supervisor lets the children stop by themselves.
The crash checks are tools/crash_test.py's (the same code the tool runs for longer);
``SHARDQ_CRASH_REPEAT`` (default 1) repeats them. tests/conftest.py puts tools/ on the path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import crash_test
import pytest
from crash_load import Client
from helpers import LAYOUTS, Layout, killed_at_fsync, poll_for, wal_args

from shardq.bench.procs import kill_group, wait_group_gone

REPEAT = max(1, int(os.environ.get("SHARDQ_CRASH_REPEAT", "1") or 1))
CRASH_SECONDS = 2.5  #: load time per crash round (a round, restart included, stays < 30 s)
#: the layouts with a shard process of its own to kill: the suite's with more shards than
#: serving processes (4; 4 over 2: two hosted, two in shard processes), and one serving
#: process over two shards
CRASH_LAYOUTS = (Layout(2), *(layout for layout in LAYOUTS if layout.shards > layout.serving))
#: the whole server or a serving process killed: every layout of the suite, and the above
KILL_LAYOUTS = (*dict.fromkeys((*LAYOUTS, *CRASH_LAYOUTS)),)


def crash_template(layout: Layout = CRASH_LAYOUTS[0]) -> str:
    serve = "-m shardq serve -l 127.0.0.1 -p {port} -b {dir} -f 0"
    return f"{sys.executable} {serve} {' '.join(layout.flags())}"


def wait_exit(proc: subprocess.Popen, timeout: float = 15.0) -> int:
    return proc.wait(timeout=timeout)


def kill_whole(server) -> None:
    """SIGKILL every process of the server at once (its own session/process group)."""
    os.killpg(server.proc.pid, signal.SIGKILL)
    assert wait_group_gone(server.proc), "processes of the killed server still run"


def kill_supervisor(server) -> None:
    server.proc.kill()
    assert wait_group_gone(server.proc), "children outlived the supervisor"


def graceful(server) -> None:
    server.proc.send_signal(signal.SIGTERM)
    assert wait_exit(server.proc) == 0, server.stderr()[-2000:]


def put(c: Client, tube: bytes, body: bytes, pri: int = 100, delay: int = 0, ttr: int = 60) -> int:
    assert c.cmd(b"use " + tube) == b"USING " + tube
    head = c.cmd(b"put %d %d %d %d\r\n%s" % (pri, delay, ttr, len(body), body))
    assert head.startswith(b"INSERTED "), head
    return int(head.split()[1])


def reserve(c: Client, timeout: int = 0) -> tuple[int, bytes]:
    c.send(b"reserve-with-timeout %d\r\n" % timeout)
    head = c.line()
    assert head.startswith(b"RESERVED "), head
    _, job_id, size = head.split()
    return int(job_id), c.body(int(size))


def stats_job(c: Client, job_id: int) -> dict[str, str]:
    return {k: v.strip('"') for k, v in c.stats(b"stats-job %d" % job_id).items()}


def peek_buried(c: Client, tube: bytes) -> int | None:
    assert c.cmd(b"use " + tube) == b"USING " + tube
    c.send(b"peek-buried\r\n")
    head = c.line()
    if head == b"NOT_FOUND":
        return None
    _, job_id, size = head.split()
    c.body(int(size))
    return int(job_id)


STABLE = ("state", "pri", "tube", "ttr", "delay", "releases", "buries", "kicks", "timeouts")


@pytest.mark.parametrize("how", ["sigterm", "sigkill-whole-server", "sigkill-supervisor"])
def test_restart_keeps_jobs(shardq_server, tmp_path: Path, how: str) -> None:
    log = tmp_path / "wal"
    srv = shardq_server(2, wal_args(log))
    c = Client(srv.port)
    holder = Client(srv.port)  # keeps a job reserved across the stop
    ta, tb = b"dur-a", b"dur-b"
    for cl in (c, holder):
        for t in (ta, tb):
            cl.cmd(b"watch " + t)
        cl.cmd(b"ignore default")

    ready = put(c, ta, b"ready", pri=5)
    delayed = put(c, tb, b"delayed", delay=40)
    # buried in the order b2, b3, b1 (not id order); reserved by priority
    b1, b2, b3 = put(c, tb, b"b1", pri=3), put(c, tb, b"b2", pri=1), put(c, tb, b"b3", pri=2)
    gone = put(c, ta, b"deleted", pri=4000)
    for expect in (b2, b3, b1):
        job_id, _ = reserve(c)
        assert job_id == expect
        assert c.cmd(b"bury %d 10" % job_id) == b"BURIED"
    released = put(c, ta, b"released", pri=200)
    assert c.cmd(b"reserve-job %d" % released).startswith(b"RESERVED")
    assert c.cmd(b"release %d 7 0" % released) == b"RELEASED"  # a new priority
    kicked = put(c, ta, b"kicked", pri=300)
    assert c.cmd(b"delete %d" % gone) == b"DELETED"
    assert c.cmd(b"reserve-job %d" % kicked).startswith(b"RESERVED")
    assert c.cmd(b"bury %d 300" % kicked) == b"BURIED"
    assert c.cmd(b"kick-job %d" % kicked) == b"KICKED"
    held = put(c, ta, b"held", pri=6)
    assert holder.cmd(b"reserve-job %d" % held).startswith(b"RESERVED")
    ids = [ready, delayed, b1, b2, b3, gone, released, kicked, held]
    before = {j: stats_job(c, j) for j in ids if j != gone}
    assert before[held]["state"] == "reserved"
    stopped_at = time.monotonic()

    stop = {"sigterm": graceful, "sigkill-whole-server": kill_whole}
    stop.get(how, kill_supervisor)(srv)
    c.close()
    holder.close()
    srv2 = shardq_server(2, wal_args(log))
    c = Client(srv2.port)
    after = {j: stats_job(c, j) for j in ids if j != gone}
    assert c.cmd(b"stats-job %d" % gone) == b"NOT_FOUND"  # deleted stays deleted
    for j in (ready, b1, b2, b3, released, kicked):
        for key in STABLE:
            assert after[j][key] == before[j][key], (j, key, before[j], after[j])
    assert after[released]["pri"] == "7" and after[released]["releases"] == "1"
    assert after[kicked]["state"] == "ready" and after[kicked]["kicks"] == "1"
    assert [after[j]["buries"] for j in (b1, b2, b3)] == ["1", "1", "1"]  # not buries + 1
    assert after[held]["state"] == "ready"  # reserved -> ready
    assert after[delayed]["state"] == "delayed"
    elapsed = time.monotonic() - stopped_at
    left = int(after[delayed]["time-left"])
    assert int(before[delayed]["time-left"]) - elapsed - 2 <= left <= 40 - elapsed + 1, (
        before[delayed],
        after[delayed],
        elapsed,
    )
    order = []
    for _ in range(3):
        order.append(peek_buried(c, tb))
        assert c.cmd(b"kick 1") == b"KICKED 1"
    assert order == [b2, b3, b1]
    assert peek_buried(c, tb) is None
    # ids never go backwards
    new = put(c, ta, b"after restart")
    assert new > max(ids)
    st = c.stats()
    cur, oldest = int(st["binlog-current-index"]), int(st["binlog-oldest-index"])
    assert 1 <= oldest <= cur, st
    assert cur >= 2, st  # a restart never appends to the old segment
    assert int(st["binlog-records-written"]) > 0, st
    assert int(st["binlog-max-size"]) > 0, st
    assert int(st["current-jobs-delayed"]) == 1, st
    c.close()


def test_ids_never_go_backwards_over_many_restarts(shardq_server, tmp_path: Path) -> None:
    """Within one run the shards take ids from blocks of their own (a put to another shard's
    tube may get a smaller id); after a restart every id is above all ids of the runs before."""
    log = tmp_path / "wal"
    last = 0
    for how in (kill_whole, graceful, kill_supervisor):
        srv = shardq_server(2, wal_args(log))
        c = Client(srv.port)
        ids = [put(c, tube, b"x") for tube in (b"i-a", b"i-b", b"i-c")]
        assert min(ids) > last, (ids, last)
        last = max(ids)
        c.close()
        how(srv)


def test_damaged_record_skipped_server_starts_and_counts_it(shardq_server, tmp_path: Path):
    log = tmp_path / "wal"
    srv = shardq_server(1, wal_args(log))
    c = Client(srv.port)
    ids = [put(c, b"dmg", b"job-%d" % i + b"." * 100) for i in range(5)]
    c.close()
    graceful(srv)
    seg = sorted((log / "shard-0").glob("*.wal"), key=lambda p: int(p.stem))[0]
    data = bytearray(seg.read_bytes())
    at = data.find(b"job-1")
    assert at > 0
    data[at] ^= 0x20  # the second job's body: its checksum fails
    seg.write_bytes(bytes(data))
    srv2 = shardq_server(1, wal_args(log))
    c = Client(srv2.port)
    present = [j for j in ids if c.cmd(b"stats-job %d" % j).startswith(b"OK")]
    assert present == [ids[0], *ids[2:]]
    assert "damaged" in srv2.stderr()
    st = c.stats()
    counted = {k: v for k, v in st.items() if "damaged" in k or "skipped" in k}
    assert list(counted.values()) == ["1"], f"no stats field counts the damaged record: {st}"
    c.close()


def test_other_shard_count_is_refused(shardq_server, shardq_launch, tmp_path: Path) -> None:
    log = tmp_path / "wal"
    srv = shardq_server(2, wal_args(log))
    c = Client(srv.port)
    job = put(c, b"layout", b"keep me")
    c.close()
    graceful(srv)
    proc, _run, _tmp, stderr_path = shardq_launch(3, wal_args(log))
    try:
        code = wait_exit(proc)
    finally:
        if proc.poll() is None:
            kill_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()
    err = stderr_path.read_text().strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "--shards 2" in err, err  # says how to proceed
    # and nothing was lost: the right shard count still serves the job
    srv3 = shardq_server(2, wal_args(log))
    c = Client(srv3.port)
    assert c.cmd(b"stats-job %d" % job).startswith(b"OK")
    c.close()


def _crash_rounds(tmp_path: Path, kill: str, layout: Layout) -> None:
    lines, failures = [], []
    for i in range(REPEAT):
        r = crash_test.run_round(
            crash_template(layout), CRASH_SECONDS, kill, workdir=tmp_path, label=f"t{i}"
        )
        lines.append(r.line(f"{kill} round {i + 1}"))
        if not r.ok:
            failures.append(lines[-1] + "\n" + r.details())
        assert r.acked_puts > 100, lines[-1]  # the load did run
    print("\n".join(lines))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("layout", KILL_LAYOUTS, ids=str)
def test_crash_whole_server_sigkill(tmp_path: Path, layout: Layout) -> None:
    """Producers and consumers under load, every process SIGKILLed, restart, drain."""
    _crash_rounds(tmp_path, "group", layout)


@pytest.mark.parametrize("layout", CRASH_LAYOUTS, ids=str)
def test_crash_one_shard_sigkill(tmp_path: Path, layout: Layout) -> None:
    """One shard SIGKILLed under load: clients see a delay, never an error; nothing lost,
    nothing run twice."""
    _crash_rounds(tmp_path, "shard", layout)


@pytest.mark.parametrize("layout", KILL_LAYOUTS, ids=str)
def test_crash_serving_sigkill(tmp_path: Path, layout: Layout) -> None:
    """A serving process (serving process), which also runs a shard, SIGKILLed under load: the
    supervisor restarts it, its shard replays its log; nothing acknowledged is lost or
    comes back, nothing is duplicated."""
    _crash_rounds(tmp_path, "serving", layout)


@pytest.mark.parametrize(("op", "expect"), [("delete", b"DELETED"), ("bury", b"BURIED")])
def test_reply_lost_in_shard_crash_is_still_right(
    shardq_server, tmp_path: Path, op: str, expect: bytes
) -> None:
    """The shard dies after its batch reached the log but before it replied (strace kills it
    at the fsync). The serving process resends the request to the restarted shard; the client must
    get the answer of what happened, not NOT_FOUND. BUG B4."""
    srv = shardq_server(1, (*wal_args(tmp_path / "wal"), "--no-colocate"))  # a shard process
    c = Client(srv.port)
    job = put(c, b"default", b"lost reply")
    assert c.cmd(b"reserve-with-timeout 0").startswith(b"RESERVED %d " % job)
    shard = srv.wait_all_children()["shard 0"]
    with killed_at_fsync(shard):
        reply = c.cmd(b"delete %d" % job if op == "delete" else b"bury %d 5" % job)
    assert srv.wait_all_children()["shard 0"] != shard, "the shard was not killed at its fsync"
    state = c.cmd(b"stats-job %d" % job)
    where = "gone" if state == b"NOT_FOUND" else c.last_body.decode().split("state: ")[1][:6]
    assert reply == expect, f"{op} answered {reply!r}; the job is now {where}"
    c.close()


@pytest.mark.parametrize("how", ["sigterm", "sigkill-whole-server"])
def test_compaction_in_a_child_keeps_every_job_across_a_stop(
    shardq_server, tmp_path: Path, how: str
) -> None:
    """The smallest segments (`-s 1`: two HEADROOMs), a backlog and churn: the shard compacts
    its log many times, each time in a forked child while it goes on taking commands
    (storage/wal.py, `start_compaction`). Then the server stops, at whatever point of a
    compaction that is; restarted, it has the backlog, and no deleted job came back."""
    log = tmp_path / "wal"
    srv = shardq_server(1, (*wal_args(log), "-s", "1"))
    c = Client(srv.port)
    body = b"b" * 1000
    backlog = [put(c, b"default", b"%06d" % n + body) for n in range(200)]  # ≈ 200 KB live
    deleted = []
    for _ in range(1500):  # ≈ 1.5 MB of churn: several compactions
        job_id = put(c, b"default", body, pri=1)
        assert c.cmd(b"delete %d" % job_id) == b"DELETED"
        deleted.append(job_id)
    # a compaction's child may still be writing (at nice 10, on a busy machine): each
    # command is a turn of the shard, which then finds it done
    poll_for(lambda: int(c.stats()["binlog-oldest-index"]) > 1, 10)  # older segments gone
    st = c.stats()
    assert int(st["binlog-records-migrated"]) >= len(backlog), st
    {"sigterm": graceful, "sigkill-whole-server": kill_whole}[how](srv)
    c.close()
    cut_short = set(log.rglob("*.new"))  # what a compaction the stop cut short left
    srv2 = shardq_server(1, (*wal_args(log), "-s", "1"))
    c = Client(srv2.port)
    assert int(c.stats()["current-jobs-ready"]) == len(backlog)
    for n, job_id in enumerate(backlog[:: len(backlog) // 10]):
        assert c.cmd(b"peek %d" % job_id).startswith(b"FOUND %d " % job_id)
        assert c.last_body == b"%06d" % (n * (len(backlog) // 10)) + body
    for job_id in deleted[-20:]:
        assert c.cmd(b"peek %d" % job_id) == b"NOT_FOUND"
    # no cut-short snapshot is left (the restarted shard may be compacting its log itself
    # by now, after replaying the churn: its own snapshot has an index of its own)
    assert not cut_short & set(log.rglob("*.new"))
    c.close()
