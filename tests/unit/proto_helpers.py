"""Helpers of the protocol unit tests (tests/unit/test_proto_*.py): feed bytes to a
shardq.protocol.proto.Parser, collect the commands, and the replies they expect.
"""

from __future__ import annotations

from shardq.protocol.commands import Command, ErrorReply
from shardq.protocol.proto import BAD_FORMAT, Parser

BAD = ErrorReply(BAD_FORMAT)


CRLF = b"\r\n"


def parse(chunks: list[bytes], max_job_size: int = 65535) -> list[Command]:
    parser = Parser(max_job_size)
    out: list[Command] = []
    for chunk in chunks:
        parser.feed(chunk)
        while (cmd := parser.next_command()) is not None:
            out.append(cmd)
    return out
