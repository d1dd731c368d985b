"""shardq.storage.events: the record format, hour and size rotation, and dropping on a bad disk."""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import pytest

from shardq.config import load_config
from shardq.storage.events import EVENTS, FIELDS, EventLog, parse_line

HOUR = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
NS = 1_000_000_000


def row(event="put", job=1, tube="default", now=0):
    return (now, event, job, tube, 1024, 0, 60, 5)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def lines(path: Path) -> list[dict]:
    return [parse_line(x) for x in path.read_text().splitlines()]


def test_record_has_exactly_the_contract_fields(tmp_path):
    log = EventLog(str(tmp_path), "web-1", 3, clock=Clock(HOUR))
    log.write([row("put", 7, "emails", now=123_456_789)], int(HOUR * NS))
    log.close()
    (record,) = lines(tmp_path / "web-1-shard3-2026010100.jsonl")
    assert tuple(record) == FIELDS
    assert record == {
        "ts": HOUR + 0.123457,  # microsecond precision
        "server": "web-1",
        "shard": 3,
        "tube": "emails",
        "job": 7,
        "event": "put",
        "pri": 1024,
        "delay": 0,
        "ttr": 60,
        "bytes": 5,
    }


def test_every_event_name_round_trips(tmp_path):
    log = EventLog(str(tmp_path), "s", 0, clock=Clock(HOUR))
    log.write([row(e, i) for i, e in enumerate(EVENTS)], int(HOUR * NS))
    assert [r["event"] for r in lines(tmp_path / "s-shard0-2026010100.jsonl")] == list(EVENTS)


def test_odd_names_stay_valid_json(tmp_path):
    log = EventLog(str(tmp_path), 'a"%s\\', 0, clock=Clock(HOUR))
    log.write([row(tube="q;$(x)")], 0)
    (path,) = tmp_path.iterdir()
    record = json.loads(path.read_text())
    assert (record["server"], record["tube"]) == ('a"%s\\', "q;$(x)")


def test_a_new_file_every_hour(tmp_path):
    clock = Clock(HOUR + 3599)
    log = EventLog(str(tmp_path), "s", 0, clock=clock)
    log.write([row()], 0)
    clock.t = HOUR + 3600
    log.write([row(), row()], 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "s-shard0-2026010100.jsonl",
        "s-shard0-2026010101.jsonl",
    ]
    assert len(lines(tmp_path / "s-shard0-2026010101.jsonl")) == 2


def test_a_new_part_when_a_file_is_full_and_after_a_restart(tmp_path):
    log = EventLog(str(tmp_path), "s", 0, max_bytes=200, clock=Clock(HOUR))
    for _ in range(5):
        log.write([row(), row()], 0)  # 236 bytes a batch: one part each
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"s-shard0-2026010100{s}.jsonl" for s in ("", ".1", ".2", ".3", ".4"))
    assert all(p.stat().st_size == 236 for p in tmp_path.iterdir())
    restarted = EventLog(str(tmp_path), "s", 0, max_bytes=200, clock=Clock(HOUR))
    restarted.write([row()], 0)
    assert (tmp_path / "s-shard0-2026010100.5.jsonl").exists()


def test_a_torn_last_line_is_not_glued_to_the_next(tmp_path):
    path = tmp_path / "s-shard0-2026010100.jsonl"
    path.write_text('{"ts":1.0,"serv')
    EventLog(str(tmp_path), "s", 0, clock=Clock(HOUR)).write([row()], 0)
    torn, good = path.read_text().splitlines()
    assert torn == '{"ts":1.0,"serv'
    assert parse_line(good)["event"] == "put"


class FullDisk(io.StringIO):
    def write(self, s: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_full_disk_drops_counts_and_logs_then_recovers(tmp_path):
    disk = {"full": True}

    def opener(path: str):
        return FullDisk() if disk["full"] else open(path, "a", encoding="utf-8")  # noqa: SIM115

    err = io.StringIO()
    log = EventLog(str(tmp_path), "s", 2, clock=Clock(HOUR), opener=opener, log=err)
    log.write([row(), row()], 0)
    log.write([row()], 0)
    assert log.dropped == 3
    assert err.getvalue().splitlines() == [
        "shard 2: event log: No space left on device; 2 events dropped (2 since start)"
    ]  # the second failure is within LOG_EVERY: counted, not logged again
    disk["full"] = False
    log.write([row()], 0)
    assert log.dropped == 3
    assert len(lines(tmp_path / "s-shard2-2026010100.jsonl")) == 1


def test_unwritable_directory_drops_instead_of_raising(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = EventLog(str(blocker / "events"), "s", 0, log=io.StringIO())
    log.write([row()], 0)
    assert log.dropped == 1


def test_parse_line_rejects_other_shapes():
    with pytest.raises(ValueError):
        parse_line('{"ts": 1}')


def test_config_events_dir_from_yaml_and_flag():
    assert load_config(None, {}).events_dir is None
    assert load_config("events:\n  dir: /var/log/shardq\n", {}).events_dir == "/var/log/shardq"
    config = load_config("events: {dir: /a}\n", {"events_dir": "/b"})
    assert config.events_dir == "/b"


def test_config_unknown_events_key_is_named():
    from shardq.config import ConfigError

    with pytest.raises(ConfigError, match=r"events\.directory: unknown key \(known: dir\)"):
        load_config("events:\n  directory: /x\n", {})
