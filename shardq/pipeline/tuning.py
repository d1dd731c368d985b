"""Spark settings sized to the input, decided before the session starts (plain Python: no
pyspark, so it is tested without a JVM).

Spark's defaults are a cluster's: 200 shuffle partitions (each a task, most of them empty
for a few MB of events), the web UI, and a JVM that compiles for the long run. For input
that one machine reads in seconds they cost more than the work: 90k events took 25 s of
work after 11 s of start-up. So, when the input is local and its size known:

* ``spark.sql.shuffle.partitions``: one per `BYTES_PER_PARTITION` of input, at least
  `MIN_PARTITIONS`, at most Spark's 200;
* on a local master (none given, or ``local[...]``): no web UI (`shardq analyze` is a batch
  command; `-V` keeps it), and below `SMALL_INPUT` bytes a driver JVM that starts fast
  (C1 compiler only, serial GC) rather than one tuned for hours of work;
* below `SMALL_QUERIES` bytes on a local master, queries planned and run as plainly as
  Spark can (`PLAIN_QUERIES`): one shuffle partition, no adaptive re-planning, and
  expressions interpreted instead of compiled to Java (no Janino, whose compilation in a
  C1-only JVM costs more than a few MB of events take to interpret). The outputs are the
  same; 1,000 events took ≈ 4 s less CPU (docs/BENCHMARKS.md, "A small input in a few
  seconds"); at 90k events (12 MB) they were no clear gain.

A master URL given (a cluster) or input behind a URI (hdfs://, s3a://) keeps Spark's
defaults, except what the user's own spark-defaults.conf says.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass, field

#: Input bytes per shuffle partition (JSON lines; the parsed columns are far smaller).
BYTES_PER_PARTITION = 64 << 20
MIN_PARTITIONS = 2
MAX_PARTITIONS = 200  #: Spark's own default
#: Below this much input a local run gets the fast-starting driver JVM.
SMALL_INPUT = 256 << 20
#: The driver JVM's flags for a small local run (what the pipeline tests use).
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Below this much input a local run gets `PLAIN_QUERIES`.
SMALL_QUERIES = 4 << 20
#: Session settings for a local input below `SMALL_QUERIES`: a query's fixed cost, not
#: its data, is what such a run pays for.
PLAIN_QUERIES = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@dataclass
class Tuning:
    """Session settings (`conf`) and driver JVM options (`jvm`, SPARK_SUBMIT_OPTS)."""

    conf: dict[str, str] = field(default_factory=dict)
    jvm: str = ""


def input_bytes(paths: list[str]) -> int | None:
    """The bytes of every local file the paths (files, directories, globs) name; None when
    one is a URI Spark alone can read or a Hadoop glob ({a,b})."""
    total = 0
    for path in paths:
        if "://" in path and not path.startswith("file://"):
            return None
        local = path.removeprefix("file://")
        if "{" in local:
            return None
        for name in glob.glob(local) if glob.has_magic(local) else [local]:
            total += _tree_bytes(name)
    return total


def _tree_bytes(name: str) -> int:
    if not os.path.isdir(name):
        return os.path.getsize(name) if os.path.exists(name) else 0
    return sum(
        os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(name) for f in files
    )


def is_local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def tuning_for(paths: list[str], master: str | None, verbose: int = 0) -> Tuning:
    """The settings for a run over `paths` on `master` (None: Spark's default, local)."""
    size = input_bytes(paths)
    tuning = Tuning()
    if size is None:
        return tuning
    partitions = math.ceil(size / BYTES_PER_PARTITION)
    tuning.conf["spark.sql.shuffle.partitions"] = str(
        min(MAX_PARTITIONS, max(MIN_PARTITIONS, partitions))
    )
    if is_local(master):
        if not verbose:
            tuning.conf["spark.ui.enabled"] = "false"
        if size < SMALL_INPUT:
            tuning.jvm = FAST_JVM
        if size < SMALL_QUERIES:
            tuning.conf.update(PLAIN_QUERIES)
    return tuning
