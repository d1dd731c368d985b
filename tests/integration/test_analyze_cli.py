"""`shardq analyze`'s answers that need no JVM: a missing input, an --out it cannot write,
and a missing pyspark.

A local path is checked before Spark starts, so the answer is one line within seconds (it
used to be a 154-line Java and Python traceback after 11 s). The Spark side (malformed
input, a missing path only Spark can see) is tests/pipeline/test_analyze_input.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

#: Far below a JVM's start-up on this machine: the answer came before Spark.
NO_JVM_S = 8.0


def _analyze(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    cmd = [sys.executable, "-m", "shardq", "analyze", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd)
    return done, time.monotonic() - started


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("missing", "no such file or directory: {tmp}/missing"),
        ("missing/*.jsonl", "no file matches {tmp}/missing/*.jsonl"),
    ],
    ids=["path", "glob"],
)
def test_a_missing_input_is_one_line_and_status_2(tmp_path: Path, given: str, said: str) -> None:
    (tmp_path / "present.jsonl").write_text("{}\n")
    done, took = _analyze(
        str(tmp_path / "present.jsonl"), str(tmp_path / given), "--out", str(tmp_path / "out"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"shardq[analyze] ERROR {said.format(tmp=tmp_path)}"]
    assert done.stdout == ""
    assert took < NO_JVM_S
    assert not (tmp_path / "out").exists()


def test_without_pyspark_it_says_how_to_install_it(tmp_path: Path) -> None:
    blocked = (
        "import sys; sys.modules['pyspark'] = None; from shardq.cli import app;"
        " app(['analyze', 'x', '--out', 'y'], prog_name='shardq')"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "pip install 'shardq[pipeline]'" in lines[0], done.stderr


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_an_out_that_cannot_be_a_directory_is_one_line_and_status_2(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "events.jsonl").write_text("{}\n")
    (tmp_path / "report").write_text("not a directory\n")
    out = tmp_path / "report" if where == "file" else tmp_path / "report" / "sub"
    said = "not a directory" if where == "file" else f"{tmp_path / 'report'} is not a directory"
    done, took = _analyze(str(tmp_path / "events.jsonl"), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"shardq[analyze] ERROR --out {out}: {said}"]
    assert done.stdout == ""
    assert took < NO_JVM_S


def test_an_out_where_no_one_may_write_is_refused(tmp_path: Path) -> None:
    """/proc/sys takes no new entries, from root either (the tests run as root in CI)."""
    (tmp_path / "events.jsonl").write_text("{}\n")
    out = "/proc/sys/shardq-analyze-out"
    done, took = _analyze(str(tmp_path / "events.jsonl"), "--out", out, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"shardq[analyze] ERROR --out {out}: cannot write in /proc/sys: permission denied"
    ]
    assert took < NO_JVM_S
