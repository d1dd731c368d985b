"""One progress line of our own on a terminal while `shardq analyze` runs (Spark's stage
bars are off unless --verbose): the step, Spark's active stage and its tasks, the time so
far. Redrawn in place on stderr from a daemon thread; cleared at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO


class ProgressLine:
    """Draws ``shardq analyze: STEP · stage N: done/total tasks · 12 s`` every `interval` s."""

    def __init__(self, spark_context: Any, stream: TextIO = sys.stderr, interval: float = 0.5):
        self.tracker = spark_context.statusTracker()
        self.stream = stream
        self.interval = interval
        self.step = "starting"
        self.started = time.monotonic()
        self.width = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="analyze-progress", daemon=True)

    def start(self) -> ProgressLine:
        self._thread.start()
        return self

    def set_step(self, step: str) -> None:
        self.step = step

    def _stage(self) -> str:
        """The active stage with the most tasks left, as 'stage N: done/total tasks'."""
        best = None
        for stage_id in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(stage_id)
            if info is not None and (best is None or info.numTasks > best.numTasks):
                best = info
        if best is None:
            return ""
        return f" · stage {best.stageId}: {best.numCompletedTasks}/{best.numTasks} tasks"

    def _draw(self) -> None:
        try:
            stage = self._stage()
        except Exception:  # the context is stopping: draw without the stage
            stage = ""
        line = f"shardq analyze: {self.step}{stage} · {time.monotonic() - self.started:.0f} s"
        pad = " " * max(0, self.width - len(line))
        self.width = len(line)
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def stop(self) -> None:
        """Stop drawing and blank the line (nothing is left on the terminal)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
