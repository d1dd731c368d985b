"""Entry point of the analytics job: `shardq analyze` and `spark-submit` both land here.

    spark-submit [--master URL] shardq/pipeline/main.py EVENTS... --out DIR [-V]
    shardq analyze EVENTS... --out DIR [--master URL] [-V]

The code never picks a master or resources: `--master` (or spark-submit's own flags, or
spark-defaults.conf) do, so the same file runs on a laptop and on a cluster. Outputs go
through Spark and Hadoop's FileSystem, so DIR may be any URI Spark can write.
The one line it prints on stdout, where the tables went, is its result; -V logs more.

Quiet by default when it starts Spark itself (`shardq analyze`): the JVM gets the packaged
log4j2 set-up (spark/log4j2.properties: errors only) and its stderr goes to a file named in
the error line if the job fails; Spark's stage bars are off and, on a terminal, one progress
line of ours replaces them. `--verbose` shows Spark's own output instead.

Exit status: 0 done; 1 Spark or the job failed; 2 the input: a path that does not exist,
input that cannot be read, or no valid event in it (malformed lines are counted and skipped
with a warning), or a local --out it could not write (checked before Spark starts).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make `shardq` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark import SparkContext, StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from shardq.log import setup as setup_logging  # noqa: E402
from shardq.pipeline import classdata, metrics, outputs, report  # noqa: E402
from shardq.pipeline.progress import ProgressLine  # noqa: E402
from shardq.pipeline.schema import SCHEMA  # noqa: E402
from shardq.pipeline.tuning import tuning_for  # noqa: E402

APP_NAME = "shardq-analyze"
EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2
#: The JVM's log4j2 set-up unless --verbose (errors only; also a SPARK_CONF_DIR).
LOG4J2 = Path(__file__).resolve().parent / "spark" / "log4j2.properties"
#: The column `read_flagged` adds: is this line a valid event.
VALID = "_valid"

log = logging.getLogger(__name__)


class InputError(Exception):
    """A missing path, input that cannot be read, or input without a valid event (exit 2)."""


@dataclass
class Outcome:
    """What a run found: the per-tube rows (empty if nothing was valid) and the line counts."""

    rows: list[dict[str, Any]]
    lines: int
    valid: int


def read_events(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Files, directories and globs, local or any Spark URI; malformed lines are dropped."""
    return metrics.clean(spark.read.schema(SCHEMA).json(paths))


