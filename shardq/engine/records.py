"""The write-ahead-log records of the engine: each kind's fields, named once.

A record is a msgpack array whose first element names its kind (see shardq/storage/wal.py
for the framing around it). The engine writes these tuples to `Engine.wal_out` and reads
them back in `Engine.restore`; msgpack packs a tuple as an array, so a record's bytes on
disk are its fields in the order below, nothing else. Changing a layout changes the log
format (see WAL_VERSION in wal.py).

Times are nanoseconds: durations as they are, instants on the wall clock (a restart
comes with another monotonic clock). A record read back from disk is a list:
``new(JobRecord, raw)`` gives its fields their names.
"""

from __future__ import annotations

from typing import NamedTuple

JOB, STATE, DELETE = "J", "S", "D"  #: the kinds, each record's first field

RECORD_OVERHEAD = 100  #: log bytes of a job beyond its body, roughly


class JobRecord(NamedTuple):
    """Everything a restart needs to rebuild a job: logged by put and in snapshots."""

    kind: str  # JOB
    id: int
    seq: int
    tube: str
    pri: int
    delay: int  # ns
    ttr: int  # ns
    created: int  # wall-clock ns
    state: int  # a State: READY, DELAYED or BURIED
    deadline: int  # wall-clock ns a delayed job is due at; 0 otherwise
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    body: bytes


class StateRecord(NamedTuple):
    """A job's new state after a release, bury or kick (the job was logged before)."""

    kind: str  # STATE
    id: int
    state: int  # a State
    pri: int
    delay: int  # ns
    deadline: int  # wall-clock ns of the job's deadline (a delayed job's due time); 0: none
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int


class DeleteRecord(NamedTuple):
    """A job is gone."""

    kind: str  # DELETE
    id: int


Record = JobRecord | StateRecord | DeleteRecord

#: How the engine makes a record: ``new(JobRecord, (JOB, id, …))`` is the same tuple as
#: ``JobRecord(JOB, id, …)`` without NamedTuple's Python-level ``__new__`` (about 0.2 µs a
#: put); ``new(JobRecord, raw)`` names the fields of a list read back from the log (a missing
#: field is an IndexError when it is read). Fields go in layout order: the tests in
#: tests/unit/test_records.py check what every writer logs.
new = tuple.__new__
