"""The engine's write-ahead-log records (shardq/engine/records.py): named fields, same bytes.

A record is a NamedTuple on the engine's side and a msgpack array on disk; these tests pin
the array each kind is (its fields in order, as the log format has them since version 1),
that the engine writes exactly that, and that a record read back gets its names again.
"""

from __future__ import annotations

from typing import Any

import msgpack

from shardq.engine.engine import Engine
from shardq.engine.job import NS, State
from shardq.engine.records import (
    DELETE,
    JOB,
    STATE,
    DeleteRecord,
    JobRecord,
    StateRecord,
    new,
)
from shardq.storage.segment_format import HEADER, decode_segment, encode

T0 = 1_000 * NS
WALL = 1_700_000_000 * NS  #: wall clock minus monotonic clock


def packed(record: Any) -> bytes:
    return msgpack.packb(record, use_bin_type=True)


def engine() -> Engine:
    e = Engine()
    e.wall_offset = WALL
    e.wal_out = []
    return e


def test_a_record_packs_as_the_array_of_its_fields() -> None:
    job = JobRecord(JOB, 7, 3, "t", 9, 2 * NS, 60 * NS, WALL, 4, WALL + 5, 1, 2, 3, 4, 5, b"b")
    assert packed(job) == packed(list(job))
    assert encode(job) == encode(list(job))
    state = StateRecord(STATE, 7, 3, 9, 0, 0, 1, 0, 0, 1, 0)
    assert packed(state) == packed(["S", 7, 3, 9, 0, 0, 1, 0, 0, 1, 0])
    assert packed(DeleteRecord(DELETE, 7)) == packed(["D", 7])


def test_the_layouts_are_the_log_formats() -> None:
    """Adding, removing or moving a field changes the log format (bump WAL_VERSION)."""
    assert JobRecord._fields == (
        "kind", "id", "seq", "tube", "pri", "delay", "ttr", "created", "state", "deadline",
        "reserves", "timeouts", "releases", "buries", "kicks", "body",
    )  # fmt: skip
    assert StateRecord._fields == (
        "kind", "id", "state", "pri", "delay", "deadline",
        "reserves", "timeouts", "releases", "buries", "kicks",
    )  # fmt: skip
    assert DeleteRecord._fields == ("kind", "id")


def test_put_logs_the_whole_job() -> None:
    e = engine()
    e.put(5, 11, "tube", 70, 3, 20, b"body", T0)
    assert [list(r) for r in e.wal_out or []] == [
        ["J", 5, 11, "tube", 70, 3 * NS, 20 * NS, T0 + WALL, int(State.DELAYED),
         T0 + 3 * NS + WALL, 0, 0, 0, 0, 0, b"body"],
    ]  # fmt: skip


def test_release_bury_kick_and_delete_log_their_records() -> None:
    e = engine()
    e.put(1, 1, "default", 10, 0, 60, b"x", T0)
    got = e.reserve(4, 1, ("default",), T0, None, None)
    assert got is not None
    e.release(4, 1, 20, 2, T0)  # delayed by 2 s
    assert e.wal_out is not None
    assert list(e.wal_out[-1]) == [
        "S", 1, int(State.DELAYED), 20, 2 * NS, T0 + 2 * NS + WALL, 1, 0, 1, 0, 0,
    ]  # fmt: skip
    e.reserve_job(4, 1, T0)
    e.bury(4, 1, 30, T0)
    ttr_end = T0 + 60 * NS + WALL  # a buried or kicked job keeps its last deadline
    assert list(e.wal_out[-1]) == ["S", 1, int(State.BURIED), 30, 2 * NS, ttr_end, 2, 0, 1, 1, 0]
    e.kick_job(1, T0)
    assert list(e.wal_out[-1]) == ["S", 1, int(State.READY), 30, 2 * NS, ttr_end, 2, 0, 1, 1, 1]
    e.delete(4, 1, T0)
    assert list(e.wal_out[-1]) == ["D", 1]
    kinds = [type(r) for r in e.wal_out]
    assert kinds == [JobRecord, StateRecord, StateRecord, StateRecord, DeleteRecord]


def test_a_decoded_record_gets_its_names_back() -> None:
    e = engine()
    e.put(2, 8, "t", 5, 0, 30, b"hello", T0)
    e.delete(1, 2, T0)
    assert e.wal_out is not None
    written = list(e.wal_out)
    decoded, _, damaged, torn = decode_segment(HEADER + b"".join(encode(r) for r in written))
    assert (damaged, torn) == (0, False)
    assert all(isinstance(r, list) for r in decoded)  # what the log gives back
    job, gone = new(JobRecord, decoded[0]), new(DeleteRecord, decoded[1])
    assert job == written[0] and gone == written[1]
    assert (job.id, job.seq, job.tube, job.pri) == (2, 8, "t", 5)
    assert (job.ttr, job.body) == (30 * NS, b"hello")
    assert (job.reserves, job.timeouts, job.releases, job.buries, job.kicks) == (0, 0, 0, 0, 0)
    assert gone.id == 2


def test_restore_reads_the_named_fields_and_skips_unknown_kinds() -> None:
    e = engine()
    e.put(1, 1, "a", 1, 0, 60, b"x", T0)
    e.put(2, 2, "a", 1, 0, 60, b"y", T0)
    e.delete(0, 1, T0)
    raw = [list(r) for r in e.wal_out or []]
    raw.insert(1, ["X", 2, "a kind this reader does not know"])
    again = Engine()
    again.wall_offset = WALL
    again.restore(raw, T0)
    assert sorted(again.jobs) == [2]


def test_snapshot_and_restore_round_trip_through_the_named_records() -> None:
    e = engine()
    e.put(1, 1, "a", 1, 0, 60, b"ready", T0)
    e.put(2, 2, "a", 2, 9, 60, b"delayed", T0)
    e.put(3, 3, "b", 3, 0, 60, b"buried", T0)
    e.reserve_job(1, 3, T0)
    e.bury(1, 3, 4, T0)
    snap = e.snapshot()
    assert [type(r) for r in snap] == [JobRecord] * 3
    raw = [msgpack.unpackb(packed(r), raw=False) for r in snap]
    again = Engine()
    again.wall_offset = WALL
    again.restore(raw, T0)
    for job_id in (1, 2, 3):
        assert again.stats_job(job_id, T0) == e.stats_job(job_id, T0)
    assert again.snapshot() == snap
