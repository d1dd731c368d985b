"""The beanstalk protocol under one name: the parser (parser.py) and the replies (replies.py).

Callers that want both write ``from shardq.protocol import proto`` and use ``proto.Parser``,
``proto.NOT_FOUND``, ``proto.job_reply``…; nothing is defined here.
"""

from __future__ import annotations

from shardq.protocol.parser import (
    COMMAND_TABLE,
    DEFAULT_MAX_JOB_SIZE,
    MAX_LINE,
    MAX_TUBE_NAME,
    Parser,
    parse_line,
)
from shardq.protocol.replies import (
    BAD_FORMAT,
    BURIED,
    DEADLINE_SOON,
    DELETED,
    DRAINING,
    EXPECTED_CRLF,
    INTERNAL_ERROR,
    JOB_TOO_BIG,
    KICKED,
    NOT_FOUND,
    NOT_IGNORED,
    OUT_OF_MEMORY,
    PAUSED,
    RELEASED,
    TIMED_OUT,
    TOUCHED,
    UNKNOWN_COMMAND,
    Raw,
    job_reply,
    using,
    watching,
    yaml_list,
    yaml_map,
)

__all__ = [
    "BAD_FORMAT",
    "BURIED",
    "COMMAND_TABLE",
    "DEADLINE_SOON",
    "DEFAULT_MAX_JOB_SIZE",
    "DELETED",
    "DRAINING",
    "EXPECTED_CRLF",
    "INTERNAL_ERROR",
    "JOB_TOO_BIG",
    "KICKED",
    "MAX_LINE",
    "MAX_TUBE_NAME",
    "NOT_FOUND",
    "NOT_IGNORED",
    "OUT_OF_MEMORY",
    "PAUSED",
    "Parser",
    "RELEASED",
    "Raw",
    "TIMED_OUT",
    "TOUCHED",
    "UNKNOWN_COMMAND",
    "job_reply",
    "parse_line",
    "using",
    "watching",
    "yaml_list",
    "yaml_map",
]
