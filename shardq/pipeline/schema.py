"""The Spark read schema of the event log, mirroring `shardq.storage.events.FIELDS`.

An explicit schema saves Spark a full pass over the input (schema inference) and turns
malformed lines into all-null rows that `metrics.clean` drops, instead of failing the job.
"""

from __future__ import annotations

from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from shardq.storage.events import FIELDS

_TYPES = {
    "ts": DoubleType(),
    "server": StringType(),
    "shard": IntegerType(),
    "tube": StringType(),
    "job": LongType(),
    "event": StringType(),
    "pri": LongType(),
    "delay": LongType(),
    "ttr": LongType(),
    "bytes": LongType(),
}

SCHEMA = StructType([StructField(name, _TYPES[name], True) for name in FIELDS])
