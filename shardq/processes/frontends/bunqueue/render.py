"""A bunqueue job as bunqueue 2.9.5 sends it: its internal record, all 47 keys, absent
options as null / false / [] (timestamps are floats, as msgpackr writes them)."""

from __future__ import annotations

from typing import Any

from shardq.processes.frontends.bunqueue.registry import BqJob

#: how long bunqueue says a DLQ entry is kept (shardq keeps it until purged or retried)
DLQ_KEPT_MS = 7 * 24 * 3600 * 1000


def job_record(j: BqJob) -> dict[str, Any]:
    o = j.opts
    return {
        "id": j.id,
        "queue": j.queue,
        "name": j.name,
        "data": j.data,
        "createdAt": float(j.created),
        "runAt": float(j.run_at),
        "startedAt": None if j.started is None else float(j.started),
        "completedAt": None if j.completed is None else float(j.completed),
        "attempts": j.attempts,
        "backoff": o.backoff,
        "backoffConfig": o.backoff_config,
        "dependsOn": o.depends_on,
        "childrenIds": [],
        "childrenCompleted": 0,
        "tags": o.tags,
        "progress": j.progress,
        "progressMessage": j.progress_message,
        "stacktrace": j.stacktrace,
        "repeat": None,
        "durable": False,
        "lastHeartbeat": float(j.heartbeat),
        "stallCount": j.stall_count,
        "priority": o.priority,
        "lifo": o.lifo,
        "maxAttempts": o.max_attempts,
        "removeOnComplete": o.remove_on_complete,
        "removeOnFail": o.remove_on_fail,
        "ttl": o.ttl,
        "timeout": o.timeout,
        "uniqueKey": o.unique_key,
        "customId": o.custom_id,
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
        "timeline": [],
    }


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
