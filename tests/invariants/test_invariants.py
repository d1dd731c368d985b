"""The randomized invariant checker, short form: about 4.5 s of load on a fresh shardq in
every layout of the suite (1 shard, 4 shards, 4 over 2 serving processes) and with 2
shards, then the drain (see workload.py for the workload, the invariants and why
the checks are sound); and checks that the checker flags each kind of violation.

``SHARDQ_INVARIANTS_SEED`` fixes the random choices (thread timing still varies); every
failure names its seed. The long form is ``make stress`` (tools/stress.py).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest
from helpers import LAYOUTS, Layout

from .ledger import Hold, Ledger, Op, analyze, deadline_soon_allowed, make_body
from .workload import run

LOAD_SECONDS = 4.5
DRAIN_SECONDS = 20.0


def _seed() -> int:
    env = os.environ.get("SHARDQ_INVARIANTS_SEED")
    return int(env) if env else random.randrange(1 << 31)


@pytest.mark.parametrize("layout", sorted({*LAYOUTS, Layout(2)}), ids=str)
def test_invariants_hold_under_random_load(
    shardq_server: Callable[..., Any], layout: Layout, request: pytest.FixtureRequest
) -> None:
    seed = _seed()
    server = shardq_server(layout.shards, ("--serving", str(layout.serving)))
    report = run(server.port, seed, seconds=LOAD_SECONDS, drain_seconds=DRAIN_SECONDS)
    replay = (
        f"replay: SHARDQ_INVARIANTS_SEED={seed} .venv/bin/pytest -p no:xdist "
        f"'{request.node.nodeid}'"
    )
    assert report.ok, (
        f"{' '.join(layout.flags())}, seed {seed}; {replay}\n{report.describe()}\n"
        f"server stderr (tail):\n{server.stderr()[-3000:]}"
    )
    print(f"{' '.join(layout.flags())}: {report.describe()}")  # shown with -rA or -s
    # Not vacuous: jobs went round.
    assert report.counters["puts"] > 0, report.describe()
    assert report.counters["reserves"] >= report.counters["puts"], report.describe()


# --------------------------------------------------------------------------- the checker


def _hold(
    conn: int,
    job_id: int,
    received: float,
    end: float | None,
    *,
    ttr: int = 2,
    sent: float | None = None,
    body: bytes | None = None,
) -> Hold:
    """A reservation read at ``received``, its reserve sent 1 ms earlier unless given."""
    sent = received - 0.001 if sent is None else sent
    body = make_body("t", ttr, str(job_id), 0) if body is None else body
    hold = Hold(conn, job_id, body, ttr, sent, received, sent, received)
    hold.end_sent, hold.how = end, "test"
    return hold


def _ledger(*job_ids: int) -> Ledger:
    """Jobs put (ttr 2), acknowledged and each deleted once."""
    led = Ledger(t0=0.0)
    for job_id in job_ids:
        body = make_body("t", 2, str(job_id), 0)
        led.sent[body] = "t"
        led.acked[job_id] = ("t", body)
        led.deleted[job_id] = 1
    return led


def _add(led: Ledger, *holds: Hold) -> None:
    for hold in holds:
        led.holds.setdefault(hold.job_id, []).append(hold)


def test_checker_accepts_correct_histories() -> None:
    led = _ledger(1, 2, 3, 4)
    _add(
        led,
        # Released, then reserved by another connection after the release was sent (even
        # before the releaser could read RELEASED).
        _hold(1, 1, 10.0, 10.5),
        _hold(2, 1, 10.501, 10.7),
        # Left to expire (never ended by its holder before 30.0); taken by another
        # connection only after the TTR could have run out (19.999 + 2 - EPS).
        _hold(1, 2, 20.0, 30.0),
        _hold(3, 2, 21.96, 22.5),
        # A slow thread reads RESERVED late (45.0) for a reservation whose TTR ran out at
        # ~42; meanwhile another connection holds the job from 43.0 to 50.0. Not a bug.
        _hold(3, 3, 45.0, 46.0, sent=40.0),
        _hold(4, 3, 43.0, 50.0, ttr=10, body=make_body("t", 2, "3", 0)),
        # The same connection gets its job again after the TTR ran out.
        _hold(5, 4, 60.0, None),
        _hold(5, 4, 62.0, 62.1),
    )
    # A put in doubt (its producer's connection died) that did become a job, once.
    doubtful = make_body("t", 2, "doubt", 0)
    led.sent[doubtful] = "t"
    _add(led, _hold(6, 99, 70.0, 70.1, body=doubtful))
    led.deleted[99] = 1
    # Deleting a job after another connection's hold surely ended is fine.
    led.ops.append(Op(9, 1, "DELETED", 10.8, 10.9))
    assert analyze(led) == []


def test_checker_flags_every_kind_of_violation() -> None:
    led = _ledger(1, 2, 3, 4, 5, 6)
    led.violations.append("conn 7 (consumer): live check failed")
    _add(
        led,
        _hold(1, 1, 10.0, 10.5),
        _hold(2, 1, 10.4, 10.7),  # RESERVED read before conn 1 even sent its release
        _hold(1, 2, 20.0, None),
        _hold(1, 2, 21.0, 21.5),  # the same connection again, TTR not yet run out
        _hold(3, 3, 30.0, 31.0, body=b"t:2:someone else:"),
        _hold(4, 77, 40.0, 40.1, body=b"t:2:never sent:"),
    )
    doubtful = make_body("t", 2, "doubt", 0)
    led.sent[doubtful] = "t"
    _add(led, _hold(5, 80, 50.0, 50.1, body=doubtful), _hold(6, 81, 51.0, 51.1, body=doubtful))
    led.ops.append(Op(8, 1, "DELETED", 10.2, 10.3))  # while conn 1 surely held it
    led.deleted[4] = 2
    del led.deleted[5]
    led.deleted[6] = 0
    problems = "\n".join(analyze(led, {5: "state: ready"}))
    for needle in (
        "conn 7 (consumer): live check failed",
        "job 1 reserved twice at once: conn 1",
        "job 2 reserved twice at once: conn 1",
        "job 1: conn 8 got DELETED",
        "job 3 was put with body",
        "job 77 was reserved but never acknowledged",
        "one put in doubt (b't:2:doubt:') became jobs [80, 81]",
        "job 4 deleted 2 times",
        "STRANDED: 2 acknowledged job(s) never deleted: [5, 6]",
        "STRANDED job 5 (tube t); stats-job: state: ready",
    ):
        assert needle in problems, f"{needle!r} not in:\n{problems}"
    assert "job 6 (tube t)" not in problems  # no stats-job fetched for it


def test_live_rules_for_not_found_and_deadline_soon() -> None:
    hold = _hold(1, 1, 10.0, None, ttr=3, sent=9.9)  # deadline >= 12.9 (minus EPS)
    assert not hold.may_have_expired(12.8)
    assert hold.may_have_expired(12.9)
    assert not deadline_soon_allowed({1: hold}, 11.8)
    assert deadline_soon_allowed({1: hold}, 11.9)
    assert not deadline_soon_allowed({}, 100.0)
    hold.base = 12.0  # touched at 12.0: deadline >= 15.0 (minus EPS)
    assert not hold.may_have_expired(14.9)
    assert not deadline_soon_allowed({1: hold}, 13.9)
