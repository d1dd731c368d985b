"""The common flows through a real, unmodified client: greenstalk 2.x.

Every test runs against ``--shards 1`` and ``--shards 4``. The tube names below are
chosen so that, with 4 shards, the tubes of one test live on different shards
(crc32 % 4, see DESIGN.md); with 1 shard everything is on shard 0.
"""

from __future__ import annotations

import threading
import time
from zlib import crc32

import greenstalk
import pytest

#: With 4 shards, TUBES[:4] are on four different shards, and so are TUBES[4:] (checked below).
TUBES = ("foxtrot", "bravo", "alpha", "juliet", "lima", "delta", "charlie", "kilo")


def test_tube_names_span_shards():
    assert [crc32(t.encode()) % 4 for t in TUBES] == [0, 1, 2, 3, 0, 1, 2, 3]


@pytest.fixture(params=[1, 4], ids=["1shard", "4shards"])
def port(request, start_shardq) -> int:
    return start_shardq(request.param)


@pytest.fixture
def connect(port):
    """Factory of greenstalk clients (bytes bodies), all closed at teardown."""
    clients: list[greenstalk.Client] = []

    def make(**kwargs) -> greenstalk.Client:
        kwargs.setdefault("encoding", None)
        client = greenstalk.Client(("127.0.0.1", port), **kwargs)
        client._sock.settimeout(10)  # a hung server fails the test instead of hanging it
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(connect) -> greenstalk.Client:
    return connect()


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
