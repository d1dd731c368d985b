"""bunqueue's semantics through shardq's door beyond one reply: Auth (compared with the real
bunqueue), leases given back on a disconnect (waking a waiting PULL, which bunqueue does
not), long polls woken by a push, locks that expire, event frames, 50 pipelined commands,
one job through both doors (bunqueue and beanstalk), and the server's limits."""

from __future__ import annotations

import struct
import time

import greenstalk
import msgpack
import pytest
from bunqueue_server import bunqueue_server_fixture, real_bunqueue_fixture  # noqa: F401
from bunqueue_wire import Raw, clean
from helpers import poll_for

SHARDS = [1, 4]


def pull_waits(port: int, tube: str) -> None:
    """Return once a pull waits on `tube` (a reserve of the door's, seen in its stats)."""
    with greenstalk.Client(("127.0.0.1", port)) as bs:

        def waiting() -> bool:
            try:
                return int(bs.stats_tube(tube)["current-waiting"]) >= 1
            except greenstalk.NotFoundError:
                return False

        poll_for(waiting)


def auth_replies(port: int) -> list[object]:
    c = Raw(port)
    out = [clean(c.call("Hello")), clean(c.call("PUSH", queue="a", data={}))]
    out += [clean(c.call("Auth", token="wrong")), clean(c.call("Ping"))]
    out.append(clean(c.call("Auth", token="s3cret")))
    out.append(clean(c.call("Auth", token="wrong")))  # does not de-authenticate
    out.append(clean(c.call("Count", queue="a")))
    c.close()
    return out


def test_auth_answers_as_bunqueue_does(bunqueue_server, real_bunqueue, tmp_path) -> None:
    config = tmp_path / "shardq.yaml"
    config.write_text("bunqueue:\n  tokens: [s3cret]\n")
    ours = bunqueue_server(1, ("--config", str(config)))
    real = real_bunqueue(env={"AUTH_TOKENS": "s3cret"})
    assert auth_replies(ours.bunqueue) == auth_replies(real)
    assert auth_replies(ours.bunqueue)[-1] == {"ok": True, "count": 0}


@pytest.mark.parametrize("shards", SHARDS)
def test_a_disconnect_gives_back_its_jobs_and_wakes_a_waiting_pull(bunqueue_server, shards):
    server = bunqueue_server(shards)
    holder, waiter = Raw(server.bunqueue), Raw(server.bunqueue)
    ident = holder.call("PUSH", queue="dc", data={"x": 1})["id"]
    assert holder.call("PULL", queue="dc", owner="w")["job"]["id"] == ident
    waiter.send({"cmd": "PULL", "queue": "dc", "timeout": 20000, "reqId": "w"})
    pull_waits(server.port, "dc")
    started = time.monotonic()
    holder.close()
    reply = waiter.recv()
    assert reply["job"]["id"] == ident and reply["job"]["attempts"] == 0
    assert time.monotonic() - started < 5  # woken, not at the end of its 20 s poll


@pytest.mark.parametrize("shards", SHARDS)
def test_a_long_poll_is_woken_by_a_push(bunqueue_server, shards) -> None:
    server = bunqueue_server(shards)
    waiter, pusher = Raw(server.bunqueue), Raw(server.bunqueue)
    waiter.send({"cmd": "PULLB", "queue": "lp", "count": 5, "timeout": 20000, "owner": "o"})
    pull_waits(server.port, "lp")
    started = time.monotonic()
    ident = pusher.call("PUSH", queue="lp", data={"n": 1})["id"]
    reply = waiter.recv()
    assert [j["id"] for j in reply["jobs"]] == [ident] and len(reply["tokens"]) == 1
    assert time.monotonic() - started < 1.5


def test_an_expired_lock_queues_the_job_again_with_one_more_attempt(bunqueue_server) -> None:
    server = bunqueue_server(1)
    c = Raw(server.bunqueue)
    ident = c.call("PUSH", queue="lk", data={})["id"]
    first = c.call("PULL", queue="lk", owner="a", lockTtl=200)
    again = c.call("PULL", queue="lk", owner="b", timeout=5000)
    assert again["job"]["id"] == ident
    assert (again["job"]["attempts"], again["job"]["stallCount"]) == (1, 1)
    assert c.call("ACK", id=ident, token=first["token"]) == {
        "ok": False,
        "error": f"Invalid or expired lock token for job {ident}",
    }
    assert c.call("JobHeartbeat", id=ident, token=again["token"])["data"] == {"ok": True}
    assert c.call("ACK", id=ident, token=again["token"]) == {"ok": True}


