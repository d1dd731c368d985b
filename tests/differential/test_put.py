"""Job bodies: EXPECTED_CRLF, JOB_TOO_BIG, odd bodies and ids used up by failed puts."""

from __future__ import annotations

import pytest

from .dsl import A, Session, assert_same_as_oracle, calc, differential_params, session

MAX = 65535
CRLF_THEN_USING = b"EXPECTED_CRLF\r\nUSING framing\r\n"


def body(n: int, fill: bytes = b"b") -> bytes:
    return (fill * n)[:n]


SESSIONS: list[Session] = [
    session(
        "expected-crlf-resumes-after-bytes-plus-two",
        A(b"use framing\r\n"),
        A(b"put 0 0 1 3\r\nabcde\r\n", 2, want=b"EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n"),
        A(b"put 0 0 1 3\r\nabcXYlist-tube-used\r\n", 2, want=CRLF_THEN_USING),
        A(b"put 0 0 1 3\r\nabc\r\rlist-tube-used\r\n", 2, want=CRLF_THEN_USING),
        A(b"put 0 0 1 3\r\nabc\n\nlist-tube-used\r\n", 2, want=CRLF_THEN_USING),
        A(b"put 0 0 1 0\r\nXYlist-tube-used\r\n", 2, want=CRLF_THEN_USING),
        A(b"put 0 0 1 2\r\nab\n\r\n\r\n", 2, want=b"EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n"),
        A(b"stats-tube framing\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "body-with-crlf-nul-and-binary",
        A(b"put 0 0 1 5\r\na\r\nb\x00\r\n", bind="j1"),
        A(b"peek-ready\r\n", want=b"FOUND {j1} 5\r\na\r\nb\x00\r\n"),
        A(b"put 0 0 1 4\r\n\r\n\r\n\r\n", bind="j2"),
        A(b"put 0 0 1 256\r\n" + bytes(range(256)) + b"\r\n", bind="j3"),
        A(b"put 0 0 1 11\r\nput 0 0 1\r\n\r\n", bind="j4"),
        A(b"reserve\r\n" * 4, 4, bind="j1 j2 j3 j4"),
        A(b"stats-job {j3}\r\n"),
    ),
    session(
        "body-split-across-writes",
        A.silent(b"put 0 0 60 10\r\n", 0.2),
        A.silent(b"01234", 0.2),
        A.silent(b"56789", 0.2),
        A.silent(b"\r", 0.2),
        A(b"\n", bind="j1"),
        A.silent(b"put 0 0 60 3\r\nabc", 0.2),
        A(b"!!", want=b"EXPECTED_CRLF\r\n"),
        A(b"peek {j1}\r\n", want=b"FOUND {j1} 10\r\n0123456789\r\n"),
    ),
    session(
        "max-job-size-65535-accepted",
        A(b"put 0 0 60 %d\r\n" % MAX + body(MAX) + b"\r\n", bind="j1"),
        A(b"reserve\r\n", bind="j1"),
        A(b"stats-job {j1}\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "job-too-big-swallows-bytes-plus-two",
        A(b"use big\r\n"),
        A(
            b"put 0 0 1 65536\r\n" + body(65536, b"x") + b"\r\nlist-tube-used\r\n",
            2,
            want=b"JOB_TOO_BIG\r\nUSING big\r\n",
        ),
        A(
            b"put 0 0 1 65536 garbage\r\n" + body(65536, b"y") + b"\r\nlist-tube-used\r\n",
            2,
            want=b"JOB_TOO_BIG\r\nUSING big\r\n",
        ),
        # exactly bytes+2 bytes are discarded, whatever they are
        A(
            b"put 0 0 1 65536\r\n" + body(65538, b"z") + b"list-tube-used\r\n",
            2,
            want=b"JOB_TOO_BIG\r\nUSING big\r\n",
        ),
        A(
            b"put 0 0 1 100000\r\n" + body(100000, b"put 0 0 1 1\r\n") + b"\r\nlist-tube-used\r\n",
            2,
            want=b"JOB_TOO_BIG\r\nUSING big\r\n",
        ),
        A(b"stats-tube big\r\n"),
        A(b"stats\r\n"),
        # the size check comes before the trailing-text check: 2**32+1 bytes to swallow
        A.silent(b"put 0 0 1 4294967295 \r\nlist-tube-used\r\n", 0.3),
    ),
    session(
        "job-too-big-waits-for-the-whole-body",
        A.silent(b"put 0 0 1 70000\r\nshort\r\n", 0.5),
        A.silent(body(69993, b"s") + b"\r", 0.3),
        A(b"\nlist-tube-used\r\n", 2, want=b"JOB_TOO_BIG\r\nUSING default\r\n"),
    ),
    session(
        "ids-used-up-by-failed-puts",
        A(b"put 0 0 60 1\r\na\r\n", bind="j1"),
        A(b"put 0 0 60 3\r\nabcde\r\n", 2, want=b"EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n"),
        A(b"put 0 0 60 1\r\nb\r\n", bind="j3"),
        calc("j3 - j1"),
        A(b"peek {j1+1}\r\n", want=b"NOT_FOUND\r\n"),
        A(b"put 0 0 60 65536\r\n" + body(65536) + b"\r\n", want=b"JOB_TOO_BIG\r\n"),
        A(b"put 0 0 60 1\r\nc\r\n", bind="j4"),
        calc("j4 - j3"),
        A(b"put 0 0 60 1 \r\nx\r\n", 2, want=b"BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n"),
        A(b"put 0 0 60 1\r\nd\r\n", bind="j5"),
        calc("j5 - j4"),
        A(b"put 0 0 60 1\r\nxYZ\r\n", 2, want=b"EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n"),
        A(b"put 0 0 60 1\r\nxYZ", want=b"EXPECTED_CRLF\r\n"),
        A(b"put 0 0 60 1\r\ne\r\n", bind="j8"),
        calc("j8 - j5"),
        A(b"stats\r\n"),
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
