"""The acceptor process (see loop.py)."""

from shardq.processes.acceptor.loop import Acceptor, main

__all__ = ["Acceptor", "main"]
