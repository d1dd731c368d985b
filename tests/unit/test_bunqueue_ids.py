"""The bunqueue door's UUIDv7s: their layout, their order within and across milliseconds
(a counter that runs out, a clock that goes back), and lock tokens that are all random."""

from __future__ import annotations

import re

from shardq.processes.frontends.bunqueue.ids import Ids

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
MS = 1_764_000_000_000


def stamp(ident: str) -> int:
    """The unix ms an id carries."""
    return int(ident.replace("-", "")[:12], 16)


def test_layout_and_stamp() -> None:
    ident = Ids().uuid7(MS)
    assert UUID7.match(ident), ident
    assert stamp(ident) == MS


def test_ids_of_one_millisecond_increase_past_the_counter() -> None:
    ids = Ids()
    made = [ids.uuid7(MS) for _ in range(10_000)]  # more than 12 bits of counter
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert all(UUID7.match(i) for i in made)
    assert stamp(made[0]) == MS
    assert stamp(made[-1]) > MS  # the counter ran out: later milliseconds taken early


def test_a_clock_that_goes_back_keeps_them_increasing() -> None:
    ids = Ids()
    made = [ids.uuid7(MS + 5), ids.uuid7(MS), ids.uuid7(MS + 1), ids.uuid7(MS + 6)]
    assert made == sorted(made)
    assert len(set(made)) == 4


def test_next_millisecond_draws_new_random_bits() -> None:
    ids = Ids()
    tails = {ids.uuid7(MS + i)[-17:] for i in range(50)}
    assert len(tails) > 45  # 62 random bits a millisecond: a repeat is (nearly) impossible


def test_tokens_are_random_beyond_the_stamp() -> None:
    ids = Ids()
    job = ids.uuid7(MS)
    tokens = [ids.token() for _ in range(200)]
    assert all(UUID7.match(t) for t in tokens)
    assert len({t[14:] for t in tokens}) == 200  # (stamp apart) no two alike
    assert all(t[-17:] != job[-17:] for t in tokens)
