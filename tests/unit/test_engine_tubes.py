"""Engine unit tests: tubes, their garbage collection and the list-tubes order.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

import random

from engine_helpers import Q

from shardq.engine.engine import Engine
from shardq.protocol import proto


def test_default_always_exists(q: Q) -> None:
    assert q.tube_names() == ["default"]
    q.e.ref("default", 1, 1, q.now)
    q.e.ref("default", -1, -1, q.now)
    job = q.put()
    q.e.delete(1, job, q.now)
    assert q.tube_names() == ["default"]
    assert Engine(owns_default=False).list_tubes() == []


def test_a_tube_lives_while_it_is_used_watched_or_holds_jobs(q: Q) -> None:
    q.e.ref("t", 1, 0, q.now)
    assert "t" in q.tube_names()
    assert q.stats_tube("t")["current-using"] == "1"
    q.e.ref("t", 0, 1, q.now)
    q.e.ref("t", -1, 0, q.now)
    assert q.stats_tube("t")["current-watching"] == "1"
    job = q.put("t")
    q.e.ref("t", 0, -1, q.now)
    assert "t" in q.tube_names()  # the job keeps it
    q.e.reserve_job(1, job, q.now)
    q.e.bury(1, job, 0, q.now)
    assert "t" in q.tube_names()
    assert q.e.delete(1, job, q.now) == proto.DELETED
    assert "t" not in q.tube_names()
    assert q.e.stats_tube("t", q.now) == proto.NOT_FOUND


def test_a_reserved_job_keeps_its_tube_alive(q: Q) -> None:
    job = q.put("t")
    q.e.reserve_job(1, job, q.now)
    q.e.ref("t", 1, 0, q.now)
    q.e.ref("t", -1, 0, q.now)
    assert "t" in q.tube_names()
    assert q.e.delete(1, job, q.now) == proto.DELETED
    assert "t" not in q.tube_names()


def test_a_collected_tube_loses_its_pause_and_stats(q: Q) -> None:
    q.e.ref("t", 1, 0, q.now)
    q.e.pause_tube("t", 100, q.now)
    job = q.put("t")
    q.e.delete(1, job, q.now)
    q.e.ref("t", -1, 0, q.now)
    q.e.ref("t", 1, 0, q.now)
    stats = q.stats_tube("t")
    assert (stats["pause"], stats["cmd-pause-tube"], stats["cmd-delete"]) == ("0", "0", "0")
    assert stats["total-jobs"] == "0"


def test_list_tubes_order_emulates_swap_remove(q: Q) -> None:
    """beanstalkd removes a tube by moving the last one into its slot."""
    for i, name in enumerate(["a", "b", "c", "d"]):
        q.e.ref(name, 1, 0, q.now + i)
    assert q.tube_names() == ["default", "a", "b", "c", "d"]
    q.e.ref("b", -1, 0, q.now)
    assert q.tube_names() == ["default", "a", "d", "c"]
    q.e.ref("e", 1, 0, q.now + 10)
    assert q.tube_names() == ["default", "a", "d", "c", "e"]
    q.e.ref("e", -1, 0, q.now)  # removing the last one moves nothing
    assert q.tube_names() == ["default", "a", "d", "c"]
    q.e.ref("a", -1, 0, q.now)
    assert q.tube_names() == ["default", "c", "d"]


def test_list_tubes_keeps_creation_order_for_tubes_created_at_the_same_instant(q: Q) -> None:
    """A shard handles a whole batch with one `now`: `watch zz`, `watch aa` pipelined."""
    q.e.ref("zz", 0, 1, q.now)
    q.e.ref("aa", 0, 1, q.now)
    q.e.ref("mm", 0, 1, q.now)
    assert q.tube_names() == ["default", "zz", "aa", "mm"]
    q.e.ref("zz", 0, -1, q.now)
    assert q.tube_names() == ["default", "mm", "aa"]


def test_list_tubes_matches_beanstalkds_swap_remove_array_under_random_gc(q: Q) -> None:
    """Replay random use/ignore against a model of beanstalkd's `tubes` array (ms.c)."""
    rng = random.Random(11)
    array = ["default"]  # beanstalkd: append on create, a[i] = a[--len] on delete
    refs: dict[str, int] = {}
    for _ in range(2000):
        q.now += rng.randint(1, 1000)  # strictly increasing, one tube per instant
        name = rng.choice("abcdefgh")
        if refs.get(name) and rng.random() < 0.5:
            refs[name] -= 1
            q.e.ref(name, 0, -1, q.now)
            if refs[name] == 0:
                hole = array.index(name)
                array[hole] = array[-1]
                array.pop()
        else:
            if not refs.get(name):
                array.append(name)
            refs[name] = refs.get(name, 0) + 1
            q.e.ref(name, 0, 1, q.now)
        assert q.tube_names() == array
    assert q.e.counts()["current-tubes"] == len(array)
