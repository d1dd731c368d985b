"""Integer and tube-name parsing per command, compared with beanstalkd 1.12.

Not here (shardq takes 1.13's stricter rule, see test_shardq_fixes.py):
``reserve-with-timeout`` with an argument that is not a plain u32 <= 2147483647.
"""

from __future__ import annotations

import pytest

from .dsl import A, B, Session, assert_same_as_oracle, differential_params, session

BAD = b"BAD_FORMAT\r\n"
BAD_THEN_BODY = b"BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n"
NINES23 = b"9" * 23
U64_MAX = b"18446744073709551615"
U64_OVER = b"18446744073709551616"
NAME_CHARS = b"ABCXYZabcxyz0189-+/;.$_()"


def put_line_rejected(line: bytes) -> object:
    """A malformed put line: BAD_FORMAT, then the body line is parsed as a command."""
    return A(line + b"\r\nx\r\n", 2, want=BAD_THEN_BODY)


SESSIONS: list[Session] = [
    session(
        "put-malformed-line-body-parsed-as-command",
        *[
            put_line_rejected(line)
            for line in (
                b"put -1 0 1 1",
                b"put +1 0 1 1",
                b"put 4294967296 0 1 1",
                b"put 0x10 0 1 1",
                b"put " + NINES23 + b" 0 1 1",
                b"put 1 0 1 1 ",
                b"put 1 0 1 1x",
                b"put 1 0 1",
                b"put 1 0 1 1 1",
                b"put a 0 1 1",
                b"put 1 -1 1 1",
                b"put 1 4294967296 1 1",
                b"put 1 0 -1 1",
                b"put 1 0 4294967296 1",
                b"put 1 0 1 -1",
                b"put 1 0 1 +1",
                b"put 1 0 1 4294967296",
                b"put 1\t0 1 1",
                b"put 1,0 1 1",
            )
        ],
        A(b"put\t1 0 1 1\r\nx\r\n", 2, want=b"UNKNOWN_COMMAND\r\nUNKNOWN_COMMAND\r\n"),
        A(b"put \r\n", want=BAD),
        A(b"put 1 0 1\r\n", want=BAD),
        A(b"stats-tube default\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "put-accepted-number-forms",
        A(b"put  1  0  1  1\r\nx\r\n", bind="j1", want=b"INSERTED {j1}\r\n"),
        A(b"put 010 0 1 1\r\nx\r\n", bind="j2"),
        A(b"put 4294967295 0 1 1\r\nx\r\n", bind="j3"),
        A(b"put 0 0 1 0\r\n\r\n", bind="j4"),
        A(b"put 00000000000000000000000000000007 0 1 1\r\nx\r\n", bind="j5"),
        A(b"put 1 4294967295 4294967295 1\r\nx\r\n", bind="j6"),
        A(b"put 1 0 0 1\r\nx\r\n", bind="j7"),
        *[A(b"stats-job {%s}\r\n" % j) for j in (b"j1", b"j2", b"j3", b"j4", b"j5", b"j6", b"j7")],
        A(b"peek {j4}\r\n", want=b"FOUND {j4} 0\r\n\r\n"),
        A(b"peek-ready\r\n"),
        A(b"peek-delayed\r\n"),
    ),
    session(
        "job-id-parsing-u64",
        A(b"put 5 0 60 2\r\nhi\r\n", bind="j1"),
        *[
            A(b"%s %s\r\n" % (cmd, arg), want=b"NOT_FOUND\r\n")
            for cmd in (b"peek", b"delete", b"touch", b"kick-job", b"stats-job", b"reserve-job")
            for arg in (U64_MAX, b"0", b"00")
        ],
        *[
            A(b"%s %s\r\n" % (cmd, arg), want=BAD)
            for cmd in (b"peek", b"delete", b"touch", b"kick-job", b"stats-job", b"reserve-job")
            for arg in (U64_OVER, b"-1", b"+1", b"1x", b"0x1", b"{j1} ", b"a", NINES23)
        ],
        A(b"release %s 1 0\r\n" % U64_MAX, want=b"NOT_FOUND\r\n"),
        A(b"release %s 1 0\r\n" % U64_OVER, want=BAD),
        A(b"bury %s 1\r\n" % U64_MAX, want=b"NOT_FOUND\r\n"),
        A(b"bury %s 1\r\n" % U64_OVER, want=BAD),
        A(b"peek  {j1}\r\n", want=b"FOUND {j1} 2\r\nhi\r\n"),
        A(b"peek 0{j1}\r\n", want=b"FOUND {j1} 2\r\nhi\r\n"),
        A(b"stats-job  {j1}\r\n"),
        A(b"reserve\r\n", bind="j1"),
        A(b"release {j1}\r\n", want=BAD),
        A(b"release {j1} 1\r\n", want=BAD),
        A(b"release {j1} 1 0 \r\n", want=BAD),
        A(b"release {j1} -1 0\r\n", want=BAD),
        A(b"release {j1} 4294967296 0\r\n", want=BAD),
        A(b"release {j1} 1 4294967296\r\n", want=BAD),
        A(b"release {j1} 1 x\r\n", want=BAD),
        A(b"bury {j1}\r\n", want=BAD),
        A(b"bury {j1} -1\r\n", want=BAD),
        A(b"bury {j1} 1 \r\n", want=BAD),
        A(b"bury {j1} 4294967296\r\n", want=BAD),
        A(b"touch {j1} 1\r\n", want=BAD),
        A(b"delete {j1} 1\r\n", want=BAD),
        A(b"touch  {j1}\r\n", want=b"TOUCHED\r\n"),
        A(b"release  {j1}  4294967295  0\r\n", want=b"RELEASED\r\n"),
        A(b"reserve\r\n", bind="j1"),
        A(b"bury  {j1}  07\r\n", want=b"BURIED\r\n"),
        A(b"stats-job {j1}\r\n"),
        A(b"delete  {j1}\r\n", want=b"DELETED\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "kick-count-parsing-strtoul",
        A(b"use k\r\nwatch k\r\nignore default\r\n", 3),
        *[A(b"put 0 0 60 1\r\nx\r\n") for _ in range(8)],
        *[step for _ in range(8) for step in (A(b"reserve\r\n", bind="r"), A(b"bury {r} 0\r\n"))],
        A(b"kick 0\r\n", want=b"KICKED 0\r\n"),
        A(b"kick 4294967296\r\n", want=b"KICKED 0\r\n"),
        A(b"kick 1x\r\n", want=b"KICKED 1\r\n"),
        A(b"kick 1 2\r\n", want=b"KICKED 1\r\n"),
        A(b"kick  1\r\n", want=b"KICKED 1\r\n"),
        A(b"kick \t1\r\n", want=b"KICKED 1\r\n"),
        A(b"kick +1\r\n", want=b"KICKED 1\r\n"),
        A(b"kick 4294967297\r\n", want=b"KICKED 1\r\n"),
        A(b"kick " + NINES23 + b"\r\n", want=BAD),
        A(b"kick 18446744073709551616\r\n", want=BAD),
        A(b"kick abc\r\n", want=BAD),
        A(b"kick -\r\n", want=BAD),
        A(b"kick x1\r\n", want=BAD),
        A(b"kick -1\r\n", want=b"KICKED 2\r\n"),
        A(b"stats-tube k\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "kick-negative-and-u64-max-kick-everything",
        A(b"use k2\r\n"),
        *[A(b"put 0 100 60 1\r\nx\r\n") for _ in range(3)],
        A(b"kick 18446744073709551615\r\n", want=b"KICKED 3\r\n"),
        *[A(b"put 0 100 60 1\r\nx\r\n") for _ in range(3)],
        A(b"kick -4294967295\r\n", want=b"KICKED 1\r\n"),
        A(b"kick -2\r\n", want=b"KICKED 2\r\n"),
        A(b"stats-tube k2\r\n"),
    ),
    session(
        "reserve-with-timeout-arguments-both-versions-agree",
        A(b"reserve-with-timeout 0\r\n", want=b"TIMED_OUT\r\n"),
        A(b"reserve-with-timeout 00\r\n", want=b"TIMED_OUT\r\n"),
        A(b"reserve-with-timeout  0\r\n", want=b"TIMED_OUT\r\n"),
        A(b"reserve-with-timeout 99999999999999999999\r\n", want=BAD),
        A(b"reserve-with-timeout " + NINES23 + b"\r\n", want=BAD),
        A(b"put 0 0 60 1\r\na\r\n", bind="j1"),
        A(b"reserve-with-timeout 2147483647\r\n", want=b"RESERVED {j1} 1\r\na\r\n"),
        A(b"put 0 0 60 1\r\nb\r\n", bind="j2"),
        A(b"reserve-with-timeout 010\r\n", want=b"RESERVED {j2} 1\r\nb\r\n"),
        A(b"put 0 0 60 1\r\nc\r\n", bind="j3"),
        A(b"reserve-with-timeout  1\r\n", want=b"RESERVED {j3} 1\r\nc\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "tube-name-rules-use-watch-ignore",
        A(b"use " + b"a" * 200 + b"\r\n", want=b"USING " + b"a" * 200 + b"\r\n"),
        A(b"use " + b"a" * 201 + b"\r\n", want=BAD),
        A(b"use -foo\r\n", want=BAD),
        A(b"use a*b\r\n", want=BAD),
        A(b"use foo \r\n", want=BAD),
        A(b"use  foo\r\n", want=BAD),
        A(b"use foo bar\r\n", want=BAD),
        A(b"use fo\to\r\n", want=BAD),
        A(b"use f\xe9\r\n", want=BAD),
        A(b"use foo-\r\n", want=b"USING foo-\r\n"),
        A(b"use +;/.$_()\r\n", want=b"USING +;/.$_()\r\n"),
        A(b"use " + NAME_CHARS + b"\r\n", want=b"USING " + NAME_CHARS + b"\r\n"),
        A(b"use 9\r\n", want=b"USING 9\r\n"),
        A(b"use Default\r\n", want=b"USING Default\r\n"),
        A(b"watch " + b"w" * 200 + b"\r\n", want=b"WATCHING 2\r\n"),
        A(b"watch " + b"w" * 201 + b"\r\n", want=BAD),
        A(b"watch -x\r\n", want=BAD),
        A(b"watch x \r\n", want=BAD),
        A(b"watch  x\r\n", want=BAD),
        A(b"watch x!\r\n", want=BAD),
        A(b"watch x-\r\n", want=b"WATCHING 3\r\n"),
        A(b"ignore -x\r\n", want=BAD),
        A(b"ignore x- \r\n", want=BAD),
        A(b"ignore  x-\r\n", want=BAD),
        A(b"ignore " + b"w" * 201 + b"\r\n", want=BAD),
        A(b"ignore x*\r\n", want=BAD),
        A(b"ignore x-\r\n", want=b"WATCHING 2\r\n"),
        A(b"list-tubes-watched\r\n"),
        A(b"list-tubes\r\n"),
        A(b"list-tube-used\r\n"),
    ),
    session(
        "tube-name-rules-stats-tube-and-pause-tube",
        A(b"use pt\r\n"),
        A(b"stats-tube nosuch\r\n", want=b"NOT_FOUND\r\n"),
        A(b"stats-tube pt \r\n", want=BAD),
        A(b"stats-tube  pt\r\n", want=BAD),
        A(b"stats-tube -pt\r\n", want=BAD),
        A(b"stats-tube p*\r\n", want=BAD),
        A(b"stats-tube " + b"s" * 201 + b"\r\n", want=BAD),
        A(b"stats-tube " + b"s" * 200 + b"\r\n", want=b"NOT_FOUND\r\n"),
        A(b"pause-tube nosuch 1\r\n", want=b"NOT_FOUND\r\n"),
        A(b"pause-tube pt\r\n", want=BAD),
        A(b"pause-tube pt \r\n", want=BAD),
        A(b"pause-tube -pt 2\r\n", want=BAD),
        A(b"pause-tube pt 4294967296\r\n", want=BAD),
        A(b"pause-tube pt -1\r\n", want=BAD),
        A(b"pause-tube pt 1x\r\n", want=BAD),
        A(b"pause-tube pt 1 \r\n", want=BAD),
        A(b"pause-tube p* 1\r\n", want=BAD),
        A(b"pause-tube " + b"s" * 201 + b" 1\r\n", want=BAD),
        A(b"pause-tube pt  0\r\n", want=b"PAUSED\r\n"),
        A(b"pause-tube   pt 0\r\n", want=b"PAUSED\r\n"),
        A(b"pause-tubept 0\r\n", want=b"PAUSED\r\n"),
        A(b"pause-tube pt 4294967295\r\n", want=b"PAUSED\r\n"),
        A(b"stats-tube pt\r\n"),
        A(b"pause-tube pt 0\r\n", want=b"PAUSED\r\n"),
        A(b"stats-tube pt\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "tube-name-200-chars-everywhere",
        A(b"use " + b"L" * 200 + b"\r\n"),
        A(b"put 0 0 60 1\r\nx\r\n", bind="j1"),
        A(b"stats-job {j1}\r\n"),
        A(b"stats-tube " + b"L" * 200 + b"\r\n"),
        B(b"watch " + b"L" * 200 + b"\r\n"),
        B(b"list-tubes-watched\r\n"),
        B(b"list-tubes\r\n"),
        B(b"reserve\r\n", want=b"RESERVED {j1} 1\r\nx\r\n"),
        B(b"ignore " + b"L" * 200 + b"\r\n"),
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
