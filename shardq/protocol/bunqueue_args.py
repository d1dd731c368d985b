"""What a bunqueue request's fields mean, checked as bunqueue 2.9.5 checks them, with its
error strings: queue names, a pushed job's options (`JobSpec`), numeric bounds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii  # (what JSONEncoder.encode does for a str)
from typing import Any

from shardq.protocol.bunqueue import INT_MAX, INT_MIN, safe

DEFAULT_NAME = "default"
MAX_NAME = 256
#: bunqueue's queue names; a beanstalk tube name has no ':' but has ';' (not in these)
QUEUE_NAME = re.compile(r"[a-zA-Z0-9_\-.:]+")
MAX_QUEUE = 200  # a beanstalk tube name's bound (bunqueue's: 256)
DAY_MS = 24 * 60 * 60 * 1000
YEAR_MS = 365 * DAY_MS
MAX_DATA = 10 * 1024 * 1024
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF = 1000
DEFAULT_LOCK_TTL = 30_000
MAX_WAIT_MS = 60_000
MAX_PULL = 1000


class BadRequest(Exception):
    """A request bunqueue refuses: str() is its error string."""


def queue_error(name: Any) -> str | None:
    if not name or not isinstance(name, str):
        return "Queue name is required"
    if len(name) > MAX_NAME:
        return "Queue name too long (max 256 characters)"
    if not QUEUE_NAME.fullmatch(name):
        return "Queue name contains invalid characters"
    if len(name) > MAX_QUEUE:
        return f"Queue name too long (max {MAX_QUEUE} characters)"
    return None


def queue(args: dict[str, Any]) -> str:
    name = args.get("queue")
    problem = queue_error(name)
    if problem:
        raise BadRequest(problem)
    return str(name)


def tube_of(queue_name: str) -> str:
    return queue_name.replace(":", ";")


def queue_of(tube: str) -> str:
    return tube.replace(";", ":")


def number(
    value: Any, name: str, low: float = 0, high: float = 2**53 - 1, integer: bool = False
) -> float | None:
    """bunqueue's `validateNumericField`: None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{name} must be a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise BadRequest(f"{name} must be a finite number")
    if integer and value != int(value):
        raise BadRequest(f"{name} must be an integer")
    if value < low:
        raise BadRequest(f"{name} must be at least {js(low)}")
    if value > high:
        raise BadRequest(f"{name} must be at most {js(high)}")
    return value


def js(value: float) -> str:
    """A number as JavaScript prints it (an integral one without a point)."""
    return str(int(value)) if value == int(value) else str(value)


def whole(value: Any, name: str, low: float, high: float, default: int) -> int:
    got = number(value, name, low, high)
    return default if got is None else int(got)


def json_ready(value: Any) -> bool:
    """What JSON can hold (bunqueue refuses the rest: ``Job data must be JSON
    serializable``)."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(json_ready(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_ready(v) for k, v in value.items())
    return False


#: compact JSON (one encoder: `json.dumps` with separators makes one a call)
JSON = json.JSONEncoder(separators=(",", ":"))


def json_body(value: Any) -> bytes:
    """`value` (already `safe`) as compact JSON: a job's body in its tube."""
    return JSON.encode(value).encode()


class NotJson(Exception):
    """Data that JSON cannot hold (`json_data`)."""


