"""The driver JVM's class-data archive (Java's AppCDS): Spark's classes mapped from one file
instead of read, parsed and verified from its jars at every start.

A run that finds no archive has its JVM write one when it exits (`-XX:ArchiveClassesAtExit`);
every later run maps it (`-XX:SharedArchiveFile`). On this project's 2-core VM a 1,000-event
`shardq analyze` takes 9.4 s without it and 5.8 s with it (docs/BENCHMARKS.md, "Spark's
classes from an archive"). The run that writes it answers ≈ 4 s later, and its JVM goes on
writing for ≈ 10 s after the command has returned (≈ 14 s of one core, once).

The JVM writes an archive's header last (a header of zeros until the file is whole), and
removes an old file before it writes a new one, so a run that starts while another JVM
writes never maps half a file: it sees no whole archive and runs without one (and writes
one too). The file is named by what it was made from (the java binary and the pyspark
install): another Java or Spark writes a new one and the old ones are removed. One the JVM
cannot use for another reason costs nothing but its gain: the JVM then loads the classes
from the jars (`-Xshare:auto`, its default).

Java archives nothing when the class path holds a non-empty directory, as it does with a
``SPARK_CONF_DIR``: such runs go as before, without an archive.

Where: ``$SHARDQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/shardq``, else ``~/.cache/shardq``
(≈ 180 MB for Spark 4.3 on Java 17). `shardq analyze --no-class-cache` runs without one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("shardq.pipeline")

#: the environment variable that names the cache directory
CACHE_ENV = "SHARDQ_CACHE_DIR"
PREFIX, SUFFIX = "spark-classes-", ".jsa"
#: the archive's header: zeros until the JVM has written the whole file
HEADER_BYTES = 16
#: JVM options that keep its notes on classes it cannot archive out of the output
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The directory the archive lives in."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "shardq"


def java_binary(env: Mapping[str, str] = os.environ) -> str | None:
    """The java the launcher runs (JAVA_HOME's, else the one on PATH), links resolved."""
    java = os.path.join(env["JAVA_HOME"], "bin", "java") if env.get("JAVA_HOME") else None
    java = java or shutil.which("java", path=env.get("PATH"))
    return os.path.realpath(java) if java and os.path.isfile(java) else None


def archive_key(java: str, spark_home: str) -> str:
    """What the archive depends on: this java binary (path, size, time) and this Spark."""
    st = os.stat(java)
    made_of = f"{java}\0{st.st_size}\0{st.st_mtime_ns}\0{os.path.realpath(spark_home)}"
    return hashlib.sha256(made_of.encode()).hexdigest()[:16]


class ClassData:
    """The archive for one (Java, Spark) pair: the JVM options that map it, or that have
    the JVM write it at its exit."""

    def __init__(self, directory: Path, key: str) -> None:
        self.path = directory / f"{PREFIX}{key}{SUFFIX}"

    def whole(self) -> bool:
        return whole(self.path)

    def jvm_options(self) -> str:
        """Map the archive if it is whole; else have the JVM write it (and drop the archives
        made for another Java or Spark)."""
        if self.whole():
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        for other in self.path.parent.glob(f"{PREFIX}*{SUFFIX}"):
            if other != self.path:
                other.unlink(missing_ok=True)
        return f"-XX:ArchiveClassesAtExit={self.path} {QUIET}"


def whole(path: Path) -> bool:
    """Is this archive there and completely written (the JVM writes its header last)?"""
    try:
        with open(path, "rb") as f:
            return any(f.read(HEADER_BYTES))
    except OSError:
        return False


def for_run(spark_home: str, env: Mapping[str, str] = os.environ) -> ClassData | None:
    """The archive for a JVM this process is about to launch, or None: no java found, a
    SPARK_CONF_DIR with files in it (on the class path: Java would neither write nor map
    an archive), a cache directory that cannot be made, or a path the launcher would split
    (whitespace, quotes: SPARK_SUBMIT_OPTS is split on spaces)."""
    java = java_binary(env)
    if java is None or holds_files(env.get("SPARK_CONF_DIR")):
        return None
    directory = cache_dir(env)
    if any(c.isspace() or c in "\"'" for c in str(directory)):
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        key = archive_key(java, spark_home)
    except OSError as e:
        log.debug("no class-data archive: %s", e)
        return None
    return ClassData(directory, key)


def holds_files(directory: str | None) -> bool:
    try:
        return directory is not None and any(os.scandir(directory))
    except OSError:
        return False
