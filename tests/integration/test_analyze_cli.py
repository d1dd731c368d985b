"""`shardq analyze`'s answers that need no JVM: a missing input and a missing pyspark.

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
