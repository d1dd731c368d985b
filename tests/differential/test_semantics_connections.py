"""Semantics over several connections at once, compared with beanstalkd 1.12: waiting
reserves served as jobs arrive, and what closing, quitting or half-closing a connection
does to its reserves and reservations.

Not here (shardq deliberately differs, see test_shardq_fixes.py): the order in
which three or more blocked reservers of one tube are served (beanstalkd serves
four waiters 1, 2, 4, 3; shardq is first come, first served).
"""

from __future__ import annotations

import pytest

from .dsl import (
    RACY_CONNECTION_KEYS,
    A,
    B,
    C,
    D,
    Session,
    assert_same_as_oracle,
    differential_params,
    put,
    session,
)

SESSIONS: list[Session] = [
    session(
        "interleaved-producer-and-consumers",
        B(b"watch jobs\r\nignore default\r\n", 2),
        C(b"watch other\r\nwatch jobs\r\n", 2),
        B.silent(b"reserve\r\n", 0.2),
        A(b"use jobs\r\n"),
        put(A, "j1", body=b"first"),
        B.read(want=b"RESERVED {j1} 5\r\nfirst\r\n"),
        C.silent(b"reserve-with-timeout 10\r\n", 0.2),
        A(b"use other\r\n"),
        put(A, "j2", body=b"second"),
        C.read(want=b"RESERVED {j2} 6\r\nsecond\r\n"),
        C.silent(b"reserve\r\n", 0.2),
        B(b"release {j1} 0 0\r\n", want=b"RELEASED\r\n"),
        C.read(want=b"RESERVED {j1} 5\r\nfirst\r\n"),
        B.silent(b"reserve\r\n", 0.2),
        C(b"bury {j1} 0\r\n"),
        B.silent(None, 0.2),
        A(b"use jobs\r\n"),
        A(b"kick 1\r\n", want=b"KICKED 1\r\n"),
        B.read(want=b"RESERVED {j1} 5\r\nfirst\r\n"),
        D(b"stats\r\n"),
        D(b"stats-tube jobs\r\n"),
        B(b"delete {j1}\r\n"),
        C(b"delete {j2}\r\n"),
        D(b"stats\r\n"),
    ),
    session(
        "two-waiters-served-in-order",
        B(b"watch wq\r\nignore default\r\n", 2),
        C(b"watch wq\r\nignore default\r\n", 2),
        B.silent(b"reserve\r\n", 0.2),
        C.silent(b"reserve\r\n", 0.2),
        A(b"stats-tube wq\r\n"),
        A(b"use wq\r\n"),
        put(A, "j1"),
        B.read(want=b"RESERVED {j1} 1\r\nx\r\n"),
        C.silent(None, 0.1),
        put(A, "j2"),
        C.read(want=b"RESERVED {j2} 1\r\nx\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "waiter-watching-several-tubes",
        B(b"watch w1\r\nwatch w2\r\nignore default\r\n", 3),
        C(b"watch w2\r\nignore default\r\n", 2),
        B.silent(b"reserve\r\n", 0.2),
        C.silent(b"reserve\r\n", 0.2),
        A(b"stats-tube w1\r\nstats-tube w2\r\n", 2),
        A(b"use w2\r\n"),
        put(A, "j1"),
        B.read(want=b"RESERVED {j1} 1\r\nx\r\n"),
        A(b"stats-tube w1\r\n"),
        A(b"use w1\r\n"),
        put(A, "j2"),
        C.silent(None, 0.2),
        A(b"use w2\r\n"),
        put(A, "j3"),
        C.read(want=b"RESERVED {j3} 1\r\nx\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "close-releases-reservations",
        A(b"watch c1\r\nwatch c2\r\nuse c1\r\n", 3),
        put(A, "j1", pri=5),
        A(b"use c2\r\n"),
        put(A, "j2", pri=1),
        A(b"reserve\r\n", bind="j2"),
        A(b"reserve\r\n", bind="j1"),
        B(b"stats-job {j1}\r\n"),
        B(b"watch c1\r\nignore default\r\n", 2),
        B.silent(b"reserve\r\n", 0.2),
        A.close(),
        B.read(want=b"RESERVED {j1} 1\r\nx\r\n"),
        B(b"stats-job {j2}\r\n"),
        B(b"stats-tube c2\r\n"),
        B(b"stats\r\n"),
        ignore=RACY_CONNECTION_KEYS,
    ),
    session(
        "quit-releases-reservations",
        A(b"put 3 0 60 1\r\nq\r\n", bind="j1"),
        A(b"reserve\r\n", bind="j1"),
        B.silent(b"reserve\r\n", 0.2),
        A.eof(b"quit\r\n"),
        B.read(want=b"RESERVED {j1} 1\r\nq\r\n"),
        B(b"stats-job {j1}\r\n"),
        ignore=RACY_CONNECTION_KEYS,
    ),
    session(
        "half-close-while-blocked-in-reserve",
        A.silent(b"reserve\r\n", 0.2),
        A.shutdown(),
        A.read(want=b"TIMED_OUT\r\n"),
        A.eof(),
        B.silent(b"reserve-with-timeout 10\r\n", 0.2),
        B.shutdown(),
        B.read(want=b"TIMED_OUT\r\n"),
        B.eof(),
    ),
    session(
        "half-close-while-holding-a-job",
        A(b"put 0 0 60 1\r\nh\r\n", bind="j1"),
        A(b"reserve\r\n", bind="j1"),
        B.silent(b"reserve\r\n", 0.2),
        A.silent(b"reserve\r\n", 0.2),
        A.shutdown(),
        A.read(want=b"TIMED_OUT\r\n"),
        A.eof(),
        B.read(want=b"RESERVED {j1} 1\r\nh\r\n"),
        ignore=RACY_CONNECTION_KEYS,
    ),
    session(
        "half-close-answers-every-command-after-a-waiting-reserve",
        A(b"reserve\r\nkick-job \r\npeek-buried\r\n", 0),
        A.shutdown(),
        A.read(3, want=b"TIMED_OUT\r\nBAD_FORMAT\r\nNOT_FOUND\r\n"),
        A.eof(),
    ),
    # hc0 and hcx4 live on shard 2 of 4 (a shard process), default on shard 3: with 4
    # shards B's reserve goes over a hop and C's spans two shards (offers)
    session(
        "half-close-reserve-still-takes-a-ready-job",
        A(b"use hc0\r\n"),
        A(b"put 0 0 60 1\r\na\r\n", bind="j1"),
        A(b"use hcx4\r\n"),
        A(b"put 0 0 60 1\r\nb\r\n", bind="j2"),
        B(b"watch hc0\r\nignore default\r\nreserve\r\npeek {j1}\r\n", 0),
        B.shutdown(),
        B.read(
            4, want=b"WATCHING 2\r\nWATCHING 1\r\nRESERVED {j1} 1\r\na\r\nFOUND {j1} 1\r\na\r\n"
        ),
        B.eof(),
        C(b"watch hcx4\r\nreserve\r\n", 0),
        C.shutdown(),
        C.read(2, want=b"WATCHING 2\r\nRESERVED {j2} 1\r\nb\r\n"),
        C.eof(),
        ignore=RACY_CONNECTION_KEYS,
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
