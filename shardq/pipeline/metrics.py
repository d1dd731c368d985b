"""Pure DataFrame -> DataFrame metrics over job events (no I/O, no UDFs, no RDDs).

Definitions (the contract `tests/pipeline/oracle.py` recomputes in plain Python):

- A job is keyed by (server, job id, life): ids repeat across servers, and across restarts
  of a server without a write-ahead log, so `life` counts the puts seen so far for that
  (server, job) in event order. Events before the first put (logs cut off) are life 0.
- Event order is (ts, RANK). One shard turn stamps all its events with the same time, so
  ties are common: a put, release, kick or timeout handed straight to a waiting worker
  has the same ts as the reserve it causes. RANK puts causes before effects.
- wait = first reserve ts - (put ts + put delay), per job that was put and reserved.
- run = delete ts - ts of the reserve before it, per job deleted while reserved, i.e. the
  latest earlier event of the job other than `touch` is a reserve.
- Percentiles per tube are Spark's `percentile_approx` over jobs, in milliseconds.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shardq.storage.events import EVENTS

#: Events counted per tube, in the order of the `tubes.csv` columns (touch is not counted).
COUNTED = ("put", "reserve", "release", "bury", "kick", "timeout", "delete")
COUNT_COLUMNS = ("puts", "reserves", "releases", "buries", "kicks", "timeouts", "deletes")
TUBE_COLUMNS = (
    "tube",
    *COUNT_COLUMNS,
    "wait_p50_ms",
    "wait_p99_ms",
    "run_p50_ms",
    "run_p99_ms",
)
MINUTE_COLUMNS = ("tube", "minute", "puts", "reserves", "deletes", "timeouts")
#: Tie-break within one timestamp: causes (put, release, kick, ...) before the reserve.
RANK = {"put": 0, "release": 1, "bury": 1, "kick": 1, "timeout": 1, "touch": 1}
RANK |= {"reserve": 2, "delete": 3}
#: percentile_approx accuracy: rank error at most 1/ACCURACY of the tube's job count.
ACCURACY = 10_000
_REQUIRED = ("ts", "server", "tube", "job", "event")
#: The columns the metrics read; the rest of a record is not kept after parsing.
USED = ("ts", "server", "tube", "job", "event", "delay")


def valid() -> Column:
    """True for a usable event: malformed lines are all-null rows under the explicit schema,
    and an unknown event or a missing required field is not one either."""
    ok = F.col("event").isin(*EVENTS)
    for name in _REQUIRED:
        ok = ok & F.col(name).isNotNull()
    return F.coalesce(ok, F.lit(False))


def clean(raw: DataFrame) -> DataFrame:
    """Drop malformed lines and unknown events (rows that are not `valid`)."""
    return raw.where(valid())


def minute_counts(events: DataFrame) -> DataFrame:
    """(tube, minute) -> one count column per counted event: small, feeds both outputs."""
    minute = F.date_trunc("minute", F.timestamp_seconds(F.col("ts"))).alias("minute")
    counts = events.groupBy("tube", minute).pivot("event", list(COUNTED)).count()
    return counts.select(
        "tube",
        "minute",
        *(F.coalesce(F.col(e), F.lit(0)).cast("long").alias(c) for e, c in _named()),
    )


def minute_series(counts: DataFrame) -> DataFrame:
    """The per-minute table: tube, minute, puts, reserves, deletes, timeouts."""
    return counts.select(*MINUTE_COLUMNS).orderBy("tube", "minute")


def jobs(events: DataFrame) -> DataFrame:
    """One row per job life: server, job, life, tube, wait_ms, run_ms (either may be null)."""
    rank = F.lit(None).cast("int")
    for name, value in RANK.items():
        rank = F.when(F.col("event") == name, value).otherwise(rank)
    order = Window.partitionBy("server", "job").orderBy("ts", "rank")
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    lifecycle = (
        events.where(F.col("event") != "touch")
        .select("server", "job", "tube", "ts", "event", "delay", rank.alias("rank"))
        .withColumn("life", F.sum((F.col("event") == "put").cast("int")).over(so_far))
        .withColumn("prev_event", F.lag("event").over(order))
        .withColumn("prev_ts", F.lag("ts").over(order))
    )
    is_ = _is_event
    ran = is_("delete") & (F.col("prev_event") == "reserve")
    per_job = lifecycle.groupBy("server", "job", "life").agg(
        F.first("tube").alias("tube"),
        F.min(F.when(is_("put"), F.col("ts"))).alias("put_ts"),
        F.max(F.when(is_("put"), F.col("delay"))).alias("delay"),
        F.min(F.when(is_("reserve"), F.col("ts"))).alias("reserve_ts"),
        F.max(F.when(ran, F.col("ts") - F.col("prev_ts"))).alias("run_s"),
    )
    wait_s = F.col("reserve_ts") - (F.col("put_ts") + F.coalesce(F.col("delay"), F.lit(0)))
    return per_job.select(
        "server",
        "job",
        "life",
        "tube",
        (wait_s * 1000).alias("wait_ms"),
        (F.col("run_s") * 1000).alias("run_ms"),
    )


def tube_table(counts: DataFrame, per_job: DataFrame) -> DataFrame:
    """The per-tube table of `TUBE_COLUMNS`, one row per tube that has any counted event."""
    totals = counts.groupBy("tube").agg(*(F.sum(c).cast("long").alias(c) for c in COUNT_COLUMNS))
    pcts = F.array(F.lit(0.5), F.lit(0.99))
    quantiles = per_job.groupBy("tube").agg(
        F.percentile_approx("wait_ms", pcts, ACCURACY).alias("w"),
        F.percentile_approx("run_ms", pcts, ACCURACY).alias("r"),
    )
    ms = [
        F.round(F.col(arr)[i], 3).alias(name)
        for arr, i, name in (
            ("w", 0, "wait_p50_ms"),
            ("w", 1, "wait_p99_ms"),
            ("r", 0, "run_p50_ms"),
            ("r", 1, "run_p99_ms"),
        )
    ]
    return (
        totals.join(quantiles, "tube", "left").select("tube", *COUNT_COLUMNS, *ms).orderBy("tube")
    )


def _is_event(name: str) -> Column:
    return F.col("event") == name


def _named() -> zip:
    return zip(COUNTED, COUNT_COLUMNS, strict=True)
