"""TTR, DEADLINE_SOON, delays, pause-tube and reserve timeouts, end to end.

These sessions sleep, with about 0.5 s of margin on each side of every
deadline, and stay short (ttr 1 and 2, delays of 1 s, pauses of 2 s).

beanstalkd 1.12 can lose a connection's TTR timer when its tick lands on the
deadline (reference page, "Known timer race"); the job then stays reserved until
the owning connection does I/O again. To stay deterministic, every session
here makes the owner send a harmless command (the "poke") after a TTR deadline
before anything depends on the expiry. For shardq the poke changes nothing.
"""

from __future__ import annotations

import pytest

from .dsl import A, B, C, Session, assert_same_as_oracle, differential_params, session, wait

DS = b"DEADLINE_SOON\r\n"
TO = b"TIMED_OUT\r\n"

SESSIONS: list[Session] = [
    session(
        "ttr-0-becomes-1-and-deadline-soon-at-once",
        A(b"use ds\r\nwatch ds\r\nignore default\r\n", 3),
        A(b"put 0 0 0 1\r\na\r\n", bind="j1"),
        A(b"stats-job {j1}\r\n"),
        A(b"reserve\r\n", want=b"RESERVED {j1} 1\r\na\r\n"),
        A(b"reserve\r\n", want=DS),
        A(b"reserve-with-timeout 5\r\n", want=DS),
        A(b"reserve-with-timeout 0\r\n", want=DS),
        # inside the margin, a ready job still wins
        A(b"put 0 0 60 1\r\nb\r\n", bind="j2"),
        A(b"reserve\r\n", want=b"RESERVED {j2} 1\r\nb\r\n"),
        # reserve-job never answers DEADLINE_SOON
        A(b"put 0 0 60 1\r\nc\r\n", bind="j3"),
        A(b"reserve-job {j3}\r\n", want=b"RESERVED {j3} 1\r\nc\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=DS),
        A(b"stats-job {j1}\r\n"),
        wait(1.5),
        A(b"list-tube-used\r\n"),  # poke (see module docstring)
        A(b"stats-job {j1}\r\n"),
        A(b"stats-tube ds\r\n"),
        A(b"stats\r\n"),
        A(b"reserve\r\n", want=b"RESERVED {j1} 1\r\na\r\n"),
        A(b"reserve\r\n", want=DS),
        A(b"stats-job {j1}\r\n"),
    ),
    session(
        "deadline-soon-while-waiting-then-ttr-expiry-hands-job-over",
        A(b"use t2\r\nwatch t2\r\nignore default\r\n", 3),
        A(b"put 0 0 2 1\r\na\r\n", bind="j1"),
        A(b"reserve\r\n", want=b"RESERVED {j1} 1\r\na\r\n"),
        # the timer fires at deadline - 1 s, i.e. about 1 s from now
        A.silent(b"reserve-with-timeout 5\r\n", 0.5),
        A.read(want=DS, timeout=1.5),
        B(b"watch t2\r\nignore default\r\n", 2),
        B.silent(b"reserve-with-timeout 5\r\n", 0.4),
        C(b"stats-job {j1}\r\n"),
        C(b"stats-tube t2\r\n"),
        wait(1.0),
        A(b"list-tube-used\r\n"),  # poke (see module docstring)
        B.read(want=b"RESERVED {j1} 1\r\na\r\n"),
        C(b"stats-job {j1}\r\n"),
        C(b"stats\r\n"),
        A(b"delete {j1}\r\n", want=b"NOT_FOUND\r\n"),
        B(b"delete {j1}\r\n", want=b"DELETED\r\n"),
    ),
    session(
        "touch-restarts-the-ttr",
        A(b"put 0 0 2 1\r\na\r\n", bind="j1"),
        A(b"reserve\r\n", bind="j1"),
        A(b"reserve-with-timeout 0\r\n", want=TO),
        wait(1.5),
        A(b"reserve-with-timeout 0\r\n", want=DS),
        A(b"touch {j1}\r\n", want=b"TOUCHED\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=TO),
        wait(1.5),
        A(b"reserve-with-timeout 0\r\n", want=DS),
        A(b"stats-job {j1}\r\n"),
        A(b"delete {j1}\r\n", want=b"DELETED\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "deadline-soon-with-ready-job-only-in-paused-tube",
        A(b"use pd\r\nwatch pd\r\n", 2),
        A(b"put 0 0 1 1\r\na\r\n", bind="j1"),
        A(b"reserve\r\n", bind="j1"),
        A(b"put 0 0 60 1\r\nb\r\n", bind="j2"),
        A(b"pause-tube pd 60\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=DS),
        A(b"reserve\r\n", want=DS),
        A(b"pause-tube pd 0\r\n"),
        A(b"reserve\r\n", want=b"RESERVED {j2} 1\r\nb\r\n"),
    ),
    session(
        "delayed-job-becomes-ready",
        A(b"use dl\r\nwatch dl\r\nignore default\r\n", 3),
        A(b"put 5 1 60 1\r\na\r\n", bind="j1"),
        A(b"put 0 100 60 1\r\nb\r\n", bind="j2"),
        A(b"stats-job {j1}\r\n"),
        A(b"peek-delayed\r\n", want=b"FOUND {j1} 1\r\na\r\n"),
        A(b"peek-ready\r\n", want=b"NOT_FOUND\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=TO),
        A.silent(b"reserve-with-timeout 3\r\n", 0.5),
        A.read(want=b"RESERVED {j1} 1\r\na\r\n", timeout=1.5),
        A(b"stats-job {j1}\r\n"),
        A(b"release {j1} 9 1\r\n", want=b"RELEASED\r\n"),
        A(b"stats-job {j1}\r\n"),
        A(b"stats-tube dl\r\n"),
        B(b"watch dl\r\nignore default\r\n", 2),
        B.silent(b"reserve\r\n", 0.5),
        B.read(want=b"RESERVED {j1} 1\r\na\r\n", timeout=1.5),
        A(b"peek-ready\r\n", want=b"NOT_FOUND\r\n"),
        A(b"stats-job {j1}\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "reserve-with-timeout-1-times-out",
        A.silent(b"reserve-with-timeout 1\r\n", 0.5),
        A.read(want=TO, timeout=1.5),
        A(b"put 0 0 60 1\r\nx\r\n", bind="j1"),
        A(b"reserve-with-timeout 1\r\n", want=b"RESERVED {j1} 1\r\nx\r\n"),
        A.silent(b"reserve-with-timeout 1\r\n", 0.5),
        A.read(want=TO, timeout=1.5),
        A(b"stats\r\n"),
    ),
    session(
        "pause-tube-holds-reservers-until-it-ends",
        A(b"use pz\r\n"),
        A(b"put 0 0 60 1\r\nx\r\n", bind="j1"),
        A(b"pause-tube pz 2\r\n", want=b"PAUSED\r\n"),
        A(b"stats-tube pz\r\n"),
        A(b"peek-ready\r\n", want=b"FOUND {j1} 1\r\nx\r\n"),
        A(b"watch pz\r\nignore default\r\n", 2),
        A(b"reserve-with-timeout 0\r\n", want=TO),
        B(b"watch pz\r\nignore default\r\n", 2),
        B.silent(b"reserve\r\n", 1.2),
        B.read(want=b"RESERVED {j1} 1\r\nx\r\n", timeout=1.5),
        A(b"stats-tube pz\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "pause-is-ignored-by-put-peek-kick-and-reserve-job",
        A(b"use pi\r\nwatch pi\r\nignore default\r\n", 3),
        A(b"pause-tube pi 100\r\n"),
        A(b"put 0 0 60 1\r\nx\r\n", bind="j1"),
        A(b"put 0 0 60 1\r\ny\r\n", bind="j2"),
        A(b"peek-ready\r\n", want=b"FOUND {j1} 1\r\nx\r\n"),
        A(b"reserve-job {j1}\r\n", want=b"RESERVED {j1} 1\r\nx\r\n"),
        A(b"bury {j1} 0\r\n"),
        A(b"kick 5\r\n", want=b"KICKED 1\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=TO),
        A(b"stats-tube pi\r\n"),
        A(b"pause-tube pi 0\r\n"),
        A(b"reserve-with-timeout 0\r\n", want=b"RESERVED {j1} 1\r\nx\r\n"),
        A(b"stats-tube pi\r\n"),
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
