"""Stats string values: beanstalkd 1.12's bytes by default, 1.13's quoting on request.

The default is checked byte for byte against beanstalkd 1.12 by the differential suite
(its normaliser compares quoting); this covers `--stats-yaml quoted` and the config key.
"""

from __future__ import annotations

import re

import pytest
from crash_load import Client


def stats_texts(port: int) -> tuple[bytes, bytes, bytes]:
    c = Client(port)
    assert c.cmd(b"use qt") == b"USING qt"
    job = c.cmd(b"put 0 0 60 1\r\nx").split()[1]
    out = []
    for what in (b"stats-job " + job, b"stats-tube qt", b"stats"):
        assert c.cmd(what).startswith(b"OK ")
        out.append(c.last_body)
    c.close()
    return out[0], out[1], out[2]


@pytest.mark.parametrize("shards", [1, 4])
def test_plain_by_default_as_beanstalkd_1_12(shardq_server, shards: int) -> None:
    job, tube, stats = stats_texts(shardq_server(shards).port)
    assert b"\ntube: qt\n" in job and b"\nstate: ready\n" in job
    assert tube.startswith(b"---\nname: qt\n")
    assert re.search(rb'\nversion: "[^"\n]+"\n', stats)  # 1.12 quotes the version itself
    assert re.search(rb"\nhostname: [^\"\n]+\n", stats)


@pytest.mark.parametrize("how", ["flag", "config"])
def test_quoted_on_request_as_beanstalkd_1_13(shardq_server, tmp_path, how: str) -> None:
    if how == "flag":
        extra: tuple[str, ...] = ("--stats-yaml", "quoted")
    else:
        config = tmp_path / "q.yaml"
        config.write_text("stats_yaml: quoted\n")
        extra = ("--config", str(config))
    job, tube, stats = stats_texts(shardq_server(4, extra).port)
    assert b'\ntube: "qt"\n' in job and b"\nstate: ready\n" in job  # state is never quoted
    assert tube.startswith(b'---\nname: "qt"\n')
    for key in (b"version", b"hostname", b"platform"):
        assert re.search(rb"\n" + key + rb': "[^"\n]*"\n', stats), key