def test_subscribers_get_event_frames_without_a_req_id(bunqueue_server) -> None:
    server = bunqueue_server(1)
    events, c = Raw(server.bunqueue), Raw(server.bunqueue)
    assert events.call("SubscribeEvents", reqId="s") == {"ok": True, "reqId": "s"}
    ident = c.call("PUSH", queue="ev", data={})["id"]
    pulled = c.call("PULL", queue="ev", owner="w")
    c.call("FAIL", id=ident, token=pulled["token"], error="once")
    seen = [events.recv() for _ in range(3)]
    assert [e["event"]["eventType"] for e in seen] == ["pulled", "failed", "retried"]
    assert all(e["type"] == "event" and "reqId" not in e for e in seen)
    assert {e["event"]["jobId"] for e in seen} == {ident}
    assert isinstance(seen[0]["event"]["timestamp"], float)


def test_fifty_pipelined_commands_are_answered_in_order(bunqueue_server) -> None:
    server = bunqueue_server(1)
    c = Raw(server.bunqueue)
    frames = b""
    for i in range(50):
        body = msgpack.packb({"cmd": "PUSH", "queue": "pipe", "data": {"i": i}, "reqId": str(i)})
        frames += struct.pack(">I", len(body)) + body
    c.send_raw(frames)
    replies = [c.recv() for _ in range(50)]
    assert [r["reqId"] for r in replies] == [str(i) for i in range(50)]
    assert c.call("Count", queue="pipe")["count"] == 50


@pytest.mark.parametrize("shards", SHARDS)
def test_one_job_through_both_doors(bunqueue_server, shards) -> None:
    server = bunqueue_server(shards)
    c = Raw(server.bunqueue)
    c.call("PUSH", queue="both:doors", data={"to": "a@b"}, priority=7, timeout=5000)
    with greenstalk.Client(("127.0.0.1", server.port), watch="both;doors") as bs:
        job = bs.reserve(timeout=5)
        assert job.body == '{"to":"a@b"}'
        assert bs.stats_job(job)["ttr"] == 5
        bs.delete(job)
        bs.use("both;doors")
        bs.put('{"from":"beanstalk"}')
        bs.put("plain text")
    got = c.call("PULLB", queue="both:doors", count=2, timeout=5000)["jobs"]
    assert [(j["name"], j["data"]) for j in got] == [
        ("default", {"from": "beanstalk"}),
        ("default", "plain text"),
    ]
    assert c.call("ACK", id=got[0]["id"], result=1) == {"ok": True}
    assert c.call("GetResult", id=got[0]["id"])["result"] == 1


def test_the_servers_job_limit_applies_to_pushes(bunqueue_server) -> None:
    server = bunqueue_server(1, ("--max-jobs", "2"))
    c = Raw(server.bunqueue)
    assert c.call("PUSHB", queue="lim", jobs=[{"data": 1}, {"data": 2}])["ok"] is True
    assert c.call("PUSH", queue="lim", data=3) == {"ok": False, "error": "Queue is full"}
    assert c.call("GetJobCounts", queue="lim")["counts"]["waiting"] == 2


def test_bad_frames_touch_no_other_connection(bunqueue_server) -> None:
    server = bunqueue_server(1)
    good = Raw(server.bunqueue)
    good.call("PUSH", queue="g", data={})
    bad = Raw(server.bunqueue)
    for body in (b"\xc1\xc1", b"\x81\xa3cmd\x05", b"\x93\x01\x02\x03"):
        bad.send_raw(struct.pack(">I", len(body)) + body)
        assert bad.recv()["ok"] is False
    assert good.call("Count", queue="g") == {"ok": True, "count": 1}
    assert bad.call("Ping")["ok"] is True


@pytest.mark.parametrize("shards", SHARDS)
def test_a_push_deleted_through_beanstalk_is_gone_for_bunqueue(bunqueue_server, shards) -> None:
    """The front-end does not see a beanstalk worker's delete: GetJob, GetState and the
    counts look at the tube before they answer."""
    server = bunqueue_server(shards)
    c = Raw(server.bunqueue)
    first = c.call("PUSH", queue="gone", data={"n": 1})["id"]
    second = c.call("PUSH", queue="gone", data={"n": 2})["id"]
    kept = c.call("PUSH", queue="gone", data={"n": 3})["id"]
    with greenstalk.Client(("127.0.0.1", server.port), watch="gone") as bs:
        for _ in range(2):
            bs.delete(bs.reserve(timeout=5))
    assert c.call("GetState", id=first) == {"ok": True, "id": first, "state": "unknown"}
    assert c.call("GetJobCounts", queue="gone")["counts"]["waiting"] == 1
    assert c.call("GetJob", id=second) == {"ok": False, "error": "Job not found"}
    assert c.call("Count", queue="gone")["count"] == 1
    assert c.call("GetState", id=kept)["state"] == "waiting"
    assert c.call("PULL", queue="gone")["job"]["id"] == kept
