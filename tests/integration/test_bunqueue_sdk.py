"""bunqueue's own SDKs, unmodified, against shardq's bunqueue door and against the real
bunqueue 2.9.5 in the same test, their outcomes compared: the TS SDK (`Queue`/`Worker` from
``bunqueue/client``, run by the pinned Bun: tests/bunqueue/sdk/flow.ts) and the Python SDK
(``bunqueue-client``: producer, worker with a job failing once, getJob, counts). With 1 and
4 shards; and jobs, attempts, the DLQ and results kept across a restart with -b."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from typing import Any

import pytest
from bunqueue_server import (  # noqa: F401  (the fixtures)
    SDK_DIR,
    bun,
    bunqueue_server_fixture,
    real_bunqueue_fixture,
    sdk_env,
)
from bunqueue_wire import Raw
from helpers import skip_or_fail, wal_args

from shardq.bench.procs import kill_group

SHARDS = [1, 4]
FLOW_TIMEOUT = 90.0
N = 40  # jobs of the Python flow


def ts_flow(port: int) -> dict[str, Any]:
    queue = f"ts-{uuid.uuid4().hex[:8]}"
    argv = [bun(), "flow.ts", "127.0.0.1", str(port), queue]
    done = subprocess.run(
        argv, cwd=SDK_DIR, env=sdk_env(), capture_output=True, timeout=FLOW_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    return dict(json.loads(done.stdout.decode().strip().splitlines()[-1]))


def python_flow(port: int) -> dict[str, Any]:
    """The Python SDK: N jobs (half with add, half with add_bulk), a worker of concurrency
    4 where one job raises once, then get_job and get_job_counts."""
    try:
        from bunqueue import Queue, Worker
    except ImportError:
        skip_or_fail("the Python SDK needs `pip install bunqueue-client` (make test does it)")
    name = f"py-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, host="127.0.0.1", port=port)
    ids = [queue.add("task", {"i": i}, attempts=3, backoff=100).id for i in range(N // 2)]
    bulk = [
        {"name": "task", "data": {"i": i}, "attempts": 3, "backoff": 100} for i in range(N // 2, N)
    ]
    ids += queue.add_bulk(bulk)
    runs: dict[int, int] = {}
    all_done = threading.Event()
    lock = threading.Lock()

    def process(job: Any) -> dict[str, int]:
        i = int(job.data["i"])
        with lock:
            runs[i] = runs.get(i, 0) + 1
            first = runs[i] == 1
        if i == 7 and first:
            raise RuntimeError("flaky once")
        return {"double": i * 2}

    completed: list[str] = []

    def on_completed(*args: Any) -> None:
        completed.append("x")
        if len(completed) == N:
            all_done.set()

    worker = Worker(name, process, host="127.0.0.1", port=port, concurrency=4, poll_timeout_ms=200)
    worker.on("completed", on_completed)
    assert all_done.wait(FLOW_TIMEOUT), f"{len(completed)} of {N} completed"
    worker.close()
    job = queue.get_job(ids[7])
    counts = queue.get_job_counts()
    queue.close()
    return {
        "distinct": len(set(ids)),
        "processed": len(runs),
        "runs": sum(runs.values()),
        "returnvalue": job.raw.get("returnvalue") if job else None,
        "counts": counts,
    }


@pytest.mark.parametrize("shards", SHARDS)
def test_the_ts_sdk_flow_goes_as_on_bunqueue(bunqueue_server, real_bunqueue, shards) -> None:
    want = ts_flow(real_bunqueue())
    got = ts_flow(bunqueue_server(shards).bunqueue)
    assert want["processed"] == 100 and want["flakyAttempts"] == 1  # the flow itself
    assert got.pop("queue") != want.pop("queue")
    assert got == want


def test_the_ts_sdk_flow_goes_on_across_a_restart_with_b(bunqueue_server, tmp_path) -> None:
    """The flow with -b, a restart, the flow again: the first run's jobs, results and
    counts are still there, and the second run goes as the first."""
    extra = ("-b", str(tmp_path / "wal"))
    first = bunqueue_server(1, extra)
    before = ts_flow(first.bunqueue)
    assert first.stop() == 0
    server = bunqueue_server(1, extra)
    after = ts_flow(server.bunqueue)
    c = Raw(server.bunqueue)
    counts = c.call("GetJobCounts", queue=before.pop("queue"))["counts"]
    assert counts == before["counts"] and counts["completed"] == 100
    after.pop("queue")
    assert after == before


@pytest.mark.parametrize("shards", SHARDS)
def test_the_python_sdk_flow_goes_as_on_bunqueue(bunqueue_server, real_bunqueue, shards) -> None:
    want = python_flow(real_bunqueue())
    got = python_flow(bunqueue_server(shards).bunqueue)
    assert want["processed"] == N and want["runs"] == N + 1
    assert got == want


@pytest.mark.parametrize("shards", SHARDS)
def test_jobs_attempts_dlq_and_results_survive_a_restart(bunqueue_server, tmp_path, shards):
    extra = ("-b", str(tmp_path / "wal"))
    first = bunqueue_server(shards, extra)
    c = Raw(first.bunqueue)
    done = c.call("PUSH", queue="keep", data={"k": "done"}, priority=10)["id"]
    retried = c.call("PUSH", queue="keep", data={"k": "retried"}, priority=5, backoff=1)["id"]
    dead = c.call("PUSH", queue="keep", data={"k": "dead"}, priority=1, maxAttempts=1)["id"]
    waiting = c.call("PUSH", queue="keep", data={"k": "waiting"}, uniqueKey="u1")["id"]
    delayed = c.call("PUSH", queue="keep", data={"k": "later"}, delay=600_000)["id"]
    for ident in (done, retried, dead):
        pulled = c.call("PULL", queue="keep", owner="w")
        assert pulled["job"]["id"] == ident
        if ident == done:
            c.call("ACK", id=ident, token=pulled["token"], result={"r": 1})
        else:
            c.call("FAIL", id=ident, token=pulled["token"], error="boom")
    held = Raw(first.bunqueue)  # pulled, not acked: given back after the restart
    assert held.call("PULL", queue="keep", timeout=5000)["job"]["id"] in (retried, waiting)
    first.stop()

    second = bunqueue_server(shards, extra)
    c = Raw(second.bunqueue)
    assert c.call("GetResult", id=done)["result"] == {"r": 1}
    assert c.call("GetState", id=dead)["state"] == "failed"
    assert [j["id"] for j in c.call("Dlq", queue="keep")["jobs"]] == [dead]
    assert c.call("GetState", id=delayed)["state"] == "delayed"
    assert c.call("PUSH", queue="keep", data={}, uniqueKey="u1")["id"] == waiting  # dedupe
    got = [c.call("PULL", queue="keep", timeout=5000)["job"] for _ in range(2)]
    assert {j["id"] for j in got} == {retried, waiting}
    assert {j["id"]: j["attempts"] for j in got} == {retried: 1, waiting: 0}
    assert c.call("PULL", queue="keep")["job"] is None
    counts = c.call("GetJobCounts", queue="keep")["counts"]
    assert (counts["active"], counts["completed"], counts["failed"], counts["delayed"]) == (
        2,
        1,
        1,
        1,
    )


@pytest.mark.parametrize("shards", SHARDS)
def test_a_crash_loses_no_acknowledged_push(bunqueue_server, tmp_path, shards) -> None:
    """SIGKILL of the whole server (-b, -f 0) right after its answers: every job it said ok
    to is there after the restart — waiting, given back (it was active), done with its
    result, or in the DLQ."""
    flags = wal_args(tmp_path / f"crash{shards}")
    server = bunqueue_server(shards, flags)
    c = Raw(server.bunqueue)
    ids = [c.call("PUSH", queue=f"crash{i % 3}", data={"i": i})["id"] for i in range(9)]
    ids += c.call("PUSHB", queue="crash0", jobs=[{"data": {"i": 9}}, {"data": {"i": 10}}])["ids"]
    acked = c.call("PULL", queue="crash1", owner="w")
    c.call("ACK", id=acked["job"]["id"], token=acked["token"], result="done")
    active = c.call("PULL", queue="crash2", owner="w")["job"]["id"]
    kill_group(server.proc)
    c = Raw(bunqueue_server(shards, flags).bunqueue)
    assert c.call("GetResult", id=acked["job"]["id"])["result"] == "done"
    assert c.call("GetState", id=active)["state"] == "waiting"
    seen = set()
    for queue in ("crash0", "crash1", "crash2"):
        while (job := c.call("PULL", queue=queue, timeout=2000)["job"]) is not None:
            seen.add(job["id"])
            assert c.call("ACK", id=job["id"]) == {"ok": True}
    assert seen == set(ids) - {acked["job"]["id"]}
