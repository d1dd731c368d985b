"""Framing, line limits and command-name matching, compared with beanstalkd 1.12.

Not here (shardq deliberately differs, see test_shardq_fixes.py): lines whose CRLF
straddles a 224-byte window (length 225, 449, 673, ... bytes including CRLF) and
bare ``\\r`` bytes in a command line.
"""

from __future__ import annotations

import pytest

from .dsl import A, B, C, D, E, Session, assert_same_as_oracle, differential_params, session

N200 = b"n" * 200
OK_USING = b"USING default\r\n"


def long_line(total: int, fill: bytes = b"x") -> bytes:
    """A line of ``total`` bytes including its CRLF."""
    # Lengths 1 (mod 224) put the CR at the end of a window: beanstalkd misses that
    # CRLF, shardq does not. They belong to test_shardq_fixes.py.
    assert total <= 224 or total % 224 != 1, "straddling length: not differential"
    return fill * (total - 2) + b"\r\n"


SESSIONS: list[Session] = [
    session(
        "line-limit-224-bytes-is-parsed",
        A(long_line(224), want=b"UNKNOWN_COMMAND\r\n"),
        A(long_line(223), want=b"UNKNOWN_COMMAND\r\n"),
        A(b"use " + N200 + b"\r\n", want=b"USING " + N200 + b"\r\n"),
        # the longest legal line: exactly 224 bytes with its CRLF
        A(b"pause-tube " + N200 + b" 4294967295\r\n", want=b"PAUSED\r\n"),
        A(b"stats-tube " + N200 + b"\r\n"),
        A(b"list-tube-used\r\n"),
    ),
    session(
        "line-too-long-one-bad-format-then-recovers",
        *[
            step
            for total in (226, 250, 447, 448, 450, 1002, 3000)
            for step in (
                A(long_line(total), want=b"BAD_FORMAT\r\n"),
                A(b"list-tube-used\r\n", want=OK_USING),
            )
        ],
    ),
    session(
        "line-too-long-pipelined-with-next-command",
        A(long_line(1002) + b"list-tube-used\r\n", 2, want=b"BAD_FORMAT\r\n" + OK_USING),
        A(long_line(252) + b"list-tube-used\r\n", 2, want=b"BAD_FORMAT\r\n" + OK_USING),
        A(long_line(300) + long_line(400) + b"list-tubes-watched\r\n", 3),
    ),
    session(
        "line-too-long-answered-only-after-its-crlf",
        A.silent(b"y" * 300, 0.3),
        A.silent(b"y" * 500, 0.3),
        A(b"yyy\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"list-tube-used\r\n", want=OK_USING),
    ),
    session(
        "line-too-long-put-line-then-body-parsed-as-command",
        A(b"put 0 0 1 1" + b" " * 300 + b"\r\nx\r\n", 2, want=b"BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n"),
        A(b"use " + b"t" * 300 + b"\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"stats\r\n"),
    ),
    session(
        "command-split-across-writes",
        A.silent(b"list-tu", 0.2),
        A.silent(b"be-used", 0.2),
        A.silent(b"\r", 0.2),
        A(b"\n", want=OK_USING),
        A.silent(b"put 0 0 1 3\r\na", 0.2),
        A.silent(b"b", 0.2),
        A.silent(b"c\r", 0.2),
        A(b"\n", bind="j1"),
        A(b"peek {j1}\r\n", want=b"FOUND {j1} 3\r\nabc\r\n"),
    ),
    session(
        "pipelined-commands-answered-in-order",
        A(
            b"use p1\r\nput 1 0 10 2\r\nhi\r\nlist-tube-used\r\nwatch p1\r\n"
            b"reserve\r\nlist-tubes-watched\r\nstats-tube p1\r\n",
            7,
            bind=("j1", "j1"),
        ),
    ),
    session(
        "empty-line-nul-case-and-bare-lf",
        A(b"\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        A(b"\x00\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"stats\x00\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"list-tube-used\x00x\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"use fo\x00o\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"\x00list-tube-used\r\n"),
        A(b"STATS\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        A(b"Stats\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        A(b" stats\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        A(b"LIST-TUBE-USED\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        A(b"\tstats\r\n", want=b"UNKNOWN_COMMAND\r\n"),
        # a bare LF never ends a line
        A.silent(b"list-tube-used\n", 0.3),
        A(b"\r\n", want=b"BAD_FORMAT\r\n"),
        A(b"\n\r\n"),
        A(b"\nlist-tube-used\r\n"),
        A(b"list-tube-used\r\n", want=OK_USING),
    ),
    session(
        "argumentless-commands-with-extra-text",
        *[
            A(line, want=b"BAD_FORMAT\r\n")
            for line in (
                b"stats \r\n",
                b"statsx\r\n",
                b"stats 1\r\n",
                b"list-tubes \r\n",
                b"list-tubesx\r\n",
                b"list-tube-used \r\n",
                b"list-tube-usedx\r\n",
                b"list-tubes-watched \r\n",
                b"list-tubes-watchedx\r\n",
                b"reserve \r\n",
                b"reservex\r\n",
                b"reserve 1\r\n",
                b"peek-ready \r\n",
                b"peek-readyx\r\n",
                b"peek-delayed \r\n",
                b"peek-delayed1\r\n",
                b"peek-buried \r\n",
                b"peek-buried 1\r\n",
            )
        ],
    ),
    session(
        "prefix-matching-of-commands-with-arguments",
        # no argument, no space: falls to a shorter prefix or to nothing
        *[
            A(line, want=b"BAD_FORMAT\r\n")
            for line in (
                b"stats-tube\r\n",
                b"stats-job\r\n",
                b"stats-tubex\r\n",
                b"reserve-job\r\n",
                b"reserve-with-timeout\r\n",
                b"reserve-with-timeoutx\r\n",
                b"kick \r\n",
                b"kick-job \r\n",
                b"stats-job \r\n",
                b"stats-tube \r\n",
                b"peek \r\n",
                b"delete \r\n",
                b"use \r\n",
                b"watch \r\n",
                b"ignore \r\n",
                b"pause-tube\r\n",
                b"pause-tube \r\n",
                b"put \r\n",
            )
        ],
        *[
            A(line, want=b"UNKNOWN_COMMAND\r\n")
            for line in (
                b"use\r\n",
                b"peek\r\n",
                b"delete\r\n",
                b"kick\r\n",
                b"kick-job\r\n",
                b"watch\r\n",
                b"ignore\r\n",
                b"release\r\n",
                b"bury\r\n",
                b"touch\r\n",
                b"put\r\n",
                b"peekx\r\n",
                b"list-tube\r\n",
                b"list\r\n",
                b"pause\r\n",
                b"qui\r\n",
                b"reserv\r\n",
                b"stat\r\n",
            )
        ],
        A(b"release \r\n"),
        A(b"bury \r\n"),
        A(b"touch \r\n"),
        A(b"reserve-job \r\n"),
        A(b"stats-jobx\r\n"),
        A(b"usex\r\n"),
        A(b"pause-tubedefault 0\r\n", want=b"PAUSED\r\n"),
        A(b"pause-tube  default 0\r\n", want=b"PAUSED\r\n"),
        A(b"list-tube-used\r\n", want=OK_USING),
    ),
    session(
        "quit-variants-close-without-reply",
        A.eof(b"quit\r\n"),
        B.eof(b"quitnow\r\n"),
        C.eof(b"quit \r\n"),
        D.eof(b"quit\r\nlist-tube-used\r\n"),
        E(b"list-tube-used\r\nquit\r\nlist-tubes\r\n", 1, want=OK_USING),
        E.eof(),
    ),
    session(
        "half-close-after-pipelined-commands",
        A(b"use hc\r\nlist-tube-used\r\n", 0),
        A.shutdown(),
        A.read(2, want=b"USING hc\r\nUSING hc\r\n"),
        A.eof(),
    ),
]


@pytest.mark.parametrize(("sess", "shards"), differential_params(SESSIONS))
def test_matches_beanstalkd(sess: Session, shards: int, beanstalkd_port, start_shardq) -> None:
    assert_same_as_oracle(sess, beanstalkd_port, start_shardq(shards), shards)
