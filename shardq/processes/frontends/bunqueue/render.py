"""A bunqueue job as bunqueue 2.9.5 sends it: its internal record, all 47 keys, absent
options as null / false / [] (timestamps are floats, as msgpackr writes them)."""

from __future__ import annotations

from typing import Any

from shardq.processes.frontends.bunqueue.registry import BqJob

#: how long bunqueue says a DLQ entry is kept (shardq keeps it until purged or retried)
DLQ_KEPT_MS = 7 * 24 * 3600 * 1000


#: the record's keys in bunqueue's order, with what never changes (bunqueue's own absent
#: options); `job_record` copies it and sets the rest, which keeps the order
TEMPLATE: dict[str, Any] = {
    "id": None,
    "queue": None,
    "name": None,
    "data": None,
    "createdAt": None,
    "runAt": None,
    "startedAt": None,
    "completedAt": None,
    "attempts": None,
    "backoff": None,
    "backoffConfig": None,
    "dependsOn": None,
    "childrenIds": None,  # a new list each time (a reply's values are not shared)
    "childrenCompleted": 0,
    "tags": None,
    "progress": None,
    "progressMessage": None,
    "stacktrace": None,
    "repeat": None,
    "durable": False,
    "lastHeartbeat": None,
    "stallCount": None,
    "priority": None,
    "lifo": None,
    "maxAttempts": None,
    "removeOnComplete": None,
    "removeOnFail": None,
    "ttl": None,
    "timeout": None,
    "uniqueKey": None,
    "customId": None,
    "parentId": None,
    "groupId": None,
    "stallTimeout": None,
    "stackTraceLimit": 10,
    "keepLogs": None,
    "sizeLimit": None,
    "failParentOnFailure": False,
    "removeDependencyOnFailure": False,
    "continueParentOnFailure": False,
    "ignoreDependencyOnFailure": False,
    "deduplicationTtl": None,
    "deduplicationExtend": False,
    "deduplicationReplace": False,
    "debounceId": None,
    "debounceTtl": None,
    "timeline": None,  # a new list each time
}


def job_record(j: BqJob) -> dict[str, Any]:
    """The 47 keys: a copy of TEMPLATE (one C call) with the job's own set in place (a
    dict display of all 47 took 2.6x as long, in a pull of 50: one per job)."""
    o = j.opts
    out = TEMPLATE.copy()
    out["id"] = j.id
    out["queue"] = j.queue
    out["name"] = j.name
    out["data"] = j.data
    out["createdAt"] = float(j.created)
    out["runAt"] = float(j.run_at)
    if j.started is not None:
        out["startedAt"] = float(j.started)
    if j.completed is not None:
        out["completedAt"] = float(j.completed)
    out["attempts"] = j.attempts
    out["backoff"] = o.backoff
    out["backoffConfig"] = o.backoff_config
    out["dependsOn"] = o.depends_on
    out["childrenIds"] = []
    out["tags"] = o.tags
    out["progress"] = j.progress
    out["progressMessage"] = j.progress_message
    out["stacktrace"] = j.stacktrace
    out["lastHeartbeat"] = float(j.heartbeat)
    out["stallCount"] = j.stall_count
    out["priority"] = o.priority
    out["lifo"] = o.lifo
    out["maxAttempts"] = o.max_attempts
    out["removeOnComplete"] = o.remove_on_complete
    out["removeOnFail"] = o.remove_on_fail
    out["ttl"] = o.ttl
    out["timeout"] = o.timeout
    out["uniqueKey"] = o.unique_key
    out["customId"] = o.custom_id
    out["timeline"] = []
    return out


def job_with_state(j: BqJob) -> dict[str, Any]:
    """GetJob's: the record, its state, result and failure."""
    out = job_record(j)
    out["state"] = j.visible_state
    if j.result is not None:  # (bunqueue: undefined, which its clients read as absent)
        out["returnvalue"] = j.result
    if j.failed_reason is not None:
        out["failedReason"] = j.failed_reason
    return out


def dlq_entry(j: BqJob) -> dict[str, Any]:
    entered = float(j.entered_dlq or 0)
    return {
        "job": job_record(j),
        "enteredAt": entered,
        "reason": "max_attempts_exceeded",
        "error": j.failed_reason,
        "attempts": j.history,
        "retryCount": 0,
        "lastRetryAt": None,
        "nextRetryAt": None,
        "expiresAt": entered + DLQ_KEPT_MS,
    }
