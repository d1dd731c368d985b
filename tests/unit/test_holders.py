"""Who holds which job (engine/holders.py): one id while a connection holds one job, a set
from its second on, and the same answers either way."""

from __future__ import annotations

import random

from shardq.engine.holders import Holders


def test_one_job_is_kept_as_its_id_and_two_as_a_set() -> None:
    h = Holders()
    h.own(1, 10)
    assert h.by_conn == {1: 10} and h.ids(1) == [10]
    h.own(1, 10)  # again: still one
    assert h.by_conn == {1: 10}
    h.own(1, 7)
    assert h.by_conn == {1: {7, 10}} and h.ids(1) == [7, 10]
    h.disown(1, 10)
    h.disown(1, 99)  # not its job: nothing
    assert h.ids(1) == [7] and h.conns() == [1]
    h.disown(1, 7)
    assert h.by_conn == {} and h.ids(1) == [] and h.conns() == []


def test_a_job_not_held_by_that_connection_is_left_alone() -> None:
    h = Holders()
    h.own(1, 10)
    h.disown(2, 10)
    h.disown(1, 11)
    assert h.as_dict() == {1: {10}}


def test_against_a_dict_of_sets() -> None:
    rng = random.Random(3)
    h, model = Holders(), dict[int, set[int]]()
    for _ in range(20_000):
        conn, job = rng.randrange(4), rng.randrange(1, 6)
        if rng.random() < 0.5:
            h.own(conn, job)
            model.setdefault(conn, set()).add(job)
        else:
            h.disown(conn, job)
            if conn in model:
                model[conn].discard(job)
                if not model[conn]:
                    del model[conn]
        assert h.as_dict() == model
        assert h.ids(conn) == sorted(model.get(conn, ()))
    assert sorted(h.conns()) == sorted(model)
