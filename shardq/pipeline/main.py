"""Entry point of the analytics job: `shardq analyze` and `spark-submit` both land here.

    spark-submit [--master URL] shardq/pipeline/main.py EVENTS... --out DIR [-V]
    shardq analyze EVENTS... --out DIR [--master URL] [-V]

The code never picks a master or resources: `--master` (or spark-submit's own flags, or
spark-defaults.conf) do, so the same file runs on a laptop and on a cluster. Outputs go
through Spark and Hadoop's FileSystem, so DIR may be any URI Spark can write.
The one line it prints on stdout, where the tables went, is its result; -V logs more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make `shardq` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from shardq.log import setup as setup_logging  # noqa: E402
from shardq.pipeline import metrics, outputs  # noqa: E402
from shardq.pipeline.schema import SCHEMA  # noqa: E402

APP_NAME = "shardq-analyze"


def read_events(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Files, directories and globs, local or any Spark URI; malformed lines are dropped."""
    return metrics.clean(spark.read.schema(SCHEMA).json(paths))


def run(spark: SparkSession, paths: list[str], out: str) -> list[dict[str, Any]]:
    """Compute every table, write them under `out`; returns the per-tube rows."""
    # Parse the JSON once: every table below reads this (spills to disk when it must).
    # Aggregates are not cached: a cached plan would keep its 200 shuffle partitions,
    # while uncached queries let adaptive execution coalesce them.
    events = read_events(spark, paths).select(*metrics.USED).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = metrics.minute_counts(events)
        tubes = metrics.tube_table(counts, metrics.jobs(events))
        return outputs.write_all(spark, out, tubes, metrics.minute_series(counts))
    finally:
        events.unpersist()


def session(master: str | None) -> SparkSession:
    """The session; only `master` from the command line may set the master."""
    builder = SparkSession.builder.appName(APP_NAME)
    if master:
        builder = builder.master(master)
    # Minute boundaries and the report's times are UTC wherever the job runs.
    return builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()


def run_job(paths: list[str], out: str, master: str | None = None) -> int:
    """Run the whole job in a fresh or existing session; returns an exit status."""
    spark = session(master)
    try:
        rows = run(spark, paths, out)
    finally:
        spark.stop()
    print(f"shardq analyze: {len(rows)} tubes -> {out}/tubes.csv, {out}/report.html")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="shardq-analyze", description=__doc__.split("\n")[0])
    parser.add_argument("events", nargs="+", help="event log files, directories or globs")
    parser.add_argument("--out", required=True, help="output directory (any Spark URI)")
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's or local)")
    parser.add_argument("-V", dest="verbose", action="count", default=0, help="more logging")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging("analyze", args.verbose)
    return run_job(args.events, args.out, args.master)


if __name__ == "__main__":
    sys.exit(main())
