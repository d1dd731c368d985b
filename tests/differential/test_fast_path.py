"""The serving process's fast path (processes/serving/home.py), compared with beanstalkd 1.12.

The fast path serves put, reserve, reserve-with-timeout and delete in their plain form
straight from a read, and hands everything else to the parser: these sessions put its
edges into one write each — plain commands before and after ones it must not serve (other
spellings the parser reads differently, errors, incomplete bodies, a reserve that waits) —
so any difference in what it serves, or in the order of the replies, shows against
beanstalkd. Each runs on every layout (on the multi-shard ones some tubes are at home and
some are not).
"""

from __future__ import annotations

import pytest

from .dsl import A, B, Session, assert_same_as_oracle, differential_params, put, session

BODY = b"hello"
PUT = b"put 0 0 60 5\r\nhello\r\n"
#: a fresh server's first put waits for a block of ids (the general path's work): each
#: session starts with one, so that what follows finds ids at hand
WARM_UP = (
    A(b"put 0 0 60 1\r\nw\r\n", bind="w"),
    A(b"delete {w}\r\n", want=b"DELETED\r\n"),
)

SESSIONS: list[Session] = [
    session(
        "fast-path-pipelined-cycle",
        WARM_UP,
        A(PUT + PUT + b"reserve\r\nreserve-with-timeout 0\r\n", 4, bind="j1 j2 r1 r2"),
        A(b"delete {r1}\r\ndelete {r2}\r\ndelete {r2}\r\nreserve-with-timeout 0\r\n", 4),
        A(b"stats-job {j1}\r\n"),
    ),
    session(
        "fast-path-other-spellings-in-the-middle",
        WARM_UP,
        # numbers the parser reads but the fast path does not: extra spaces, leading zeros,
        # a sign, a number past u32, garbage after the size, a tab
        A(PUT + b"put 0  0 60 5\r\nhello\r\n" + PUT, 3, bind="j1 j2 j3"),
        A(b"put 007 0 060 05\r\nhello\r\n" + PUT, 2, bind="j4 j5"),
        # (a line that does not parse leaves its body to be read as a command)
        A(b"put +1 0 60 5\r\nhello\r\n" + PUT, 3, bind="j6"),
        A(b"put 4294967296 0 60 5\r\nhello\r\n" + PUT, 3, bind="j7"),
        A(b"put 0 0 60 5 x\r\nhello\r\n" + PUT, 3, bind="j8"),
        A(b"put 0 0 60 5 \r\nhello\r\n" + PUT, 3, bind="j9"),
        A(b"put\t0 0 60 5\r\nhello\r\n" + PUT, 3, bind="j10"),
        A(b"reserve-with-timeout 0x\r\nreserve-with-timeout  0\r\nreserve \r\n", 3),
        A(b"delete  {j1}\r\ndelete +{j2}\r\ndelete {j3} \r\ndelete 18446744073709551616\r\n", 4),
        A(b"stats-tube default\r\n"),
    ),
    session(
        "fast-path-bodies-wrong-or-split",
        WARM_UP,
        A(b"put 0 0 60 5\r\nhelloX\r\n" + PUT, 3),
        A(b"put 0 0 60 5\r\nhel", 0),
        A(b"lo\r\n" + PUT, 2, bind="j1 j2"),
        A(b"put 0 0 60 5\r\nhello\r", 0),
        A(b"\n" + PUT + b"put 0 0 60 70000\r\n", 2, bind="j3 j4"),
        A(b"x" * 70000 + b"\r\n" + PUT, 2, bind="j5"),
        A(b"stats-tube default\r\n"),
    ),
    session(
        "fast-path-reserve-waits-then-pipeline-goes-on",
        WARM_UP,
        A(b"use other\r\nwatch other\r\nignore default\r\n", 3),
        A(b"reserve-with-timeout 1\r\nlist-tube-used\r\n" + PUT + b"reserve\r\n", 4, bind="j1 r1"),
        A(b"delete {r1}\r\nreserve-with-timeout 0\r\n", 2),
    ),
    session(
        "fast-path-put-serves-another-connections-reserve",
        WARM_UP,
        B(b"reserve\r\n", 0),
        A(PUT + PUT, 2, bind="j1 j2"),
        B.read(1, want=b"RESERVED {j1} 5\r\nhello\r\n"),
        B(b"delete {j1}\r\nreserve-with-timeout 0\r\ndelete {j2}\r\n", 3),
        A(b"delete {j2}\r\n"),
    ),
    session(
        "fast-path-watch-list-away-from-home",
        WARM_UP,
        A(b"watch t1\r\nwatch t2\r\nwatch t3\r\nuse t3\r\n", 4),
        A(PUT + b"use t1\r\n" + PUT + b"reserve\r\nreserve\r\n", 5, bind="j1 j2 r1 r2"),
        A(b"delete {r1}\r\ndelete {r2}\r\nreserve-with-timeout 0\r\n", 3),
        put(B, "j3", body=BODY),
        A(b"reserve\r\ndelete {j3}\r\n", 2),
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
