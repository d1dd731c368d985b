"""Workq's framing and argument checks, sans-IO: byte-at-a-time feeds give the same frames
as whole ones, blocks are consumed whatever their errors, and each word's error is the
one Workq gives, in Workq's order."""

from __future__ import annotations

import pytest

from shardq.protocol import workq_args as a
from shardq.protocol.workq import Frame, Invalid, WorkqParser, client_error

ID = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
NOW = 1_700_000_000_000


def frames(data: bytes, step: int = 0) -> list[Frame | Invalid]:
    p = WorkqParser()
    out: list[Frame | Invalid] = []
    chunks = [data] if not step else [data[i : i + step] for i in range(0, len(data), step)]
    for chunk in chunks:
        p.feed(chunk)
        while (cmd := p.next_command()) is not None:
            out.append(cmd)
    return out


STREAM = (
    f"add {ID} ping 1000 60000 4 -priority=10 -max-attempts=3\r\npong\r\n"
    f"lease a  b 100\r\n"
    f"complete {ID} 5\r\nx\r\ny\r\r\n"
    f"fail {ID} 2\r\nabc\r\n"
    f"inspect server\r\n"
).encode()


@pytest.mark.parametrize("step", [0, 1, 7])
def test_frames_whole_or_in_pieces(step: int) -> None:
    got = frames(STREAM, step)
    assert got == [
        Frame(
            "add",
            (ID.encode(), b"ping", b"1000", b"60000", b"4"),
            {"priority": b"10", "max-attempts": b"3"},
            b"pong",
        ),
        Frame("lease", (b"a", b"b", b"100")),
        Frame("complete", (ID.encode(), b"5"), {}, b"x\r\ny\r"),  # a block may hold CRLFs
        Invalid(client_error("Invalid result size")),  # 3 bytes where 2 were declared
        Frame("inspect", (b"server",)),
    ]


def test_a_block_past_one_mib_is_dropped_as_it_arrives() -> None:
    p = WorkqParser()
    p.feed(f"add {ID} q 1 1 2000000\r\n".encode() + b"x" * 1000)
    assert p.next_command() == Invalid(client_error("Invalid payload size"))
    assert p.buffered == 0
    p.feed(b"x" * (2_000_000 - 1000) + b"\r\nlease q 1\r\n")
    assert p.next_command() == Frame("lease", (b"q", b"1"))


def test_a_line_with_no_end_closes() -> None:
    p = WorkqParser()
    p.feed(b"x" * 10_001)
    assert p.next_command() == Invalid(client_error("Line too long"), close=True)
    p.feed(b"\r\nlease q 1\r\n")
    assert p.next_command() is None  # nothing more is read


def parse(line: bytes) -> a.Typed | Invalid:
    got = frames(line)
    assert len(got) == 1
    cmd = got[0]
    return cmd if isinstance(cmd, Invalid) else a.parse(cmd, NOW)


def test_typed_commands() -> None:
    assert parse(f"add {ID.upper()} q 5 10 1 -max-fails=2\r\nx\r\n".encode()) == a.Add(
        ID, "q", 5, 10, b"x", 0, 0, 2
    )
    when = "2023-11-14T22:13:30Z"  # NOW + 10 s
    assert parse(f"schedule {ID} q 5 10 {when} 0\r\n\r\n".encode()) == a.Add(
        ID, "q", 5, 10, b"", at=NOW + 10_000
    )
    assert parse(f"run {ID} q 5 70 1 -priority=-3\r\nx\r\n".encode()) == a.Add(
        ID, "q", 5, 0, b"x", -3, wait_ms=70
    )
    assert parse(b"lease a b.c d_e-f 0\r\n") == a.Lease(("a", "b.c", "d_e-f"), 0)
    assert parse(f"result {ID} 9\r\n".encode()) == a.Result(ID, 9)
    assert parse(f"fail {ID} 1\r\nr\r\n".encode()) == a.Finish(ID, b"r", False)
    assert parse(b"inspect jobs q 3 4\r\n") == a.Inspect("jobs", "q", 3, 4)
    assert parse(b"inspect queues 0 100\r\n") == a.Inspect("queues", "", 0, 100)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        # the id is checked first, then the name, TTR, TTL, time, flags
        (b"add nope q/ 0 0 1\r\nx\r\n", "Invalid ID"),
        (f"add {ID} q/ 0 0 1\r\nx\r\n".encode(), "Invalid Name"),
        (f"add {ID} {'n' * 256} 1 1 1\r\nx\r\n".encode(), "Invalid Name"),
        (f"add {ID} q 0 0 1\r\nx\r\n".encode(), "Invalid TTR"),
        (f"add {ID} q 1 0 1 -priority=x\r\nx\r\n".encode(), "Invalid TTL"),
        (f"add {ID} q 1 18446744073709551616 1\r\nx\r\n".encode(), "Invalid TTL"),
        (f"add {ID} q 1 1 1 -max-attempts=x -priority=x\r\nx\r\n".encode(), "Invalid Max Attempts"),
        (f"schedule {ID} q 1 1 2023-11-14T22:13:10Z 1\r\nx\r\n".encode(), "Invalid Time"),
        (f"run {ID} q 1 86400001 1\r\nx\r\n".encode(), "Invalid wait timeout"),
        (f"add {ID} q 1 1 1 -a=1 -b=2 -c=3 -d=4\r\nx\r\n".encode(), "Invalid command args"),
        (f"run {ID} q 1 1 1 -a=1 -b=2\r\nx\r\n".encode(), "Invalid command args"),
    ],
)
def test_word_errors_in_workqs_order(line: bytes, error: str) -> None:
    assert parse(line) == Invalid(client_error(error))
