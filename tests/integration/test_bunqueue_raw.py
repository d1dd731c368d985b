"""bunqueue's protocol, command by command, differentially: the same requests to shardq's
bunqueue door (1 and 4 shards) and to the real bunqueue 2.9.5, and the same replies back —
field names, null/empty conventions, error strings — once ids, tokens and times are
replaced by what they stand for (`Normal`). msgpackr's `undefined` counts as absent."""

from __future__ import annotations

import struct
import time
from typing import Any

import msgpack
import pytest
from bunqueue_server import bunqueue_server_fixture, real_bunqueue_fixture  # noqa: F401  (fixtures)
from bunqueue_wire import UNDEFINED, Raw

SHARDS = [1, 4]
TIME_KEYS = {
    "createdAt",
    "runAt",
    "startedAt",
    "completedAt",
    "lastHeartbeat",
    "time",
    "timestamp",
    "enteredAt",
    "failedAt",
    "duration",
    "registeredAt",
    "lastSeen",
    "expiresAt",
}


#: what shardq does not reproduce (docs/PROTOCOLS.md): bunqueue's per-job state history
IGNORED = {"timeline"}


class Normal:
    """Replies with their ids and tokens named by first appearance (``id1``, ``id2``...) and
    their times as ``T``, so two servers' replies compare."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value not in self.names:
            self.names[value] = f"id{len(self.names) + 1}"
        return self.names[value]

    def __call__(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {
                k: self(v, k) for k, v in value.items() if v is not UNDEFINED and k not in IGNORED
            }
        if isinstance(value, list):
            if key in ("ids", "tokens", "dependsOn"):
                return [self.name(v) for v in value]
            return [self(v) for v in value]
        if key in TIME_KEYS and isinstance(value, int | float):
            return "T"
        if key == "error" and isinstance(value, str):
            for known, name in self.names.items():
                value = value.replace(known, name)
            return value
        if key in ("id", "token", "jobId", "workerId") and value is not UNDEFINED:
            return self.name(value)
        return value


class Session:
    """One scenario on one server: each reply normalized, kept in order."""

    def __init__(self, port: int) -> None:
        self.raw = Raw(port)
        self.normal = Normal()
        self.replies: list[Any] = []
        self.last: Any = None

    def __call__(self, cmd: str, **args: Any) -> Any:
        self.last = self.raw.call(cmd, **args)
        self.replies.append((cmd, self.normal(self.last)))
        return self.last

    def job_id(self) -> str:
        return str(self.last["job"]["id"])


def core_flow(c: Session) -> None:
    c("Hello", reqId="1")
    c("Ping", reqId=7)
    c("PUSH", queue="raw", data={"n": 1}, reqId="a")
    first = c.last["id"]
    c("PUSHB", queue="raw", jobs=[{"data": {"n": 2}, "priority": 5}, {"data": {"n": 3}}])
    c("PUSHB", queue="raw", jobs=[])
    c("GetJobCounts", queue="raw")
    c("Count", queue="raw")
    c("GetCountsPerPriority", queue="raw")
    c("GetState", id=first)
    c("GetJob", id=first)
    c("GetJob", id="no-such-job")
    c("GetState", id="no-such-job")
    c("GetResult", id="no-such-job")
    c("PULL", queue="raw", owner="w1", lockTtl=30000)  # the priority-5 job first
    pulled, token = c.job_id(), c.last["token"]
    c("GetState", id=pulled)
    c("ACK", id=pulled)
    c("ACK", id=pulled, token="not-it")
    c("ACK", id=pulled, token=token, result={"ok": 1})
    c("ACK", id=pulled, token=token)
    c("GetResult", id=pulled)
    c("GetJob", id=pulled)
    c("PULLB", queue="raw", count=5, owner="w2", lockTtl=30000)
    ids, tokens = [j["id"] for j in c.last["jobs"]], c.last["tokens"]
    c("JobHeartbeat", id=ids[0], token=tokens[0])
    c("JobHeartbeatB", ids=ids, tokens=tokens)
    c("ACKB", ids=ids, tokens=tokens[:1])
    c("ACKB", ids=ids, results=[1])
    c("ACKB", ids=ids, tokens=tokens, results=["r1", "r2"])
    c("GetJobCounts", queue="raw")
    c("PULL", queue="raw")
    c("PULL", queue="raw", owner="w1")
    c("PULLB", queue="raw", count=3)
    c("PULLB", queue="raw", count=3, owner="w1")
    c("GetJobs", queue="raw", state="completed", asc=True)


def errors_flow(c: Session) -> None:
    c("PUSH", queue="bad name!", data={})
    c("PUSH", data={})
    c("PUSH", queue="e", data={}, priority=2_000_000)
    c("PUSH", queue="e", data={}, maxAttempts=0)
    c("PUSH", queue="e", data={}, delay=-1)
    c("PUSH", queue="e", data={}, dependsOn=["missing-parent"])
    c("PUSHB", queue="e", jobs=[{"data": {}}, {"data": {}, "priority": 2_000_000}])
    c("PULL", queue="e", timeout=70000)
    c("PULLB", queue="e", count=2000)
    c("PULLB", queue="e", count=0)
    c("ACK", id="nope")
    c("FAIL", id="nope", error="x")
    c("Progress", id="nope", progress=5)
    c("GetProgress", id="nope")
    c("Cancel", id="nope")
    c("WaitJob", id="nope", timeout=10)
    c("Bogus")


def options_flow(c: Session) -> None:
    c("PUSH", queue="opt", data={"name": "send-mail", "to": "a@b"})  # the legacy envelope
    c("PUSH", queue="opt", name="explicit", data={"name": "kept", "x": 1})
    c("PUSH", queue="opt", data={"u": 1}, uniqueKey="k1")
    c("PUSH", queue="opt", data={"u": 2}, uniqueKey="k1")  # the first one's id
    c("PUSH", queue="opt", data={"c": 1}, jobId="custom-1")
    c("PUSH", queue="opt", data={"c": 2}, jobId="custom-1")
    c("GetJobByCustomId", customId="custom-1")
    c("PUSH", queue="opt", data={"d": 1}, delay=60000)
    delayed = c.last["id"]
    c("GetState", id=delayed)
    c("PUSH", queue="opt", data={"child": 1}, dependsOn=["custom-1"], priority=100)
    child = c.last["id"]
    c("GetState", id=child)
    c("GetJobCounts", queue="opt")
    c("Count", queue="opt")
    c("Pause", queue="opt")
    c("IsPaused", queue="opt")
    c("GetJobCounts", queue="opt")
    c("PULL", queue="opt")
    c("Resume", queue="opt")
    c("IsPaused", queue="opt")
    c("PULL", queue="opt", owner="w")  # the legacy-envelope job
    job, token = c.job_id(), c.last["token"]
    c("Progress", id=job, progress=150, message="over", token=token)
    c("GetProgress", id=job)
    c("WaitJob", id=job, timeout=50)
    c("ACK", id=job, token=token, result=[1, 2])
    c("WaitJob", id=job, timeout=50)
    c("Cancel", id=delayed)
    c("GetState", id=delayed)
    c("Cancel", id=delayed)
    c("Drain", queue="opt")
    c("GetJobCounts", queue="opt")
    c("ListQueues")


def dlq_flow(c: Session) -> None:
    c("PUSH", queue="dl", data={"f": 1}, maxAttempts=1)
    c("PULL", queue="dl", owner="w")
    job, token = c.job_id(), c.last["token"]
    c("FAIL", id=job, token=token, error="boom")
    c("GetState", id=job)
    c("GetJobCounts", queue="dl")
    c("PULL", queue="dl")
    c("Dlq", queue="dl")
    c("RetryDlq", queue="dl")
    c("GetState", id=job)
    c("PULL", queue="dl")  # attempts back to 0
    c("FAIL", id=c.job_id(), error="again")
    c("PurgeDlq", queue="dl")
    c("GetJobCounts", queue="dl")
    c("PUSH", queue="dl", data={"r": 1}, maxAttempts=3, backoff=100000)
    c("PULL", queue="dl", owner="w")
    retried = c.job_id()
    c("FAIL", id=retried, token=c.last["token"], error="retry me")
    c("GetState", id=retried)
    c("GetJob", id=retried)


def lifo_flow(c: Session) -> None:
    """bunqueue's order: priority, then lifo jobs newest first, then the others oldest first
    (pulled one by one, in a batch, and pipelined)."""
    for name, opts in [
        ("fifo1", {}),
        ("l1", {"lifo": True}),
        ("l2", {"lifo": True}),
        ("fifo2", {}),
        ("l3", {"lifo": True}),
        ("p5f", {"priority": 5}),
        ("p5l1", {"priority": 5, "lifo": True}),
        ("p5l2", {"priority": 5, "lifo": True}),
    ]:
        c("PUSH", queue="lf", name=name, data={"n": name}, **opts)
    c("PUSHB", queue="lf", jobs=[{"name": f"b{i}", "data": {}, "lifo": True} for i in (1, 2)])
    c("PULLB", queue="lf", count=3)
    for _ in range(8):
        c("PULL", queue="lf")


def ttl_flow(c: Session) -> None:
    """A job past its ttl is still counted waiting, and is dropped when a pull meets it."""
    first = c("PUSH", queue="tl", data={"t": 1}, ttl=1)["id"]
    c("PUSH", queue="tl", data={"t": 2})
    c("PUSH", queue="tl", data={"t": 3}, ttl=1)
    c("PUSH", queue="tl", data={"t": 4}, ttl=60000)
    c("PUSH", queue="tl", data={"t": 5})
    time.sleep(0.01)  # (the ttls, 1 ms, are past)
    c("GetState", id=first)
    c("GetJobCounts", queue="tl")
    c("PULLB", queue="tl", count=2)  # t2, t4: t1 and t3 dropped, their places filled
    c("PULL", queue="tl")
    c("PULL", queue="tl")
    c("GetState", id=first)
    c("GetJobCounts", queue="tl")
    c("Dlq", queue="tl")


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Where two replies differ (``job.state: 'waiting' != 'prioritized'``)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got), key=str):
            if key not in got or key not in want:
                out.append(
                    f"{path}{key}: {want.get(key, '<absent>')!r} != {got.get(key, '<absent>')!r}"
                )
            else:
                out += differences(want[key], got[key], f"{path}{key}.")
        return out
    return [] if want == got else [f"{path[:-1]}: {want!r} != {got!r}"]


FLOWS = [core_flow, errors_flow, options_flow, dlq_flow, lifo_flow, ttl_flow]


def run_flows(port: int) -> dict[str, list[Any]]:
    out = {}
    for flow in FLOWS:
        c = Session(port)
        flow(c)
        out[flow.__name__] = c.replies
        c.raw.close()
    return out


def frame_errors(port: int) -> list[Any]:
    """What bad frames get: the error, and whether the connection is still served."""
    out = []
    bodies = [b"\xc0", b"\x82\xa3cmd", msgpack.packb([1, 2]), msgpack.packb({"no": "cmd"})]
    bodies.append(msgpack.packb({"cmd": "", "reqId": "r"}))
    for body in bodies:
        c = Raw(port)
        c.send_raw(struct.pack(">I", len(body)) + body)
        out.append(Normal()(c.recv()))
        out.append(Normal()(c.call("Ping")))
        c.close()
    return out


@pytest.mark.parametrize("shards", SHARDS)
def test_every_command_answers_as_bunqueue_does(bunqueue_server, real_bunqueue, shards) -> None:
    real = real_bunqueue()
    ours = bunqueue_server(shards)
    want, got = run_flows(real), run_flows(ours.bunqueue)
    for name in want:
        for (cmd, expected), (_, actual) in zip(want[name], got[name], strict=True):
            assert actual == expected, f"{name}: {cmd}: {differences(expected, actual)}"
    assert frame_errors(ours.bunqueue) == frame_errors(real)


def test_a_frame_too_large_is_refused_and_the_connection_closed(bunqueue_server) -> None:
    server = bunqueue_server(1)
    c = Raw(server.bunqueue)
    c.send_raw(struct.pack(">I", 64 * 1024 * 1024 + 1))
    assert c.recv() == {
        "ok": False,
        "error": "Frame too large: 67108865 bytes exceeds maximum 67108864",
    }
    assert c.recv() is None  # closed
    other = Raw(server.bunqueue)  # the front-end goes on
    assert other.call("Ping")["ok"] is True
