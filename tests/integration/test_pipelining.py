"""Pipelined commands: answered in order, whatever process answers them, and a long
pipeline of commands the serving process answers itself does not exhaust its stack."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from helpers import connect, read_replies, send

SHARDS = [1, 4]


@pytest.mark.parametrize("shards", SHARDS)
def test_thousands_of_locally_answered_commands_in_one_write(
    start_shardq: Callable[[int], int], shards: int
) -> None:
    sock = connect(start_shardq(shards))
    send(sock, b"list-tube-used\r\n" * 5000 + b"bogus\r\n")
    replies = read_replies(sock, 5001, timeout=20)
    assert replies[:5000] == [b"USING default\r\n"] * 5000
    assert replies[5000] == b"UNKNOWN_COMMAND\r\n"


def _ids(replies: list[bytes]) -> list[int]:
    return [int(r.split()[1]) for r in replies]


@pytest.mark.parametrize("shards", SHARDS)
def test_pipelined_commands_to_several_shards_are_answered_in_order(
    start_shardq: Callable[[int], int], shards: int
) -> None:
    # Given jobs in tubes that live on different shards (with 4 shards)
    sock = connect(start_shardq(shards))
    tubes = [b"pa", b"pb", b"pc", b"pd"]
    setup = b"".join(b"use %s\r\nput 0 0 60 1\r\nx\r\n" % t for t in tubes)
    send(sock, setup)
    ids = _ids(read_replies(sock, 8)[1::2])
    # When one write mixes puts, peeks, deletes, stats and tube changes
    script = b"use pa\r\n" + b"put 0 0 60 2\r\nhi\r\n" * 50
    script += b"".join(b"peek %d\r\n" % i for i in ids)
    script += b"stats-tube pb\r\n"
    script += b"".join(b"delete %d\r\n" % i for i in reversed(ids))
    script += b"use pd\r\nput 1 0 60 1\r\nz\r\nlist-tube-used\r\n"
    send(sock, script)
    replies = read_replies(sock, 1 + 50 + 4 + 1 + 4 + 3, timeout=20)
    # Then every reply is the answer to the command at its position
    assert replies[0] == b"USING pa\r\n"
    puts = replies[1:51]
    assert all(r.startswith(b"INSERTED ") for r in puts)
    assert _ids(puts) == sorted(_ids(puts))
    for job_id, reply in zip(ids, replies[51:55], strict=True):
        assert reply == b"FOUND %d 1\r\nx\r\n" % job_id
    assert replies[55].startswith(b"OK ") and b"name: pb\n" in replies[55]
    assert replies[56:60] == [b"DELETED\r\n"] * 4
    assert replies[60] == b"USING pd\r\n"
    assert replies[61].startswith(b"INSERTED ")
    assert replies[62] == b"USING pd\r\n"


@pytest.mark.parametrize("shards", SHARDS)
def test_close_with_a_pipeline_in_flight_loses_no_answer_already_due(
    start_shardq: Callable[[int], int], shards: int
) -> None:
    port = start_shardq(shards)
    sock = connect(port)
    send(sock, b"put 0 0 60 1\r\nx\r\n" * 200)
    sock.shutdown(socket.SHUT_WR)
    replies = read_replies(sock, 200, timeout=20)
    assert all(r.startswith(b"INSERTED ") for r in replies)
    other = connect(port)
    send(other, b"stats-tube default\r\n")
    assert b"current-jobs-ready: 200\n" in read_replies(other, 1)[0]
