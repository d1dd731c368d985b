"""Writing the results: Parquet through Spark, small text files through Hadoop's FileSystem.

`tubes.csv` and `report.html` are single small files made on the driver from collected
rows (one per tube; the chart series is capped), written with the JVM's Hadoop
FileSystem so `--out` may be hdfs://, s3a:// or a local path alike.
"""

from __future__ import annotations

import csv
import io
from operator import itemgetter

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shardq.pipeline import metrics, report

#: Tubes drawn in the throughput charts (the busiest by puts); the table lists them all.
CHART_TUBES = 8
#: At most this many points per chart line; longer spans are summed into wider buckets.
CHART_POINTS = 720


def write_all(spark: SparkSession, out: str, tubes: DataFrame, series: DataFrame) -> list[dict]:
    """Write Parquet, tubes.csv and report.html under `out`; returns the tube rows."""
    out = out.rstrip("/")
    collected = tubes.collect()  # one row per tube: computed once, written three ways
    rows = [r.asDict() for r in collected]
    small = spark.createDataFrame(collected, tubes.schema).coalesce(1)
    small.write.mode("overwrite").parquet(f"{out}/tubes.parquet")
    series.write.mode("overwrite").parquet(f"{out}/minutes.parquet")
    write_text(spark, f"{out}/tubes.csv", to_csv(rows))
    chart, bucket = chart_series(spark.read.parquet(f"{out}/minutes.parquet"), rows)
    write_text(spark, f"{out}/report.html", report.render(rows, chart, bucket))
    return rows


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(metrics.TUBE_COLUMNS)
    for row in rows:
        writer.writerow(["" if row[c] is None else row[c] for c in metrics.TUBE_COLUMNS])
    return buf.getvalue()


def chart_series(series: DataFrame, rows: list[dict]) -> tuple[list[dict], int]:
    """The busiest tubes' per-minute counts, bucketed so a line has <= CHART_POINTS points."""
    busiest = [r["tube"] for r in sorted(rows, key=itemgetter("puts"), reverse=True)[:CHART_TUBES]]
    part = series.where(F.col("tube").isin(*busiest)) if busiest else series.limit(0)
    epoch = F.unix_timestamp("minute")
    span = part.agg(F.min(epoch).alias("lo"), F.max(epoch).alias("hi")).first()
    minutes = 1 if span is None or span.lo is None else (span.hi - span.lo) // 60 + 1
    bucket = max(1, -(-minutes // CHART_POINTS))
    start = (epoch - epoch % (60 * bucket)).alias("t")
    sums = [F.sum(c).alias(c) for c in ("puts", "reserves", "deletes", "timeouts")]
    grouped = part.groupBy("tube", start).agg(*sums).orderBy("tube", "t")
    return [r.asDict() for r in grouped.collect()], bucket


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
