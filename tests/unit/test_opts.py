"""`shardq.opts.getopt` parses as the standard library's `getopt.getopt` (which `shardqd`
no longer imports: its gettext costs start-up time): the same options, the same arguments
left, the same error messages."""

from __future__ import annotations

import getopt as stdlib

import pytest

from shardq.dropin import LONG, SHORT
from shardq.opts import GetoptError, getopt

CASES = [
    [],
    ["-VV"],
    ["-f0", "-F", "-l", "127.0.0.1", "-p11300"],
    ["-b", "/var/q", "-z", "10", "-c", "-n", "rest", "-V"],
    ["-Vl", "0.0.0.0"],
    ["--config", "q.yaml", "--shards=4", "--no-colocate"],
    ["--shar", "4", "--no-c"],  # unique prefixes
    ["--", "-V"],
    ["-", "-V"],
    ["-p", "--shards"],
    ["-x"],
    ["-Vx"],
    ["-:"],
    ["-p"],
    ["--shards"],
    ["--nonsense"],
    ["--no-colocate=1"],
    ["--s", "4"],  # shards, serving, stats-yaml, ...
    ["--config"],
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_it_parses_as_getopt(args: list[str]) -> None:
    try:
        expected: object = stdlib.getopt(args, SHORT, LONG)
    except stdlib.GetoptError as e:
        expected = f"error: {e}"
    try:
        got: object = getopt(args, SHORT, LONG)
    except GetoptError as e:
        got = f"error: {e}"
    assert got == expected
