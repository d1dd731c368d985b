"""The common flows through a real, unmodified client: greenstalk 2.x.

Here: put, reserve and delete, tubes (use, watch, ignore), reserve order across
shards, waiting and timed-out reserves, reserve-job. The other commands are in
test_greenstalk_jobs.py and test_greenstalk_replies.py.

Every test runs against ``--shards 1`` and ``--shards 4`` (the ``port``, ``connect``
and ``client`` fixtures in conftest.py). The tube names (greenstalk_tubes.py) are
chosen so that, with 4 shards, the tubes of one test live on different shards
(as the server spreads tubes: helpers.shard_of_tube); with 1 shard everything is on shard 0.
"""

from __future__ import annotations

import threading
import time

import greenstalk
import pytest
from greenstalk_tubes import TUBES
from helpers import shard_of_tube


def test_tube_names_span_shards():
    assert [shard_of_tube(t, 4) for t in TUBES] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_put_reserve_delete(client):
    job_id = client.put(b"hello")
    assert job_id >= 1
    job = client.reserve(timeout=1)
    assert (job.id, job.body) == (job_id, b"hello")
    assert client.stats_job(job)["state"] == "reserved"
    client.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_job(job_id)
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)


def test_string_bodies_with_encoding(connect):
    client = connect(encoding="utf-8")
    client.put("grüße\r\nzwei Zeilen")
    job = client.reserve(timeout=1)
    assert job.body == "grüße\r\nzwei Zeilen"
    client.delete(job)


def test_ids_increase_and_priority_then_age_order(client):
    ids = [client.put(b"%d" % i, priority=pri) for i, pri in enumerate([5, 1, 5, 0])]
    assert ids == sorted(ids)
    got = []
    for _ in ids:
        job = client.reserve(timeout=1)
        got.append(job.id)
        client.delete(job)
    assert got == [ids[3], ids[1], ids[0], ids[2]]


def test_use_watch_ignore_over_several_tubes(connect):
    producer = connect()
    for tube in TUBES[:4]:
        producer.use(tube)
        assert producer.using() == tube
        producer.put(tube.encode())
    consumer = connect(watch=[TUBES[0], TUBES[2], TUBES[3]])
    assert sorted(consumer.watching()) == sorted([TUBES[0], TUBES[2], TUBES[3]])
    assert consumer.ignore(TUBES[3]) == 2
    assert consumer.watch(TUBES[3]) == 3
    assert consumer.watch(TUBES[3]) == 3  # watching twice counts once
    assert consumer.ignore(TUBES[3]) == 2
    got = set()
    for _ in range(2):
        job = consumer.reserve(timeout=1)
        got.add(job.body)
        consumer.delete(job)
    assert got == {TUBES[0].encode(), TUBES[2].encode()}
    with pytest.raises(greenstalk.TimedOutError):
        consumer.reserve(timeout=0)
    assert consumer.ignore(TUBES[0]) == 1
    with pytest.raises(greenstalk.NotIgnoredError):
        consumer.ignore(TUBES[2])
    # TUBES[0] is neither used, watched nor holding a job any more: it is gone.
    assert sorted(producer.tubes()) == sorted(["default", *TUBES[1:4]])
    # The jobs left in the other tubes are still there.
    other = connect(watch=[TUBES[1], TUBES[3]])
    bodies = set()
    for _ in range(2):
        job = other.reserve(timeout=1)
        bodies.add(job.body)
        other.delete(job)
    assert bodies == {TUBES[1].encode(), TUBES[3].encode()}


def test_use_and_watch_on_connect(connect):
    producer = connect(use=TUBES[5])
    job_id = producer.put(b"x")
    consumer = connect(watch=TUBES[5])
    assert consumer.watching() == [TUBES[5]]
    job = consumer.reserve(timeout=1)
    assert job.id == job_id
    assert consumer.stats_job(job)["tube"] == TUBES[5]
    consumer.delete(job)


def test_cross_shard_reserve_is_most_urgent_first(connect):
    producer = connect()
    expected = []
    for pri, tube in zip([30, 10, 20, 0], TUBES[4:8], strict=True):
        producer.use(tube)
        expected.append((pri, producer.put(tube.encode(), priority=pri)))
    consumer = connect(watch=list(TUBES[4:8]))
    got = []
    for _ in expected:
        job = consumer.reserve(timeout=1)
        got.append(job.id)
        consumer.delete(job)
    assert got == [job_id for _, job_id in sorted(expected)]


def test_waiting_reserve_is_woken_by_a_put_on_another_shard(connect):
    consumer = connect(watch=[TUBES[0], TUBES[1]])
    producer = connect(use=TUBES[1])

    # Reserve in this thread while a second thread puts a moment later.
    def put_later() -> None:
        time.sleep(0.3)
        producer.put(b"late")

    t = threading.Thread(target=put_later)
    t.start()
    start = time.monotonic()
    job = consumer.reserve(timeout=5)
    elapsed = time.monotonic() - start
    t.join(5)
    assert job.body == b"late"
    assert elapsed < 2.0, elapsed
    consumer.delete(job)


def test_reserve_with_timeout_times_out(client):
    # One round trip first, so that the timing below measures the reserve and not the
    # server's start-up (see test_supervisor.py::test_listening_line_means_ready).
    assert client.using() == "default"
    start = time.monotonic()
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=1)
    assert 0.5 < time.monotonic() - start < 3.0
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)


def test_deadline_soon(connect):
    client = connect(use=TUBES[2], watch=TUBES[2])
    client.put(b"d", ttr=1)
    client.reserve(timeout=1)
    start = time.monotonic()
    with pytest.raises(greenstalk.DeadlineSoonError):
        client.reserve(timeout=5)
    assert time.monotonic() - start < 1.5


def test_reserve_job(connect):
    client = connect(use=TUBES[3])
    first = client.put(b"1")
    second = client.put(b"2")
    job = client.reserve_job(second)  # not in a watched tube, still reservable by id
    assert (job.id, job.body) == (second, b"2")
    with pytest.raises(greenstalk.NotFoundError):
        client.reserve_job(second)  # already reserved
    with pytest.raises(greenstalk.NotFoundError):
        client.reserve_job(10**9)
    client.delete(job)
    client.delete(first)
