"""Workq's semantics against shardq with 1 and 4 shards: leases that end by TTR (to the
millisecond) and go back or fail past max-attempts, failures retried up to max-fails, jobs
evicted at their ttl, scheduled jobs, priorities, leases that cross connections, `run`
and `result` with concurrent workers, one job through two doors (Workq and beanstalk),
and everything kept across a restart with -b."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import greenstalk
import pytest
from helpers import killed_at_fsync, killed_at_syscall, poll_for, tube_on_shard, wal_args
from kestrel_server import START_TIMEOUT, TEARDOWN_TIMEOUT
from workq_server import Workq, add, new_id, workq_server_fixture  # noqa: F401  (the fixture)

from shardq.bench.procs import group_members, kill_group, role_of_pid

SHARDS = [1, 4]


def state_of(c: Workq, ident: str) -> dict[str, str]:
    reply = c.cmd(f"inspect job {ident}\r\n".encode()).decode()
    return dict(re.findall(r"^([a-z-]+) (.*)\r$", reply, re.M))


@pytest.mark.parametrize("shards", SHARDS)
def test_a_lease_ends_by_its_ttr_and_the_last_attempt_fails(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "ttr", b"p", ttr=150, flags="-max-attempts=2") == b"+OK\r\n"
    assert c.cmd(b"lease ttr 1000\r\n").startswith(f"+OK 1\r\n{ident} ttr 150 1".encode())
    assert state_of(c, ident)["state"] == "4"  # leased
    # not completed within 150 ms: back in its queue, leased again (attempt 2)
    assert c.cmd(b"lease ttr 2000\r\n").startswith(f"+OK 1\r\n{ident}".encode())
    assert state_of(c, ident)["attempts"] == "2"
    # and after its second TTR it fails for good, with an empty result
    assert c.cmd(f"result {ident} 3000\r\n".encode()) == f"+OK 1\r\n{ident} 0 0\r\n\r\n".encode()
    assert state_of(c, ident)["state"] == "2"
    assert c.cmd(b"lease ttr 300\r\n") == b"-TIMEOUT\r\n"


@pytest.mark.parametrize("shards", SHARDS)
def test_fails_are_retried_up_to_max_fails(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "retry", b"p", flags="-max-fails=2") == b"+OK\r\n"
    assert c.cmd(b"lease retry 1000\r\n").startswith(b"+OK 1\r\n")
    assert c.cmd(f"fail {ident} 5\r\nfirst\r\n".encode()) == b"+OK\r\n"
    st = state_of(c, ident)
    assert (st["state"], st["fails"]) == ("3", "1")  # pending: queued again
    assert c.cmd(b"lease retry 1000\r\n").startswith(f"+OK 1\r\n{ident}".encode())
    assert c.cmd(f"fail {ident} 6\r\nsecond\r\n".encode()) == b"+OK\r\n"
    assert c.cmd(f"result {ident} 0\r\n".encode()) == f"+OK 1\r\n{ident} 0 6\r\nsecond\r\n".encode()
    assert c.cmd(b"lease retry 200\r\n") == b"-TIMEOUT\r\n"


@pytest.mark.parametrize("shards", SHARDS)
def test_jobs_go_at_their_ttl(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    waiting, done = new_id(), new_id()
    assert add(c, waiting, "ttl", b"w", ttl=300) == b"+OK\r\n"
    assert add(c, done, "ttl2", b"d", ttl=300) == b"+OK\r\n"
    assert c.cmd(b"lease ttl2 1000\r\n").startswith(b"+OK 1\r\n")
    assert c.cmd(f"complete {done} 1\r\nr\r\n".encode()) == b"+OK\r\n"
    assert poll_for(lambda: c.cmd(f"inspect job {waiting}\r\n".encode()) == b"-NOT-FOUND\r\n")
    assert poll_for(lambda: c.cmd(f"result {done} 0\r\n".encode()) == b"-NOT-FOUND\r\n")
    assert b"evicted-jobs 1\r\n" in c.cmd(b"inspect server\r\n")  # the done one is not evicted
    assert c.cmd(b"lease ttl 100\r\n") == b"-TIMEOUT\r\n"
    with greenstalk.Client(("127.0.0.1", server.port), watch="ttl") as bs:
        assert bs.stats_tube("ttl")["current-jobs-ready"] == 0  # gone from the tube too


@pytest.mark.parametrize("shards", SHARDS)
def test_priority_then_age_and_a_lease_over_several_queues(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    names = [tube_on_shard(i % shards, shards, "prio") for i in range(3)]
    low, high, mid = new_id(), new_id(), new_id()
    assert add(c, low, names[0], b"low", flags="-priority=-5") == b"+OK\r\n"
    assert add(c, high, names[1], b"high", flags="-priority=100") == b"+OK\r\n"
    assert add(c, mid, names[2], b"mid") == b"+OK\r\n"
    order = []
    for _ in range(3):
        reply = c.cmd(f"lease {' '.join(names)} 1000\r\n".encode())
        order.append(reply.split(b"\r\n")[1].split(b" ")[0].decode())
    assert order == [high, mid, low]


@pytest.mark.parametrize("shards", SHARDS)
def test_a_scheduled_job_waits_for_its_time(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    ident = new_id()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    line = f"schedule {ident} sched 1000 60000 {when} 1\r\nx\r\n"
    assert c.cmd(line.encode()) == b"+OK\r\n"
    assert c.cmd(b"lease sched 200\r\n") == b"-TIMEOUT\r\n"
    listed = c.cmd(b"inspect scheduled-jobs sched 0 10\r\n")
    assert (
        listed.startswith(f"+OK 1\r\n{ident} 13\r\n".encode()) and f"time {when}".encode() in listed
    )
    assert c.cmd(b"lease sched 5000\r\n").startswith(f"+OK 1\r\n{ident} sched 1000 1".encode())


@pytest.mark.parametrize("shards", SHARDS)
def test_a_lease_crosses_connections(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c, worker = Workq(server.workq), Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "cross", b"p", ttr=5000) == b"+OK\r\n"
    assert worker.cmd(b"lease cross 1000\r\n").startswith(b"+OK 1\r\n")
    worker.close()  # a Workq lease is not the connection's: it stays until its TTR
    time.sleep(0.1)
    assert state_of(c, ident)["state"] == "4"
    assert c.cmd(f"complete {ident} 2\r\nok\r\n".encode()) == b"+OK\r\n"
    assert c.cmd(f"result {ident} 0\r\n".encode()) == f"+OK 1\r\n{ident} 1 2\r\nok\r\n".encode()


@pytest.mark.parametrize("shards", SHARDS)
def test_run_and_result_with_concurrent_workers(workq_server, shards: int) -> None:
    server = workq_server(shards)
    names = [tube_on_shard(i % shards, shards, "calc") for i in range(2)]
    runs, results = 12, {}
    stop = threading.Event()

    def worker() -> None:
        w = Workq(server.workq)
        while not stop.is_set():
            reply = w.cmd(f"lease {' '.join(names)} 200\r\n".encode())
            if reply == b"-TIMEOUT\r\n":
                continue
            head, payload = reply.split(b"\r\n")[1:3]
            ident = head.split(b" ")[0].decode()
            answer = payload[::-1]
            assert (
                w.cmd(f"complete {ident} {len(answer)}\r\n".encode() + answer + b"\r\n")
                == b"+OK\r\n"
            )

    def runner(i: int) -> None:
        r = Workq(server.workq)
        ident, payload = new_id(), f"job-{i}".encode()
        line = f"run {ident} {names[i % 2]} 5000 10000 {len(payload)}\r\n".encode()
        results[i] = (ident, r.cmd(line + payload + b"\r\n", timeout=15))

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(3)]
    runners = [threading.Thread(target=runner, args=(i,)) for i in range(runs)]
    for t in workers + runners:
        t.start()
    for t in runners:
        t.join(20)
    stop.set()
    for t in workers:
        t.join(5)
    for i in range(runs):
        ident, reply = results[i]
        answer = f"job-{i}".encode()[::-1]
        assert reply == f"+OK 1\r\n{ident} 1 {len(answer)}\r\n".encode() + answer + b"\r\n"
    # `result` waits for a job another connection completes
    c, w = Workq(server.workq), Workq(server.workq)
    ident = new_id()
    assert add(c, ident, names[0], b"later") == b"+OK\r\n"
    c.send(f"result {ident} 5000\r\n".encode())
    assert w.cmd(f"lease {names[0]} 1000\r\n".encode()).startswith(f"+OK 1\r\n{ident}".encode())
    assert w.cmd(f"complete {ident} 4\r\ndone\r\n".encode()) == b"+OK\r\n"
    assert c.reply() == f"+OK 1\r\n{ident} 1 4\r\ndone\r\n".encode()


@pytest.mark.parametrize("shards", SHARDS)
def test_a_run_nobody_takes_times_out_and_goes(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    ident = new_id()
    assert c.cmd(f"run {ident} idle 1000 150 1\r\nx\r\n".encode()) == b"-TIMEOUT\r\n"
    assert c.cmd(f"inspect job {ident}\r\n".encode()) == b"-NOT-FOUND\r\n"
    assert c.cmd(b"lease idle 100\r\n") == b"-TIMEOUT\r\n"  # not left in the queue


@pytest.mark.parametrize("shards", SHARDS)
def test_one_job_two_doors(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "doors", b"from workq") == b"+OK\r\n"
    with greenstalk.Client(("127.0.0.1", server.port), use="doors", watch="doors") as bs:
        job = bs.reserve(timeout=5)
        assert job.body == "from workq"
        bs.delete(job)
        bs.put("from beanstalk", ttr=7)
        reply = c.cmd(b"lease doors 1000\r\n")
        found = re.fullmatch(
            rb"\+OK 1\r\n([0-9a-f-]{36}) doors 7000 14\r\nfrom beanstalk\r\n", reply
        )
        assert found, reply
        adopted = found[1].decode()
        assert c.cmd(f"complete {adopted} 2\r\nok\r\n".encode()) == b"+OK\r\n"
        assert (
            c.cmd(f"result {adopted} 0\r\n".encode())
            == f"+OK 1\r\n{adopted} 1 2\r\nok\r\n".encode()
        )
        assert bs.stats_tube("doors")["current-jobs-ready"] == 0


@pytest.mark.parametrize("shards", SHARDS)
def test_a_payload_of_1_mib_whatever_z_says(workq_server, shards: int) -> None:
    """Workq's payloads go up to 1 MiB; beanstalk's -z (65,535 by default) bounds what a
    beanstalk client may put, not what the Workq door puts for its clients."""
    server = workq_server(shards, ("--serving", "2") if shards > 1 else ())
    c = Workq(server.workq)
    big = bytes(range(256)) * 4096  # 1 MiB exactly
    first, second = new_id(), new_id()
    assert add(c, first, "big", big) == b"+OK\r\n"
    assert add(c, second, "big", big) == b"+OK\r\n"
    leased = c.cmd(b"lease big 5000\r\n", timeout=10)
    assert leased == f"+OK 1\r\n{first} big 1000 {len(big)}\r\n".encode() + big + b"\r\n"
    with greenstalk.Client(("127.0.0.1", server.port), watch="big", encoding=None) as bs:
        assert bs.reserve(timeout=5).body == big  # a beanstalk worker gets it whole
        with pytest.raises(greenstalk.JobTooBigError):
            bs.put(big)  # while its own puts stay within -z
    c.close()


@pytest.mark.parametrize("shards", SHARDS)
def test_everything_is_kept_across_a_restart_with_b(workq_server, tmp_path, shards: int) -> None:
    """Every key of a queued, a leased and a completed job is the same after a restart, and a
    lease taken before it ends by its TTR after it.

    The lease whose every key is compared has a TTR no restart can outlast (a start slower
    than START_TIMEOUT fails by itself); the one that must end has 1.5 s, and its state is
    not compared: a restart on a loaded machine took 1.2-1.8 s, so whether it was still
    leased when inspected depended on the machine (it failed 4 times in 8 under one busy
    loop), not on the server."""
    flags = wal_args(tmp_path / f"wal{shards}")
    server = workq_server(shards, flags)
    c = Workq(server.workq)
    queued, held, leased, completed = new_id(), new_id(), new_id(), new_id()
    ttr_past_any_restart = int((START_TIMEOUT + TEARDOWN_TIMEOUT) * 1000) * 10
    assert add(c, queued, "keep", b"q", flags="-priority=3 -max-attempts=4") == b"+OK\r\n"
    assert add(c, held, "keep1", b"h", ttr=ttr_past_any_restart) == b"+OK\r\n"
    assert add(c, leased, "keep2", b"l", ttr=1500) == b"+OK\r\n"
    assert add(c, completed, "keep3", b"c") == b"+OK\r\n"
    assert c.cmd(b"lease keep1 1000\r\n").startswith(f"+OK 1\r\n{held}".encode())
    assert c.cmd(b"lease keep2 1000\r\n").startswith(f"+OK 1\r\n{leased}".encode())
    assert c.cmd(b"lease keep3 1000\r\n").startswith(f"+OK 1\r\n{completed}".encode())
    assert c.cmd(f"complete {completed} 6\r\nresult\r\n".encode()) == b"+OK\r\n"
    before = {ident: state_of(c, ident) for ident in (queued, held, leased, completed)}
    assert before[held]["state"] == before[leased]["state"] == "4"  # leased
    assert server.stop() == 0
    server = workq_server(shards, flags)
    c = Workq(server.workq)
    after = {ident: state_of(c, ident) for ident in before}
    before[leased].pop("state")  # leased or back in its queue: see above
    after[leased].pop("state")
    assert after == before  # every key, created times too
    assert (
        c.cmd(f"result {completed} 0\r\n".encode())
        == f"+OK 1\r\n{completed} 1 6\r\nresult\r\n".encode()
    )
    assert add(c, queued, "keep", b"again") == b"-CLIENT-ERROR Duplicate job\r\n"
    assert c.cmd(b"lease keep 1000\r\n") == f"+OK 1\r\n{queued} keep 1000 1\r\nq\r\n".encode()
    # the lease taken before the restart ends by its TTR and the job is leased again
    assert c.cmd(b"lease keep2 5000\r\n") == f"+OK 1\r\n{leased} keep2 1500 1\r\nl\r\n".encode()
    assert state_of(c, leased)["attempts"] == "2"
    assert state_of(c, held)["state"] == "4"  # its lease goes on


def test_the_registry_is_bounded_by_max_memory(workq_server) -> None:
    """Results are kept until their ttl outside any beanstalk job: with limits.max_memory
    the Workq front-end refuses adds once what it holds would pass it."""
    server = workq_server(1, ("--max-memory", "1M"))
    c = Workq(server.workq)
    result = b"r" * 60_000
    answers = []
    for _ in range(40):
        ident = new_id()
        answers.append(add(c, ident, "big", b"p" * 60_000))
        if answers[-1] != b"+OK\r\n":
            break
        assert c.cmd(b"lease big 1000\r\n").startswith(f"+OK 1\r\n{ident}".encode())
        assert (
            c.cmd(f"complete {ident} {len(result)}\r\n".encode() + result + b"\r\n") == b"+OK\r\n"
        )
    assert answers[-1] == b"-SERVER-ERROR queue is full\r\n"
    assert 4 <= len(answers) - 1 <= 9  # about 1 MiB of payloads and results was taken
    with greenstalk.Client(("127.0.0.1", server.port)) as bs:
        assert bs.stats()["current-jobs-ready"] == 0  # not the server's own limit


@pytest.mark.parametrize("shards", SHARDS)
def test_a_crash_loses_no_acknowledged_job(workq_server, tmp_path, shards: int) -> None:
    """SIGKILL of the whole server (-b, -f 0) right after its answers: every job it said +OK
    to is there after the restart — queued, leased (back at its TTR) or done with its
    result."""
    flags = wal_args(tmp_path / f"crash{shards}")
    server = workq_server(shards, flags)
    c = Workq(server.workq)
    ids = [new_id() for _ in range(12)]
    for i, ident in enumerate(ids):
        assert add(c, ident, f"crash{i % 3}", b"%d" % i, ttr=400) == b"+OK\r\n"
    leased = []
    for _ in range(4):
        reply = c.cmd(b"lease crash0 crash1 crash2 1000\r\n")
        leased.append(reply.split(b"\r\n")[1].split(b" ")[0].decode())
    for ident in leased[:2]:
        assert c.cmd(f"complete {ident} 2\r\nok\r\n".encode()) == b"+OK\r\n"
    kill_group(server.proc)
    server = workq_server(shards, flags)
    c = Workq(server.workq)
    for ident in leased[:2]:
        assert c.cmd(f"result {ident} 0\r\n".encode()) == f"+OK 1\r\n{ident} 1 2\r\nok\r\n".encode()
    seen = set()
    while len(seen) < 10:
        reply = c.cmd(b"lease crash0 crash1 crash2 3000\r\n")
        assert reply.startswith(b"+OK 1\r\n"), (reply, seen)
        ident = reply.split(b"\r\n")[1].split(b" ")[0].decode()
        seen.add(ident)
        assert c.cmd(f"complete {ident} 0\r\n\r\n".encode()) == b"+OK\r\n"
    assert seen == set(ids) - set(leased[:2])


def test_leases_that_end_while_the_server_restarts_are_not_stranded(workq_server, tmp_path) -> None:
    """The janitor puts ended leases back through its own server connection; if that
    connection goes midway (its serving process killed), what it had not put back yet is
    given back and put back by the next janitor, not left waiting for its ttl (it was:
    the janitor's turn took the jobs with it). With -b: the killed process hosts the shard."""
    server = workq_server(1, wal_args(tmp_path / "jan"))
    c = Workq(server.workq)
    ids = {new_id() for _ in range(20)}
    for ident in ids:
        assert add(c, ident, "jan", b"x", ttr=200, ttl=600_000) == b"+OK\r\n"
    assert c.cmd(b"lease jan 1000\r\n").startswith(b"+OK 1\r\n")
    assert c.cmd(b"lease jan 2000\r\n").startswith(b"+OK 1\r\n")  # the janitor is up
    c.send(b"lease jan 1000\r\n" * len(ids))  # pipelined: their TTRs end close together
    assert all(c.reply().startswith(b"+OK 1\r\n") for _ in ids)
    serving = next(p for p in group_members(server.proc.pid) if role_of_pid(p) == "serving")
    os.kill(serving, signal.SIGSTOP)  # the janitor's turn sends its first put: no answer
    time.sleep(0.6)
    os.kill(serving, signal.SIGKILL)  # and its connection goes (the supervisor restarts it)
    c.close()
    poll_for(lambda: any(role_of_pid(p) == "serving" for p in group_members(server.proc.pid)))
    c = Workq(server.workq)
    seen: set[str] = set()
    while not ids <= seen:  # each of them again (a put whose answer the kill took may come
        # back twice, adopted under a new id: at least once, never lost)
        reply = c.cmd(b"lease jan 3000\r\n", timeout=10)
        assert reply.startswith(b"+OK 1\r\n"), (reply, len(ids - seen))
        seen.add(reply.split(b"\r\n")[1].split(b" ")[0].decode())
        assert len(seen) <= 2 * len(ids)


def test_with_f0_an_answer_leaves_only_after_its_journal_fsync(workq_server, tmp_path) -> None:
    """strace kills the Workq front-end at its first journal fsync after the client's lease:
    the lease must not have been answered (answers of a turn wait for its fsync), and after
    the restart the job is still there to lease."""
    flags = wal_args(tmp_path / "sync")
    server = workq_server(1, flags)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "synced", b"p", ttr=300) == b"+OK\r\n"
    front = next(p for p in group_members(server.proc.pid) if role_of_pid(p) == "workq")
    with killed_at_fsync(front):
        c.send(b"lease synced 1000\r\n")
    assert c.eof(), "the lease was answered before its journal record was on disk"
    kill_group(server.proc)
    server = workq_server(1, flags)
    c = Workq(server.workq)
    assert c.cmd(b"lease synced 2000\r\n").startswith(f"+OK 1\r\n{ident}".encode())


def test_a_lease_killed_before_its_delete_gives_the_job_back_as_itself(
    workq_server, tmp_path
) -> None:
    """The front-end journals a lease, then deletes its beanstalk job from the tube: killed
    in between (strace, at the delete's send), the entry is back in its tube after the
    restart. The job comes back by its lease's end under its own id, once: not also as a new
    job made of that entry (it was, when the journal's lease did not name it)."""
    flags = wal_args(tmp_path / "gap")
    server = workq_server(1, flags)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "gap", b"p", ttr=300) == b"+OK\r\n"
    front = next(p for p in group_members(server.proc.pid) if role_of_pid(p) == "workq")
    with killed_at_syscall(front, "sendto", nth=2):  # 1: watch and reserve; 2: the delete
        c.send(b"lease gap 1000\r\n")
    assert c.eof()
    kill_group(server.proc)
    server = workq_server(1, flags)
    c = Workq(server.workq)
    assert c.cmd(b"lease gap 2000\r\n") == f"+OK 1\r\n{ident} gap 300 1\r\np\r\n".encode()
    assert c.cmd(f"complete {ident} 1\r\nr\r\n".encode()) == b"+OK\r\n"
    assert c.cmd(b"lease gap 300\r\n") == b"-TIMEOUT\r\n"
