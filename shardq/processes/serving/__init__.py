"""The serving process (see loop.py; its entry is process.py)."""

from shardq.processes.serving.loop import ServingProcess
from shardq.processes.serving.process import main

__all__ = ["ServingProcess", "main"]

__all__ = ["Serving process", "main"]
