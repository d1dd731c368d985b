"""A job's life through greenstalk 2.x: release, bury, kick, touch, TTR expiry,
pause-tube, and a closed connection's jobs.

Set-up (1 and 4 shards, tubes on different shards): see test_greenstalk.py.
"""

from __future__ import annotations

import time

import greenstalk
import pytest
from greenstalk_tubes import TUBES


def test_release_with_delay(connect):
    client = connect(use=TUBES[2], watch=TUBES[2])
    job_id = client.put(b"again", priority=7)
    job = client.reserve(timeout=1)
    client.release(job, priority=3, delay=1)
    stats = client.stats_job(job_id)
    assert (stats["state"], stats["pri"], stats["delay"], stats["releases"]) == (
        "delayed",
        3,
        1,
        1,
    )
    assert client.peek_delayed().id == job_id
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    start = time.monotonic()
    job = client.reserve(timeout=4)
    waited = time.monotonic() - start
    assert job.id == job_id
    assert 0.3 < waited < 2.5, waited
    assert client.stats_job(job)["reserves"] == 2
    client.release(job)
    assert client.stats_job(job_id)["state"] == "ready"
    client.delete(job_id)


def test_bury_kick_kick_job(connect):
    client = connect(use=TUBES[3], watch=TUBES[3])
    ids = [client.put(b"%d" % i) for i in range(3)]
    for _ in ids:
        client.bury(client.reserve(timeout=1), priority=9)
    assert client.stats_tube(TUBES[3])["current-jobs-buried"] == 3
    assert client.peek_buried().id == ids[0]
    assert client.stats_job(ids[1])["state"] == "buried"
    assert client.stats_job(ids[1])["pri"] == 9
    client.kick_job(ids[2])
    assert client.stats_job(ids[2])["state"] == "ready"
    assert client.kick(1) == 1
    assert client.stats_job(ids[0])["state"] == "ready"
    assert client.kick(10) == 1
    assert client.kick(10) == 0
    stats = client.stats_tube(TUBES[3])
    assert (stats["current-jobs-buried"], stats["current-jobs-ready"]) == (0, 3)
    assert client.stats_job(ids[1])["kicks"] == 1
    with pytest.raises(greenstalk.NotFoundError):
        client.kick_job(ids[1])  # ready, not buried or delayed
    for _ in ids:
        client.delete(client.reserve(timeout=1))


def test_kick_delayed_jobs(connect):
    client = connect(use=TUBES[4], watch=TUBES[4])
    a = client.put(b"a", delay=100)
    b = client.put(b"b", delay=100)
    assert client.peek_delayed().id == a
    client.kick_job(b)
    assert client.stats_job(b)["state"] == "ready"
    assert client.kick(5) == 1
    assert client.stats_job(a)["state"] == "ready"
    for _ in range(2):
        client.delete(client.reserve(timeout=1))


def test_touch(connect):
    client = connect(use=TUBES[5], watch=TUBES[5])
    other = connect(watch=TUBES[5])
    job_id = client.put(b"t", ttr=3)
    job = client.reserve(timeout=1)
    client.touch(job)
    assert client.stats_job(job)["time-left"] in (2, 3)
    with pytest.raises(greenstalk.NotFoundError):
        other.touch(job)  # reserved by someone else
    client.release(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.touch(job)  # not reserved any more
    client.delete(job_id)


def test_ttr_expiry_releases_the_job(connect):
    client = connect(use=TUBES[6], watch=TUBES[6])
    other = connect(watch=TUBES[6])
    job_id = client.put(b"slow", ttr=1)
    client.reserve(timeout=1)
    job = other.reserve(timeout=4)  # comes back once the TTR runs out
    assert job.id == job_id
    assert other.stats_job(job)["timeouts"] == 1
    with pytest.raises(greenstalk.NotFoundError):
        client.delete(job_id)
    other.delete(job)


def test_pause_tube(connect):
    client = connect(use=TUBES[1], watch=TUBES[1])
    job_id = client.put(b"p")
    client.pause_tube(TUBES[1], 1)
    assert client.stats_tube(TUBES[1])["pause"] == 1
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    start = time.monotonic()
    job = client.reserve(timeout=4)
    waited = time.monotonic() - start
    assert job.id == job_id
    assert 0.3 < waited < 2.5, waited
    client.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.pause_tube("no-such-tube", 1)


def test_closing_the_connection_releases_reserved_jobs(connect):
    holder = connect(use=TUBES[6], watch=TUBES[6])
    job_id = holder.put(b"held")
    holder.reserve(timeout=1)
    other = connect(watch=TUBES[6])
    with pytest.raises(greenstalk.TimedOutError):
        other.reserve(timeout=0)
    holder.close()
    job = other.reserve(timeout=2)
    assert job.id == job_id
    other.delete(job)
