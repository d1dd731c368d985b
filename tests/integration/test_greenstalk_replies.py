"""What greenstalk 2.x reads back: peeks, stats as it parses them, NOT_FOUND
cases and the body size limit.

Set-up (1 and 4 shards, tubes on different shards): see test_greenstalk.py.
"""

from __future__ import annotations

import greenstalk
import pytest
from greenstalk_tubes import TUBES


def test_peeks(connect):
    client = connect(use=TUBES[7], watch=TUBES[7])
    for peek in (client.peek_ready, client.peek_delayed, client.peek_buried):
        with pytest.raises(greenstalk.NotFoundError):
            peek()
    ready = client.put(b"ready", priority=2)
    urgent = client.put(b"urgent", priority=1)
    delayed = client.put(b"delayed", delay=60)
    client.put(b"buried", priority=0)
    client.bury(client.reserve(timeout=1))
    assert (client.peek_ready().id, client.peek_ready().body) == (urgent, b"urgent")
    assert (client.peek_delayed().id, client.peek_delayed().body) == (delayed, b"delayed")
    assert client.peek_buried().body == b"buried"
    assert client.peek(ready).body == b"ready"
    # peek by id works from any tube
    other = connect()
    assert other.peek(delayed).body == b"delayed"
    with pytest.raises(greenstalk.NotFoundError):
        other.peek(10**9)


def test_stats_parsed_by_greenstalk(connect):
    client = connect(use=TUBES[0])
    job_id = client.put(b"s", priority=12, delay=0, ttr=30)
    stats = client.stats()
    for key in (
        "current-jobs-ready",
        "current-connections",
        "total-jobs",
        "cmd-put",
        "uptime",
        "max-job-size",
        "current-tubes",
    ):
        assert isinstance(stats[key], int), key
    assert stats["current-jobs-ready"] >= 1
    assert stats["cmd-put"] == 1
    assert stats["max-job-size"] == 65535
    assert stats["draining"] == "false"
    tube = client.stats_tube(TUBES[0])
    assert tube["name"] == TUBES[0]
    assert (tube["current-jobs-ready"], tube["total-jobs"], tube["current-using"]) == (1, 1, 1)
    assert tube["pause"] == 0
    job = client.stats_job(job_id)
    assert job["id"] == job_id
    assert (job["tube"], job["state"], job["pri"], job["ttr"]) == (TUBES[0], "ready", 12, 30)
    assert list(job) == [
        "id",
        "tube",
        "state",
        "pri",
        "age",
        "delay",
        "ttr",
        "time-left",
        "file",
        "reserves",
        "timeouts",
        "releases",
        "buries",
        "kicks",
    ]
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_tube("no-such-tube")
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_job(10**9)


def test_not_found_cases(connect):
    client = connect()
    other = connect()
    job_id = client.put(b"n")
    for call in (
        lambda: client.delete(10**9),
        lambda: client.peek(10**9),
        lambda: client.kick_job(10**9),
        lambda: client.stats_job(10**9),
        lambda: client.release(greenstalk.Job(job_id, b"n")),  # ready, not reserved
        lambda: client.bury(greenstalk.Job(job_id, b"n")),
        lambda: client.touch(greenstalk.Job(job_id, b"n")),
    ):
        with pytest.raises(greenstalk.NotFoundError):
            call()
    job = client.reserve(timeout=1)
    for call in (
        lambda: other.release(job),
        lambda: other.bury(job),
        lambda: other.delete(job),  # reserved by another connection
    ):
        with pytest.raises(greenstalk.NotFoundError):
            call()
    client.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.delete(job)


def test_largest_body_round_trips(connect):
    client = connect(use=TUBES[4], watch=TUBES[4])
    body = bytes(range(256)) * 255 + b"\r\n" * 127 + b"z"
    assert len(body) == 65535
    job_id = client.put(body)
    assert client.peek(job_id).body == body
    job = client.reserve(timeout=1)
    assert job.body == body
    client.delete(job)


def test_job_too_big(connect):
    client = connect(use=TUBES[5], watch=TUBES[5])
    with pytest.raises(greenstalk.JobTooBigError):
        client.put(b"x" * 65536)
    # The body was swallowed: the connection is still in step.
    assert client.using() == TUBES[5]
    job_id = client.put(b"fits")
    assert client.reserve(timeout=1).id == job_id
