"""A bunqueue job record as bunqueue 2.9.5 sends it: all 47 keys in its order, the job's
own values in place, the rest bunqueue's absent options; no list shared between records."""

from __future__ import annotations

from shardq.processes.frontends.bunqueue.registry import Registry
from shardq.processes.frontends.bunqueue.render import job_record
from shardq.protocol import bunqueue_args as a

KEYS = [
    "id",
    "queue",
    "name",
    "data",
    "createdAt",
    "runAt",
    "startedAt",
    "completedAt",
    "attempts",
    "backoff",
    "backoffConfig",
    "dependsOn",
    "childrenIds",
    "childrenCompleted",
    "tags",
    "progress",
    "progressMessage",
    "stacktrace",
    "repeat",
    "durable",
    "lastHeartbeat",
    "stallCount",
    "priority",
    "lifo",
    "maxAttempts",
    "removeOnComplete",
    "removeOnFail",
    "ttl",
    "timeout",
    "uniqueKey",
    "customId",
    "parentId",
    "groupId",
    "stallTimeout",
    "stackTraceLimit",
    "keepLogs",
    "sizeLimit",
    "failParentOnFailure",
    "removeDependencyOnFailure",
    "continueParentOnFailure",
    "ignoreDependencyOnFailure",
    "deduplicationTtl",
    "deduplicationExtend",
    "deduplicationReplace",
    "debounceId",
    "debounceTtl",
    "timeline",
]


def test_a_plain_job() -> None:
    reg = Registry()
    j = reg.add("q", a.job_spec({"data": "x"}, "customId"), 1000.0)
    rec = job_record(j)
    assert list(rec) == KEYS
    assert len(KEYS) == 47
    assert rec == {
        **dict.fromkeys(KEYS),
        "id": j.id,
        "queue": "q",
        "name": "default",
        "data": "x",
        "createdAt": 1000.0,
        "runAt": 1000.0,
        "attempts": 0,
        "backoff": a.DEFAULT_BACKOFF,
        "dependsOn": [],
        "childrenIds": [],
        "childrenCompleted": 0,
        "tags": [],
        "progress": 0,
        "durable": False,
        "lastHeartbeat": 1000.0,
        "stallCount": 0,
        "priority": 0,
        "lifo": False,
        "maxAttempts": a.DEFAULT_MAX_ATTEMPTS,
        "removeOnComplete": False,
        "removeOnFail": False,
        "stackTraceLimit": 10,
        "failParentOnFailure": False,
        "removeDependencyOnFailure": False,
        "continueParentOnFailure": False,
        "ignoreDependencyOnFailure": False,
        "deduplicationExtend": False,
        "deduplicationReplace": False,
        "timeline": [],
    }
    assert all(type(rec[k]) is float for k in ("createdAt", "runAt", "lastHeartbeat"))


def test_a_job_with_every_option_and_times() -> None:
    reg = Registry()
    job = {
        "data": {"n": 1},
        "name": "mail",
        "priority": 5,
        "lifo": True,
        "maxAttempts": 7,
        "backoff": 250,
        "ttl": 9000,
        "timeout": 3000,
        "uniqueKey": "u1",
        "customId": "c1",
        "tags": ["t"],
        "removeOnComplete": True,
        "removeOnFail": True,
    }
    j = reg.add("q", a.job_spec(job, "customId"), 2000.0)
    j.started, j.completed, j.attempts = 2001, 2002, 2
    j.progress, j.progress_message, j.stacktrace = 50, "half", ["at x"]
    rec = job_record(j)
    assert list(rec) == KEYS
    assert (rec["startedAt"], rec["completedAt"]) == (2001.0, 2002.0)
    assert type(rec["startedAt"]) is float and type(rec["completedAt"]) is float
    assert (rec["id"], rec["customId"], rec["uniqueKey"]) == ("c1", "c1", "u1")
    assert (rec["name"], rec["data"], rec["priority"], rec["lifo"]) == ("mail", {"n": 1}, 5, True)
    assert (rec["maxAttempts"], rec["backoff"], rec["ttl"], rec["timeout"]) == (7, 250, 9000, 3000)
    assert (rec["tags"], rec["removeOnComplete"], rec["removeOnFail"]) == (["t"], True, True)
    assert (rec["attempts"], rec["progress"], rec["progressMessage"]) == (2, 50, "half")
    assert rec["stacktrace"] == ["at x"]


def test_records_share_no_list() -> None:
    reg = Registry()
    one = job_record(reg.add("q", a.job_spec({"data": 1}, "customId"), 1.0))
    two = job_record(reg.add("q", a.job_spec({"data": 2}, "customId"), 1.0))
    assert one["childrenIds"] is not two["childrenIds"]
    assert one["timeline"] is not two["timeline"]