def read_flagged(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Every line read (blank lines aside), the used columns plus VALID (`metrics.valid`)."""
    raw = spark.read.schema(SCHEMA).json(paths)
    return raw.select(*metrics.USED, metrics.valid().alias(VALID))


def _noop_step(step: str) -> None:
    pass


def analyze(spark: SparkSession, paths: list[str], out: str, step: Any = _noop_step) -> Outcome:
    """Count the lines and the valid ones, compute every table from the valid events and
    write them under `out` (nothing is written when no line is valid). `step(name)` is told
    which step runs (the progress line)."""
    # Parse the JSON once: the counts and every table below read this (spills to disk when
    # it must). The same pass finds the span of the events, which sizes the report's chart
    # bins. Of the aggregates only the per-minute counts are kept (read twice); a cached plan
    # keeps its shuffle partitions, few when the input is small (tuning.py).
    step("reading events")
    flagged = read_flagged(spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        valid_ts = F.when(F.col(VALID), F.col("ts"))
        total = flagged.agg(
            F.count(F.lit(1)).alias("lines"),
            F.sum(F.col(VALID).cast("long")).alias("valid"),
            F.min(valid_ts).alias("first"),
            F.max(valid_ts).alias("last"),
        ).first()
        lines = int(total["lines"]) if total else 0
        valid = int(total["valid"] or 0) if total else 0
        if not valid or total is None:
            return Outcome([], lines, 0)
        bin_s = report.bin_seconds(total["last"] - total["first"])
        events = flagged.where(F.col(VALID)).drop(VALID)
        step("computing and writing the tables")
        # The per-minute counts feed both the tube table and minutes.parquet: small, kept.
        counts = metrics.minute_counts(events).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            tubes = metrics.tube_table(counts, metrics.jobs(events))
            series = metrics.minute_series(counts)
            rows = outputs.write_all(spark, out, tubes, series, events, bin_s)
        finally:
            counts.unpersist()
        return Outcome(rows, lines, valid)
    finally:
        flagged.unpersist()


def run(spark: SparkSession, paths: list[str], out: str) -> list[dict[str, Any]]:
    """Compute every table, write them under `out`; returns the per-tube rows."""
    return analyze(spark, paths, out).rows


def clean_path(path: str) -> str:
    """`out/`, `./out//x` -> `out`, `out/x`; URIs only lose trailing slashes."""
    if "://" in path:
        return path.rstrip("/") or path
    return os.path.normpath(path)


def check_local_paths(paths: list[str]) -> None:
    """Raise InputError for a local path or glob that matches nothing or cannot be read, before
    a JVM starts. URIs (hdfs://, s3a://...) and Hadoop-only glob syntax ({a,b}) are left to
    Spark."""
    for path in paths:
        if "://" in path and not path.startswith("file://"):
            continue
        local = path.removeprefix("file://")
        if "{" in local:
            continue
        if glob.has_magic(local):
            found = glob.glob(local)
            if not found:
                raise InputError(f"no file matches {path}")
        elif os.path.exists(local):
            found = [local]
        else:
            raise InputError(f"no such file or directory: {path}")
        for name in found:
            is_dir = os.path.isdir(name)
            if not os.access(name, os.R_OK | (os.X_OK if is_dir else 0)):
                raise InputError(f"cannot read {name}: permission denied")


def check_local_out(out: str) -> None:
    """Raise InputError for a local --out that the job could not write, before a JVM
    starts: a file, something under a file, or a place this user may not write (the
    directory itself if it exists, else its nearest existing parent). URIs are Spark's."""
    if "://" in out and not out.startswith("file://"):
        return
    local = os.path.abspath(out.removeprefix("file://"))
    if os.path.exists(local) and not os.path.isdir(local):
        raise InputError(f"--out {out}: not a directory")
    existing = local
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise InputError(f"--out {out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot write in {existing}: permission denied")


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]


def _input_error(error: Exception) -> InputError | None:
    """The InputError a Spark failure amounts to (a path Spark found missing, a file it
    could not read), or None for any other failure."""
    text = str(error)
    if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
        return InputError(f"no such input: {_first_line(error)}")
    for java in ("FileNotFoundException", "AccessDeniedException", "Permission denied"):
        if java in text:
            return InputError(f"cannot read the input: {_first_line(error)}")
    return None


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def execute(
    spark: SparkSession,
    paths: list[str],
    out: str,
    progress: ProgressLine | None = None,
    startup_s: float | None = None,
) -> int:
    """Run the job in `spark` (not stopped here): logs one line per problem, prints the
    result line; returns the exit status."""
    out = clean_path(out)
    started = time.monotonic()
    try:
        outcome = analyze(spark, paths, out, progress.set_step if progress else _noop_step)
    except Exception as e:  # Spark's errors arrive as Py4J or pyspark exceptions
        if progress:
            progress.stop()
        log.debug("the job failed", exc_info=True)
        problem = _input_error(e)
        if problem is not None:
            log.error("%s", problem)
            return EXIT_INPUT
        log.error("the job failed: %s", _first_line(e))
        return EXIT_FAILED
    work_s = time.monotonic() - started
    if progress:
        progress.stop()
    where = ", ".join(paths)
    skipped = outcome.lines - outcome.valid
    if not outcome.valid:
        log.error(
            "no valid event in %s (%s read: malformed JSON or not shardq events); nothing written",
            where,
            _plural(outcome.lines, "line"),
        )
        return EXIT_INPUT
    if skipped:
        log.warning(
            "skipped %s of %s: malformed JSON or not shardq events",
            _plural(skipped, "line"),
            f"{outcome.lines:,}",
        )
    times = f"work {work_s:.1f} s"
    if startup_s is not None:
        times = f"Spark start-up {startup_s:.1f} s, {times}"
    log.info("%s; %s events, %s skipped", times, f"{outcome.valid:,}", f"{skipped:,}")
    print(
        f"shardq analyze: {_plural(len(outcome.rows), 'tube')} from"
        f" {_plural(outcome.valid, 'event')} -> {out}/tubes.csv, {out}/report.html ({times})"
    )
    return EXIT_OK


def session(
    master: str | None, quiet: bool = False, conf: dict[str, str] | None = None
) -> SparkSession:
    """The session; only `master` from the command line may set the master. `quiet` turns
    Spark's console stage bars off (its logging is set when its JVM starts, `_jvm_output`);
    `conf`: settings sized to the input (`tuning.tuning_for`)."""
    builder = SparkSession.builder.appName(APP_NAME)
    if master:
        builder = builder.master(master)
    if quiet:
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    # Minute boundaries and the report's times are UTC wherever the job runs.
    return builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()


@contextlib.contextmanager
def _jvm_output(log_file: Path | None, jvm: str = "") -> Iterator[None]:
    """While the session starts: the JVM it launches gets the `jvm` options and, with a
    `log_file`, the packaged log4j2 set-up and a stderr that is `log_file` (its launcher's
    warnings, anything it prints later); ours is restored afterwards. A no-op if the JVM
    already runs (spark-submit)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    added = f"{jvm} -Dlog4j2.configurationFile=file:{LOG4J2}" if log_file else jvm
    os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {added}".strip()
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        if log_file is not None:
            with open(log_file, "ab") as f:
                os.dup2(f.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if opts:
            os.environ["SPARK_SUBMIT_OPTS"] = opts
        else:
            del os.environ["SPARK_SUBMIT_OPTS"]


def class_data() -> classdata.ClassData | None:
    """The class-data archive for the JVM this process is about to launch (None: the JVM
    runs already, as under spark-submit)."""
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    import pyspark

    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    return classdata.for_run(spark_home)


def java_missing() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


def run_job(
    paths: list[str],
    out: str,
    master: str | None = None,
    verbose: int = 0,
    class_cache: bool = True,
) -> int:
    """Run the whole job in a fresh or existing session; returns an exit status.
    `class_cache`: a JVM this launches maps Spark's classes from an archive (classdata.py)."""
    try:
        check_local_paths(paths)
        check_local_out(out)
    except InputError as e:
        log.error("%s", e)
        return EXIT_INPUT
    if java_missing():
        log.error("Spark needs Java 17 or later: no java on PATH and JAVA_HOME is not set")
        return EXIT_FAILED
    quiet = verbose == 0
    fd, name = tempfile.mkstemp(prefix="shardq-analyze-", suffix=".log")
    os.close(fd)
    spark_log = Path(name)
    status = EXIT_FAILED
    started = time.monotonic()
    tuning = tuning_for(paths, master, verbose)
    classes = class_data() if class_cache else None
    jvm = f"{tuning.jvm} {classes.jvm_options()}".strip() if classes else tuning.jvm
    log.debug("Spark settings for this input: %s %s", tuning.conf, jvm)
    try:
        with _jvm_output(spark_log if quiet else None, jvm):
            spark = session(master, quiet, tuning.conf)
        startup_s = time.monotonic() - started
        log.info("Spark session up in %.1f s", startup_s)
        progress = None
        if quiet and sys.stderr.isatty():
            progress = ProgressLine(spark.sparkContext).start()
        try:
            status = execute(spark, paths, out, progress, startup_s)
        finally:
            if progress:
                progress.stop()
            spark.stop()
    except Exception as e:  # the JVM did not start, or stopping it failed
        log.debug("Spark failed", exc_info=True)
        log.error("Spark failed: %s", _first_line(e))
    finally:
        if status == EXIT_FAILED and quiet and spark_log.stat().st_size:
            log.error("Spark's own output is in %s", spark_log)
        else:
            spark_log.unlink(missing_ok=True)
    return status


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="shardq-analyze", description=__doc__.split("\n")[0])
    parser.add_argument("events", nargs="+", help="event log files, directories or globs")
    parser.add_argument("--out", required=True, help="output directory (any Spark URI)")
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's or local)")
    parser.add_argument(
        "-V", "--verbose", dest="verbose", action="count", default=0, help="more logging"
    )
    parser.add_argument(
        "--no-class-cache",
        dest="class_cache",
        action="store_false",
        help="load Spark's classes from its jars, not from the cached archive",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging("analyze", args.verbose)
    return run_job(args.events, args.out, args.master, args.verbose, args.class_cache)


if __name__ == "__main__":
    sys.exit(main())
