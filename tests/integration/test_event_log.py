"""Every state change of a job reaches the event log (`--events`, storage/events.py), the
give-back of a closing connection's jobs included (issue 22, item 11): it is logged as a
`release` with no delay, so `shardq analyze`'s counts add up (here a tube's reserves are
exactly its puts and releases; before, the two given back were missing)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import greenstalk
import pytest

from shardq.bench.procs import terminate


def client(port: int, **kwargs: Any) -> greenstalk.Client:
    c = greenstalk.Client(("127.0.0.1", port), **kwargs)
    c._sock.settimeout(10)  # a hung server fails the test instead of hanging it
    return c


def events_of(directory: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for f in directory.glob("*.jsonl") for line in f.open()]
    return sorted(rows, key=lambda row: row["ts"])


@pytest.mark.parametrize(("shards", "serving"), [(1, "1"), (2, "2")], ids=["1", "2"])
def test_a_job_a_closed_connection_held_is_logged_as_released(
    shardq_server: Callable[..., Any], tmp_path: Path, shards: int, serving: str
) -> None:
    events = tmp_path / "events"
    srv = shardq_server(shards, ("--serving", serving, "--events", str(events)))
    with client(srv.port, use="work") as producer:
        ids = [producer.put(f"j{i}", delay=0) for i in range(3)]
    worker = client(srv.port, watch="work")
    held = [worker.reserve(timeout=5).id for _ in range(2)]
    worker.close()  # gives both back
    with client(srv.port, watch="work") as other:
        for _ in ids:
            other.delete(other.reserve(timeout=5))  # waits for the two given back
    assert terminate(srv.proc, 10, group=True) == 0

    rows = [row for row in events_of(events) if row["tube"] == "work"]
    lives = {job: [row["event"] for row in rows if row["job"] == job] for job in ids}
    for job in held:
        assert lives[job] == ["put", "reserve", "release", "reserve", "delete"], lives
    given_back = [row for row in rows if row["event"] == "release"]
    assert sorted(row["job"] for row in given_back) == sorted(held)
    assert {row["delay"] for row in given_back} == {0}
    counts = Counter(row["event"] for row in rows)
    assert (counts["put"], counts["reserve"], counts["release"]) == (3, 5, 2)
    assert counts["reserve"] <= counts["put"] + counts["release"]
