"""Writing the results: Parquet through Spark, small text files through Hadoop's FileSystem.

`tubes.csv` and `report.html` are single small files made on the driver from collected
rows (one per tube; the chart series is capped), written with the JVM's Hadoop
FileSystem so `--out` may be hdfs://, s3a:// or a local path alike.
"""

from __future__ import annotations

import csv
import io
from operator import itemgetter

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shardq.pipeline import metrics, report

#: Tubes drawn in the throughput charts (the busiest by puts); the table lists them all.
CHART_TUBES = 8


def write_all(
    spark: SparkSession,
    out: str,
    tubes: DataFrame,
    series: DataFrame,
    events: DataFrame,
    bin_s: int,
) -> list[dict]:
    """Write Parquet, tubes.csv and report.html under `out`; returns the tube rows. The
    report's throughput charts count `events` in bins of `bin_s` seconds (`report.bin_seconds`
    of their span), so a short run is drawn as a line, not a dot per minute."""
    out = out.rstrip("/")
    # One row per tube: computed once, written three ways. Kept in the JVM's cache, not
    # sent back from Python rows (`createDataFrame` would start a Python worker for them).
    tubes = tubes.persist(StorageLevel.MEMORY_ONLY)
    try:
        rows = [r.asDict() for r in tubes.collect()]
        tubes.coalesce(1).write.mode("overwrite").parquet(f"{out}/tubes.parquet")
    finally:
        tubes.unpersist()
    series.write.mode("overwrite").parquet(f"{out}/minutes.parquet")
    write_text(spark, f"{out}/tubes.csv", to_csv(rows))
    chart = chart_series(events, rows, bin_s)
    write_text(spark, f"{out}/report.html", report.render(rows, chart, bin_s))
    return rows


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(metrics.TUBE_COLUMNS)
    for row in rows:
        writer.writerow(["" if row[c] is None else row[c] for c in metrics.TUBE_COLUMNS])
    return buf.getvalue()


def chart_series(events: DataFrame, rows: list[dict], bin_s: int) -> list[dict]:
    """The busiest tubes' counts of puts, reserves, deletes and timeouts per `bin_s`-second
    bin (t: the bin's start, epoch seconds; bins without events are left out)."""
    busiest = [r["tube"] for r in sorted(rows, key=itemgetter("puts"), reverse=True)[:CHART_TUBES]]
    part = events.where(F.col("tube").isin(*busiest)) if busiest else events.limit(0)
    start = (F.floor(F.col("ts") / bin_s) * bin_s).cast("long").alias("t")
    sums = [
        F.count(F.when(F.col("event") == event, 1)).alias(column)
        for event, column in (
            ("put", "puts"),
            ("reserve", "reserves"),
            ("delete", "deletes"),
            ("timeout", "timeouts"),
        )
    ]
    grouped = part.groupBy("tube", start).agg(*sums).orderBy("tube", "t")
    return [r.asDict() for r in grouped.collect()]


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Create or replace one file at `uri` through Hadoop's FileSystem (no .crc beside it)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:  # only a stopped context has no gateway
        raise RuntimeError("the Spark context is stopped")
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.setWriteChecksum(False)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
