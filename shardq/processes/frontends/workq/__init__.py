"""The Workq front-end process (see loop.py and docs/PROTOCOLS.md)."""

from shardq.processes.frontends.workq.loop import Frontend, main

__all__ = ["Frontend", "main"]
