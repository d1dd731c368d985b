"""The acceptor process (see loop.py; its entry is process.py)."""

from shardq.processes.acceptor.loop import Acceptor
from shardq.processes.acceptor.process import main

__all__ = ["Acceptor", "main"]