def json_data(value: Any) -> Any:
    """`safe(value)` for what `json_ready` accepts, in one walk; NotJson for the rest. The
    exact types first (all that MessagePack decodes to), then their subclasses."""
    kind = type(value)
    if kind is str or kind is float or kind is bool or value is None:
        return value
    if kind is int:
        return value if INT_MIN <= value <= INT_MAX else float(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJson
            out[key] = json_data(item)
        return out
    if kind is list:
        return [json_data(item) for item in value]
    if not json_ready(value):
        raise NotJson
    return safe(value)


def data_of(value: Any) -> tuple[Any, bytes]:
    """The job's data (integers past 32 bits as floats) and its JSON body, checked (once
    encoded: the size is of that compact JSON, as bunqueue's ``JSON.stringify``)."""
    if type(value) is str and len(value) <= MAX_DATA // 6 - 2:  # (no check can refuse it)
        return value, encode_basestring_ascii(value).encode()
    try:
        value = json_data(value)
    except NotJson:
        raise BadRequest("Job data must be JSON serializable") from None
    body = json_body(value)
    if len(body) > MAX_DATA:
        raise BadRequest("Job data too large (max 10MB)")
    return value, body


def name_and_data(job: dict[str, Any]) -> tuple[str, Any]:
    """The job's name and data, lifting the legacy envelope: no top-level ``name`` and a
    map ``data`` holding a string ``name`` -> that is the name, taken out of the data."""
    data = job.get("data")
    name = job.get("name")
    if name is None and isinstance(data, dict) and isinstance(data.get("name"), str):
        data = dict(data)
        name = data.pop("name")
    if name is None:
        name = DEFAULT_NAME
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise BadRequest("Job name must be a non-empty string of at most 256 characters")
    return name, data


@dataclass(slots=True)
class JobSpec:
    """A job to push, its options checked."""

    name: str
    data: Any
    priority: int = 0
    delay: int = 0
    lifo: bool = False
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: int = DEFAULT_BACKOFF
    backoff_config: dict[str, Any] | None = None
    ttl: int | None = None
    timeout: int | None = None
    unique_key: str | None = None
    custom_id: str | None = None
    depends_on: list[str] = field(default_factory=list)
    tags: list[Any] = field(default_factory=list)
    remove_on_complete: bool = False
    remove_on_fail: bool = False
    timestamp: float | None = None
    #: the data as its tube's JSON body, until the job is put (not journaled: b"" after a
    #: restart, made again when needed)
    body: bytes = b""


def backoff_of(value: Any) -> tuple[int, dict[str, Any] | None]:
    if isinstance(value, dict):
        if value.get("type") not in ("fixed", "exponential"):
            raise BadRequest("backoff.type must be 'fixed' or 'exponential'")
        delay = number(value.get("delay"), "backoff.delay", 0, DAY_MS)
        if delay is None:
            raise BadRequest("backoff.delay is required")
        return int(delay), {"type": value["type"], "delay": delay}
    return whole(value, "backoff", 0, DAY_MS, DEFAULT_BACKOFF), None


def optional(value: Any, name: str, high: float) -> int | None:
    got = number(value, name, 0, high)
    return None if got is None else int(got)


#: a job's fields that need no check beyond its name and data (the common push: a job with
#: no options takes every default without a look at each option)
PLAIN = frozenset({"name", "data", "queue"})


def job_spec(job: dict[str, Any], custom_key: str) -> JobSpec:
    """A PUSH's fields (`custom_key` "jobId"), or one job of a PUSHB ("customId")."""
    data = job.get("data")
    if type(data) is str and job.get("name") is None and job.keys() <= PLAIN:
        data, body = data_of(data)  # the plainest push: no envelope to lift, no option
        return JobSpec(DEFAULT_NAME, data, body=body)
    name, data = name_and_data(job)
    data, body = data_of(data)
    if job.keys() <= PLAIN:
        return JobSpec(name, data, body=body)
    priority = number(job.get("priority"), "priority", -1_000_000, 1_000_000, integer=True)
    delay = optional(job.get("delay"), "delay", YEAR_MS)
    timeout = optional(job.get("timeout"), "timeout", DAY_MS)
    attempts = number(job.get("maxAttempts"), "maxAttempts", 1, 1000, integer=True)
    backoff, backoff_config = backoff_of(job.get("backoff"))
    ttl = optional(job.get("ttl"), "ttl", YEAR_MS)
    custom = job.get(custom_key)
    depends = job.get("dependsOn") or []
    tags = job.get("tags") or []
    stamp = job.get("timestamp")
    return JobSpec(
        name,
        data,
        int(priority or 0),
        delay or 0,
        bool(job.get("lifo")),
        int(attempts or DEFAULT_MAX_ATTEMPTS),
        backoff,
        backoff_config,
        ttl,
        timeout,
        None if job.get("uniqueKey") is None else str(job["uniqueKey"]),
        None if custom is None else str(custom),
        [str(d) for d in depends] if isinstance(depends, list) else [],
        list(tags) if isinstance(tags, list) else [],
        bool(job.get("removeOnComplete")),
        bool(job.get("removeOnFail")),
        float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None,
        body,
    )


def batch_specs(jobs: Any) -> list[JobSpec]:
    """A PUSHB's jobs; an error names the job (``jobs[3]: ...``)."""
    if not isinstance(jobs, list):
        raise BadRequest("jobs must be an array")
    specs = []
    for i, job in enumerate(jobs):
        try:
            if not isinstance(job, dict):
                raise BadRequest("Job data must be JSON serializable")
            specs.append(job_spec(job, "customId"))
        except BadRequest as e:
            raise BadRequest(f"jobs[{i}]: {e}") from None
    return specs


def wait_ms(args: dict[str, Any]) -> int:
    return int(number(args.get("timeout"), "timeout", 0, MAX_WAIT_MS) or 0)


def pull_count(args: dict[str, Any]) -> int:
    got = number(args.get("count"), "count", 1, MAX_PULL)
    return 1 if got is None else int(got)


def ids_of(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
